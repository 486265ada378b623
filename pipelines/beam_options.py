"""The tokenize job's flag groups as Beam ``PipelineOptions`` (one plain subclass per group of
pipelines/options.py), and Beam's parse of a command line. Importing this module imports Beam:
a command imports it when a pipeline is to run, or when its command line holds Beam's own
flags; ``--help``, ``--dry-run`` and planning read pipelines/options.py alone.

Defining a subclass registers its flags with Beam (Beam finds them by scanning
``PipelineOptions.__subclasses__()``), so they are defined here, at module level: pickled by
reference, the same classes in every worker.
"""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import (DirectOptions, PipelineOptions,
                                                  StandardOptions, WorkerOptions)

from runtime import cli, log
from runtime import workers as local_workers
from pipelines import options as opts


class InputOutputOptions(opts.InputOutputFlags, PipelineOptions):
    """--input, --output and what is read and written (pipelines/options.py)."""


class TokenizerOptions(opts.TokenizerFlags, PipelineOptions):
    """The tokenizer and its Megatron flags (pipelines/options.py)."""


class SegmentationOptions(opts.SegmentationFlags, PipelineOptions):
    """Sentences, empty documents and holdout (pipelines/options.py)."""


class RunOptions(opts.RunFlags, PipelineOptions):
    """Workers, progress and the log (pipelines/options.py)."""


class AzureOptions(opts.AzureFlags, PipelineOptions):
    """Azure Blob credentials (pipelines/options.py)."""


# The PipelineOptions subclass of each flag group.
OPTIONS_OF = {opts.InputOutputFlags: InputOutputOptions, opts.TokenizerFlags: TokenizerOptions,
              opts.SegmentationFlags: SegmentationOptions, opts.RunFlags: RunOptions,
              opts.AzureFlags: AzureOptions}


def _accepted_classes(groups) -> list:
    """Beam's option classes, the runners' (runners/spark_jar.py declares Spark's), and the
    job's own groups; not another job's (a class defined under ``pipelines``)."""
    own = [OPTIONS_OF.get(g, g) for g in groups]
    found = [cls for cls in PipelineOptions.__subclasses__()
             if cls in own or not cls.__module__.startswith("pipelines.")]
    return found + [cls for cls in own if cls not in found]


def parse(argv, *, groups=opts.GROUPS, own_flags: argparse.ArgumentParser | None = None,
          job: str = "tokenize"):
    """Parse ``argv`` into PipelineOptions of a job whose own flags are ``groups`` (flag groups
    of pipelines/options.py, by default the tokenize job's, or PipelineOptions subclasses),
    refusing unknown flags and other jobs' (Beam silently drops the first and accepts the
    second). ``own_flags``: a parser declaring exactly the job's flags, for a job that takes
    only some of its groups' (reshard); ``job`` names it in the refusal. ``--workers auto``
    runs one process here; :func:`use_local_workers` sets the number."""
    parser = own_flags or cli.ArgumentParser(add_help=False, allow_abbrev=False)
    for cls in _accepted_classes(groups if own_flags is None else ()):
        try:
            cls._add_argparse_args(parser)
        except argparse.ArgumentError:
            pass  # a flag two Beam option classes both declare
    _, extras = parser.parse_known_args(argv)
    unknown = [u.split("=", 1)[0] for u in extras if u.startswith("-") and u != "-"]
    if extras and not unknown:  # a stray value, e.g. a second input after --input
        raise opts.OptionsError(cli.unexpected_message(extras, parser))
    if unknown:
        flag = unknown[0]
        whose = (f": it is the tokenize job's, not {job}'s" if job != "tokenize"
                 and flag in opts.help_parser("tokenize")._option_string_actions else "")
        if whose:
            raise opts.OptionsError(f"unknown flag {flag}{whose}; {cli.SEE_HELP}")
        raise opts.OptionsError(cli.unknown_flag_message(flag, cli.flag_names(parser)))
    options = PipelineOptions(argv)
    if opts.RunFlags in groups:
        workers = options.view_as(RunOptions).workers
        use_local_workers(options, workers if isinstance(workers, int) else 1)
    return options


def pipeline_options(options, *, workers: int | None = None):
    """The PipelineOptions to run with: ``options`` itself, or parsed from a
    :class:`~pipelines.options.Flags`' argv; ``workers``: the number of local processes
    decided."""
    if isinstance(options, opts.Flags):
        options = parse(options.argv, groups=opts.GROUPS)
    if workers is not None:
        use_local_workers(options, workers)
    return options


def use_local_workers(options, workers: int) -> None:
    """DirectRunner means the in-process FnApiRunner: Beam 2.77's DirectRunner would first try
    to download its Prism runner from the internet. ``workers`` > 1 runs that many processes."""
    std = options.view_as(StandardOptions)
    if opts.is_local_runner(std.runner) or std.runner == local_workers.RUNNER:
        std.runner = "FnApiRunner"
        direct = options.view_as(DirectOptions)
        if workers > 1:
            direct.direct_running_mode = "multi_processing"
            direct.direct_num_workers = workers
            # worker processes log every gRPC step at INFO: shown with --log-level debug only
            worker = options.view_as(WorkerOptions)
            if worker.default_sdk_harness_log_level is None:
                level = getattr(opts.flags(options), "log_level", None) or log.DEFAULT_LEVEL
                worker.default_sdk_harness_log_level = log.harness_level(level)
            # The same runner, whose workers die with the driver (kill -9 of the driver
            # included) and leave Ctrl-C to it: runtime/workers.py.
            std.runner = local_workers.RUNNER
        else:
            direct.direct_running_mode = "in_memory"
