"""Durable parts: what a work item wrote survives the run's death, and a rerun reuses it.

A work item (a byte range of a JSONL file, a compressed file, a list of Parquet row groups) is
read, tokenized and written as parts by one worker. Once every part of the item is written, the
worker writes the item's record; from then on the item is done, whatever happens to the run: a
rerun of the same command finds the record while planning and hands the item's parts to the
sink instead of reading and tokenizing it again. Layout, under ``{output}/_parts/``::

    {stem folder}/{item key}.json                        the item record (written last, atomically)
    {stem folder}/{item key}/{shard hash}-{batch}.bin/.idx  its parts, one per batch and shard

``stem folder`` = ``{hash of the stem}-{hash of its shards and their fingerprints}``. A shard's
fingerprint hashes its input (path, size, version), the tokenizer and every setting that
changes output bytes (pipelines/tokenize/planner.py), so a changed input or option gives another
folder and stale parts are never reused; the planner removes them (same first half, other
second). ``item key`` = ``{item index}-{hash of its range}``: another ``--split-bytes`` cuts
other ranges, which are not reused either. An item's record names its parts, their counts and
input bytes, the records it read and the bad ones among them (so that a reused item still
reports them in ``_errors/`` and counts them for ``--max-bad-fraction``).

A stem is committed by the worker that finishes its last item (dataio/sink.py), as soon as it
does; the parts of a stem go once all its shards are committed. Nothing here imports Beam.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from typing import Iterable, Sequence

from dataio import fs as fsutil

PARTS_DIR = "_parts"
# An item that found more bad records than this keeps no record (it is redone on a rerun): its
# record would hold them all.
MAX_KEPT_BAD = 10_000


def _hash(text: str, n: int = 16) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:n]


@dataclasses.dataclass(frozen=True)
class StemPlan:
    """What the workers need to keep and commit one input's items: its parts' folder, its
    shards ((shard, fingerprint, resume key) each, as the driver planned them), how many items
    it has, and the keys of the items an earlier run finished (found while planning)."""

    stem: str
    folder: str
    shards: tuple
    items: int
    done: frozenset = frozenset()
    keys: tuple = ()  # of its items, where it has several (the worker of the last commits)
    found: bool = True  # its folder held files when planned (False: this run's are its only)


def stem_folder(stem: str, shards: Iterable[tuple[str, str]]) -> str:
    """The parts folder of ``stem`` planned with ``shards`` ((shard, fingerprint) pairs)."""
    settings = json.dumps(sorted([s, f] for s, f in shards))
    return f"{_hash(stem)}-{_hash(settings)}"


def item_key(index: int, start: int, end: int | None, row_groups: Sequence[int]) -> str:
    """The key of a work item: its place in its file and a hash of its range."""
    return f"{index:06d}-{_range_hash(start, end, tuple(row_groups))}"


@functools.lru_cache(maxsize=4096)
def _range_hash(start: int, end: int | None, row_groups: tuple) -> str:
    # (remembered: every whole file's range is the same, and a reader asks per work item)
    return _hash(json.dumps([start, end, list(row_groups)]), 12)


def root(output: str) -> str:
    return fsutil.join(output, PARTS_DIR)


def record_path(output: str, folder: str, key: str) -> str:
    return fsutil.join(output, PARTS_DIR, folder, key + ".json")


def part_prefix(output: str, folder: str, key: str, shard: str, batch: int) -> str:
    return fsutil.join(output, PARTS_DIR, folder, key, f"{_hash(shard, 12)}-{batch:06d}")


def write_record(output: str, folder: str, key: str, record: dict) -> None:
    """Atomically, but not fsynced (nor are parts): a power cut may lose a record, and then the
    item is redone; a record whose parts did not survive whole is not used (the reader checks
    their sizes), so the cost of a crash is work, never a wrong shard."""
    fsutil.write_bytes_atomic(record_path(output, folder, key),
                              json.dumps(record, ensure_ascii=False).encode("utf-8"),
                              durable=False)


def read_record(output: str, folder: str, key: str) -> dict | None:
    """The item's record, or None where there is none (or it cannot be read: the item is
    redone)."""
    try:
        record = json.loads(fsutil.read_bytes(record_path(output, folder, key)))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("parts"), list) else None


def done_items(output: str) -> dict[str, set[str]]:
    """``{stem folder: keys of its items with a record}`` of every folder holding a file, from
    one recursive listing of ``_parts/`` (empty when there is none)."""
    done: dict[str, set[str]] = {}
    for path in fsutil.files_under(root(output)):
        folder, _, name = path.partition("/")
        keys = done.setdefault(folder, set())
        if name.endswith(".json") and "/" not in name:
            keys.add(name[:-len(".json")])
    return done


def folders(output: str) -> list[str]:
    """The stem folders under ``_parts/`` (one listing)."""
    return [n for n in fsutil.list_names(root(output)) if "-" in n]


def remove_stale(output: str, plans: Iterable[StemPlan], existing: Iterable[str], *,
                 everything: bool = False) -> None:
    """Remove the parts folders of the planned stems that were written with other shards or
    fingerprints (a changed input, tokenizer or option); ``everything``: every folder of the
    planned stems (``--overwrite``). Folders of stems not planned now are left alone (another
    command may be writing them into the same output)."""
    current = {p.folder.split("-", 1)[0]: p.folder for p in plans}
    for name in existing:
        stem_hash = name.split("-", 1)[0]
        if stem_hash in current and (everything or name != current[stem_hash]):
            fsutil.remove_tree(fsutil.join(root(output), name))


def remove_stems(output: str, stems: Iterable[str], existing: Iterable[str]) -> None:
    """Remove every parts folder (of ``existing``) of ``stems``, whatever settings wrote it."""
    hashes = {_hash(stem) for stem in stems}
    for name in existing:
        if name.split("-", 1)[0] in hashes:
            fsutil.remove_tree(fsutil.join(root(output), name))


def unplanned(existing: Iterable[str], stems: Iterable[str]) -> list[str]:
    """The parts folders (of ``existing``) of none of ``stems``."""
    hashes = {_hash(stem) for stem in stems}
    return [name for name in existing if name.split("-", 1)[0] not in hashes]


def remove_folder(output: str, folder: str) -> None:
    fsutil.remove_tree(fsutil.join(root(output), folder))


def prefix_of(output: str, folder: str, key: str, name: str) -> str:
    """A part's prefix from the name its item record gives it."""
    return fsutil.join(output, PARTS_DIR, folder, key, os.path.basename(name))


