"""Input files: discovery, work planning, and reading raw records.

Formats: ``.jsonl``/``.json`` (one JSON object per line), ``.jsonl.gz``, ``.jsonl.zst`` and
``.parquet``. Large uncompressed JSONL files are cut into byte ranges so several workers read
one file: a range ``[start, end)`` owns every line that *starts* inside it, so the ranges of a
file together yield each line exactly once. Compressed files are read whole (they cannot be
entered in the middle). Parquet files are read by row group and only the requested columns.

A file that is wrong as a whole (truncated or corrupt compression, a short Parquet file, a path
that cannot be read) raises :class:`CorruptFileError` from the reader, in the worker, so only that
file's shards fail: discovery and planning never raise for one bad file, they record why the file
could not be listed or planned (``InputFile.error``, ``WorkItem.error``) and the reader fails with
it. A compressed stream must end where its format says it ends: a zstd file that stops inside a
frame, a gzip file without its trailer, and an empty ``.gz``/``.zst`` (a copy that never started)
are corrupt, not short.

Discovery (:func:`find_inputs`) takes each file once, however many names lead to it (a symlink
beside its target, a hard link, a path given twice), refuses inputs that are not regular files (a
FIFO, a device) before anything opens them, and reads a dataset folder named like a file
(Spark's ``t.parquet/`` of part files) as its part files. Planning samples of an input
(:func:`sample_item`) are bounded in bytes, stored and decompressed.

Lines end as in Python's text mode, which Megatron reads JSONL with (universal newlines): at a
LF, a CR LF pair or a CR alone, so files with CR LF, CR-only or mixed line ends give the records
Megatron gives. A range boundary never splits a CR LF pair into two line ends.

Readers yield :class:`RawRecord`s: the bytes of one JSONL line (or the values of one Parquet
row) with its line number and byte offset, for error reports. Line numbers are 1-based. For a
range that does not start at 0 the line number is found by counting line ends before it, which
is only done when a record of that range is reported as bad.
"""

from __future__ import annotations

import dataclasses
import functools
import glob as globlib
import gzip
import io
import os
import posixpath
import re
import sys
import zlib
from typing import Iterator, Sequence

from runtime import errors, faults
from dataio import input_hashes, jsonl_sink
from dataio import fs as fsutil
from dataio.elements import WorkItem

JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".jsonl.zst", ".json.zst")
PARQUET_SUFFIXES = (".parquet",)
SUPPORTED_SUFFIXES = JSONL_SUFFIXES + PARQUET_SUFFIXES
_LONGEST_SUFFIX_FIRST = tuple(sorted(SUPPORTED_SUFFIXES, key=len, reverse=True))
# The compression codec Spark writes into a part file's name (part-00000-....snappy.parquet).
_PART_CODEC = re.compile(r"\.(snappy|gz|gzip|zstd|lz4|lz4_raw|brotli|lzo|uncompressed)$",
                         re.IGNORECASE)
_BLOCK = 8 << 20
# A compressed file is one work item, read by one worker from start to end: above this size
# discovery says so (4 GiB takes one core about 2 minutes at ~37 MB/s in the job).
WHOLE_FILE_NOTE_BYTES = 4 << 30


class InputError(errors.ConfigError):
    """The inputs named on the command line cannot be used (no files, an unsupported format,
    clashing names, an incomplete dataset); the message names them and the fix. A bad command
    line, exit status 2, unless raised with another ``exit_status`` (the dataset commands answer
    a dataset they cannot find or use with 1). The one input error of every command."""

    def __init__(self, message: str, *, exit_status: int = errors.EXIT_USAGE):
        super().__init__(message)
        self.exit_status = exit_status


class CorruptFileError(IOError):
    """A file that cannot be read at all (bad compression, unreadable Parquet)."""


class InputChangedError(CorruptFileError):
    """A file that is no longer the one planned (truncated, rewritten or replaced while the job
    ran): what was read from it are not the planned bytes, so its shards fail (a rerun plans it
    again)."""


@dataclasses.dataclass(frozen=True)
class InputFile:
    path: str
    size: int
    version: str  # mtime (local) or etag (object stores): part of the resume key
    error: str = ""  # why discovery could not read the file; its shards fail with this reason
    dataset: str = ""  # a part file of a dataset folder (``t.parquet/``): that folder's stem
    # The folder the file (a part file: its dataset folder) lies in, relative to the input root,
    # with "/" between folders; "" directly in it (see :func:`shard_stems`).
    folder: str = ""
    # The stem its shards are named by, where discovery chose one other than its own name (an
    # input of the same name elsewhere, or --output-layout mirror: :func:`shard_stems`).
    shard_stem: str = ""

    # Cached: planning asks each file's stem several times per shard (10,000 inputs: 60,000).
    @functools.cached_property
    def stem(self) -> str:
        """The name of its shards: :attr:`own_stem`, or the one :func:`shard_stems` chose."""
        return self.shard_stem or self.own_stem

    @functools.cached_property
    def own_stem(self) -> str:
        """The file's name without its suffixes; for a part file of a dataset folder,
        ``{folder stem}_{part stem}`` without the codec Spark names in it
        (``t.parquet/part-00000-(uuid)-c000.snappy.parquet``: ``t_part-00000-(uuid)-c000``)."""
        if self.dataset:
            return f"{self.dataset}_{_PART_CODEC.sub('', file_stem(self.path))}"
        return file_stem(self.path)

    @functools.cached_property
    def format(self) -> str:
        return file_format(self.path)


@dataclasses.dataclass
class RawRecord:
    data: bytes | dict  # a JSONL line, or a Parquet row's values by column
    line: int | None  # 1-based line (JSONL) or row number (Parquet); None until resolved
    offset: int  # byte offset of the line (JSONL) or row index (Parquet)


def file_format(path: str) -> str:
    name = os.path.basename(path).lower()
    for suffix in SUPPORTED_SUFFIXES:
        if name.endswith(suffix):
            if suffix.endswith(".gz"):
                return "jsonl.gz"
            if suffix.endswith(".zst"):
                return "jsonl.zst"
            return "parquet" if suffix == ".parquet" else "jsonl"
    raise InputError(f"{path}: unsupported file type; supported: {', '.join(SUPPORTED_SUFFIXES)}")


def file_stem(path: str) -> str:
    name = os.path.basename(path)
    lower = name.lower()
    for suffix in _LONGEST_SUFFIX_FIRST:
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return os.path.splitext(name)[0]


def _version_of(info: dict) -> str:
    for key in ("etag", "ETag", "mtime", "last_modified", "LastModified", "created"):
        if info.get(key) is not None:
            return f"{key}:{info[key]}"
    return "unknown"


