"""Finding datasets, for every command: :func:`list_datasets` (the datasets directly in one
folder, with a rule for incomplete pairs), :func:`find_datasets` (command-line paths: globs,
folders, files, prefixes, URLs), :func:`unique_datasets` (each dataset once however spelled),
:func:`resolve_prefixes` (what the loader opens, dataio/dataset.py); the tokenizer and vocabulary
size a folder's records name; and :data:`HOLDOUT_DIR`, where the tokenize job writes holdout
shards.
"""

from __future__ import annotations

import concurrent.futures
import glob as globlib
import json
import os
import sys
from typing import Sequence

from runtime import errors
from dataio import fs as fsutil
from dataio import locations
from dataio import indexed, manifest, naming
from dataio.readers import InputError


SPLIT_NAMES = ("train", "holdout")


HOLDOUT_DIR = "holdout"


METADATA_NAME = "metadata.json"


INCOMPLETE = ("error", "skip", "keep", "idx")


def _incomplete_message(prefix: str, present: str) -> str:
    missing = ".idx" if present == ".bin" else ".bin"
    return (f"{prefix}{present} has no {os.path.basename(prefix)}{missing} (an unfinished or "
            "partly copied dataset?); finish or delete it")


def _dataset_error(message: str) -> InputError:
    # The dataset commands (count, merge, signature, blend) have always answered a dataset that
    # cannot be found or used with exit status 1, not the usage status 2 of a bad --input.
    return InputError(message, exit_status=errors.EXIT_FAILED)


def list_datasets(folder: str, *, incomplete: str = "error") -> list[str]:
    """Prefixes of the datasets directly in ``folder`` (not in its subfolders, so ``holdout/``
    stays apart), sorted by name, spelled as ``folder`` is (a path or URL); temporary files of
    unfinished writes are ignored. A tokenize output folder (one with ``_commits/``) and its
    ``holdout/`` folder count their subfolders too (``--output-layout mirror`` writes shards
    there: ``CC-MAIN-2024-10/000_00000_text_document_...``), all but ``holdout/`` and those
    whose names start with ``_`` or ``.`` (tokenbeam's own); sorted by their names below
    ``folder`` (``CC-MAIN-2024-10/...`` before ``CC-MAIN-2024-18/...``).

    ``incomplete`` says what becomes of a ``.bin`` without its ``.idx`` or the reverse:
    ``"error"`` raises :class:`InputError` naming it, ``"skip"`` warns on stderr and leaves it
    out, ``"keep"`` lists it (for a check that reports it), ``"idx"`` lists exactly the prefixes
    whose ``.idx`` exists (the writer's commit rule: a lone ``.bin`` is an unfinished write).
    """
    if incomplete not in INCOMPLETE:
        raise ValueError(f"incomplete={incomplete!r}: use one of {INCOMPLETE}")
    if not is_folder(folder):
        raise _dataset_error(f"{folder} is not a folder; give the folder that holds the .bin/.idx "
                             "files")
    fs, inner = fsutil.filesystem_and_path(folder)
    found: dict[str, set[str]] = {}
    pending = [("", fs.ls(inner, detail=True))]
    below = None  # whether subfolders hold shards too: asked once, of the folder itself
    while pending:
        under, entries = pending.pop()
        if below is None:
            below = _shards_below(folder, entries)
        for entry in entries:
            name = os.path.basename(entry["name"].rstrip("/"))
            if entry.get("type") == "directory":
                if below and not name.startswith(("_", ".")) and (under or name != HOLDOUT_DIR):
                    pending.append((f"{under}{name}/", fs.ls(entry["name"], detail=True)))
            elif name.endswith((".bin", ".idx")) and not indexed.is_temporary_name(name):
                found.setdefault(under + name[:-4], set()).add(name[-4:])
    base = folder.rstrip("/") or folder
    prefixes = []
    for name, suffixes in sorted(found.items()):
        prefix = fsutil.join(base, name)
        if len(suffixes) == 2 or incomplete == "keep":
            prefixes.append(prefix)
        elif incomplete == "idx":
            if ".idx" in suffixes:
                prefixes.append(prefix)
        elif incomplete == "skip":
            print(f"warning: skipped {_incomplete_message(prefix, suffixes.pop())}",
                  file=sys.stderr)
        else:
            raise _dataset_error(_incomplete_message(prefix, suffixes.pop()) +
                                 " (or pass --skip-incomplete)")
    return prefixes


