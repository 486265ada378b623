"""``python -m runners.local`` refuses a config of another kind (the whole job on Beam's local
runner: tests/e2e/runners/test_local_runner.py)."""

import os
import subprocess

from runner_support import PYTHON, ROOT


def test_wrong_kind_of_config_is_refused(tmp_path):
    proc = subprocess.run([PYTHON, "-m", "runners.local", "--config",
                           os.path.join(ROOT, "runners/flink.yaml"), "--", "--input", "x"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2
    assert "needs a 'direct' config" in proc.stderr
