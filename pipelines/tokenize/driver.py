"""``python -m pipelines.tokenize``: JSONL/Parquet in, Megatron ``.bin/.idx`` shards out.

One shard per input file and json key: ``{stem}_{key}_{document|sentence}_dc=N_sc=N_tc=N``,
byte-identical to Megatron-LM's ``tools/preprocess_data.py`` for the same input and tokenizer
settings, whatever the runner, ``--workers`` or retries. Rerunning the same command skips shards
already committed with the same inputs, tokenizer and options; ``--dry-run`` prints the plan.
See DESIGN.md for the data flow and dataio/sink.py for the commit protocol.

One run at a time per output folder (dataio/lock.py); its temporaries live under
``_temporary/{run id}/``. Everything a user can get wrong (the output, the tokenizer files) is
checked while planning, before any input is read.

Exit status (dataio/errors.py): 0 when every planned shard is committed; 1 when some shard
failed (they are listed), the data or the run failed, or another run holds the output; 2 for a
bad command line or configuration; 130 / 143 when interrupted by SIGINT / SIGTERM (rerun the
same command to resume). Anticipated failures print one line, never a traceback.

This module is the driver: lock the output, plan (pipelines/tokenize/planner.py, which decides
every shard's name, fingerprint and settings), run the pipeline (pipelines/tokenize/graph.py
wires it), then finish: metadata.json from the commit records (dataio/manifest.py) and the
summary, whose figures are the pipeline's Beam counters where the runner reports them (the
commit records' otherwise). Beam is imported only when a pipeline runs: ``--help`` reads the
flags alone (pipelines/options.py), and the planner reads them from a Beam-free
:class:`~pipelines.options.Flags` when the command line holds only tokenbeam's flags.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import importlib.metadata
import os
import sys
import time

import numpy as np

from dataio import azure, errors, faults, indexed, log, manifest, parts, workers
from dataio import fs as fsutil
from dataio import lock as output_lock
from dataio.redact import install_logging_filter, redact, redact_argv
from pipelines import options as opts
from pipelines.tokenize.planner import (Job, ShardPlan, announce_skips, local_workers, plan,
                                      preflight, print_plan)
from transforms import progress

_LOG = log.get("tokenize")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Figures:
    """What the summary reports of a run's written shards: from the pipeline's counters
    (:func:`pipelines.tokenize.graph.figures`) or, where the runner reports none, the
    commit records and error files (:func:`recorded_figures`)."""

    documents: int
    tokens: int
    input_bytes: int
    bad_records: int


def recorded_figures(job: Job, results: list[manifest.ShardResult]) -> Figures:
    """The figures as the records of this run's shards tell them (any runner)."""
    written = [r for r in results if r.failed is None]
    return Figures(documents=sum(r.counts.documents for r in written),
                   tokens=sum(r.counts.tokens for r in written),
                   input_bytes=sum(r.input_bytes for r in written),
                   bad_records=manifest.count_bad_records(
                       job.output, {s.stem for s in job.to_process}))


def counted_figures(job: Job, results: list[manifest.ShardResult],
                    counters: dict[str, int] | None) -> Figures:
    """The figures from the pipeline's counters when the runner reported them for every shard
    this run committed; the records' otherwise."""
    written = sum(1 for r in results if r.failed is None)
    if not counters or counters.get("shards_committed", 0) != written:
        return recorded_figures(job, results)
    return Figures(documents=counters.get("documents", 0), tokens=counters.get("tokens", 0),
                   input_bytes=counters.get("input_bytes", 0),
                   bad_records=counters.get("bad_records", 0))


def build(pipeline, job: Job, *, storage=None, finish_argv=None):
    """Wire the job into ``pipeline`` (a ``beam.Pipeline``); returns the PCollection of
    ShardResult. See pipelines/tokenize/graph.py."""
    from pipelines.tokenize import graph as _tokenize_graph

    return _tokenize_graph.build(pipeline, job, storage=storage, finish_argv=finish_argv,
                                 started=_now())


