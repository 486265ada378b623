"""``python -m runners.local --config runners/direct.yaml [--workers N] -- <tokenize args>``:
run a tokenbeam job on this machine with the settings of a ``kind: direct`` config (Beam's
in-process runner; ``workers`` > 1 runs that many worker processes). Exit status: the
pipeline's; 2 for a bad configuration.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from runtime import cli
from runtime import errors
from runners import config as rc
from runners.config import PIPELINE_MODULE


def pipeline_command(cfg: dict, pipeline_args: list[str]) -> list[str]:
    return [sys.executable, "-m", PIPELINE_MODULE, *pipeline_args, "--runner=DirectRunner",
            f"--workers={cfg['workers']}"]


def _main(argv) -> int:
    parser = cli.ArgumentParser(prog="python -m runners.local", description=__doc__)
    parser.add_argument("--config", default=None, help="runner YAML (kind: direct)")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("pipeline_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    pipeline_args = list(args.pipeline_args)
    if pipeline_args and pipeline_args[0] == "--":
        pipeline_args = pipeline_args[1:]
    overrides = {"workers": args.workers} if args.workers is not None else {}
    cfg = rc.load(args.config, overrides, kind="direct")
    return subprocess.run(pipeline_command(cfg, pipeline_args)).returncode


def main(argv=None) -> int:
    return errors.main(_main, argv)


if __name__ == "__main__":
    sys.exit(errors.main(_main, process=True))