def discover(patterns: Sequence[str], *, leave_out: Sequence[str] = (), prefer=None,
             layout: str = "flat", kept=None) -> list[InputFile]:
    """The tokenize job's inputs: :func:`find_inputs`, each with the stem its shards are named
    by (:func:`shard_stems`, ``layout`` and ``kept`` as there: two inputs whose shards would
    have the same names are refused), saying on stderr when large compressed files will each be
    read whole by one worker. ``prefer`` as for :func:`find_inputs`."""
    files = find_inputs(patterns, leave_out=leave_out, prefer=prefer)
    _note_whole_files(files)
    return shard_stems(files, layout=layout, kept=kept)


# --output-layout: shards side by side in the output (flat), or in the input's folders (mirror).
LAYOUTS = ("flat", "mirror")


def shard_stems(files: Sequence[InputFile], *, layout: str = "flat",
                kept=None) -> list[InputFile]:
    """``files``, each with the stem its shards are named by (``InputFile.stem``), no two alike.

    The rule (README: "Shard names"), from the file's path relative to the input root
    (``InputFile.folder``: see :func:`find_inputs`), so it depends on the set of inputs alone,
    never on listing order, runner or workers:

    - ``flat`` (the default): a file's own stem (its name without suffixes), as it always was,
      unless another input has the same own stem; then each of those is named by its folder
      and stem joined by ``_``: FineWeb's ``CC-MAIN-2024-10/000_00000.parquet`` and
      ``CC-MAIN-2024-18/000_00000.parquet`` give ``CC-MAIN-2024-10_000_00000`` and
      ``CC-MAIN-2024-18_000_00000``; dolma's ``documents/books/0000.json.gz`` beside
      ``documents/wiki/0000.json.gz`` (input root ``documents/``) gives ``books_0000``.
    - ``mirror``: every file by its folder and stem joined by ``/`` (``CC-MAIN-2024-10/000_00000``):
      its shards go to that subfolder of the output. A folder named ``holdout`` at the top, or
      any folder whose name starts with ``_`` or ``.``, is refused there (tokenbeam's own
      folders: holdout shards, ``_commits/``...).

    Two inputs left with one stem (``a.jsonl`` beside ``a.jsonl.gz``; ``x_y/z.jsonl`` and
    ``x/y_z.jsonl`` beside ``x/z.jsonl``...) are refused with an :class:`InputError` naming
    both and the fix: names are never made unique by a counter, which would move with the set.
    ``kept`` (flat only): a function of a file renamed by the rule above giving the stem its
    shards are already committed under in the output (or None): that stem is kept, so an input
    of the same name added later does not write the committed one's data again under a new
    name (one line on stderr says so)."""
    if layout not in LAYOUTS:
        raise InputError(f"--output-layout {layout}: give one of {', '.join(LAYOUTS)}")
    if layout == "mirror":
        for f in files:
            _refuse_reserved_folder(f)
    seen: set[str] = set()
    repeated = {f.own_stem for f in files if f.own_stem in seen or seen.add(f.own_stem)}
    named = []
    for f in files:
        if layout == "mirror":
            stem = f"{f.folder}/{f.own_stem}" if f.folder else f.own_stem
        elif f.own_stem in repeated and f.folder:
            stem = f"{f.folder.replace('/', '_')}_{f.own_stem}"
            committed = kept(dataclasses.replace(f, shard_stem=stem)) if kept else None
            if committed and committed != stem:
                print(f"inputs: {f.path} keeps the shard name {committed}_* it is committed "
                      f"under in the output (an input of the same name was added: new inputs "
                      f"of that name are named by their folders, e.g. {stem}_*)",
                      file=sys.stderr, flush=True)
                stem = committed
        else:
            stem = f.own_stem
        named.append(f if stem == f.own_stem and not f.shard_stem
                     else dataclasses.replace(f, shard_stem=stem))
    by_stem: dict[str, InputFile] = {}
    for f in sorted(named, key=lambda f: f.path):
        other = by_stem.setdefault(f.stem, f)
        if other is not f:
            fix = "rename one or tokenize them in separate --output folders"
            if layout == "flat" and (other.folder, other.own_stem) != (f.folder, f.own_stem):
                fix = ("give --output-layout mirror (shards in the input's folders), "
                       f"or {fix}")
            raise InputError(f"inputs {other.path} and {f.path} would both write shards named "
                             f"{f.stem}_*; {fix}")
    return named


def _refuse_reserved_folder(f: InputFile) -> None:
    """--output-layout mirror: ``f``'s folder must not be one tokenbeam reads or writes in an
    output (``holdout/`` at the top, ``_commits/`` and the other ``_`` folders, hidden ones)."""
    parts = f.folder.split("/") if f.folder else []
    for depth, part in enumerate(parts):
        if part.startswith(("_", ".")) or not part or (depth == 0 and part == "holdout"):
            raise InputError(
                f"--output-layout mirror: input {f.path} lies in the folder {f.folder}/, and an "
                f"output folder named {part or '(empty)'} would sit among tokenbeam's own "
                "(holdout/, _commits/, _temporary/, ...); rename that folder, or leave out "
                "--output-layout mirror (flat names: its folders joined by _)")


