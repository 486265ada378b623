"""The README and the docs are the truth: every flag a command's --help lists is written in
README.md or a docs/ page (the full reference is docs/usage.md; issue 26)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ["tokenize", "reshard", "validate", "inspect", "count", "signature", "blend", "merge"]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_in_help_is_in_the_readme_or_docs(command):
    proc = subprocess.run([sys.executable, "-m", f"pipelines.{command}", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    flags = set(FLAG.findall(proc.stdout)) - {"--help"}
    assert flags, proc.stdout  # the pattern found the command's flags
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    missing = sorted(f for f in flags if not re.search(re.escape(f) + r"(?![\w-])", text))
    assert not missing, (f"python -m pipelines.{command} --help lists {missing}; neither "
                         "README.md nor docs/ does")
