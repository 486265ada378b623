"""``python -m pipelines.tokenize``: the tokenize job as one package (see driver.py for now)."""

from pipelines.tokenize import driver
from pipelines.tokenize.driver import (Figures, _now, announce_skips, build, collect_results,
                                       counted_figures, finish, lock_output, main, opts, plan,
                                       preflight, prepare_output, print_plan, process_started,
                                       progress_plan, recorded_figures, report, run, setup,
                                       take_over)


def __getattr__(name: str):
    # Beam-side names, imported on first use (runners/spark.py and the tests use them).
    if name == "_FinishFn":
        from pipelines.tokenize import graph

        return graph._FinishFn
    if name == "sink":
        from dataio import sink

        return sink
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