def prepare_output(job: Job, *, guard=None) -> None:
    """Before the pipeline: clear the records and temporaries of the shards this run redoes,
    each removal only while the output is still ours (``guard``: the lock's OutputGuard, by
    default ``job.guard``; see dataio/lock.py)."""
    io = opts.flags(job.options)
    ours = output_lock.renewing(guard or job.guard)
    # What is there, from one listing of each control folder: removing an absent file is a
    # request per shard on object storage (100,000 shards: an hour), and no other run writes
    # here while we hold the lock.
    def listed(folder: str) -> set[str]:
        return fsutil.files_under(fsutil.join(job.output, folder))

    records = listed(manifest.COMMITS_DIR) if io.overwrite else set()
    failures, bad_records = listed(manifest.FAILURES_DIR), listed(manifest.ERRORS_DIR)
    for s in job.to_process:
        if f"{s.shard}.json" in records:
            ours()
            fsutil.remove(manifest.commit_record_path(job.output, s.shard))
        if f"{s.shard}.json" in failures:
            ours()
            fsutil.remove(manifest.failure_record_path(job.output, s.shard))
    for stem in {s.stem for s in job.to_process}:
        if f"{stem}.jsonl" in bad_records:
            ours()
            fsutil.remove(manifest.errors_path(job.output, stem))
    # Kept parts of the stems we redo that were written with another input, tokenizer or
    # options (or, with --overwrite, any): one listing of _parts/ (dataio/parts.py).
    kept = parts.folders(job.output)
    if kept:
        ours()
        parts.remove_stale(job.output, job.stem_plans().values(), kept,
                           everything=io.overwrite)
    # Temporaries an interrupted run left beside the final files of the shards we redo.
    bases = tuple("." + os.path.basename(s.shard) + "_" for s in job.to_process)
    for folder in {os.path.dirname(s.shard) for s in job.to_process}:
        ours()
        fsutil.remove_temporaries(
            fsutil.join(job.output, folder) if folder else job.output,
            is_temporary=lambda p: indexed.is_temporary_name(p)
            and os.path.basename(p).startswith(bases))


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


def write_metadata(job: Job, *, argv, started: str, finished: str,
                   results: list[manifest.ShardResult]) -> dict:
    """metadata.json (dataio/manifest.py) of the job; ``results``: of the shards this run
    wrote (the others are listed from their commit records)."""
    of_shard = {r.shard: r for r in results}

    def status(s: ShardPlan) -> str:
        r = of_shard.get(s.shard)
        return ("failed" if r.failed else "written") if r else "skipped" if s.skip else "missing"

    entries = [manifest.ShardEntry(
        shard=s.shard, input=redact(fsutil.resolved(s.input.path, job.folder)), key=s.key,
        status=status(s), result=of_shard.get(s.shard)) for s in job.shards]
    head = {"tokenizer": job.tokenizer, "dtype": job.dtype.name, "level": job.config.level,
            "versions": _versions(job),
            # paths resolved from the driver's folder (this may run on a Spark worker)
            "inputs": [{"path": redact(fsutil.resolved(f.path, job.folder)), "size": f.size,
                        "version": f.version} for f in job.files]}
    tail = {"options": redact_argv(argv), "run_id": job.run_id, "started": started,
            "finished": finished}
    return manifest.write_metadata(job.output, shards=entries, head=head, tail=tail)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


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
    for r in written:
        print(f"  committed {r.name}", file=out)


def collect_results(job: Job, reported: dict[str, manifest.ShardResult] | None = None
                    ) -> list[manifest.ShardResult]:
    """What became of each shard this run had to write: as the pipeline ``reported`` them
    (pipelines/tokenize/graph.py shard_results) when that names every one, else from the commit
    and failure records (runners whose driver is not this process, or that report no metrics)."""
    if reported is not None and all(s.shard in reported for s in job.to_process):
        return [reported[s.shard] for s in job.to_process]
    failures = fsutil.files_under(fsutil.join(job.output, manifest.FAILURES_DIR))  # one listing
    return [manifest.shard_result(job.output, s.shard, s.fingerprint, failures=failures)
            for s in job.to_process]


def finish(job: Job, argv, *, started: str,
           reported: dict[str, manifest.ShardResult] | None = None) -> list[manifest.ShardResult]:
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


def already_committed(job: Job) -> dict[str, dict]:
    """shard -> commit record, of the shards this run skips (committed by an earlier run)."""
    return manifest.read_commit_records(job.output, [s.shard for s in job.shards if s.skip])


def _remove_committed_parts(job: Job, results: list[manifest.ShardResult]) -> None:
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


def execute(job: Job, argv, *, storage=None, since: float | None = None) -> int:
    """Run the job to completion; returns the exit status. ``since``: when the command began
    (``time.monotonic()``; the process's start for the command line), for the summary's wall
    time."""
    started, t0 = _now(), time.monotonic()
    announce_skips(job)
    counters = reported = None
    if job.to_process:
        prepare_output(job)
        workers.mark_driver()  # local workers die with this process (dataio/workers.py)
        chosen = local_workers(job)
        if chosen is not None:
            _LOG.info("workers: %d (%s)", chosen[0], chosen[1])
        options = opts.pipeline_options(job.options, workers=chosen and chosen[0])
        plan_ = progress_plan(job, workers=chosen and chosen[0])
        job.config = dataclasses.replace(job.config, progress=plan_)
        import apache_beam as beam

        from pipelines.tokenize import graph as _tokenize_graph

        t0 = time.monotonic()  # the job's seconds: the pipeline, not Beam's import or planning
        watch = progress.JobProgress(plan_).start() if plan_.folder else None
        try:
            with beam.Pipeline(options=options) as pipeline:
                _tokenize_graph.build(pipeline, job, storage=storage)
        finally:
            if watch is not None:
                watch.close()  # the last line (or the bar's end) before the summary
        counters = _tokenize_graph.figures(pipeline.result)
        reported = _tokenize_graph.shard_results(pipeline.result)
    results = finish(job, argv, started=started, reported=reported)
    now = time.monotonic()
    return report(job, results, seconds=now - t0, wall=None if since is None else now - since,
                  figures=counted_figures(job, results, counters))


