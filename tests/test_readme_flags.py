"""The README is the truth: every flag a command's --help lists is written in README.md."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ["tokenize", "reshard", "validate", "inspect", "count", "signature", "blend", "merge"]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_in_help_is_in_the_readme(command):
    proc = subprocess.run([sys.executable, "-m", f"pipelines.{command}", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    flags = set(FLAG.findall(proc.stdout)) - {"--help"}
    assert flags, proc.stdout  # the pattern found the command's flags
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = sorted(f for f in flags if not re.search(re.escape(f) + r"(?![\w-])", readme))
    assert not missing, f"python -m pipelines.{command} --help lists {missing}, README.md does not"
