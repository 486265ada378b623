"""An output's records, without Beam: the commit protocol's records (what the planner reads to
skip shards, and what the sink, dataio/sink.py, writes) and ``metadata.json``.

A shard is committed exactly when ``{output}/_commits/{shard}.json`` exists and names files of
the recorded sizes; ``{output}/_failures/{shard}.json`` records why a shard failed; bad records
go to ``{output}/_errors/{stem}.jsonl``; a run's parts live under ``_temporary/{run id}/``.
``{output}/metadata.json`` is written last, from the commit records (:func:`write_metadata`).
What a shard became (:class:`ShardResult`) is read back from those records by
:func:`shard_result` where the pipeline's own output does not reach the driver.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import secrets

from dataio import fs as fsutil
from dataio import indexed, naming
from dataio.elements import ShardResult
from dataio.indexed import Counts
from dataio.lock import TEMPORARY_DIR

COMMITS_DIR = "_commits"
FAILURES_DIR = "_failures"
ERRORS_DIR = "_errors"
METADATA_FILE = "metadata.json"


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
    try:
        # read at once, not asked first whether it exists: a request less per record on Azure
        return json.loads(fsutil.read_bytes(path))
    except FileNotFoundError:
        return None
    except ValueError:
        return None  # a torn record (should not happen: written atomically) counts as absent


def is_committed(output: str, shard: str, fingerprint: str, *,
                 resume_key: dict | None = None,
                 sizes: dict[str, int] | None = None) -> tuple[bool, str]:
    """Whether ``shard`` is committed with this fingerprint and its record's files are there
    with the recorded sizes, and why not (naming what changed when the record keeps its resume
    key and ``resume_key`` is the one now). ``sizes``: the output's files as
    :func:`listed_sizes` found them (no request per file); without it, each file is asked."""
    record = read_commit_record(output, shard)
    if record is None:
        return False, "not committed yet"
    if record.get("fingerprint") != fingerprint:
        return False, what_changed(record.get("resume_key"), resume_key)
    problem = record_files_problem(output, record, sizes)
    if problem:
        return False, problem
    return True, "committed with the same inputs, tokenizer and options"


def listed_sizes(output: str, folders) -> dict[str, int]:
    """``{path relative to output: size}`` of the files directly in each of ``folders``
    (relative to ``output``; ``""`` is the output itself): one listing each."""
    sizes = {}
    for folder in sorted(set(folders)):
        prefix = folder.rstrip("/") + "/" if folder else ""
        where = fsutil.join(output, folder) if folder else output
        sizes.update({prefix + name: size for name, size in fsutil.file_sizes(where).items()})
    return sizes


def final_files(sizes: dict[str, int], shards) -> dict[str, tuple[str, ...]]:
    """``{shard: final names}``: for each of ``shards`` that ``sizes`` (:func:`listed_sizes` of
    the shards' folders) holds files of, the names (relative to the output, with counts or
    without, without ``.bin``/``.idx``) of those files, sorted. What a commit of the shard under another name
    removes (older runs' versions of other counts), found by the planner's one listing of each
    folder rather than by a listing per commit. Shards with no such file are left out."""
    wanted = set(shards)
    found: dict[str, set[str]] = {}
    for relative in sizes:
        if not relative.endswith((".bin", ".idx")):
            continue
        prefix = indexed.prefix_of(relative)
        # with counts (--output), or the shard's name alone (--output-prefix): either is the
        # shard's, and a commit under the other naming replaces it
        shard = naming.strip_counts(prefix)
        if shard in wanted:
            found.setdefault(shard, set()).add(prefix)
    return {shard: tuple(sorted(names)) for shard, names in found.items()}


def record_files_problem(output: str, record: dict, sizes: dict[str, int] | None = None
                         ) -> str | None:
    """Why the files a commit record names are not what it recorded (missing, or another size),
    or None when both are there with the recorded sizes. ``sizes`` as :func:`is_committed`."""
    name = record.get("name")
    if not isinstance(name, str) or not name:
        return "its commit record names no files"
    for suffix, key in ((".bin", "bin_size"), (".idx", "idx_size")):
        relative = name + suffix
        if sizes is not None:
            actual = sizes.get(relative)
        else:
            path = fsutil.join(output, relative)
            actual = fsutil.size(path) if fsutil.exists(path) else None
        base = os.path.basename(relative)
        if actual is None:
            return f"{base} is missing (its commit record names it)"
        if actual != record.get(key):
            return f"{base} is {actual} bytes but its commit record says {record.get(key)}"
    return None


def commit_record_problems(output: str, folder: str = "") -> list[tuple[str, str]]:
    """``(shard, problem)`` for each commit record of ``output`` whose shard lives in
    ``folder`` (relative to it, ``""`` for the output itself) and whose files are missing or
    not of the recorded sizes (what ``validate`` reports): one listing of the records and one of
    the folder, plus a read of each record."""
    records = sorted(r[:-len(".json")] for r in fsutil.files_under(fsutil.join(output, COMMITS_DIR))
                     if r.endswith(".json") and _lives_in(r, folder))
    if not records:
        return []
    sizes = listed_sizes(output, sorted({os.path.dirname(r) for r in records}))
    problems = []
    for shard in records:
        try:
            record = read_commit_record(output, shard)
        except fsutil.NotRegularFileError as exc:  # a FIFO or a device: never read
            problems.append((shard, f"the record is {exc.what}: remove it"))
            continue
        problem = ("its commit record is not valid JSON" if record is None
                   else record_files_problem(output, record, sizes))
        if problem:
            problems.append((shard, problem))
    return problems


def _lives_in(record: str, folder: str) -> bool:
    """Whether the shard of ``record`` (its path under ``_commits/``) lives in ``folder`` of the
    output or in a subfolder of it (``--output-layout mirror``), holdout shards apart."""
    if folder:
        return record.startswith(folder.rstrip("/") + "/")
    return not record.startswith("holdout/")


def tokenizer_of(record: dict | None) -> str | None:
    """The identity of the tokenizer a commit record's shard was written with (its files'
    sha256, kind, EOD and options, as its resume key keeps them), or None when the record
    does not say (older records)."""
    key = (record or {}).get("resume_key")
    if not isinstance(key, dict) or key.get("tokenizer") is None:
        return None
    return json.dumps(key["tokenizer"], sort_keys=True)


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
    if before.get("names") != now.get("names"):
        changed.append("written now " + ("without counts in its name (--output-prefix)"
                                         if now.get("names") else "with counts in its name"))
    if not changed and before.get("format") != now.get("format"):
        changed.append("tokenbeam's output format changed")
    return "; ".join(changed) or "inputs, tokenizer or options changed since it was committed"


def shard_result(output: str, shard: str, fingerprint: str, *,
                 failures: set[str] | None = None) -> ShardResult:
    """What the records say became of ``shard`` (committed with ``fingerprint``, or failed).
    ``failures``: the failure records there are (``fsutil.files_under`` of ``_failures/``, one
    listing for many shards), else the shard's is asked for."""
    record = read_commit_record(output, shard)
    failure = None
    if (f"{shard}.json" in failures if failures is not None
            else fsutil.exists(failure_record_path(output, shard))):
        failure = json.loads(fsutil.read_bytes(failure_record_path(output, shard)))
    if failure is not None or record is None or record.get("fingerprint") != fingerprint:
        reason = failure["reason"] if failure else "no commit record after the run"
        return ShardResult(shard, None, Counts(), failed=reason)
    return ShardResult(shard, record["name"], Counts(record["documents"], record["sequences"],
                                                     record["tokens"]),
                       input_bytes=record.get("input_bytes", 0))