def progress_plan(job: Job, *, workers: int | None) -> progress.ProgressPlan:
    """How progress is told (transforms/progress.py): by this process alone (one local
    worker), by this process from the counts ``workers`` > 1 local processes note in a private
    folder, or on a cluster (None) by each worker process, labelled. The planned bytes are
    comparable only for plain JSONL (and not on a cluster, whose lines are per process)."""
    stems = {s.stem for s in job.to_process}  # once, not per file: 100,000 files
    todo = [f for f in job.files if f.stem in stems]
    several = bool(workers and workers > 1 and job.config.log_interval)
    return progress.ProgressPlan(
        interval=job.config.log_interval, run=job.run_id,
        folder=progress.worker_folder() if several else "", labelled=workers is None,
        planned_bytes=progress.planned_bytes([(f.format, f.size) for f in todo])
        if workers else 0)


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


def take_over(output: str, held: output_lock.OutputLock, *, ended=None) -> None:
    """Under the lock no other run is alive (unless a detached one: see dataio/lock.py, refused
    unless ``ended(hold)`` proves it over): whatever is in ``_temporary/`` was left by dead runs
    (killed, or killed between their last commit and their cleanup) and goes."""
    for hold in output_lock.refuse_detached(output, ended=ended) if held.exclusive else []:
        _LOG.info("note: %s has ended; removing its temporaries",
                  output_lock.describe_detached(hold))
    if not held.exclusive:
        return
    # A run paused right after taking the lock may have lost it since to a run now writing
    # there: its temporaries are not ours to remove (dataio/lock.py).
    held.verify()
    left = output_lock.describe_temporaries(output)
    removing = f"; removing the temporaries of {left}" if left else ""
    if held.stale:
        _LOG.info("note: taking over %s from a run that is no longer running (%s)%s",
                  held.path, output_lock.describe_holder(held.stale), removing)
    elif held.expired:
        _LOG.info("note: taking over %s from %s, whose lease ran out (killed elsewhere, or "
                  "paused or cut off for longer than the lease)%s", held.path,
                  output_lock.describe_holder(held.expired), removing)
    elif left:
        _LOG.info("note: removing the temporaries of %s (left by runs that ended without "
                  "removing them)", left)
    fsutil.remove_tree(manifest.temporary_dir(output))


def run(argv=None) -> int:
    """The command (also for in-process callers): returns the exit status; what goes wrong
    is one line on stderr (see dataio/errors.py)."""
    return errors.main(functools.partial(_run, since=time.monotonic()), argv)


def setup(argv, *, beam_free: bool = False) -> tuple[list[str], object, object]:
    """Parse and check a tokenize command line before anything is written: returns (argv
    without secrets, the options, the storage plan workers adopt). The options are
    PipelineOptions, or with ``beam_free`` a :class:`~pipelines.options.Flags` where argv holds
    only tokenbeam's flags."""
    log.setup(log.level_from_argv(argv))  # before Beam's import, which logs
    install_logging_filter()
    # Secrets leave argv before Beam sees it: Beam serialises every option into the job.
    argv, secrets = azure.prepare_argv(argv)
    argv = opts.expand_output_prefix(argv)  # Megatron's --output-prefix P: --output-name
    # beam_free: tokenbeam's flags alone need no Beam (PipelineOptions come when a pipeline runs)
    options = ((opts.parse_flags(argv) if beam_free else None)
               or opts.parse(argv, groups=opts.GROUPS))
    storage = configure_storage(options, secrets)
    preflight(options)
    return argv, options, storage


def lock_output(options, argv, *, run_id: str) -> output_lock.OutputLock:
    """Take the output's lock (dataio/lock.py) for this run."""
    return output_lock.acquire(opts.flags(options).output, run_id=run_id,
                               command=" ".join(["tokenize", *redact_argv(argv)]))


