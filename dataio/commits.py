"""The commit protocol's records, without Beam: what the planner reads to skip shards, and what
the sink (dataio/sink.py, the protocol itself) writes.

A shard is committed exactly when ``{output}/_commits/{shard}.json`` exists and names files of
the recorded sizes; ``{output}/_failures/{shard}.json`` records why a shard failed; bad records
go to ``{output}/_errors/{stem}.jsonl``; a run's parts live under ``_temporary/{run id}/``.
"""

from __future__ import annotations

import dataclasses
import json
import os

from dataio import fs as fsutil
from dataio.lock import TEMPORARY_DIR

COMMITS_DIR = "_commits"
FAILURES_DIR = "_failures"
ERRORS_DIR = "_errors"


@dataclasses.dataclass(frozen=True)
class PartInfo:
    order: tuple[int, int]
    prefix: str
    documents: int
    sequences: int
    tokens: int


@dataclasses.dataclass(frozen=True)
class ShardCounts:
    documents: int = 0
    sequences: int = 0
    tokens: int = 0
    num_bytes: int = 0

    def __add__(self, other: "ShardCounts") -> "ShardCounts":
        return ShardCounts(self.documents + other.documents, self.sequences + other.sequences,
                           self.tokens + other.tokens, self.num_bytes + other.num_bytes)


@dataclasses.dataclass(frozen=True)
class ShardResult:
    shard: str
    name: str | None
    counts: ShardCounts
    failed: str | None = None


def temporary_dir(output: str, run_id: str = "") -> str:
    """The run's own temporaries (the parent of every run's when ``run_id`` is empty)."""
    root = fsutil.join(output, TEMPORARY_DIR)
    return fsutil.join(root, run_id) if run_id else root


def commit_record_path(output: str, shard: str) -> str:
    return fsutil.join(output, COMMITS_DIR, shard + ".json")


def failure_record_path(output: str, shard: str) -> str:
    return fsutil.join(output, FAILURES_DIR, shard + ".json")


def read_commit_record(output: str, shard: str) -> dict | None:
    path = commit_record_path(output, shard)
    if not fsutil.exists(path):
        return None
    try:
        return json.loads(fsutil.read_bytes(path))
    except ValueError:
        return None  # a torn record (should not happen: written atomically) counts as absent


def is_committed(output: str, shard: str, fingerprint: str, *,
                 resume_key: dict | None = None) -> tuple[bool, str]:
    """Whether ``shard`` is committed with this fingerprint, and why not (naming what changed
    when the record keeps its resume key and ``resume_key`` is the one now)."""
    record = read_commit_record(output, shard)
    if record is None:
        return False, "not committed yet"
    if record.get("fingerprint") != fingerprint:
        return False, what_changed(record.get("resume_key"), resume_key)
    prefix = fsutil.join(output, record["name"])
    for suffix, key in ((".bin", "bin_size"), (".idx", "idx_size")):
        path = prefix + suffix
        if not fsutil.exists(path):
            return False, f"{os.path.basename(path)} is missing"
        if fsutil.size(path) != record[key]:
            return False, f"{os.path.basename(path)} has changed size"
    return True, "committed with the same inputs, tokenizer and options"


def what_changed(before: dict | None, now: dict | None) -> str:
    """Why a committed shard's resume key differs, in words: the input (path, size or
    modification time; its content), the tokenizer, which options, or tokenbeam's format."""
    if not isinstance(before, dict) or not isinstance(now, dict):
        return "inputs, tokenizer or options changed since it was committed"
    changed = []
    if before.get("input") != now.get("input"):
        changed.append("the input's path, size or modification time changed")
    elif before.get("content") != now.get("content"):
        if not now.get("content"):
            changed.append("the input is now resumed without its content hash")
        elif not before.get("content"):
            changed.append("the input is now resumed by content (--verify-inputs)")
        else:
            changed.append("the input's content changed")
    if before.get("tokenizer") != now.get("tokenizer"):
        changed.append("the tokenizer changed (its files, kind, EOD or options)")
    old_settings, new_settings = before.get("settings") or {}, now.get("settings") or {}
    options = [f"{k} {old_settings.get(k)!r} -> {new_settings.get(k)!r}"
               for k in sorted(set(old_settings) | set(new_settings))
               if old_settings.get(k) != new_settings.get(k)]
    if options:
        changed.append("options changed: " + ", ".join(options))
    if not changed and before.get("format") != now.get("format"):
        changed.append("tokenbeam's output format changed")
    return "; ".join(changed) or "inputs, tokenizer or options changed since it was committed"