def find_inputs(patterns: Sequence[str], *, leave_out: Sequence[str] = (),
                skip_unsupported: bool = False, prefer=None) -> list[InputFile]:
    """Every supported file named by the patterns (globs, files, or folders: every supported file
    in them and in the folders below them, see :func:`_files_below`), sorted by path, each
    once, with its size, version, ``format`` (compression kind) and ``folder`` (below the input
    root: :func:`_input_root`, :func:`_common_root`): the one way every job finds its inputs.

    A path that exists is taken as it is, even with glob characters in its name (``web[1].jsonl``).
    What a folder or glob matches leaves out the files of a tokenbeam job that are not inputs: a
    ``metadata.json`` it wrote, anything under ``_commits/``, ``_failures/``, ``_errors/`` or
    ``_temporary/``, and the files in ``leave_out`` (the tokenizer's); one line on stderr names
    them. A glob matching a file of another type is refused, unless ``skip_unsupported``: then
    what a folder or glob matches that is hidden (``.name``) or of another type is passed over
    in silence (a raw corpus folder holds READMEs and checksums), and a pattern left with nothing
    "matches no input file". A file whose details cannot be read (a symlink loop, a dangling link,
    a storage error) is kept with ``error`` set, so that only its shards fail.

    Of several names of one file the one kept is, in this order: one for which ``prefer`` (a
    function of an :class:`InputFile`; the tokenize planner's: "its shards are committed in the
    output") is true, the file's own name (the one its real path ends with), the first in sorted
    order. So a name added later (a link beside a file already tokenized) never takes over; a
    line says when ``prefer`` is true of two names of one file (the output holds it twice).

    Cost: one listing per folder or glob. On object stores the listing's pages carry each
    blob's size and etag, so no file is asked for its details again (10,000 inputs: a couple of
    requests, not 10,000); local files are each stat'ed (microseconds)."""
    found: dict[str, InputFile] = {}
    named_again: list[str] = []  # the same path from a second pattern
    left_out: list[str] = []
    not_inputs = {_location(p) for p in leave_out if p}
    real_folders: dict[str, str] = {}
    roots: dict[str, str] = {}  # pattern -> its input root (see _input_root)
    units: dict[str, str] = {}  # path -> what is named from the root: the file or its dataset
    for pattern in patterns:
        fs, inner = fsutil.filesystem_and_path(pattern)
        literal = False
        details: dict[str, dict] = {}  # what the listing said of each path (object stores)
        folders: set[str] = set()  # paths known to be folders
        is_folder = fs.isdir(inner)  # one request pair on object stores: asked once
        if is_folder and _is_dataset_name(pattern):
            paths = [pattern.rstrip("/")]  # a dataset folder itself: its parts, below
            folders.add(paths[0])
            roots[pattern] = _input_root(pattern, "file")
        elif is_folder:
            details, datasets_below = _files_below(pattern)
            paths = sorted(details)
            folders.update(datasets_below)
            roots[pattern] = _input_root(pattern, "folder")
        elif fs.exists(inner) or (fsutil.is_local(pattern) and os.path.islink(inner)):
            literal, paths = True, [pattern]  # a link that leads nowhere fails its shards
            roots[pattern] = _input_root(pattern, "file")
        elif any(ch in pattern for ch in "*?["):
            details = fsutil.glob_details(pattern)
            paths = list(details)
            roots[pattern] = _input_root(pattern, "glob")
        else:
            raise InputError(f"--input {pattern}: no such file or folder")
        if skip_unsupported and not literal:
            paths = [p for p in paths if _is_visible_input(p)]
        skipped = []
        if not literal:  # a file named on purpose is read even if it looks like one of ours
            kept = []
            for path in paths:
                why = _not_an_input(path, not_inputs, real_folders)
                if why:
                    skipped.append(f"{path} ({why})")
                else:
                    kept.append(path)
            paths = kept
            left_out += skipped
        paths, datasets = _dataset_parts(pattern, paths, details, folders, units)
        if not paths:
            wanted = "input file" if skip_unsupported else "supported file"
            where = (" in it or any folder below it (folders named .* or _* are not entered)"
                     if is_folder and not _is_dataset_name(pattern) else "")
            raise InputError(f"--input {pattern}: matches no {wanted} "
                             f"({', '.join(SUPPORTED_SUFFIXES)}){where}"
                             + (f"; left out, not inputs: {_listing(skipped)}" if skipped else ""))
        for path in paths:
            _refuse_special_file(pattern, path)
            file_format(path)
        for path, input_file in zip(paths, _input_files(paths, details)):
            if path in found:
                named_again.append(path)
            found[path] = dataclasses.replace(input_file, dataset=datasets[path]) \
                if path in datasets else input_file
    if left_out:
        print(f"inputs: left out {len(left_out)} file(s) that are not inputs: "
              f"{_listing(left_out)}", file=sys.stderr, flush=True)
    root = _common_root(list(roots.values()))
    for path, f in found.items() if root is not None else ():
        folder = _folder_below(root, units.get(path, path))
        if folder:  # most inputs of a flat corpus lie in the root: no copy for them
            found[path] = dataclasses.replace(f, folder=folder)
    files = _each_file_once(list(found.values()), named_again, prefer)
    # A folder reshard writes is read only once its commit there is complete (one manifest
    # read per folder; dataio/jsonl_sink.py step 3).
    why = jsonl_sink.refusal_of_inputs(patterns, {f.path: None if f.error else f.size
                                                  for f in files})
    if why:
        raise InputError(why, exit_status=errors.EXIT_FAILED)
    return files


def _is_dataset_name(path: str) -> bool:
    """A folder named like a file (``t.parquet/``, ``t.jsonl/``): how Spark and others write
    one dataset as part files (``part-00000-....parquet``, ``_SUCCESS``, ``.crc`` files)."""
    return os.path.basename(path.rstrip("/")).lower().endswith(SUPPORTED_SUFFIXES)


