"""runtime/cli.py: a typo on any command's line is one line on stderr, exit 2, naming the nearest
valid flag or choice; --help is unchanged.

The whole-job runs; the unit tests are in tests/runtime/test_cli.py."""

import subprocess
import sys

from tests.runtime.test_cli import _one_line


def test_the_command_line_prints_one_line_and_exits_2():
    proc = subprocess.run([sys.executable, "-m", "pipelines.tokenize", "--input", "in.jsonl",
                           "--output", "out", "--tokenizer-type", "HuggingfaceTokenizer"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "did you mean --tokenizer-type HuggingFaceTokenizer?" in _one_line(proc.stderr)
