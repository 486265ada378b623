"""What a command costs before any work (pipelines/options.py, pipelines/tokenize/): ``--help``
without importing Beam, the Beam-free flag parser giving the values Beam's does from the same
definitions, and ``--workers auto`` chosen from the backend and the cores, and said."""

import argparse
import os
import subprocess
import sys

import pytest

from runtime import workers
from pipelines import beam_options
from pipelines import options as opts
from pipelines import tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARGV = ["--input", "in/", "--output", "out/", "--tokenizer-type", "NullTokenizer",
        "--vocab-size", "100", "--append-eod", "--json-keys", "text", "title",
        "--log-interval", "0", "--runner=DirectRunner"]


def test_help_does_not_import_beam():
    probe = ("import runpy, sys; sys.argv = ['pipelines.tokenize', '--help']\n"
             "try:\n    runpy.run_module('pipelines.tokenize', run_name='__main__')\n"
             "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
             "print(sorted(m for m, mod in sys.modules.items()\n"
             "             if m.split('.')[0] == 'apache_beam' and mod is not None))")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert "--workers N|auto" in proc.stdout and "--tokenizer-type" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_the_planner_imports_no_beam():
    # planning, the checks, --dry-run's estimate and the run's finish need no Beam: in the
    # tokenize package only graph.py imports it (and pipelines/beam_options.py outside it).
    probe = ("import sys\n"
             "from pipelines import options, tokenize\n"
             "from pipelines.tokenize import checks, driver, estimate, outcome, planner\n"
             "from dataio import manifest\n"
             "from transforms import tokenize_config\n"
             "print(sorted(m for m, mod in sys.modules.items()\n"
             "             if m.split('.')[0] == 'apache_beam' and mod is not None))")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_flags_parsed_without_beam_equal_beams_parse_of_the_same_definitions():
    fast = opts.parse_flags(ARGV)
    assert fast is not None and fast.argv == ARGV
    beam_values = opts.flags(beam_options.parse(ARGV))
    for group in opts.GROUPS:
        parser = argparse.ArgumentParser()
        group._add_argparse_args(parser)
        for action in parser._actions[1:]:
            assert getattr(fast, action.dest) == getattr(beam_values, action.dest), action.dest
    assert fast.tokenizer_spec() == beam_values.tokenizer_spec()
    assert fast.workers == "auto" and opts.parse_flags(ARGV + ["--workers", "3"]).workers == 3


@pytest.mark.parametrize("extra", [["--direct_num_workers", "2"], ["--workers", "0"],
                                   ["--workers", "many"], ["stray"]])
def test_anything_but_our_flags_goes_to_beams_parser(extra):
    assert opts.parse_flags(ARGV + extra) is None


@pytest.mark.parametrize("bad", ["0", "-1", "two"])
def test_a_bad_workers_value_is_a_usage_error(bad, capsys):
    # argparse's usage error, as for any bad value: its status, returned (runtime/errors.py main)
    assert tokenize.run(ARGV + ["--workers", bad]) == 2
    assert "error: --workers: expected a number of processes >= 1 or auto" in \
        capsys.readouterr().err


@pytest.mark.parametrize("backend, cores, items, expected", [
    ("fast", 2, 8, 1), ("fast", 16, 100, 1), ("reference", 2, 8, 2), ("reference", 16, 3, 3),
    ("reference", 4, 0, 1), ("reference", 1, 8, 1)])
def test_auto_workers_from_backend_cores_and_items(backend, cores, items, expected):
    n, why = workers.auto_workers(backend=backend, cores=cores, items=items)
    assert n == expected and why.startswith("auto: ") and backend in why


def test_workers_given_are_kept_and_set_the_local_runner(monkeypatch):
    monkeypatch.setattr(workers, "usable_cores", lambda: 4)
    given = beam_options.parse(ARGV + ["--workers", "3"])
    assert opts.choose_workers(given, backend="fast", items=8) == (3, "--workers")
    auto = beam_options.parse(ARGV)
    assert opts.choose_workers(auto, backend="reference", items=8)[0] == 4
    from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

    beam_options.use_local_workers(auto, 4)
    direct = auto.view_as(DirectOptions)
    assert auto.view_as(StandardOptions).runner == workers.RUNNER
    assert (direct.direct_running_mode, direct.direct_num_workers) == ("multi_processing", 4)
    beam_options.use_local_workers(auto, 1)
    assert auto.view_as(StandardOptions).runner == "FnApiRunner"
    assert direct.direct_running_mode == "in_memory"
    assert not opts.runs_locally(opts.parse_flags(["--runner", "FlinkRunner"]))


@pytest.mark.parametrize("requested, cores, items, expected, limit", [
    (64, 2, 8, 2, "the 2 usable cores"), (64, 16, 3, 3, "the 3 work items"),
    (4, 1, 1, 1, "the 1 usable core"), (2, 4, 8, 2, None), (8, 8, 8, 8, None)])
def test_workers_given_capped_at_the_useful_number(requested, cores, items, expected, limit):
    """Megatron's habitual --workers 64 on 2 cores ran 14x slower: capped, saying why."""
    n, why = workers.capped_workers(requested, cores=cores, items=items)
    assert n == expected
    if limit is None:
        assert why == "--workers"
    else:
        assert why == (f"--workers {requested} capped at {expected}: no more than {limit}; "
                       "more processes only compete for the cores")


@pytest.mark.parametrize("runner", ["Direct", "directrunner", "DIRECTRUNNER"])
def test_beams_other_spellings_of_the_direct_runner_run_here(runner):
    """Beam takes --runner in any case, "Runner" optional (options.check_runner too): such a
    spelling is the local runner, with its workers, not a cluster's (labelled "this process
    only" lines, --workers ignored)."""
    from apache_beam.options.pipeline_options import StandardOptions

    assert opts.runs_locally(opts.parse_flags(["--runner", runner]))
    given = beam_options.parse(ARGV + ["--runner", runner])
    beam_options.use_local_workers(given, 2)
    assert given.view_as(StandardOptions).runner == workers.RUNNER
