"""reshard's commit cannot be turned against its user (dataio/jsonl_sink.py, step 3; issue 23):

The whole-job runs; the unit tests are in tests/pipelines/test_reshard_safety.py."""

import os
import signal
import subprocess
import sys
import time

import pytest
from dataio import jsonl_sink
from test_reshard_commit_e2e import ROOT, _args, _corpus
from tests.pipelines.test_reshard_commit import _files
from tests.pipelines.test_reshard_safety import PLANTED_TEMPORARY, _plant


def _cli(args, *, cwd=ROOT, env=None, **popen):
    """``python -m pipelines.reshard ARGS`` in its own session (a fault hook signals its
    process group); returns the Popen, or with no ``popen`` keywords, the finished run."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBEAM_FAULT")}
    full.update(PYTHONPATH=ROOT, **(env or {}))
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.reshard", *map(str, args)],
                            cwd=cwd, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, **popen)
    return proc


def _finished(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)  # a hang detector, not a timing
    return proc.returncode, out, err


def _one_line(err, expected):
    lines = [line for line in err.splitlines() if expected in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_planted_manifest_deletes_nothing_and_is_refused_in_one_line(tmp_path):
    victim = tmp_path / "v" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("victim\n")
    inputs, out = _corpus(tmp_path / "in"), tmp_path / "out"
    _plant(out, adding=[[PLANTED_TEMPORARY, "../v/victim.txt"]])
    status, _, err = _finished(_cli(_args(inputs, out, "--target-size", "50KB")))
    line = _one_line(err, "not a manifest reshard wrote")
    assert status == 2 and str(out / jsonl_sink.MANIFEST_NAME) in line and "remove it" in line
    assert victim.read_text() == "victim\n"
    assert sorted(os.listdir(out)) == [jsonl_sink.MANIFEST_NAME]  # nothing written either
    (out / jsonl_sink.MANIFEST_NAME).unlink()  # the fix the line names
    status, _, err = _finished(_cli(_args(inputs, out, "--target-size", "50KB")))
    assert status == 0, err


def _parquet_corpus(folder):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    for k in range(2):
        rows = [{"text": f"document {k}-{i} " + "x" * 80} for i in range(200)]
        pq.write_table(pa.Table.from_pylist(rows), folder / f"web_{k}.parquet", row_group_size=50)
    return folder


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_an_input_truncated_while_reading_commits_nothing(tmp_path, kind):
    inputs = _corpus(tmp_path / "in") if kind == "jsonl" else _parquet_corpus(tmp_path / "in")
    victim = sorted(inputs.iterdir())[1]
    planned = victim.stat().st_size
    out = tmp_path / "out"
    env = {"TOKENBEAM_FAULT": "reshard.before_write:1",
           "TOKENBEAM_FAULT_TRUNCATE": f"{victim}:{planned // 3}"}
    status, _, err = _finished(_cli(_args(inputs, out, "--target-size", "20KB"), env=env))
    line = _one_line(err, "changed while reading")
    assert status == 1, err
    assert f"{victim} changed while reading (planned {planned} bytes, found {planned // 3})" \
        in line and line.endswith("; rerun")
    assert not (out.exists() and [n for n in os.listdir(out)])  # nothing committed, no leftovers


def test_a_rerun_from_another_working_folder_settles_the_dead_runs_commit_in_the_output(tmp_path):
    inputs = _corpus(tmp_path / "in")
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    proc = _cli(_args(inputs, "rs10", "--target-size", "20KB"), cwd=first,
                env={"TOKENBEAM_FAULT": "reshard.between_renames:2"})
    status, _, err = _finished(proc)
    assert status == -signal.SIGKILL, err
    out = first / "rs10"
    dead = [n for n in os.listdir(out) if jsonl_sink.is_temporary_dir(n)]
    assert len(dead) == 1
    decoy = second / "rs10" / dead[0] / "keep.txt"  # where a cwd-relative record would point
    decoy.parent.mkdir(parents=True)
    decoy.write_text("not reshard's\n")
    status, _, err = _finished(_cli(_args(inputs, out, "--target-size", "20KB"), cwd=second))
    assert status == 0 and "rolled back the unfinished commit" in err, err
    assert decoy.read_text() == "not reshard's\n"
    assert not [n for n in os.listdir(out) if n.startswith(".")]  # the dead run's temporaries
    clean = tmp_path / "clean"
    status, _, err = _finished(_cli(_args(inputs, clean, "--target-size", "20KB")))
    assert status == 0 and _files(out) == _files(clean), err


def _stopped(pid) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def test_a_second_run_is_refused_while_the_first_lives_and_a_dead_runs_lock_is_taken_over(
        tmp_path):
    inputs, out = _corpus(tmp_path / "in"), tmp_path / "out"
    # the first run pauses (SIGSTOP) inside its commit: one shard renamed, the others still
    # temporaries, the manifest unfinished (what a second run used to "roll back")
    first = _cli(_args(inputs, out, "--target-size", "20KB"),
                 env={"TOKENBEAM_FAULT": "reshard.between_renames:1",
                      "TOKENBEAM_FAULT_SIGNAL": "STOP"})
    try:
        for _ in range(600):  # a hang detector: the first run reaches its checkpoint
            if _stopped(first.pid) or first.poll() is not None:
                break
            time.sleep(0.5)
        assert _stopped(first.pid), first.poll()
        temporaries = [n for n in os.listdir(out) if jsonl_sink.is_temporary_dir(n)]
        assert len(temporaries) == 1
        status, _, err = _finished(_cli(_args(inputs, out, "--target-size", "20KB")))
        line = _one_line(err, "is in use by another run")
        assert status == 1 and f"pid {first.pid}" in line, err
        assert "rolled back" not in err and (out / temporaries[0]).is_dir()
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    status, _, err = _finished(first)
    assert status == 0, err
    clean = _files(out)

    # a run killed while holding the lock: the next one takes it over, saying whose it was
    status, _, err = _finished(_cli(_args(inputs, out, "--target-size", "20KB", "--overwrite"),
                                    env={"TOKENBEAM_FAULT": "reshard.before_write:2"}))
    assert status == -signal.SIGKILL, err
    assert [n for n in os.listdir(out) if jsonl_sink.is_temporary_dir(n)]
    status, _, err = _finished(_cli(_args(inputs, out, "--target-size", "20KB", "--overwrite")))
    assert status == 0, err
    _one_line(err, "taking over")
    assert "no longer running" in err
    assert not [n for n in os.listdir(out) if n.startswith(".")] and _files(out) == clean


def test_a_dying_reshard_worker_names_its_last_work_item(tmp_path):
    """reshard --workers 2 with one worker killed in its write pass: the one line names the
    shard and inputs it was writing (not "it had taken no work yet"); nothing is committed."""
    inputs, out = _corpus(tmp_path / "in"), tmp_path / "out"
    proc = _cli([*_args(inputs, out, "--target-size", "20KB"), "--workers", "2"],
                env={"TOKENBEAM_FAULT": "reshard.before_write:1", "TOKENBEAM_FAULT_SCOPE": "process",
                     "TOKENBEAM_FAULT_COUNTER": str(tmp_path / "hits")})
    status, _, err = _finished(proc)
    assert status == 1, err
    line = _one_line(err, "was killed by SIGKILL")
    assert "its last work item: writing shard " in line and str(inputs) in line, line
    assert not [n for n in os.listdir(out) if n.endswith(".jsonl")] if out.exists() else True
