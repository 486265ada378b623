"""``python -m pipelines.reshard``: merge small and split large JSONL/Parquet files into shards.

    python -m pipelines.reshard --input GLOB [--input GLOB ...] --output DIR --target-size 1GB
        --name-template "{language}_{domain}_{subdomain}_split_{split:05d}"
        [--name-regex REGEX | --language L --domain D --subdomain S] [--compression gzip|zstd]
        [--overwrite] [--dry-run] [--workers N] [Beam flags, e.g. --runner]

The template's fields come from the named groups of ``--name-regex`` (searched in each input's
base name, or in its whole path when the pattern has a ``/``, so folders can carry them) and
from ``--language``/``--domain``/``--subdomain``;
inputs with the same field values form one group, resharded together into
``DIR/{template}.jsonl[.gz|.zst]`` with ``split`` = 0, 1, 2, ... The target size counts
uncompressed bytes. What ends up where, and why the output is the same bytes on every run, is
specified in :mod:`transforms.reshard`.

The driver takes the output's lock (:mod:`dataio.lock`, as the tokenize job: one run at a time;
a dead run's lock is taken over and its temporary folders removed), finds the inputs, their
fields and the names, settles a commit that a killed run left
unfinished in the output (finished when all its shards were in place, else rolled back;
:func:`dataio.jsonl_sink.recover`), refuses to replace earlier outputs unless ``--overwrite`` (which then deletes that group's old shards once the new ones are in
place), and with ``--dry-run`` prints the plan and stops. The Beam job measures, plans, writes and
commits. ``--runner=DirectRunner`` (the default) runs Beam's in-process FnApiRunner, with
``--workers N`` processes.

Exit status: 0 written, 1 the run failed (unreadable input, storage error), 2 bad configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from runtime import cli
from runtime import errors
from dataio import fs as fsutil
from dataio import locations
from dataio import jsonl_sink, naming, readers
from dataio import discovery
from runtime import redact
from dataio import lock as output_lock
from pipelines import beam_options
from pipelines import options as opts
from transforms import reshard as rs

class ReshardOptions(PipelineOptions):
    """Reshard's own flags (``--input``, ``--output``, ``--overwrite``, ``--dry-run`` and
    ``--workers`` are the tokenize job's, from :mod:`pipelines.options`; :func:`parse` refuses
    the tokenize job's others)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--target-size", default="1GB",
                            help="uncompressed bytes per shard, e.g. 1GB (10**9), 1GiB, 256MB "
                                 "(default 1GB); a shard never splits a document")
        parser.add_argument("--name-template",
                            default="{language}_{domain}_{subdomain}_split_{split:05d}",
                            help="shard name without extension, a Python format string with "
                                 "{split} and any fields of --name-regex or the field flags")
        parser.add_argument("--name-regex", default=None,
                            help="regular expression with named groups, searched in each input's "
                                 "file name (whole path if it has a /), e.g. "
                                 "'^(?P<language>[a-z]+)_(?P<domain>[a-z]+)_'")
        for field in rs.FIELD_FLAGS:
            parser.add_argument(f"--{field}", default=None,
                                help=f"{{{field}}} for every input (instead of --name-regex)")
        parser.add_argument("--compression", default="none",
                            choices=sorted(jsonl_sink.EXTENSIONS),
                            help="compress the output shards (.jsonl.gz / .jsonl.zst)")


@dataclasses.dataclass(kw_only=True)
class ReshardJob:
    """Everything the driver decided before the pipeline runs."""

    options: PipelineOptions
    sources: list[rs.Source]
    target: int
    compression: str
    temp_dir: str
    plan: rs.CommitPlan

    def groups(self) -> dict[tuple, list[rs.Source]]:
        found: dict[tuple, list[rs.Source]] = {}
        for s in self.sources:
            found.setdefault(s.fields, []).append(s)
        return dict(sorted(found.items()))


