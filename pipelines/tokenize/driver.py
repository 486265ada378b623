"""The tokenize job's run, in one order for every launcher: :func:`prepare` (check the command
line, the tokenizer and the output; take the output's lock, take over what dead runs left, plan,
clear what this run redoes) and :func:`complete` (finish: metadata.json and this run's
temporaries; the summary and the exit status). Between them the launcher runs the pipeline:
:func:`execute` on this machine (the local runner, Flink, any runner whose driver is this
process), runners/spark.py as a jar on a cluster. See the package's docstring for the contract.

Beam is imported only where a pipeline runs (:func:`execute` imports pipelines/tokenize/graph.py):
``--help``, ``--dry-run`` and a rerun that skips every shard read tokenbeam's flags alone
(pipelines/options.py :class:`~pipelines.options.Flags`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import os
import time

from dataio import azure, indexed, manifest, parts
from runtime import errors, faults, log, workers
from dataio import fs as fsutil
from dataio import lock as output_lock
from runtime.redact import install_logging_filter, redact_argv
from pipelines import options as opts
from pipelines.tokenize.outcome import (Reported, _now, _remove_if_empty, collect_results,
                                        counted_figures, finish, finished_in_pipeline, report)
from pipelines.tokenize.planner import (Job, announce_skips, local_workers, plan, preflight,
                                        print_plan)
from transforms import progress

_LOG = log.get("tokenize")


@dataclasses.dataclass
class Run:
    """A run :func:`prepare` made ready: the checked command line, and the planned ``job``
    (None: ``--dry-run`` printed the plan, nothing is to run). ``handed_off``: set by a
    launcher once the pipeline runs in another process that cleans up itself (a Spark batch):
    this process then leaves the run's temporaries alone."""

    argv: list[str]
    options: object
    storage: object
    job: Job | None = None
    started: str = ""  # the run's start, for metadata.json
    t0: float = 0.0  # time.monotonic() at the start of the job's seconds
    since: float | None = None  # when the command began, for the summary's wall time
    handed_off: bool = False


@contextlib.contextmanager
def prepare(argv, *, beam_free: bool = True, check=None, ended=None,
            since: float | None = None):
    """Everything before the pipeline, as a context that holds the output's lock (and, when the
    body fails or is interrupted, removes this run's temporaries); yields the :class:`Run`.
    ``beam_free``: see :func:`setup`; ``check(options)``: a launcher's own refusals, before
    anything is locked or written; ``ended(hold)``: whether a detached run (dataio/lock.py)
    has ended; ``since``: when the command began."""
    argv, options, storage = setup(argv, beam_free=beam_free)
    if check is not None:
        check(options)
    run = Run(argv=argv, options=options, storage=storage, since=since)
    io = opts.flags(options)
    if io.plan_only:
        print_plan(plan(options, checked=True))
        yield run
        return
    run_id = output_lock.new_run_id()
    # The lock comes before the plan: what is committed must not change while we decide.
    with lock_output(options, argv, run_id=run_id) as held:
        faults.checkpoint("tokenize.locked")
        take_over(io.output, held, ended=ended)
        run.started, run.t0 = _now(), time.monotonic()
        job = run.job = plan(options, checked=True)
        job.run_id, job.guard = run_id, held.guard()
        errors.on_interrupt_say(lambda: what_is_kept(job))
        announce_skips(job)
        try:
            if job.to_process:
                prepare_output(job)
            yield run
        except BaseException as exc:
            # Failed or interrupted: this run's temporaries are of no use to the next (its
            # finished items are kept under _parts/); removing them may fail too (storage
            # down), but the first error is the one to report.
            if not run.handed_off and not isinstance(exc, output_lock.OutputLostError):
                _remove_own_temporaries(io.output, run_id, guard=job.guard, failed=True)
            space = space_error(exc, io.output) if isinstance(exc, Exception) else None
            if space is not None:
                raise space from None
            raise
        if not run.handed_off:
            _remove_own_temporaries(io.output, run_id, guard=job.guard, failed=False)


def complete(run: Run, reported: Reported | None = None, *,
             pipeline_finishes: bool = False) -> int:
    """Everything after the pipeline (or instead of it, when every shard is skipped): finish
    (idempotent; skipped when ``pipeline_finishes`` and the pipeline's own last step wrote
    this run's metadata.json) and the summary; returns the exit status. ``reported``: what the
    pipeline reported through the runner (None: the commit records say it)."""
    job = run.job
    shards = reported.results if reported is not None else None
    if pipeline_finishes and finished_in_pipeline(job):
        results = collect_results(job, shards)
    else:
        results = finish(job, run.argv, started=run.started, reported=shards)
    now = time.monotonic()
    return report(job, results, seconds=now - run.t0,
                  wall=None if run.since is None else now - run.since,
                  figures=counted_figures(job, results,
                                          reported.counters if reported is not None else None))


def execute(run: Run) -> Reported:
    """Run the prepared job's pipeline in this process, to its end (local workers, or a
    cluster's runner submitted from here); returns what it reported."""
    job = run.job
    workers.mark_driver()  # local workers die with this process (runtime/workers.py)
    chosen = local_workers(job)
    if chosen is not None:
        _LOG.info("workers: %d (%s)", chosen[0], chosen[1])
    plan_ = progress_plan(job, workers=chosen and chosen[0])
    job.config = dataclasses.replace(job.config, progress=plan_)
    from pipelines.tokenize import graph  # Beam: only when a pipeline runs

    # What is loaded by now (Beam, the tokenizer, the plan: a few million objects) lives to the
    # end: out of the garbage collector's sight, a full collection no longer walks it (each
    # one did, for about 50 ms, several times a run).
    gc.freeze()
    run.t0 = time.monotonic()  # the job's seconds: the pipeline, not Beam's import or planning
    watch = progress.JobProgress(plan_).start() if plan_.folder else None
    try:
        return graph.run(job, workers=chosen and chosen[0], storage=run.storage)
    finally:
        if watch is not None:
            watch.close()  # the last line (or the bar's end) before the summary


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
    is one line on stderr (see runtime/errors.py)."""
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
    options = opts.parse_flags(argv) if beam_free else None
    if options is None:  # Beam's own flags too (or a launcher that needs PipelineOptions)
        from pipelines import beam_options

        options = beam_options.parse(argv)
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
    with prepare(argv, since=since) as ready:
        if ready.job is None:
            return 0  # --dry-run: the plan is printed
        return complete(ready, execute(ready) if ready.job.to_process else None)


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
        for stem_plan in job.stem_plans().values():
            if all(shard in committed for shard, _, _ in stem_plan.shards):
                kept += size_of.get(stem_plan.stem, 0)
                continue
            for key in done_items.get(stem_plan.folder, ()):
                kept += int((parts.read_record(job.output, stem_plan.folder, key) or {}).get(
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
    :func:`run` with its interrupt handling (exit 130 / 143, see runtime/errors.py)."""
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