def _shards_below(folder: str, entries: list[dict]) -> bool:
    """Whether ``folder``'s subfolders hold its shards too: it is a tokenize output (its listing
    ``entries`` show ``_commits/``) or the ``holdout/`` folder of one."""
    if any(e.get("type") == "directory" and os.path.basename(e["name"].rstrip("/")) ==
           manifest.COMMITS_DIR for e in entries):
        return True
    return os.path.basename(folder.rstrip("/")) == HOLDOUT_DIR and \
        tokenize_output_of(folder) is not None


def find_datasets(patterns: Sequence[str], *, incomplete: str = "error") -> list[str]:
    """Dataset prefixes named by command-line paths, sorted, each dataset once however it is
    spelled (see :func:`unique_datasets`): the one way every dataset command finds its inputs.

    A pattern may be a glob, a folder (its datasets, not its subfolders': see
    :func:`list_datasets`), a ``.bin``/``.idx`` file or a prefix; local or any fsspec URL. Other
    matches (``metadata.json``, folders matched by a wildcard) are ignored. ``incomplete`` as for
    :func:`list_datasets`; a pattern that names no dataset is an :class:`InputError` naming it,
    except with ``"keep"``, where a path that is not a folder stands for its own prefix (so a
    check reports what is missing) and an empty folder adds nothing.
    """
    prefixes: set[str] = set()
    for pattern in patterns:
        found: set[str] = set()
        magic = globlib.has_magic(pattern)
        matches = fsutil.glob(pattern)
        if fsutil.is_local(pattern) and not os.path.isabs(pattern):
            # fsspec's local glob answers absolute paths: keep them spelled as the user did
            matches = [os.path.relpath(m) for m in matches]
        if not matches and not magic and fsutil.exists(indexed.idx_path(pattern)):
            matches = [indexed.idx_path(pattern)]
        for match in matches:
            if is_folder(match):
                # A folder named outright is read; one a wildcard happens to match (holdout/
                # under out/*) is not descended into.
                if not magic:
                    found.update(list_datasets(match, incomplete=incomplete))
            elif match.endswith((".bin", ".idx")) and not indexed.is_temporary_name(match):
                found.add(indexed.prefix_of(match))
        if incomplete != "keep":
            for prefix in sorted(found):
                _check_pair(prefix, found, incomplete=incomplete)
        elif not found and not magic and not is_folder(pattern):
            found.add(indexed.prefix_of(pattern))
        if not found and incomplete != "keep":
            raise _dataset_error(f"--input {pattern}: no .bin/.idx datasets match; check the "
                                 "path and quote the glob so the shell does not expand it")
        prefixes.update(found)
    return unique_datasets(sorted(prefixes))


def _check_pair(prefix: str, found: set[str], *, incomplete: str) -> None:
    """Apply ``incomplete`` to ``prefix`` when one of its two files is missing."""
    for present, other in ((".bin", ".idx"), (".idx", ".bin")):
        if fsutil.exists(prefix + other):
            continue
        if incomplete == "idx" and other == ".bin":
            return  # a lone .idx is listed: opening it says what is wrong
        if incomplete in ("skip", "idx"):
            if incomplete == "skip":
                print(f"warning: skipped {_incomplete_message(prefix, present)}",
                      file=sys.stderr)
            found.discard(prefix)
            return
        raise _dataset_error(_incomplete_message(prefix, present))


def unique_datasets(prefixes: Sequence[str]) -> list[str]:
    """``prefixes`` with every dataset once, in the given order: ``out/x`` and ``out/./x`` (or a
    symlink to it) are one dataset, and counting, blending or merging it twice is never meant."""
    seen: set[str] = set()
    unique = []
    for prefix in prefixes:
        where = locations.resolve_location(indexed.idx_path(prefix))
        if where not in seen:
            seen.add(where)
            unique.append(prefix)
    return unique