def plan_job(options: PipelineOptions, *, exclusive: bool = False) -> ReshardJob:
    """Validate the options and find the inputs; raises :class:`rs.ReshardError`,
    :class:`opts.OptionsError` or :class:`readers.InputError` with the flag and the fix.
    Settles an unfinished commit in the output unless ``--dry-run``; ``exclusive``: this run
    holds the output's lock (no other run is alive), so the temporary folders of dead runs
    go too."""
    io = options.view_as(beam_options.InputOutputOptions)
    ro = options.view_as(ReshardOptions)
    if not io.input:
        raise opts.OptionsError("--input is required: a glob, file or folder of JSONL/Parquet")
    if not io.output:
        raise opts.OptionsError("--output is required: the folder for the shards")
    target = rs.parse_size(ro.target_size)
    needed = rs.check_template(ro.name_template)
    regex = None
    if ro.name_regex:
        try:
            regex = re.compile(ro.name_regex)
        except re.error as exc:
            raise rs.ReshardError(f"--name-regex {ro.name_regex!r}: {exc}") from None
    flags = {f: getattr(ro, f) for f in rs.FIELD_FLAGS if getattr(ro, f) is not None}
    both = sorted(set(flags) & set(regex.groupindex if regex else ()))
    if both:
        raise rs.ReshardError(f"{{{both[0]}}} comes from both --{both[0]} and --name-regex; "
                              "use one of them")
    unused = sorted(set(flags) - set(needed))
    if unused:
        raise rs.ReshardError(f"--{unused[0]} is given but --name-template has no {{{unused[0]}}}")
    sources = []
    for found in discovery.find_inputs(io.input, skip_unsupported=True):
        naming.refuse_not_utf8(found.path)
        fields = rs.fields_of(found.path, regex=regex, flags=flags, needed=needed)
        sources.append(rs.Source(path=found.path, format=found.format, size=found.size,
                                 fields=tuple(sorted(fields.items())), error=found.error,
                                 version=found.version))
    extension = jsonl_sink.EXTENSIONS[ro.compression]
    output = io.output.rstrip("/") if "://" in io.output else io.output
    group_fields = sorted({s.fields for s in sources})
    first_names: dict[str, tuple] = {}
    for fields in group_fields:
        name = rs.format_name(ro.name_template, dict(fields), 0, extension)
        if name in first_names:
            raise rs.ReshardError(f"groups {dict(first_names[name])} and {dict(fields)} would both "
                                  f"be named {name}; put the differing field in --name-template")
        first_names[name] = fields
    # A run killed inside its commit left it unfinished: finish or roll it back first (a dry
    # run only says so, and plans as if rolled back).
    unsettled: set[str] = set()
    if io.plan_only:
        unsettled = jsonl_sink.unfinished_shards(output)
        settled = (f"reshard: {output} holds the unfinished commit of an interrupted run; the "
                   "run will settle it first") if unsettled else ""
    else:
        settled = jsonl_sink.recover(output)
    if settled:
        print(naming.printable(settled), file=sys.stderr, flush=True)
    left = jsonl_sink.remove_temporary_dirs(output) if exclusive and not io.plan_only else []
    if left:
        print(f"reshard: removed the temporary folders of {len(left)} run(s) that ended without "
              f"removing them ({naming.printable(', '.join(left))})", file=sys.stderr, flush=True)
    patterns = [rs.name_pattern(ro.name_template, dict(f), extension) for f in group_fields]
    existing = [p for p in fsutil.list_files(output)
                if any(pat.fullmatch(p.rsplit("/", 1)[-1]) for pat in patterns)
                and p.rsplit("/", 1)[-1] not in unsettled]
    read = {locations.resolve_location(s.path) for s in sources}  # any spelling, symlinks too
    clobbered = sorted(p for p in existing if locations.resolve_location(p) in read)
    if clobbered:
        raise rs.ReshardError(f"input {clobbered[0]} has a name the output would use; write to "
                              "another --output folder")
    if existing and not io.overwrite:
        raise rs.ReshardError(f"{len(existing)} shard(s) of an earlier run are in {output} (e.g. "
                              f"{existing[0].rsplit('/', 1)[-1]}); pass --overwrite to replace "
                              "them or choose another --output")
    temp_dir = jsonl_sink.new_temporary_dir(output)
    plan = rs.CommitPlan(output=output, template=ro.name_template, extension=extension,
                         stale=tuple(existing))
    return ReshardJob(options=options, sources=sources, target=target,
                      compression=ro.compression, temp_dir=temp_dir, plan=plan)