def _dataset_parts(pattern: str, paths: list[str], details: dict[str, dict],
                   folders: set[str], units: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """``paths`` with each dataset folder among them replaced by its part files (the supported
    files directly in it, in name order; ``_SUCCESS``, ``_committed_*``, hidden and ``.crc``
    files are not parts), and {part file: its folder's stem}, which names the part's shards;
    ``units`` receives {part file: its dataset folder} (what its name's folder comes from).
    One line on stderr per dataset folder; one holding no part file is refused."""
    out: list[str] = []
    datasets: dict[str, str] = {}
    dataset_folders = [p.rstrip("/") + "/" for p in paths if _is_dataset_name(p) and (
        p in folders or (os.path.isdir(p.removeprefix("file://")) if fsutil.is_local(p)
                         else details.get(p, {}).get("type") == "directory"))]
    is_dataset = set(dataset_folders)
    for path in paths:
        if path.rstrip("/") + "/" not in is_dataset:
            # a part file a glob matched (data/**/*.parquet) is read as its dataset's part
            if not any(path.startswith(d) for d in dataset_folders):
                out.append(path)
            continue
        listed = fsutil.glob_details(fsutil.join(_escape_glob(path), "*"))
        details.update(listed)
        parts = [p for p in listed if _is_visible_input(p)
                 and not os.path.basename(p).startswith("_")
                 and not (os.path.isdir(p.removeprefix("file://")) if fsutil.is_local(p)
                          else listed[p].get("type") == "directory")]
        if not parts:
            raise InputError(f"--input {pattern}: {path} is a folder (a dataset written as part "
                             "files, as Spark writes one?) holding no part file "
                             f"({', '.join(SUPPORTED_SUFFIXES)}) directly in it; give the files "
                             f"inside it, e.g. --input '{path}/*/*{_suffix_of(path)}'")
        stem = file_stem(path.rstrip("/"))
        print(f"inputs: {path} is a dataset folder: read as its {len(parts)} part file(s) in "
              f"name order, shards named {stem}_{{part name}}_*", file=sys.stderr, flush=True)
        for part in sorted(parts):
            datasets[part] = stem
            units[part] = path
            out.append(part)
    return out, datasets


def _input_root(pattern: str, kind: str) -> str:
    """The folder an input's files are named from (README: "Shard names"): a folder given is
    its own root, a glob's is the folder its part before the first wildcard ends in
    (``data/**/*.jsonl``: ``data``; ``data/CC-*/x.jsonl``: ``data``), a file's (or a dataset
    folder's, ``t.parquet/``) is the folder it lies in. Local paths absolute, as listed."""
    path = pattern.rstrip("/") or pattern
    if kind == "glob":
        cut = min((path.index(ch) for ch in "*?[" if ch in path), default=len(path))
        path = posixpath.dirname(path[:cut])
    elif kind == "file":
        path = posixpath.dirname(path)
    if fsutil.is_local(pattern):
        return os.path.abspath(path.removeprefix("file://") or ".")
    return path.split("?", 1)[0].rstrip("/")


def _common_root(roots: list[str]) -> str | None:
    """The deepest folder holding every root (several --input: ``data/CC-MAIN-2024-10/`` and
    ``data/CC-MAIN-2024-18/`` give ``data``), or None when they share none (local paths and
    URLs, two containers)."""
    if not roots:
        return None
    split = [r.rstrip("/").split("/") for r in roots]
    common = []
    for parts in zip(*split):
        if len(set(parts)) > 1:
            break
        common.append(parts[0])
    if fsutil.is_local(roots[0]) and all(fsutil.is_local(r) for r in roots):
        return "/".join(common) or "/"
    scheme = roots[0].split("://", 1)[0] + "://"
    joined = "/".join(common)
    # an URL root needs its scheme and container (az://container): "az:" alone is none
    return joined if joined.startswith(scheme) and len(joined) > len(scheme) else None


def _folder_below(root: str, path: str) -> str:
    """The folder ``path`` lies in relative to ``root``, with "/" between folders ("" directly
    in it, or when ``path`` is not below ``root``)."""
    if fsutil.is_local(path):
        path = os.path.abspath(path.removeprefix("file://"))
    base = root.rstrip("/") + "/"
    if not path.startswith(base):
        return ""
    return posixpath.dirname(path[len(base):].rstrip("/"))


def _files_below(folder: str) -> tuple[dict[str, dict], set[str]]:
    """({path: details} of every supported file in ``folder`` and the folders below it, {the
    dataset folders among them}): a folder named like a file (``t.parquet/``) is one dataset
    (read as its part files), not entered here; folders whose names start with ``.`` or ``_``
    (``.git/``, tokenbeam's ``_commits/``, Delta's ``_delta_log/``) are not entered; a folder
    linked to twice is read once. Paths are
    spelled as a listing of ``folder`` spells them (local: absolute). Details only where the
    listing gives them exactly (Azure: see fs.glob_details); one listing on object stores."""
    def enter(name: str) -> bool:
        # As Hadoop and Spark list a folder: "_" and "." folders are metadata (ours: _commits/,
        # _temporary/, _parts/; Spark's _temporary/, Delta's _delta_log/ of .json files).
        return not name.startswith((".", "_"))

    def wanted(name: str) -> bool:
        return name.lower().endswith(SUPPORTED_SUFFIXES)

    files: dict[str, dict] = {}
    datasets: set[str] = set()
    if fsutil.is_local(folder):
        start = os.path.abspath(folder.removeprefix("file://"))
        seen: set[tuple[int, int]] = set()
        pending = [start]
        while pending:
            here = pending.pop()
            try:
                st = os.stat(here)
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                entries = list(os.scandir(here))
            except OSError:
                continue  # an unreadable folder below: what it holds cannot be listed
            for entry in entries:
                try:
                    is_dir = entry.is_dir()  # follows links: a linked folder is entered
                except OSError:
                    is_dir = False
                if is_dir and wanted(entry.name):
                    datasets.add(entry.path)
                    files[entry.path] = {}
                elif is_dir and enter(entry.name):
                    pending.append(entry.path)
                elif not is_dir and wanted(entry.name):
                    files[entry.path] = {}
        return files, datasets
    base = folder.split("?", 1)[0].rstrip("/") + "/"
    for url, entry in fsutil.find_details(folder).items():
        if not url.startswith(base):
            continue
        names = url[len(base):].rstrip("/").split("/")
        if not all(enter(n) for n in names[:-1]):
            continue
        holder = next((k for k, n in enumerate(names[:-1]) if wanted(n)), None)
        if holder is not None or entry.get("type") == "directory":
            if holder is not None or wanted(names[-1]):  # a dataset folder is the input
                url = base + "/".join(names if holder is None else names[:holder + 1])
                datasets.add(url)
                files[url] = {"type": "directory"}
        elif wanted(names[-1]):
            files[url] = entry
    return files, datasets


def _suffix_of(path: str) -> str:
    """The supported suffix ``path`` ends with (``.parquet``), or ""."""
    lower = path.rstrip("/").lower()
    return next((s for s in _LONGEST_SUFFIX_FIRST if lower.endswith(s)), "")


def _refuse_special_file(pattern: str, path: str) -> None:
    """A local input (or what its link leads to) that is not a regular file (``/dev/zero``, a
    FIFO) is refused before anything opens it: reading it would hang or never end. Folders and
    paths that cannot be stat'ed are left to the checks that follow."""
    if not fsutil.is_local(path):
        return
    try:
        mode = os.stat(path.removeprefix("file://")).st_mode
    except OSError:
        return
    kind = fsutil.special_kind(mode)
    if kind:
        named = path if path == pattern else f"{path} (matched by {pattern})"
        if os.path.islink(path.removeprefix("file://")):
            named += f", a link to {os.path.realpath(path.removeprefix('file://'))}"
        raise InputError(f"--input {named}: {kind}, not a regular file; reading it would "
                         "hang or never end: give regular files (copy the data to a file)")


def _each_file_once(files: list[InputFile], named_again: list[str],
                    prefer=None) -> list[InputFile]:
    """``files`` sorted by path, each file once however many names lead to it: a symlink
    (``latest.jsonl -> v3.jsonl``), a hard link, or another spelling of the same path or URL
    would otherwise be tokenized twice. Of the names of one file the one kept is one ``prefer``
    says yes to (asked only of names with aliases), else the file's own name (the one its real
    path ends with) if it is among them, else the first in sorted order; one line on stderr
    names the others."""
    groups: dict[object, list[InputFile]] = {}
    for f in files:
        groups.setdefault(file_key(f.path), []).append(f)
    kept, dropped = [], []
    for group in groups.values():
        if len(group) == 1:
            kept.append(group[0])
            continue
        own = {f.path: os.path.basename(_location(f.path)) == os.path.basename(f.path.rstrip("/"))
               for f in group}
        preferred = {f.path: bool(prefer and prefer(f)) for f in group}
        first = min(group, key=lambda f: (not preferred[f.path], not own[f.path], f.path))
        kept.append(first)
        dropped += [f"{f.path} (the same file as {first.path})" for f in group if f is not first]
        for f in group:  # the output holds the same data under two names (an older version)
            if f is not first and preferred[f.path] and f.stem != first.stem:
                print(f"inputs: {f.path} and {first.path} are one file and the output holds "
                      "shards of both: its documents are there twice; delete the shards named "
                      f"{f.stem}_* and their _commits/ records", file=sys.stderr, flush=True)
    kept_paths = {f.path for f in kept}
    dropped += [f"{p} (named twice)" for p in sorted(set(named_again)) if p in kept_paths]
    if dropped:
        print(f"inputs: each file is read once; left out {len(dropped)} other name(s) of an "
              f"input: {_listing(sorted(dropped))}", file=sys.stderr, flush=True)
    return sorted(kept, key=lambda f: f.path)


def file_key(path: str) -> object:
    """What is the same for every name of one file: a local file's device and inode (symlinks
    and hard links alike), else its place: :func:`dataio.fs.resolve_location` for Azure (which
    knows the account), the filesystem's own path for other URLs."""
    if fsutil.is_local(path):
        try:
            st = os.stat(path.removeprefix("file://"))
            return ("inode", st.st_dev, st.st_ino)
        except OSError:
            return ("place", _location(path))
    place = fsutil.resolve_location(path)  # Azure: the account, container and blob
    if place.startswith("azure://"):
        return ("place", place)
    fs, inner = fsutil.filesystem_and_path(path)  # memory://x/a and memory:///x/a: one file
    return ("place", str(fs.protocol), posixpath.normpath("/" + inner.lstrip("/")))


def _is_visible_input(path: str) -> bool:
    name = os.path.basename(path.rstrip("/"))
    return not name.startswith(".") and name.lower().endswith(SUPPORTED_SUFFIXES)


def _note_whole_files(files: Sequence[InputFile]) -> None:
    """One line on stderr when compressed inputs are large: each is one worker's work however
    many workers there are (the job waits for the largest), where a ``.jsonl`` is cut into
    ``--split-bytes`` ranges and Parquet into row groups."""
    big = sorted((f for f in files if f.format in ("jsonl.gz", "jsonl.zst")
                  and f.size > WHOLE_FILE_NOTE_BYTES), key=lambda f: -f.size)
    if big:
        print(f"inputs: {len(big)} compressed file(s) above {WHOLE_FILE_NOTE_BYTES >> 30} GiB are "
              f"each read whole by one worker (largest {big[0].path}, {big[0].size / 1e9:.1f} "
              "GB): the job lasts at least as long as that file takes one core; split them "
              "into smaller files, or give .jsonl (read in --split-bytes ranges by several "
              "workers)", file=sys.stderr, flush=True)


def _listing(entries: list[str], shown: int = 5) -> str:
    more = len(entries) - shown
    return ", ".join(entries[:shown]) + (f" and {more} more" if more > 0 else "")


def _input_files(paths: list[str], details: dict[str, dict]) -> list[InputFile]:
    """:func:`_input_file` of each path: local files one after the other (a stat each), remote
    files whose listing did not say enough 16 at a time (a request each)."""
    if all(fsutil.is_local(p) or _input_file_listed(p, details.get(p)) for p in paths):
        return [_input_file(p, details.get(p)) for p in paths]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(lambda p: _input_file(p, details.get(p)), paths))


