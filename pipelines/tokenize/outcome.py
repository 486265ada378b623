"""What a tokenize run did, without Beam: after the pipeline, :func:`finish` (idempotent: this
run's temporaries removed, metadata.json written from the commit records, dataio/manifest.py)
and :func:`report` (the summary on stdout, failed shards on stderr, the exit status). The
figures are the pipeline's Beam counters where the runner reports them (:class:`Reported`,
from pipelines/tokenize/graph.py), the commit records' otherwise. The pipeline's own last step
calls :func:`finish` on runners whose driver is not this process (runners/spark.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.metadata
import json
import os
import sys

import numpy as np

from dataio import fs as fsutil
from dataio import locations
from runtime import log
from dataio import manifest, parts
from dataio.elements import ShardResult
from runtime.redact import redact, redact_argv
from pipelines.tokenize.planner import Job, ShardPlan
from transforms import progress

_LOG = log.get("tokenize")


@dataclasses.dataclass(frozen=True)
class Reported:
    """What the pipeline reported back through the runner's result (None where it reports
    none): the sink's counters and shard -> ShardResult of the shards it committed or failed."""

    counters: dict[str, int] | None = None
    results: dict[str, ShardResult] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Figures:
    """What the summary reports of a run's written shards: from the pipeline's counters
    (:func:`pipelines.tokenize.graph.figures`) or, where the runner reports none, the
    commit records and error files (:func:`recorded_figures`)."""

    documents: int
    tokens: int
    input_bytes: int
    bad_records: int


def recorded_figures(job: Job, results: list[ShardResult]) -> Figures:
    """The figures as the records of this run's shards tell them (any runner)."""
    written = [r for r in results if r.failed is None]
    return Figures(documents=sum(r.counts.documents for r in written),
                   tokens=sum(r.counts.tokens for r in written),
                   input_bytes=sum(r.input_bytes for r in written),
                   bad_records=manifest.count_bad_records(
                       job.output, {s.stem for s in job.to_process}))


def counted_figures(job: Job, results: list[ShardResult],
                    counters: dict[str, int] | None) -> Figures:
    """The figures from the pipeline's counters when the runner reported them for every shard
    this run committed; the records' otherwise."""
    written = sum(1 for r in results if r.failed is None)
    if not counters or counters.get("shards_committed", 0) != written:
        return recorded_figures(job, results)
    return Figures(documents=counters.get("documents", 0), tokens=counters.get("tokens", 0),
                   input_bytes=counters.get("input_bytes", 0),
                   bad_records=counters.get("bad_records", 0))


def collect_results(job: Job, reported: dict[str, ShardResult] | None = None
                    ) -> list[ShardResult]:
    """What became of each shard this run had to write: as the pipeline ``reported`` it
    (pipelines/tokenize/graph.py shard_results), else from its commit and failure records (a
    shard the report misses: runners whose driver is not this process, or that report no
    metrics, or a report over the metrics' size limit)."""
    reported = reported or {}
    missing = [s for s in job.to_process if s.shard not in reported]
    if missing:
        # one listing
        failures = fsutil.files_under(fsutil.join(job.output, manifest.FAILURES_DIR))
        reported = {**reported, **{s.shard: manifest.shard_result(
            job.output, s.shard, s.fingerprint, failures=failures) for s in missing}}
    return [reported[s.shard] for s in job.to_process]


def finish(job: Job, argv, *, started: str,
           reported: dict[str, ShardResult] | None = None) -> list[ShardResult]:
    """After the pipeline (idempotent): remove this run's temporaries, write metadata.json;
    returns the shard results (``reported``: by the pipeline, see :func:`collect_results`)."""
    results = collect_results(job, reported)
    if job.guard is not None:  # metadata.json is a commit too: only while the output is ours
        job.guard.verify()
    if job.run_id:
        fsutil.remove_tree(manifest.temporary_dir(job.output, job.run_id))
    _remove_if_empty(manifest.temporary_dir(job.output))
    _remove_committed_parts(job, results)
    if job.to_process or not manifest.metadata_lists(job.output, already_committed(job)):
        write_metadata(job, argv=argv, started=started, finished=_now(), results=results)
    else:  # a rerun that wrote nothing: metadata.json already says all, its times included
        manifest.clear_metadata_leftovers(job.output)  # a killed write's temporary
    return results


def finished_in_pipeline(job: Job) -> bool:
    """Whether metadata.json is this run's: the pipeline's last step (graph.py ``Finish``) wrote
    it in another process, so what this process listed of the output before is stale."""
    path = fsutil.join(job.output, "metadata.json")
    fs, inner = fsutil.filesystem_and_path(job.output)
    fs.invalidate_cache(inner)
    try:
        meta = json.loads(fsutil.read_bytes(path)) if fsutil.exists(path) else {}
    except ValueError:
        return False
    return isinstance(meta, dict) and meta.get("run_id") == job.run_id


def already_committed(job: Job) -> dict[str, dict]:
    """shard -> commit record, of the shards this run skips (committed by an earlier run)."""
    return manifest.read_commit_records(job.output, [s.shard for s in job.shards if s.skip])


def _remove_committed_parts(job: Job, results: list[ShardResult]) -> None:
    """The kept parts of every input whose shards are all committed now, whichever run
    committed them (one listing of ``_parts/``; a stem of one item removed its own when its
    worker committed it)."""
    kept = parts.folders(job.output)
    if kept:
        written = {r.shard for r in results if not r.failed}
        not_done = {s.stem for s in job.shards if not s.skip and s.shard not in written}
        parts.remove_stems(job.output, {s.stem for s in job.shards} - not_done, kept)
        others = parts.unplanned(kept, [s.stem for s in job.shards])
        if others:
            # Not ours to remove: another --input into this output may be resumed with them.
            _LOG.info("note: %s holds the finished work items of %d input(s) this run did not "
                      "plan (a run cut short with other --input, or an input renamed or removed "
                      "since); rerun that command to use them, or delete their folders",
                      parts.root(job.output), len(others))
    _remove_if_empty(parts.root(job.output))