def build(pipeline: beam.Pipeline, job: ReshardJob | PipelineOptions):
    """Wire the reshard job into ``pipeline``; returns the PCollection of committed shard
    summaries. ``job`` may be the options (then it is planned here)."""
    if not isinstance(job, ReshardJob):
        job = plan_job(job)
    return (pipeline
            | "ListSources" >> beam.Create(job.sources)
            | "Reshard" >> rs.ReshardFiles(target=job.target, compression=job.compression,
                                           temp_dir=job.temp_dir, plan=job.plan))


def print_plan(job: ReshardJob, out=None) -> None:
    out = out or sys.stdout
    print(f"reshard plan: {len(job.sources)} inputs, target {job.target} bytes per shard, "
          f"output {job.plan.output}", file=out)
    for fields, sources in job.groups().items():
        plain = sum(s.size for s in sources if s.format == "jsonl")
        other = [s for s in sources if s.format != "jsonl"]
        first = rs.format_name(job.plan.template, dict(fields), 0, job.plan.extension)
        estimate = f"~{math.ceil(plain / job.target)} shard(s)" if not other else \
            f"{math.ceil(plain / job.target)}+ shard(s) (sizes of {len(other)} compressed or " \
            "Parquet input(s) are measured during the run)"
        print(f"  {first}: {len(sources)} input(s), {sum(s.size for s in sources)} bytes on "
              f"storage, {estimate}", file=out)
        for s in sources:
            print(f"    {naming.printable(s.path)} ({s.format}, {s.size} bytes)", file=out)
    if job.plan.stale:
        print(f"  --overwrite: {len(job.plan.stale)} earlier shard(s) will be replaced", file=out)


def help_parser() -> argparse.ArgumentParser:
    """Every flag reshard takes besides Beam's: the five it shares with the tokenize job (read
    through :mod:`pipelines.options`' classes) and :class:`ReshardOptions`."""
    parser = cli.ArgumentParser(prog="python -m pipelines.reshard", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--input", action="append", metavar="GLOB",
                        help="JSONL (.jsonl, .json, .gz, .zst) / Parquet files: glob, file or "
                             "folder; local or fsspec URL; repeatable")
    parser.add_argument("--output", metavar="DIR", help="folder for the shards (local or URL)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace shards of an earlier run with the same names")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    # Its value is checked where it is read (pipelines.options' --workers), not twice.
    parser.add_argument("--workers", metavar="N", help="worker processes on the local runner")
    parser.add_argument("--log-level", metavar="LEVEL", help="debug, info (default), warning or "
                        "error; Beam's own log is shown at debug only")
    ReshardOptions._add_argparse_args(parser)
    return parser


def parse(argv: list[str]) -> PipelineOptions:
    """``argv`` as PipelineOptions, refusing any flag that is neither reshard's
    (:func:`help_parser`) nor Beam's. Beam's parser knows every PipelineOptions class imported
    in the process, so the tokenize job's ``--tokenizer-type`` would otherwise pass and do
    nothing."""
    return beam_options.parse(argv, groups=GROUPS, own_flags=help_parser(), job="reshard")


GROUPS = (opts.InputOutputFlags, opts.RunFlags, ReshardOptions)  # parse() allows only help_parser's


class InputsUnreadable(errors.RunError):
    """Inputs that cannot be read whole: nothing is written (exit status 1)."""


class ReshardFailed(errors.RunError):
    """The Beam job failed; the message says why (exit status 1)."""


# An input truncated or rewritten while the job read it (transforms.reshard.piece_documents):
# its message is the line to print, also when a worker process raised it.
errors.anticipate(readers.InputChangedError, status=errors.EXIT_FAILED)


def run(argv=None) -> int:
    return errors.main(_run, argv)