def _input_file_listed(path: str, listed: dict | None) -> InputFile | None:
    """The file as its listing entry describes it, if that names its size and version."""
    if listed and listed.get("type", "file") == "file" and listed.get("size") is not None \
            and _version_of(listed) != "unknown":
        return InputFile(path, int(listed["size"]), _version_of(listed))
    return None


def _input_file(path: str, listed: dict | None = None) -> InputFile:
    """The file's size and version; from ``listed`` (its entry in a listing) when that names
    them, so object-store inputs cost no request each."""
    known = _input_file_listed(path, listed)
    if known is not None:
        return known
    fs, inner = fsutil.filesystem_and_path(path)
    try:
        info = fs.info(inner)
    except OSError as exc:  # this file only: its shards fail with the reason, the others run
        return InputFile(path, 0, "unreadable", error=f"{path}: cannot read the file "
                         f"({exc.strerror or exc}); fix it or leave it out")
    return InputFile(path, int(info.get("size") or 0), _version_of(info))


def _location(path: str, real_folders: dict[str, str] | None = None) -> str:
    """One spelling per file, to compare paths: resolved for local paths (symlinks, ``..``).
    ``real_folders`` caches resolved folders: a listing's files share theirs, and resolving
    each path whole walks every folder above it again."""
    if not fsutil.is_local(path):
        return path.rstrip("/")
    local = os.path.abspath(path.removeprefix("file://"))
    if real_folders is None or os.path.islink(local):
        return os.path.realpath(local)
    folder, name = os.path.split(local)
    if folder not in real_folders:
        real_folders[folder] = os.path.realpath(folder)
    return os.path.join(real_folders[folder], name)


def _escape_glob(path: str) -> str:
    """``path`` with glob characters matching only themselves (a folder named ``data[1]``). In
    URLs ``?`` starts the query, so it stays."""
    if fsutil.is_local(path):
        return globlib.escape(path)
    return "".join(f"[{ch}]" if ch in "*[" else ch for ch in path)


# What a tokenbeam job writes into its output folder besides shards (dataio.sink's layout).
_JOB_FOLDERS = ("_commits", "_failures", "_errors", "_temporary", "_parts")


def _not_an_input(path: str, not_inputs: set[str], real_folders: dict[str, str]) -> str:
    """Why a file a folder or glob matched is not an input ("" when it is one)."""
    parts = path.replace("\\", "/").rstrip("/").split("/")
    for name in _JOB_FOLDERS:
        if name in parts:
            return f"written by tokenbeam under {name}/"
    if not_inputs and _location(path, real_folders) in not_inputs:
        return "a tokenizer file"
    if os.path.basename(path) == "metadata.json" and _is_manifest(path):
        return "tokenbeam's metadata.json"
    return ""


