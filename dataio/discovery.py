"""Finding the inputs: globs, folders and dataset folders to the list of input files.

:func:`find_inputs` takes each file once, however many names lead to it (a symlink beside its
target, a hard link, a path given twice), refuses inputs that are not regular files (a FIFO, a
device) before anything opens them, and reads a dataset folder named like a file (Spark's
``t.parquet/`` of part files) as its part files. It never raises for one bad file: it records
why the file could not be listed (``InputFile.error``) and its reader fails with that
(dataio/readers.py, which also holds the formats and :class:`~dataio.readers.InputFile`).
:func:`shard_stems` names the shards of the files found (``--output-layout``).
"""

from __future__ import annotations

import dataclasses
import glob as globlib
import os
import posixpath
import sys
from typing import Sequence

from runtime import errors
from dataio import jsonl_sink
from dataio import fs as fsutil
from dataio import locations
from dataio.readers import (LONGEST_SUFFIX_FIRST, SUPPORTED_SUFFIXES, InputError, InputFile,
                            file_format, file_stem, version_of)


# A compressed file is one work item, read by one worker from start to end: above this size
# discovery says so (one core reads it alone: minutes for a few GiB).
WHOLE_FILE_NOTE_BYTES = 4 << 30


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

    The rule (docs/usage.md, "Shard names"), from the file's path relative to the input root
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
    """The folder an input's files are named from (docs/usage.md, "Shard names"): a folder given is
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
    return next((s for s in LONGEST_SUFFIX_FIRST if lower.endswith(s)), "")


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
    and hard links alike), else its place: :func:`dataio.locations.resolve_location` for Azure (which
    knows the account), the filesystem's own path for other URLs."""
    if fsutil.is_local(path):
        try:
            st = os.stat(path.removeprefix("file://"))
            return ("inode", st.st_dev, st.st_ino)
        except OSError:
            return ("place", _location(path))
    place = locations.resolve_location(path)  # Azure: the account, container and blob
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
            and version_of(listed) != "unknown":
        return InputFile(path, int(listed["size"]), version_of(listed))
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
    return InputFile(path, int(info.get("size") or 0), version_of(info))


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
