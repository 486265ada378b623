"""reshard's commit is all or nothing as every reader sees it (dataio/jsonl_sink.py, step 3).

The whole-job runs; the unit tests are in tests/pipelines/test_reshard_commit.py."""

import json
import os
import signal
import subprocess
import sys

import pytest

from dataio import jsonl_sink, readers
from dataio import discovery
from pipelines import demo, reshard
from test_tokenize import run_job
from tests.pipelines.test_reshard_commit import _files


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


TEMPLATE = "{language}_{domain}_split_{split:03d}"


def _corpus(folder):
    folder.mkdir()
    docs = [json.dumps(r, ensure_ascii=False).encode() for r in demo.documents(5, 300)]
    for k in range(3):
        (folder / f"web_{k}.jsonl").write_bytes(b"\n".join(docs[k * 100:(k + 1) * 100]) + b"\n")
    return folder


def _args(inputs, out, *extra):
    return ["--input", str(inputs), "--output", str(out), "--language", "en", "--domain", "web",
            "--name-template", TEMPLATE, *map(str, extra)]


def _killed_run(args, point_hit):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBEAM_FAULT")}
    env.update(PYTHONPATH=ROOT, TOKENBEAM_FAULT=f"reshard.between_renames:{point_hit}")
    proc = subprocess.run([sys.executable, "-m", "pipelines.reshard", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, start_new_session=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]


def _one_line_refusal(capsys, status, expected):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if expected in line]
    assert status == 1 and len(lines) == 1 and "Traceback" not in err, err


def test_kill_inside_the_commit_then_readers_refuse_and_the_rerun_settles_it(
        tmp_path, hf_tokenizer, capsys):
    inputs = _corpus(tmp_path / "in")
    clean, out = tmp_path / "clean", tmp_path / "out"
    assert reshard.run(_args(inputs, clean, "--target-size", "20KB")) == 0
    shards = sorted(n for n in _files(clean) if n.endswith(".jsonl"))
    assert len(shards) >= 4

    _killed_run(_args(inputs, out, "--target-size", "20KB"), 2)
    present = sorted(n for n in _files(out) if n.endswith(".jsonl"))
    assert present == shards[:2]  # two final-named shards of more: what a reader used to take
    capsys.readouterr()
    # (a) every reader refuses the folder, with one line: tokenize, reshard, any glob of it
    _one_line_refusal(capsys, run_job(out, tmp_path / "tok", hf_tokenizer),
                      "holds an unfinished reshard commit")
    assert not (tmp_path / "tok").exists() or not any(
        n.endswith(".idx") for n in os.listdir(tmp_path / "tok"))
    _one_line_refusal(capsys, reshard.run(_args(out, tmp_path / "again", "--target-size", "1MB")),
                      "holds an unfinished reshard commit")
    with pytest.raises(readers.InputError, match="unfinished reshard commit"):
        discovery.find_inputs([str(out / "*.jsonl")])

    assert reshard.run(_args(inputs, out, "--target-size", "20KB", "--dry-run")) == 0
    assert "unfinished commit of an interrupted run" in capsys.readouterr().err
    # (b) the same command again: rolled back by itself, then done as a clean run does it
    assert reshard.run(_args(inputs, out, "--target-size", "20KB")) == 0
    assert "rolled back the unfinished commit" in capsys.readouterr().err
    assert _files(out) == _files(clean)
    assert not [n for n in os.listdir(out) if n.startswith(".")]  # the dead run's temporaries
    assert len(discovery.find_inputs([str(out)])) == len(shards)


def test_kill_inside_an_overwrite_then_the_rerun_with_overwrite_settles_it(tmp_path, capsys):
    """--overwrite renames over the earlier run's shards of the same names: those cannot come
    back, so readers are refused until the rerun (with --overwrite) has committed."""
    inputs = _corpus(tmp_path / "in")
    clean, out = tmp_path / "clean", tmp_path / "out"
    for folder in (clean, out):
        assert reshard.run(_args(inputs, folder, "--target-size", "15KB")) == 0
    assert reshard.run(_args(inputs, clean, "--target-size", "25KB", "--overwrite")) == 0
    _killed_run(_args(inputs, out, "--target-size", "25KB", "--overwrite"), 1)
    with pytest.raises(readers.InputError, match="unfinished reshard commit"):
        discovery.find_inputs([str(out)])
    assert "rolled back" in jsonl_sink.recover(str(out))  # what a rerun does first
    with pytest.raises(readers.InputError, match="had already replaced earlier shards"):
        discovery.find_inputs([str(out)])
    capsys.readouterr()
    assert reshard.run(_args(inputs, out, "--target-size", "25KB")) == 2  # earlier shards there
    assert "pass --overwrite" in capsys.readouterr().err
    with pytest.raises(readers.InputError, match="had already replaced earlier shards"):
        discovery.find_inputs([str(out)])
    assert reshard.run(_args(inputs, out, "--target-size", "25KB", "--overwrite")) == 0
    assert _files(out) == _files(clean)