def encode_result(result: ShardResult) -> str:
    """A ShardResult as one short string (the sink reports each through a Beam metric)."""
    c = result.counts
    return json.dumps([result.shard, result.name, c.documents, c.sequences, c.tokens,
                       result.input_bytes, result.failed], separators=(",", ":"))


def decode_result(text: str) -> ShardResult:
    shard, name, documents, sequences, tokens, input_bytes, failed = json.loads(text)
    return ShardResult(shard, name, Counts(documents, sequences, tokens),
                       input_bytes=input_bytes, failed=failed)


def errors_path(output: str, stem: str) -> str:
    """The bad records of one input (``stem``): one JSON line each."""
    return fsutil.join(output, ERRORS_DIR, stem + ".jsonl")


def count_bad_records(output: str, stems) -> int:
    """The bad records the error files of ``stems`` hold (where the runner reports no
    metrics: the summary's fallback): the files there found by one listing."""
    there = fsutil.files_under(fsutil.join(output, ERRORS_DIR))
    total = 0
    for stem in stems:
        if f"{stem}.jsonl" in there:
            total += fsutil.read_bytes(errors_path(output, stem)).count(b"\n")
    return total


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardEntry:
    """One planned shard as metadata.json lists it."""

    shard: str
    input: str  # the input's path, as recorded (resolved, secrets stripped)
    key: str
    status: str  # written, failed, skipped or missing
    # what this run committed, when the pipeline said so (its commit record is not read again)
    result: ShardResult | None = None

    def committed(self, output: str) -> dict:
        """Name and counts of the shard as committed (None each when it is not)."""
        if self.result is not None and self.result.failed is None:
            c = self.result.counts
            return {"name": self.result.name, "documents": c.documents,
                    "sequences": c.sequences, "tokens": c.tokens}
        record = read_commit_record(output, self.shard) or {}
        return {k: record.get(k) for k in ("name", "documents", "sequences", "tokens")}