def _run(argv) -> int:
    if "-h" in argv or "--help" in argv:
        help_parser().print_help()
        return 0
    options = parse(argv)
    if options.view_as(beam_options.InputOutputOptions).plan_only:
        print_plan(plan_job(options))
        return 0
    # The lock comes before the plan: settling an unfinished commit deletes what the run that
    # left it wrote, so that run must be dead, not merely still writing.
    output = options.view_as(beam_options.InputOutputOptions).output
    local = fsutil.filesystem_and_path(output)[1] if output and fsutil.is_local(output) else None
    created = local is not None and not os.path.exists(local)
    try:
        with lock_output(output, argv) as held:
            return _run_locked(options, held)
    finally:
        if created:  # made for the lock: a run that wrote nothing leaves no empty folder
            try:
                os.rmdir(local)
            except OSError:
                pass  # not empty: the run wrote its shards there


def lock_output(output: str | None, argv) -> output_lock.OutputLock:
    """Take the output's lock (:mod:`dataio.lock`, as the tokenize job does): a second run into
    the same output is refused with one line naming the holder; a dead run's lock is taken over,
    saying whose it was. A local output folder is made first (the lock lives in it)."""
    if not output:
        raise opts.OptionsError("--output is required: the folder for the shards")
    if fsutil.is_local(output):
        fs, inner = fsutil.filesystem_and_path(output)
        if fs.isfile(inner):
            raise errors.ConfigError(f"--output {output} is a file; give a folder (created if "
                                     "missing)")
        try:
            fsutil.makedirs(fs, inner)
        except OSError as exc:
            reason = (errors.os_error_message(exc.errno, None) if exc.errno else None) or \
                f"{exc.strerror or exc}; give --output a folder this run can write"
            raise errors.ConfigError(f"--output {output}: cannot write there: {reason}") from None
    held = output_lock.acquire(output, run_id=output_lock.new_run_id(),
                               command=" ".join(["reshard", *redact.redact_argv(argv)]))
    if held.stale or held.expired:
        how = "no longer running" if held.stale else \
            "whose lease ran out (killed elsewhere, or paused for longer than the lease)"
        print(f"reshard: note: taking over {held.path} from a run that is {how} "
              f"({output_lock.describe_holder(held.stale or held.expired)})", file=sys.stderr,
              flush=True)
    return held


def _run_locked(options: PipelineOptions, held: output_lock.OutputLock) -> int:
    job = plan_job(options, exclusive=held.exclusive)
    try:
        with beam.Pipeline(options=job.options) as pipeline:
            build(pipeline, job)
        summary = jsonl_sink.read_summary(job.temp_dir)
    except Exception as exc:  # noqa: BLE001 - any failure of the job ends it with its reason
        raise ReshardFailed(f"reshard failed: {_root_cause(exc)}") from exc
    finally:
        fsutil.remove_tree(job.temp_dir)
    if summary["failed"]:
        for f in summary["failed"]:
            reason = f["reason"] if f["reason"].startswith(f["path"]) else \
                f"{f['path']}: {f['reason']}"
            print(f"FAILED {naming.printable(reason)}", file=sys.stderr)
        raise InputsUnreadable(f"reshard wrote nothing: {len(summary['failed'])} input(s) cannot "
                               "be read whole (listed above); a shard without their documents "
                               "would look complete. Re-copy or leave them out and rerun.")
    summary = summary["shards"]
    for row in sorted(summary, key=lambda r: r["name"]):
        print(f"{row['name']}  documents={row['documents']} bytes={row['bytes']}")
    print(f"{len(summary)} shards, {sum(r['documents'] for r in summary)} documents, "
          f"{sum(r['bytes'] for r in summary)} bytes -> {job.plan.output}")
    return 0


def _root_cause(exc: BaseException) -> str:
    """What went wrong, in one line: the anticipated cause when there is one
    (:func:`runtime.errors.describe` finds it also in what a Beam worker raised), else the
    innermost exception of the chain (Beam wraps a DoFn's exception in layers of context)."""
    known = errors.describe(exc)
    if known is not None:
        return known[0]
    chain = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    chosen = chain[-1]
    message = re.sub(r" \[while running '[^']*'\]", "", str(chosen))
    return f"{type(chosen).__name__}: {message}".strip()


def main() -> int:
    """The command line (``python -m pipelines.reshard``, ``tokenbeam-reshard``): :func:`run`
    with its interrupt handling (exit 130 / 143, see runtime/errors.py)."""
    return errors.main(_run, process=True)


if __name__ == "__main__":
    sys.exit(main())