def _is_manifest(path: str) -> bool:
    """A pretty-printed JSON document, as tokenbeam writes metadata.json: its first line is
    ``{`` alone, so it cannot be JSONL (a JSONL record is a whole object on one line)."""
    if fsutil.is_local(path) and not os.path.isfile(path.removeprefix("file://")):
        return False  # a FIFO named metadata.json would block the open; refused as an input
    try:
        with fsutil.open_file(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return head.split(b"\n", 1)[0].strip() == b"{" and b"\n" in head


def plan_items(files: Sequence[InputFile], *, split_bytes: int = 256 << 20,
               stamps: dict[str, str] | None = None) -> list[WorkItem]:
    """Cut files into work items; see the module docstring. Never raises for one bad file: a
    file that could not be listed or planned becomes one item carrying the reason, which the
    reader raises in the worker (so only that file's shards fail). Each item carries the file
    as planned (size, version, and its ``stamps`` entry: the identity its content hash was
    taken under), which the reader confirms (:func:`confirm_unchanged`).

    Parquet files are planned from their footers, 16 read at a time (on object stores a few
    requests each, so 10,000 files one after the other would take minutes), and cut like JSONL
    by bytes: consecutive row groups of at most ``split_bytes`` uncompressed (at least one
    group) per item, each item carrying its first row. Every item reads the footer again, so
    a file of 20,000 small row groups is a few items, not 2,500 footer reads."""
    groups_of = _parquet_row_groups_of([f for f in files if f.format == "parquet" and not f.error])
    items = []
    for f in files:
        of_file = {"path": f.path, "stem": f.stem, "format": f.format}
        if not f.error:
            of_file.update(size=f.size, version=f.version, stamp=(stamps or {}).get(f.path, ""))
        if f.error:
            items.append(WorkItem(**of_file, index=0, error=f.error))
        elif f.format == "jsonl" and f.size > split_bytes:
            for k, start in enumerate(range(0, f.size, split_bytes)):
                items.append(WorkItem(**of_file, index=k, start=start,
                                      end=min(start + split_bytes, f.size)))
        elif f.format == "parquet":
            groups = groups_of[f]
            if isinstance(groups, CorruptFileError):  # e.g. a short file: no footer to plan with
                items.append(WorkItem(**of_file, index=0, error=str(groups)))
                continue
            chunks: list[tuple[tuple[int, ...], int]] = []  # (row groups, first row)
            chunk: list[int] = []
            first_row = row = size = 0
            for g, (rows, num_bytes) in enumerate(groups):
                if chunk and size + num_bytes > split_bytes:
                    chunks.append((tuple(chunk), first_row))
                    chunk, first_row, size = [], row, 0
                chunk.append(g)
                row, size = row + rows, size + num_bytes
            chunks.append((tuple(chunk), first_row))  # ((), 0) for a file of no row group
            for k, (groups_of_item, first) in enumerate(chunks):
                items.append(WorkItem(**of_file, index=k, row_groups=groups_of_item,
                                      first_row=first))
        else:
            items.append(WorkItem(**of_file, index=0))
    return items


def _parquet_row_groups_of(files: Sequence[InputFile]) -> dict:
    """{file: its row groups' (rows, bytes), or the CorruptFileError why not}, footers read 16
    at a time."""
    def one(f: InputFile):
        try:
            return parquet_row_groups(f.path)
        except CorruptFileError as exc:
            return exc

    if len(files) < 2:
        return {f: one(f) for f in files}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=16) as pool:
        return dict(zip(files, pool.map(one, files)))


def parquet_row_groups(path: str) -> list[tuple[int, int]]:
    """(rows, uncompressed bytes) of each row group of a Parquet file, from its footer."""
    import pyarrow.parquet as pq

    try:
        with fsutil.open_file(path, "rb") as fh:
            meta = pq.ParquetFile(fh).metadata
            groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
            return [(group.num_rows, group.total_byte_size) for group in groups]
    except Exception as exc:  # noqa: BLE001 - any pyarrow failure means an unreadable file
        raise CorruptFileError(f"{path}: not a readable Parquet file ({exc}); the file is "
                               "corrupt or truncated: re-copy it or leave it out") from exc


# --- JSONL ------------------------------------------------------------------------------------

class _BadStream(Exception):
    """A compressed stream that is not whole (raised inside :func:`read_jsonl`)."""


class _ZstdStream:
    """The decompressed bytes of a ``.zst`` file, frame after frame, as ``read(n)``.

    zstandard's ``stream_reader`` returns end-of-file when the file stops inside a frame, so a
    truncated file would read as a shorter valid one. Here each frame is decoded by its own
    ``decompressobj``, which knows when its frame is complete: input ending while a frame is
    open raises :class:`_BadStream`. Compressed input is fed in small chunks so the output held
    at once stays near ``n`` (plus one chunk's worth).
    """

    _CHUNK = 1 << 17

    def __init__(self, raw):
        import zstandard

        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._error = zstandard.ZstdError
        self._frame = None  # the decompressobj of the frame being decoded
        self._frames = 0
        self._out: list[bytes] = []
        self._held = 0
        self._eof = False

    def read(self, n: int = -1) -> bytes:
        while not self._eof and (n < 0 or self._held < n):
            self._fill()
        data = b"".join(self._out)
        if 0 <= n < len(data):
            data, rest = data[:n], data[n:]
            self._out, self._held = [rest], len(rest)
        else:
            self._out, self._held = [], 0
        return data

    def _fill(self) -> None:
        data = self._raw.read(self._CHUNK)
        if not data:
            if self._frame is not None:
                raise _BadStream("the file ends inside a zstd frame")
            if self._frames == 0:
                raise _BadStream("empty file, not even one zstd frame")
            self._eof = True
            return
        try:
            while data:
                if self._frame is None:
                    self._frame = self._dctx.decompressobj()
                    self._frames += 1
                out = self._frame.decompress(data)
                if out:
                    self._out.append(out)
                    self._held += len(out)
                if not self._frame.eof:
                    break
                data, self._frame = self._frame.unused_data, None  # the next frame starts here
        except self._error as exc:
            raise _BadStream(str(exc)) from None


def read_jsonl(item: WorkItem) -> Iterator[RawRecord]:
    """The lines a work item owns, in order (without their newline). Raises
    :class:`CorruptFileError` for a file that cannot be read, or whose compressed stream is
    corrupt or incomplete, and :class:`InputChangedError` for a file that is not the one planned
    (then records before the fault may already have been yielded: the caller fails the whole
    file)."""
    if item.error:
        raise CorruptFileError(item.error)
    if item.head is not None:
        yield from _split_lines(io.BytesIO(_whole_lines_of_head(item)), base=0, end=None,
                                first_line=1)
        return
    if item.size is not None:
        faults.checkpoint("readers.item_started")
    if item.format == "jsonl":
        try:
            yield from _read_jsonl_range(item.path, item.start, item.end)
        except CorruptFileError:
            raise
        except OSError as exc:
            confirm_unchanged(item)  # a file cut short under us changed; it is not corrupt
            raise CorruptFileError(f"{item.path}: cannot read the file ({exc}); fix it or "
                                   "leave it out") from exc
        confirm_unchanged(item)
        return
    try:
        raw = fsutil.open_file(item.path, "rb")
    except OSError as exc:
        raise CorruptFileError(f"{item.path}: cannot read the file ({exc}); fix it or leave it "
                               "out") from exc
    with raw:
        try:
            f = _ZstdStream(raw) if item.format == "jsonl.zst" else gzip.GzipFile(fileobj=raw,
                                                                                  mode="rb")
            yield from _split_lines(f, base=0, end=None, first_line=1)
            if item.format == "jsonl.gz" and raw.tell() == 0:
                raise _BadStream("empty file, not even a gzip header")
        except (OSError, EOFError, zlib.error, _BadStream) as exc:
            confirm_unchanged(item, raw)  # a file cut short under us changed; it is not corrupt
            raise CorruptFileError(f"{item.path}: cannot decompress ({exc}); the file is corrupt "
                                   "or truncated: re-copy it or leave it out") from exc
        confirm_unchanged(item, raw)