@dataclasses.dataclass
class ItemMark:
    """Travels behind a work item's last batch ("end": every batch of the item has gone by) or
    instead of its batches ("reused": an earlier run finished it; ``record`` is its item record).
    The reader and the tokenizer add what they found bad in the item (as BadRecordReport dicts),
    so that its record can report them again when it is reused."""

    plan: StemPlan
    key: str
    kind: str
    path: str = ""
    record: dict | None = None
    records: int = 0  # records the reader passed on as documents ("end")
    num_bytes: int = 0  # their bytes, as DocumentBatch.num_bytes counts them
    file_bytes: int = 0  # the item's share of its input file's size
    bad_read: list = dataclasses.field(default_factory=list)
    bad_tokenized: list = dataclasses.field(default_factory=list)
    keepable: bool = True  # False: too many bad records to keep in a record (redone on a rerun)
    # The TokenBatches the tokenize step sent for the item ("end"; None: not counted): the sink
    # records or commits the item only when it has seen every one of them
    token_batches: int | None = None

    # Every bad record found ("end"), kept in the lists above or not: how many the reader and
    # the tokenizer found, and the first in the file (smallest offset), for the sink's tally
    bad_read_count: int = 0
    bad_tokenized_count: int = 0
    first_bad: dict | None = None

    def note_bad(self, report: dict, *, found: str) -> None:
        if found == "read":
            self.bad_read_count += 1
        else:
            self.bad_tokenized_count += 1
        if self.first_bad is None or report["offset"] < self.first_bad["offset"]:
            self.first_bad = report
        kept = self.bad_read if found == "read" else self.bad_tokenized
        if len(self.bad_read) + len(self.bad_tokenized) >= MAX_KEPT_BAD:
            self.keepable = False
        else:
            kept.append(report)