def write_metadata(output: str, *, shards: list[ShardEntry], head: dict, tail: dict) -> dict:
    """``{output}/metadata.json``, written atomically: ``head`` (tokenizer, dtype, ...), the
    shards with the counts their commit records hold, the totals of those committed, then
    ``tail`` (options, run id, times). Returns what it wrote."""
    listed = [{"shard": entry.shard, "input": entry.input, "key": entry.key,
               **entry.committed(output), "status": entry.status} for entry in shards]
    committed = [x for x in listed if x["name"]]
    meta = {**head, "shards": listed,
            "totals": {"shards": len(committed),
                       "documents": sum(x["documents"] for x in committed),
                       "sequences": sum(x["sequences"] for x in committed),
                       "tokens": sum(x["tokens"] for x in committed)},
            **tail}
    path = fsutil.join(output, METADATA_FILE)
    clear_metadata_leftovers(output)
    fsutil.write_bytes_atomic(path, metadata_text(meta).encode("utf-8"))
    return meta


def metadata_text(meta: dict) -> str:
    """``meta`` as metadata.json holds it: indented, each entry of ``shards`` on a line of its own
    (a shard a line reads well at 100,000 shards, and Python's indenting encoder took 0.04 ms
    a shard where its C encoder, used per line, takes a tenth of that)."""
    hole = f"@@shards-{secrets.token_hex(16)}@@"  # no text of the options can be it
    text = json.dumps({**meta, "shards": hole}, indent=1, ensure_ascii=False)
    rows = ",\n".join("  " + json.dumps(s, ensure_ascii=False) for s in meta["shards"])
    return text.replace(json.dumps(hole), f"[\n{rows}\n ]" if rows else "[]", 1)


def clear_metadata_leftovers(output: str) -> None:
    """A run killed inside metadata.json's write left its temporary: the run holding the lock
    now clears it."""
    fsutil.remove_atomic_leftovers(fsutil.join(output, METADATA_FILE))


def read_commit_records(output: str, shards) -> dict[str, dict]:
    """shard -> its commit record, for those of ``shards`` (names without counts) that have
    one: read 16 at a time (a request each on object storage), no shard file opened."""
    shards = list(shards)
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        read = list(pool.map(lambda s: read_commit_record(output, s), shards))
    return {s: r for s, r in zip(shards, read) if r}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Committed:
    """What the commit records of some shards add up to (a rerun's shards already there)."""

    shards: int
    documents: int
    tokens: int

    @classmethod
    def of(cls, records: dict[str, dict]) -> "Committed":
        return cls(shards=len(records),
                   documents=sum(int(r.get("documents") or 0) for r in records.values()),
                   tokens=sum(int(r.get("tokens") or 0) for r in records.values()))


def metadata_lists(output: str, records: dict[str, dict]) -> bool:
    """Whether ``metadata.json`` lists exactly the shards of ``records`` (shard -> commit
    record), each committed under the name its record holds: then a rerun that writes nothing
    leaves it as it is (byte for byte, its times included); otherwise (no metadata, or it lists
    other shards, or one failed or missing then) the rerun writes it again."""
    try:
        meta = json.loads(fsutil.read_bytes(fsutil.join(output, METADATA_FILE)))
        listed = {x["shard"]: x.get("name") for x in meta["shards"]}
    except (FileNotFoundError, ValueError, KeyError, TypeError, AttributeError):
        return False
    return listed == {s: r.get("name") for s, r in records.items()} and all(listed.values())