def confirm_unchanged(item: WorkItem, opened=None) -> None:
    """Raise :class:`InputChangedError` unless the file ``item`` was read from is still the one
    planned: the same size and version (mtime or etag) and, where the item carries a ``stamp``,
    the same identity as when its content hash was taken (a local file's ctime moves with every
    write and cannot be set back, so an edit that keeps size and mtime is caught without hashing
    again). Called once the item's bytes are read: a file truncated, appended to or rewritten
    in place since planning fails its shards instead of committing part of it. ``opened``: the
    file object read from, where the caller holds it (a local file is then checked by its
    descriptor), else the path is checked. Items without a planned size (the planner's samples)
    are not checked."""
    if item.size is None:
        return
    stamp = ""
    try:
        if fsutil.is_local(item.path):
            fileno = getattr(opened, "fileno", None)
            st = os.fstat(fileno()) if fileno is not None else \
                os.stat(item.path.removeprefix("file://"))
            size, version = st.st_size, f"mtime:{st.st_mtime}"
            if item.stamp:
                stamp = input_hashes.stamp(st)
        else:
            fs, inner = fsutil.filesystem_and_path(item.path)
            fs.invalidate_cache(inner)  # the file as it is now, not as a listing cached it
            info = fs.info(inner)
            size, version = int(info.get("size") or 0), _version_of(info)
    except FileNotFoundError:
        size, version = None, "gone"
    comparable = item.version.startswith("mtime:") or not fsutil.is_local(item.path)
    if size == item.size and (not comparable or version == item.version) and stamp == item.stamp:
        return
    found = "it is gone" if size is None else f"found {size}" if size != item.size else \
        f"found {size}, rewritten in place"
    raise InputChangedError(f"{item.path} changed while reading (planned {item.size} bytes, "
                            f"{found}); rerun")


# A planning sample (:func:`sample_item`) reads at most this much of a JSONL file, stored and
# decompressed: a 2 MB .gz whose first line unpacks to 2 GB is judged from its first MiB.
SAMPLE_BYTES = 1 << 20
# ... and of a Parquet file, the first row group's requested columns if they hold no more than
# this uncompressed (their size is in the footer); a larger row group gives no sample.
PARQUET_SAMPLE_BYTES = 64 << 20
# ... and of a compressed file streamed to measure how it unpacks (counted, never held), at most
# this many decompressed bytes.
SAMPLE_UNPACKED = 256 << 20


def sample_item(f: InputFile, *, head: int | None = None) -> WorkItem:
    """The work item of a planning sample of ``f`` (the tokenizer self-check, ``--dry-run``'s
    estimates): bounded in bytes (:data:`SAMPLE_BYTES`, :data:`PARQUET_SAMPLE_BYTES`), so no
    input, however its first record is made, costs planning more than that."""
    parquet = f.format == "parquet"
    return WorkItem(path=f.path, stem=f.stem, format=f.format, index=0, error=f.error,
                    row_groups=(0,) if parquet else (),
                    head=head or (PARQUET_SAMPLE_BYTES if parquet else SAMPLE_BYTES))


class _Capped:
    """A binary file's first ``limit`` bytes as a file: reads stop there."""

    def __init__(self, raw, limit: int):
        self._raw, self._left = raw, limit

    def read(self, n: int = -1) -> bytes:
        n = self._left if n is None or n < 0 else min(n, self._left)
        data = self._raw.read(n) if n > 0 else b""
        self._left -= len(data)
        return data

    def readable(self) -> bool:
        return True

    @property
    def capped(self) -> bool:
        return self._left <= 0


class _Counting:
    """A binary file read through, counting the bytes read (a decompressor's input)."""

    def __init__(self, raw):
        self._raw, self.read_bytes = raw, 0

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self.read_bytes += len(data)
        return data

    def readable(self) -> bool:
        return True


def decompressed_sizes(path: str, fmt: str, *, stored: int, step: int = 256 << 10,
                       most: int = SAMPLE_UNPACKED) -> list[tuple[int, int]]:
    """How a compressed JSONL file (``fmt``: jsonl.gz or jsonl.zst) unpacks at its start:
    ``(stored bytes read, decompressed bytes)`` after each ``step`` stored bytes or so, up to
    ``stored`` stored bytes or ``most`` decompressed ones (or the end of the file, the last pair
    then being exact). Streamed: memory stays at one read, whatever the ratio. Never raises for
    a damaged file: the pairs are what could be read (the job reports the file)."""
    points: list[tuple[int, int]] = []
    out = 0
    try:
        with fsutil.open_file(path, "rb") as raw:
            counted = _Counting(_Capped(raw, stored))
            if fmt == "jsonl.gz":
                stream = gzip.GzipFile(fileobj=counted, mode="rb")
            else:
                import zstandard

                stream = zstandard.ZstdDecompressor().stream_reader(
                    counted, read_size=16 << 10, read_across_frames=True)
            mark = step
            while True:
                chunk = stream.read(1 << 13)  # small reads: the pairs follow the stream closely
                if not chunk:
                    break
                out += len(chunk)
                if out >= most:
                    break
                if counted.read_bytes >= mark:
                    points.append((counted.read_bytes, out))
                    mark = counted.read_bytes + step
            points.append((counted.read_bytes, out))
    except Exception:  # noqa: BLE001 - a damaged or cut-off stream: what was read counts
        pass
    return points


def _whole_lines_of_head(item: WorkItem) -> bytes:
    """The whole lines within the first ``item.head`` bytes of the (decompressed) file, read
    from at most ``item.head`` stored bytes; a line not ended within them is not sampled. Never
    raises for a damaged file: the sample is what could be read (the job reports the file)."""
    limit = item.head
    chunks: list[bytes] = []
    held, whole = 0, False
    try:
        with fsutil.open_file(item.path, "rb") as raw:
            stored = _Capped(raw, limit)
            if item.format == "jsonl.gz":
                stream = gzip.GzipFile(fileobj=stored, mode="rb")
            elif item.format == "jsonl.zst":
                import zstandard

                stream = zstandard.ZstdDecompressor().stream_reader(stored, read_size=1 << 16,
                                                                   read_across_frames=True)
            else:
                stream = stored
            while held < limit:
                # at most what is asked (memory stays bounded), in pieces: what was read
                # before a damaged part is kept
                chunk = stream.read(min(limit - held, 1 << 16))
                if not chunk:
                    whole = not stored.capped  # the file ended, not the bytes a sample may read
                    break
                chunks.append(chunk)
                held += len(chunk)
    except Exception:  # noqa: BLE001 - a damaged or cut-off stream: the sample is what was read
        whole = False
    data = b"".join(chunks)
    return data if whole else data[:data.rfind(b"\n") + 1]