def shown_names(prefixes: Sequence[str]) -> list[str]:
    """How a listing names each dataset: its file name, or, where two would read the same (the
    shards of ``--output-layout mirror`` in several subfolders: ``CC-MAIN-2024-10/000_00000_...``
    and ``CC-MAIN-2024-18/000_00000_...``), each its path below the deepest folder they share."""
    names = [os.path.basename(p.rstrip("/")) for p in prefixes]
    if len(set(names)) == len(names):
        return names
    split = [p.rstrip("/").split("/") for p in prefixes]
    shared = 0
    for parts in zip(*(s[:-1] for s in split)):
        if len(set(parts)) > 1:
            break
        shared += 1
    return ["/".join(s[shared:]) for s in split]


def is_folder(path: str) -> bool:
    fs, inner = fsutil.filesystem_and_path(path)
    return fs.isdir(inner)


def resolve_prefixes(path_or_prefixes, split=None) -> list[str]:
    """The dataset prefixes ``get_dataset`` opens for these arguments (see the module docs)."""
    if isinstance(split, str) and split not in SPLIT_NAMES:
        raise ValueError(f"split={split!r}: use one of {SPLIT_NAMES}, a (start, end) pair of "
                         "fractions, or None")
    if isinstance(path_or_prefixes, (str, os.PathLike)):
        path = os.fspath(path_or_prefixes)
        if is_folder(path):
            folder = fsutil.join(path, HOLDOUT_DIR) if split == "holdout" else path
            if split == "holdout" and not is_folder(folder):
                raise FileNotFoundError(f"{path} has no {HOLDOUT_DIR}/ subfolder; holdout shards "
                                        "exist only when the tokenize job ran with "
                                        "--holdout-fraction")
            prefixes = list_datasets(folder, incomplete="idx")
            if not prefixes:
                raise FileNotFoundError(f"no .bin/.idx datasets in {folder}; pass the --output "
                                        "folder of pipelines.tokenize or a list of prefixes")
            refuse_mixed_tokenizers(folder, prefixes)  # a list of prefixes is taken as named
            return prefixes
        path_or_prefixes = [path]
    if isinstance(split, str):
        raise ValueError(f"split={split!r} selects a subfolder of a tokenize output folder; with "
                         "prefixes pass the holdout prefixes themselves, or a (start, end) pair")
    prefixes = [indexed.prefix_of(os.fspath(p)) for p in path_or_prefixes]
    if not prefixes:
        raise ValueError("get_dataset needs a folder or at least one dataset prefix")
    missing = [p for p in prefixes if not fsutil.exists(indexed.idx_path(p))]
    if missing:
        raise FileNotFoundError(f"no dataset at {', '.join(missing)} (expected PREFIX.idx and "
                                "PREFIX.bin)")
    return prefixes


class MixedTokenizersError(errors.RunError, ValueError):
    """A folder holds shards written with different tokenizers (exit status 1: the data)."""


def tokenize_output_of(folder: str) -> tuple[str, str] | None:
    """``(output, subfolder)`` when ``folder`` holds the shards of a tokenize output (one with
    commit records, ``_commits/``): the output itself (``""``) or its ``holdout/`` folder;
    None for any other folder."""
    base = folder.rstrip("/") or folder
    if is_folder(fsutil.join(base, manifest.COMMITS_DIR)):
        return base, ""
    if os.path.basename(base) == HOLDOUT_DIR:
        parent = _parent(base)
        if is_folder(fsutil.join(parent, manifest.COMMITS_DIR)):
            return parent, HOLDOUT_DIR
    return None


