"""An input that changes while the job reads it fails its shards instead of committing part of it.

The whole-job runs; the unit tests are in tests/pipelines/test_input_changed.py."""

import os
import shutil
import subprocess
import sys

from tests.pipelines.test_input_changed import _line_boundary_near


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_job_fails_the_changed_shard_and_commits_the_others(corpus_dir, hf_tokenizer, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("c0_web.jsonl", "c1_web.jsonl"):
        shutil.copy2(corpus_dir / name, folder / name)
    victim = folder / "c0_web.jsonl"
    planned, cut = victim.stat().st_size, _line_boundary_near(victim, 0.5)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "pipelines.tokenize", "--input", str(folder), "--output",
           str(out), "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
           str(hf_tokenizer), "--log-interval", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBEAM_FAULT")}
    env.update(PYTHONPATH=ROOT, TOKENBEAM_FAULT="readers.item_started:1",
               TOKENBEAM_FAULT_TRUNCATE=f"{victim}:{cut}")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert victim.stat().st_size == cut  # the hook did cut it, after planning
    assert "Traceback" not in proc.stderr
    changed = [line for line in proc.stderr.splitlines() if "changed while reading" in line]
    assert len(changed) == 1, proc.stderr[-3000:]
    assert f"{victim} changed while reading (planned {planned} bytes, found {cut}); rerun" \
        in changed[0]
    names = os.listdir(out)
    assert not any(n.startswith("c0_web_") for n in names), names  # nothing of it committed
    assert any(n.startswith("c1_web_") and n.endswith(".idx") for n in names), names
    assert os.path.exists(out / "_failures" / "c0_web_text_document.json")

    env = {k: v for k, v in env.items() if not k.startswith("TOKENBEAM_FAULT")}
    rerun = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert any(n.startswith("c0_web_") and n.endswith(".idx") for n in os.listdir(out))