def _read_jsonl_range(path: str, start: int, end: int | None) -> Iterator[RawRecord]:
    with fsutil.open_file(path, "rb") as f:
        if start > 0:
            # The line containing byte start-1 belongs to the previous range; skip past its end
            # (a CR LF pair whose LF is byte start belongs to it too: the next line starts after).
            f.seek(start - 1)
            skipped = 0
            while True:
                block = _read_block(f)
                if not block:
                    return
                found = _LINE_END.search(block)
                if found:
                    base = start - 1 + skipped + found.end()
                    f.seek(base)
                    break
                skipped += len(block)
            first_line = None
        else:
            base, first_line = 0, 1
        if end is not None and base >= end:
            return
        yield from _split_lines(f, base=base, end=end, first_line=first_line)


# What ends a line: Python's text mode (universal newlines), as Megatron reads JSONL: LF, CR LF,
# or a CR alone. Not U+2028 or the other breaks that str.splitlines knows (file iteration does
# not split there). In UTF-8 no multi-byte character holds the byte CR or LF, so the bytes can be
# split before decoding.
_LINE_END = re.compile(rb"\r\n?|\n")
_SPLIT_LINES = re.compile(rb"(\r\n?|\n)")


def _read_block(f) -> bytes:
    """The next block of ``f``; it never ends between the CR and LF of one line end, so that
    each block's CRs can be told apart (a CR alone ends a line, CR LF is one line end)."""
    block = f.read(_BLOCK)
    while block.endswith(b"\r"):
        more = f.read(1)
        if not more:
            break
        block += more
    return block


def _lines_of(block: bytes) -> tuple[list[bytes], list[bytes] | None, int]:
    """(the pieces of ``block`` between line ends, the line ends, or None when all are ``step``
    bytes long, step). A block of one kind of line end is split at the speed of bytes.split."""
    if b"\r" not in block:
        return block.split(b"\n"), None, 1
    if b"\n" not in block:
        return block.split(b"\r"), None, 1
    if block.count(b"\r\n") == block.count(b"\r") == block.count(b"\n"):
        return block.split(b"\r\n"), None, 2
    pieces = _SPLIT_LINES.split(block)
    return pieces[0::2], pieces[1::2], 0


def _split_lines(f, *, base: int, end: int | None, first_line: int | None) -> Iterator[RawRecord]:
    """Lines from the current position of ``f`` (at byte ``base``), stopping after the last line
    that starts before ``end``, without their line ends (LF, CR LF or CR: see ``_LINE_END``).
    Line numbers count from ``first_line`` (None = unknown).

    A line longer than a block (one huge document) is gathered block by block and joined once:
    its peak is twice its size, and no copy of it is kept here once it is yielded, so it lives
    only as long as the caller holds it."""
    pending: list[bytes] = []  # the blocks of a line longer than one block
    offset = base
    line_no = first_line
    out: list[RawRecord] = []  # `yield out.pop()`: this frame holds no reference to the record
    while True:
        block = _read_block(f)
        if not block:
            break
        if pending:
            found = _LINE_END.search(block)
            if found is None:
                pending.append(block)
                continue
            pending.append(block[:found.start()])
            block = block[found.end():]
            line = b"".join(pending)
            pending = []
            if end is not None and offset >= end:
                return
            size = len(line)
            out.append(RawRecord(line, line_no, offset))
            del line
            yield out.pop()
            offset += size + len(found.group())
            if line_no is not None:
                line_no += 1
        lines, ends, step = _lines_of(block)
        tail = lines.pop()
        pending = [tail] if tail else []
        for n, line in enumerate(lines):
            if end is not None and offset >= end:
                return
            yield RawRecord(line, line_no, offset)
            offset += len(line) + (step if ends is None else len(ends[n]))
            if line_no is not None:
                line_no += 1
        del block, lines, ends
    if pending and (end is None or offset < end):
        out.append(RawRecord(b"".join(pending), line_no, offset))
        pending = []
        yield out.pop()


def line_number_at(path: str, offset: int) -> int:
    """1-based number of the line starting at ``offset`` of an uncompressed file, counting lines
    as :func:`_split_lines` does (a CR LF pair ends one line)."""
    count = 0
    after_cr = False  # the block before ended with CR: a LF starting this one is of that pair
    with fsutil.open_file(path, "rb") as f:
        remaining = offset
        while remaining > 0:
            block = f.read(min(_BLOCK, remaining))
            if not block:
                break
            count += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")
            if after_cr and block.startswith(b"\n"):
                count -= 1
            after_cr = block.endswith(b"\r")
            remaining -= len(block)
    return count + 1


# --- Parquet ----------------------------------------------------------------------------------

def row_group_bytes(pf, groups: Sequence[int], columns: Sequence[str]) -> int:
    """Uncompressed bytes of ``columns`` in row ``groups``, from the footer (nothing read)."""
    meta, wanted = pf.metadata, set(columns)
    total = 0
    for g in groups:
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            if chunk.path_in_schema.split(".")[0] in wanted:
                total += chunk.total_uncompressed_size
    return total


def read_parquet(item: WorkItem, columns: Sequence[str]) -> Iterator[tuple[int, dict]]:
    """``(row index, {column: list of values})`` per row group, columns read whole (no per-row
    dicts). A column missing from the file gives a list of None (reported per record)."""
    import pyarrow.parquet as pq

    if item.error:
        raise CorruptFileError(item.error)
    if item.size is not None:
        faults.checkpoint("readers.item_started")
    try:
        with fsutil.open_file(item.path, "rb") as fh:
            pf = pq.ParquetFile(fh)
            present = [c for c in columns if c in pf.schema_arrow.names]
            if item.head is not None and row_group_bytes(pf, item.row_groups, present) > item.head:
                return  # a planning sample: this row group is larger than a sample may be
            row = item.first_row
            if row is None:  # not planned by plan_items: counted in the footer
                row = sum(pf.metadata.row_group(g).num_rows
                          for g in range(min(item.row_groups or (0,)))) if item.row_groups else 0
            for g in item.row_groups:
                table = pf.read_row_group(g, columns=present)
                values = {c: table.column(c).to_pylist() for c in present}
                for c in columns:
                    if c not in values:
                        values[c] = [None] * table.num_rows
                yield row, values
                row += table.num_rows
            confirm_unchanged(item, fh)
    except CorruptFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - any pyarrow failure means an unreadable file
        confirm_unchanged(item)  # a file cut short under us changed; it is not corrupt
        raise CorruptFileError(f"{item.path}: not a readable Parquet file ({exc}); the file is "
                               "corrupt or truncated: re-copy it or leave it out") from exc