def refuse_mixed_tokenizers(folder: str, prefixes: Sequence[str]) -> None:
    """Raise :class:`MixedTokenizersError` when the datasets ``prefixes`` of the tokenize output
    folder ``folder`` were written with more than one tokenizer, as their commit records say
    (an ``--overwrite`` run with another tokenizer rewrites only the shards it plans). Datasets
    without a record (other tools' files) and folders without records say nothing."""
    where = tokenize_output_of(folder)
    if where is None:
        return
    output, sub = where
    records = fsutil.files_under(fsutil.join(output, manifest.COMMITS_DIR))
    shards = {}  # dataset name -> its shard's record, for the datasets that have one
    base = folder.rstrip("/") + "/"
    for prefix in prefixes:
        # its name below the folder: shards of --output-layout mirror lie in subfolders
        name = prefix[len(base):] if prefix.startswith(base) else os.path.basename(prefix)
        shard = naming.strip_counts(name)
        shard = f"{sub}/{shard}" if sub else shard
        if f"{shard}.json" in records:
            shards[name] = shard

    def tokenizer_of(shard: str) -> str | None:
        try:
            return manifest.tokenizer_of(manifest.read_commit_record(output, shard))
        except fsutil.NotRegularFileError:  # a FIFO or device says nothing (validate FAILs it)
            return None

    # One small read per record; 16 at a time (object stores: a request each).
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        found = list(pool.map(tokenizer_of, shards.values()))
    by_tokenizer: dict[str, list[str]] = {}
    for name, tokenizer in zip(shards, found):
        if tokenizer is not None:
            by_tokenizer.setdefault(tokenizer, []).append(name)
    if len(by_tokenizer) < 2:
        return
    recorded = {}
    for _, meta in metadata_files(prefixes):
        tok = meta.get("tokenizer") or {}
        recorded[tuple(f.get("sha256") for f in tok.get("files") or [])] = tok.get("model")
    described = []
    for tokenizer, names in sorted(by_tokenizer.items(), key=lambda kv: kv[1][0]):
        files, kind = json.loads(tokenizer)[:2]
        model = recorded.get(tuple(files))
        who = f"{kind} {model}" if model else f"{kind} with files sha256 {files[0][:12]}..." \
            if files else str(kind)
        shown = ", ".join(names[:2]) + (f" and {len(names) - 2} more" if len(names) > 2 else "")
        described.append(f"{who} ({shown})")
    raise MixedTokenizersError(
        f"{folder} holds shards of {len(described)} tokenizers: {'; '.join(described)} "
        "(an --overwrite run with another tokenizer rewrites only the shards it plans); delete "
        "the shards of the tokenizer you do not want (and their _commits/ records), or name "
        "the shards of one tokenizer explicitly (their prefixes)")


def metadata_files(prefixes: Sequence[str]) -> list[tuple[str, dict]]:
    """``(path, parsed)`` of the ``metadata.json`` that belongs to each folder holding the
    prefixes: the one beside the shards, or for a ``holdout/`` folder, its parent's."""
    found = []
    for folder in dict.fromkeys(_parent(p) for p in prefixes):
        candidates = [folder]
        if os.path.basename(folder.rstrip("/")) == HOLDOUT_DIR:
            candidates.append(_parent(folder.rstrip("/")))
        elif not fsutil.exists(fsutil.join(folder, METADATA_NAME)):
            # a subfolder of --output-layout mirror: the output's, the folders above
            output = _output_above(folder)
            if output:
                candidates = [output]
        for candidate in candidates:
            path = fsutil.join(candidate, METADATA_NAME)
            if not fsutil.exists(path):
                continue
            with fsutil.open_file(path, "rb") as f:
                try:
                    found.append((path, json.load(f)))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path} is not valid JSON: {exc}") from None
            break
    return found


def read_vocab_size(prefixes: Sequence[str]) -> int | None:
    """``tokenizer.vocab_size`` from :func:`metadata_files`; different folders must agree."""
    found: dict[int, str] = {}
    for path, meta in metadata_files(prefixes):
        vocab = (meta.get("tokenizer") or {}).get("vocab_size")
        if vocab is not None:
            found.setdefault(int(vocab), path)
    if len(found) > 1:
        listing = ", ".join(f"{v} in {p}" for v, p in found.items())
        raise ValueError(f"the datasets come from tokenizers with different vocab sizes "
                         f"({listing}); load them separately")
    return next(iter(found), None)


def _output_above(folder: str, *, levels: int = 8) -> str | None:
    """The tokenize output (a folder with ``_commits/``) ``folder`` lies in, at most ``levels``
    folders up (``--output-layout mirror`` shards in ``OUT/CC-MAIN-2024-10/``, holdout shards
    in ``OUT/holdout/CC-MAIN-2024-10/``), or None."""
    here = folder.rstrip("/")
    for _ in range(levels):
        up = _parent(here)
        if up == here or not up or up in (".", "/"):
            return None
        if is_folder(fsutil.join(up, manifest.COMMITS_DIR)):
            return up
        here = up
    return None


def _parent(path: str) -> str:
    if fsutil.is_local(path):
        return os.path.dirname(path) or "."
    return path.rsplit("/", 1)[0]