def write_metadata(job: Job, *, argv, started: str, finished: str,
                   results: list[ShardResult]) -> dict:
    """metadata.json (dataio/manifest.py) of the job; ``results``: of the shards this run
    wrote (the others are listed from their commit records)."""
    of_shard = {r.shard: r for r in results}

    def status(s: ShardPlan) -> str:
        r = of_shard.get(s.shard)
        return ("failed" if r.failed else "written") if r else "skipped" if s.skip else "missing"

    shown: dict[str, str] = {}  # input path -> as written: resolved from the driver's folder
    # (this may run on a Spark worker) and redacted; once per input, not once per shard

    def path_of(path: str) -> str:
        if path not in shown:
            shown[path] = redact(locations.resolved(path, job.folder))
        return shown[path]

    entries = [manifest.ShardEntry(
        shard=s.shard, input=path_of(s.input.path), key=s.key,
        status=status(s), result=of_shard.get(s.shard)) for s in job.shards]
    head = {"tokenizer": job.tokenizer, "dtype": job.dtype.name, "level": job.config.level,
            "versions": _versions(job),
            "inputs": [{"path": path_of(f.path), "size": f.size, "version": f.version}
                       for f in job.files]}
    tail = {"options": redact_argv(argv), "run_id": job.run_id, "started": started,
            "finished": finished}
    return manifest.write_metadata(job.output, shards=entries, head=head, tail=tail)


def _versions(job: Job) -> dict:
    def version(dist):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {"tokenbeam": version("tokenbeam"), "apache-beam": version("apache-beam"),
            "numpy": np.__version__, job.tokenizer["library"]: job.tokenizer["library_version"],
            job.tokenizer["backend_library"]: job.tokenizer["backend_version"],
            # a HuggingFace folder: transformers loads it, its Rust tokenizer is tokenizers'
            **({"tokenizers": version("tokenizers")}
               if job.tokenizer["library"] == "transformers" else {})}


def report(job: Job, results: list, *, seconds: float, figures: Figures | None = None,
           wall: float | None = None) -> int:
    """The summary on stdout, failed shards on stderr; returns the exit status. ``seconds``:
    the job's (the pipeline's); ``wall``: the command's, from its start (None: not known);
    ``figures``: the run's counters (the records' when not given). A run that had nothing to
    write says so in one line, with what the commit records of its shards add up to."""
    if not job.to_process:
        there = manifest.Committed.of(already_committed(job))
        print(f"nothing to do: {there.shards} shards already committed ({there.documents:,} "
              f"documents, {there.tokens:,} tokens)", flush=True)
        return 0
    _summary(job, results, seconds=seconds, wall=wall,
             figures=figures or recorded_figures(job, results))
    failed = [r for r in results if r.failed]
    for r in failed:
        _LOG.error("FAILED %s: %s", r.shard, r.failed)
    return 1 if failed else 0


SUMMARY_NAMES = 20  # the committed shards the summary names; metadata.json lists them all


def _summary(job: Job, results: list, *, seconds: float, figures: Figures,
             wall: float | None = None, out=None) -> None:
    """The table on stdout. Sizes in MB of 10^6 bytes (transforms/progress.py); rates by the
    wall time when known (the command's, from the process's start), else by the job's."""
    out = out or sys.stdout
    written = [r for r in results if r.failed is None]
    docs_, toks, mb = figures.documents, figures.tokens, figures.input_bytes / progress.MB
    bad_records = figures.bad_records
    skipped = sum(1 for s in job.shards if s.skip)
    per = wall if wall else seconds
    rows = [("shards written", f"{len(written)}"), ("shards skipped", f"{skipped}"),
            ("shards failed", f"{len(results) - len(written)}"), ("documents", f"{docs_:,}"),
            ("tokens", f"{toks:,}"), ("input MB", f"{mb:.2f}"),
            ("wall seconds", f"{wall:.1f}" if wall is not None else "-"),
            ("job seconds", f"{seconds:.1f}"),
            ("MB/s", f"{mb / per:.2f}" if per else "-"),
            ("tokens/s", f"{toks / per:,.0f}" if per else "-"),
            ("bad records", f"{bad_records}")]
    width = max(len(k) for k, _ in rows)
    print("summary", file=out)
    for k, v in rows:
        print(f"  {k:<{width}}  {v:>14}", file=out)
    if skipped:  # the figures above are this run's; what earlier runs committed is there too
        there = manifest.Committed.of(already_committed(job))
        print(f"  already committed: {there.shards} shards ({there.documents:,} documents, "
              f"{there.tokens:,} tokens), skipped", file=out)
    for r in written[:SUMMARY_NAMES]:
        print(f"  committed {r.name}", file=out)
    if len(written) > SUMMARY_NAMES:  # a corpus of 100,000 files would print 100,000 lines
        print(f"  ... and {len(written) - SUMMARY_NAMES:,} more committed (metadata.json lists "
              "every shard)", file=out)


def _remove_if_empty(folder: str) -> None:
    """Remove ``folder`` when nothing is left in it (a rerun that skips every shard must not
    leave an empty ``_temporary/`` behind)."""
    if fsutil.is_local(folder):
        try:
            os.rmdir(folder)
        except OSError:
            pass  # absent, or not empty
    elif fsutil.exists(folder) and not fsutil.list_names(folder):
        fsutil.remove_tree(folder)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