def _run(argv, *, since: float | None = None) -> int:
    if "-h" in argv or "--help" in argv:
        opts.help_parser("python -m pipelines.tokenize").print_help()
        return 0
    argv, options, storage = setup(argv, beam_free=True)
    io = opts.flags(options)
    if io.plan_only:
        print_plan(plan(options, checked=True))
        return 0
    run_id = output_lock.new_run_id()
    # The lock comes before the plan: what is committed must not change while we decide.
    with lock_output(options, argv, run_id=run_id) as held:
        faults.checkpoint("tokenize.locked")
        take_over(io.output, held)
        job = plan(options, checked=True)
        job.run_id, job.guard = run_id, held.guard()
        errors.on_interrupt_say(lambda: what_is_kept(job))
        try:
            status = execute(job, argv, storage=storage, since=since)
        except BaseException as exc:
            # Failed or interrupted: this run's temporaries are of no use to the next (its
            # finished items are kept under _parts/); removing them may fail too (storage
            # down), but the first error is the one to report.
            if not isinstance(exc, output_lock.OutputLostError):
                _remove_own_temporaries(io.output, run_id, guard=job.guard, failed=True)
            space = space_error(exc, io.output) if isinstance(exc, Exception) else None
            if space is not None:
                raise space from None
            raise
        _remove_own_temporaries(io.output, run_id, guard=job.guard, failed=False)
        return status


def what_is_kept(job: Job) -> str:
    """What a run cut short leaves for the rerun: "14 of 32 shards committed, 61% of the input
    done (kept)": the shards committed with this run's fingerprints, and the input bytes of
    their files and of the finished items kept under ``_parts/`` (dataio/parts.py)."""
    try:
        listed = fsutil.files_under(fsutil.join(job.output, manifest.COMMITS_DIR))
        committed = {s.shard for s in job.to_process if s.shard + ".json" in listed and
                     (manifest.read_commit_record(job.output, s.shard) or {}).get(
                         "fingerprint") == s.fingerprint}
        size_of = {f.stem: f.size or 0 for f in job.files}
        total = sum(size_of.get(stem, 0) for stem in {s.stem for s in job.to_process})
        done_items = parts.done_items(job.output)
        kept = 0
        for plan in job.stem_plans().values():
            if all(shard in committed for shard, _, _ in plan.shards):
                kept += size_of.get(plan.stem, 0)
                continue
            for key in done_items.get(plan.folder, ()):
                kept += int((parts.read_record(job.output, plan.folder, key) or {}).get(
                    "file_bytes", 0))
    except Exception:  # noqa: BLE001 - storage gone with the run: say nothing more
        return "the shards and items finished so far are kept"
    share = f"{kept / total:.0%}" if total else "all"
    return (f"{len(committed)} of {len(job.to_process)} shards committed, {share} of the "
            "input's bytes tokenized and kept")


def _remove_own_temporaries(output: str, run_id: str, *, guard, failed: bool) -> None:
    """Only while the output is ours: an empty ``_temporary/`` removed on object storage takes
    with it whatever another run has just written there."""
    try:
        if guard is not None:
            guard.verify()
        fsutil.remove_tree(manifest.temporary_dir(output, run_id))
        _remove_if_empty(manifest.temporary_dir(output))
    except Exception as exc:  # noqa: BLE001
        if not failed:
            raise
        if isinstance(exc, output_lock.OutputLostError):
            return  # the first error is the one to report; the next take-over removes them
        _LOG.warning("could not remove this run's temporaries (%s); the next run removes them",
                     errors.cause(exc))


def space_error(exc: Exception, output: str) -> errors.RunError | None:
    """A write to an open file says no name: when space ran out, name the output."""
    known = errors.describe(exc)
    if known and known[0].startswith(errors.SPACE_MESSAGES):
        return errors.RunError(f"--output {output}: {known[0]}")
    return None


def configure_storage(options, secrets: dict):
    """Credentials for every remote path of the job, checked up front; returns the secret-free
    plan workers adopt in ``DoFn.setup`` (None when nothing remote needs one)."""
    io = tok = opts.flags(options)
    paths = [*(io.input or []), io.output, tok.tokenizer_model, tok.vocab_file, tok.merge_file]
    return azure.configure_from_options({**options.get_all_options(), **secrets},
                                        paths=[p for p in paths if p])


def main() -> int:
    """The command line (``python -m pipelines.tokenize``, the ``tokenbeam-tokenize`` script):
    :func:`run` with its interrupt handling (exit 130 / 143, see dataio/errors.py)."""
    return errors.main(functools.partial(_run, since=process_started()), process=True)


def process_started() -> float:
    """When this process started, on ``time.monotonic()``'s clock (the summary's wall time
    counts the interpreter's start-up and imports too, as ``time`` does); now where
    ``/proc`` does not say."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            # field 22, after the parenthesised name (which may hold spaces)
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return now - max(0.0, age)
