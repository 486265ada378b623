"""reshard's commit cannot be turned against its user (dataio/jsonl_sink.py, step 3; issue 23):

- a manifest planted or edited in the output deletes nothing outside the output's own shards and
  temporaries: it is refused with one line (exit 2) naming it and the fix;
- an input truncated while the job reads it commits nothing ("changed while reading; rerun");
- the manifest records temporaries relative to the output, so a rerun from another working
  folder settles a dead run's commit in the output, not under the new working folder;
- one run at a time per output (dataio/lock.py, as tokenize): a second run is refused while the
  first lives, a dead run's lock is taken over.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from runtime import errors
from dataio import jsonl_sink
from test_reshard_commit import ROOT, _args, _corpus, _files

PLANTED_TEMPORARY = "/nonexistent/.reshard-x.tmp/a.part"


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


def _tree(folder):
    return {os.path.relpath(os.path.join(d, n), folder): open(os.path.join(d, n), "rb").read()
            for d, _, names in os.walk(folder) for n in names}


def _plant(out, **manifest):
    out.mkdir(parents=True, exist_ok=True)
    (out / jsonl_sink.MANIFEST_NAME).write_text(json.dumps(
        {"version": 1, "complete": False, "files": {}, "previous": {}, "adding": [],
         "removing": [], **manifest}))


# -- item 1: a planted manifest ------------------------------------------------------------------


@pytest.mark.slow
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


@pytest.mark.parametrize("manifest", [
    {"adding": [[PLANTED_TEMPORARY, "../v/victim.txt"]]},
    {"adding": [[PLANTED_TEMPORARY, "/abs/victim.txt"]]},
    {"adding": [[".reshard-x.tmp/a.part", "en\n_00.jsonl"]]},
    {"adding": [[".reshard-x.tmp/a.part", "en_00.jsonl"]], "removing": ["../v/victim.txt"]},
    {"adding": [[".reshard-x.tmp/a.part", "en_00.jsonl"]], "removing": ["_lock"]},
    {"adding": [[".reshard-x.tmp/a.part", "en_00.jsonl"]], "previous": {"../v/victim.txt": 7}},
    {"adding": [[".reshard-x.tmp/a.part", "en_00.jsonl"]], "files": {"..": 7}},
    {"adding": [["../v/.reshard-x.tmp/a.part", "en_00.jsonl"]]},  # another folder's temporaries
    {"adding": [[".reshard-x.tmp/../../v/victim.txt", "en_00.jsonl"]]},
    {"adding": [["v/a.part", "en_00.jsonl"]]},  # a folder of the output that is no temporary
    {"adding": [[str(PLANTED_TEMPORARY), "en_00.jsonl"]]},  # absolute, cwd-relative: not ours
    {"adding": [[".reshard-x.tmp/a.part", "en_00.jsonl", "more"]]},
    {"complete": False, "lost": ["../v/victim.txt"], "adding": []},
], ids=lambda m: json.dumps(m)[:60])
def test_recover_and_readers_refuse_a_manifest_naming_anything_outside_the_output(
        tmp_path, manifest):
    victim = tmp_path / "v" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("victim\n")
    out = tmp_path / "out"
    _plant(out, **manifest)
    (out / "v").mkdir()
    (out / "v" / "a.part").write_text("x\n")
    (out / "en_00.jsonl").write_text("{}\n")
    (out / "_lock").write_text("")
    before = _tree(tmp_path)
    for settle in (jsonl_sink.recover, jsonl_sink.unfinished_shards,
                   lambda o: jsonl_sink.commit([], output=o)):
        with pytest.raises(jsonl_sink.ManifestError, match="not a manifest reshard wrote") as e:
            settle(str(out))
        assert errors.describe(e.value)[1] == errors.EXIT_USAGE
    assert "not a manifest reshard wrote" in jsonl_sink.refusal(str(out), {}, whole=True)
    assert _tree(tmp_path) == before  # nothing deleted, nothing written


# -- item 2: an input truncated while reshard reads it --------------------------------------------


def _parquet_corpus(folder):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    for k in range(2):
        rows = [{"text": f"document {k}-{i} " + "x" * 80} for i in range(200)]
        pq.write_table(pa.Table.from_pylist(rows), folder / f"web_{k}.parquet", row_group_size=50)
    return folder


@pytest.mark.slow
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


# -- item 3: temporaries recorded relative to the output --------------------------------------------


@pytest.mark.slow
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


# -- item 4: one run at a time -------------------------------------------------------------------


def _stopped(pid) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


@pytest.mark.slow
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


def test_an_unfinished_commit_recorded_by_an_earlier_version_is_still_rolled_back(tmp_path):
    """Before temporaries were recorded relative to the output, the manifest held their paths as
    the run spelled them: one in this output's own run folder is still settled."""
    out = tmp_path / "out"
    temp = out / ".reshard-0123456789ab.tmp"
    temp.mkdir(parents=True)
    (temp / "b.part").write_text("{}\n")
    (out / "en_00.jsonl").write_text("{}\n")  # renamed before the kill
    _plant(out, adding=[[str(temp / "a.part"), "en_00.jsonl"],
                        [str(temp / "b.part"), "en_01.jsonl"]])
    assert "1 of 2 shard(s) had been renamed" in jsonl_sink.recover(str(out))
    assert sorted(os.listdir(out)) == [jsonl_sink.MANIFEST_NAME]
    assert json.loads((out / jsonl_sink.MANIFEST_NAME).read_text())["complete"]


# -- a dying worker names what it was doing ------------------------------------------------------


@pytest.mark.slow
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
