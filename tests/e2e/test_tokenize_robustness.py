"""The driver of `python -m pipelines.tokenize` fails cleanly, early and alone (issue 12, items
4, 7, 8, 9, 12): one run per output, one line (no traceback) per anticipated failure with the
documented exit status, checks before any input is read, workers that die with the driver."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from dataio import indexed

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLED = "tokenizer backend:"  # printed once the inputs have been sampled: work has started


def command(inputs, output, tokenizer, *extra, kind="HuggingFaceTokenizer"):
    return [sys.executable, "-m", "pipelines.tokenize", "--input", str(inputs), "--output",
            str(output), "--tokenizer-type", kind, "--tokenizer-model", str(tokenizer),
            "--log-interval", "0", *map(str, extra)]


def run_cli(*args, **kwargs):
    proc = subprocess.run(command(*args, **kwargs), cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def start(*args, **kwargs):
    return subprocess.Popen(command(*args, **kwargs), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for(predicate, *, proc=None, deadline_s=300, what="condition"):
    """Liveness: poll until ``predicate()`` (a generous deadline, not a timing assertion)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the run ended (status {proc.returncode}) before {what}: "
                        f"{proc.stderr.read()[-2000:]}")
        time.sleep(0.01)
    pytest.fail(f"no {what} within {deadline_s} s")


def has_progress(out):
    """Work done that a kill keeps: a shard committed (an input of one work item is written
    straight to its shard, dataio/sink.py), or a part written under _parts/ (a work item's of a
    larger input, dataio/parts.py)."""
    commits, kept = out / "_commits", out / "_parts"
    return (commits.is_dir() and any(n.endswith(".json") for n in os.listdir(commits))) or \
        (kept.is_dir() and any(f.endswith(".idx") for _, _, fs in os.walk(kept) for f in fs))


def one_line_error(stderr):
    """The lines a user sees, without the noise Beam prints at import and the progress lines
    naming the backend and the number of workers."""
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines()
            if line and "apitools not found" not in line
            and not line.startswith((SAMPLED, "workers: "))]


@pytest.fixture(scope="module")
def big_input(corpus_dir, tmp_path_factory):
    """24 files: enough work that a run is still going when the test acts on it."""
    folder = tmp_path_factory.mktemp("big")
    for k in range(8):
        for src in sorted(corpus_dir.glob("*.jsonl")):
            (folder / f"{src.stem}_{k}.jsonl").write_bytes(src.read_bytes())
    return folder


SLOW = ("--batch-documents", "16")  # many small parts: a run lasts long enough to interrupt


# --- item 4: one run per output -----------------------------------------------------------

def test_second_run_is_refused_naming_the_first_which_completes(big_input, hf_tokenizer,
                                                               tmp_path):
    out = tmp_path / "out"
    first = start(big_input, out, hf_tokenizer, "--batch-documents", "4")
    wait_for(lambda: (out / "_lock").exists(), proc=first, what="the first run's lock")
    status, _, err = run_cli(big_input, out, hf_tokenizer)
    assert first.poll() is None, "the first run ended too soon for this test"
    lines = one_line_error(err)
    assert status == 1, err
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "in use by another run" in lines[0]
    assert f"pid {first.pid}" in lines[0] and socket.gethostname() in lines[0]
    assert SAMPLED not in err, "refused before any input was read"
    _, first_err = first.communicate(timeout=600)
    assert first.returncode == 0, first_err
    assert len(list((out / "_commits").glob("*.json"))) == 24
    assert not (out / "_temporary").exists() and not (out / "_lock").exists()


def test_lock_of_a_killed_run_is_taken_over(big_input, hf_tokenizer, tmp_path):
    out = tmp_path / "out"
    killed = start(big_input, out, hf_tokenizer, *SLOW)
    wait_for(lambda: has_progress(out), proc=killed, what="the run's first work")
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    holder = json.loads((out / "_lock").read_text())
    assert holder["pid"] == killed.pid and holder["host"] == socket.gethostname()
    status, _, err = run_cli(big_input, out, hf_tokenizer)
    assert status == 0, err
    assert f"pid {killed.pid}" in err and "no longer running" in err
    assert len(list((out / "_commits").glob("*.json"))) == 24
    assert not (out / "_temporary").exists() and not (out / "_lock").exists()


# --- items 7 and 8: one line, the documented status, before any input is read --------------

def test_output_that_is_a_file(corpus_dir, hf_tokenizer, tmp_path):
    (tmp_path / "out").write_text("not a folder")
    status, _, err = run_cli(corpus_dir, tmp_path / "out", hf_tokenizer)
    assert status == 2
    assert one_line_error(err) == [f"error: --output {tmp_path / 'out'} is a file; give a folder "
                                   "(created if missing)"]
    assert SAMPLED not in err


@pytest.fixture
def tmpfs(tmp_path):
    """A small tmpfs of our own (tests run as root); skipped where mounting is not allowed."""
    mounted = []

    def mount(size="300k", read_only=False):
        folder = tmp_path / f"mnt{len(mounted)}"
        folder.mkdir()
        opts = f"size={size}" + (",ro" if read_only else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_read_only_output(corpus_dir, hf_tokenizer, tmpfs):
    out = tmpfs(read_only=True) / "out"  # as root chmod stops nothing; a read-only mount does
    status, _, err = run_cli(corpus_dir, out, hf_tokenizer)
    assert status == 2, err
    assert one_line_error(err) == [f"error: --output {out}: cannot write there: read-only file "
                                   "system; give --output a writable folder"]
    assert SAMPLED not in err


def test_disk_full(big_input, hf_tokenizer, tmpfs):
    out = tmpfs(size="300k") / "out"  # room for the probe, not for ~1.5 MB of parts and shards
    status, _, err = run_cli(big_input, out, hf_tokenizer)
    assert status == 1, err
    assert one_line_error(err) == [f"error: --output {out}: no space left on the device; free "
                                   "some space, then rerun the same command to resume"]
    assert not [n for n in os.listdir(out) if n.endswith(".idx")
                and not indexed.is_temporary_name(n)
                and not indexed.validate(str(out / n[:-4])).ok]


@pytest.mark.parametrize("model", ["missing", "folder"])
def test_sentencepiece_model_missing_or_a_folder(corpus_dir, tmp_path, model):
    path = tmp_path / "spm"
    if model == "folder":
        path.mkdir()
        (path / "tok.model").write_bytes(b"x")
    status, _, err = run_cli(corpus_dir, tmp_path / "out", path, kind="SentencePieceTokenizer")
    assert status == 2, err
    expected = (f"error: --tokenizer-model {path}: no such file; give the SentencePiece .model "
                "file" if model == "missing" else
                f"error: --tokenizer-model {path} is a folder; give the SentencePiece .model "
                "file (in it: tok.model)")
    assert one_line_error(err) == [expected]
    assert SAMPLED not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_on_bad_record_fail_says_it_once(hf_tokenizer, tmp_path, workers):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "x.jsonl").write_text('{"text": "ok"}\n{"text": 1}\n')
    status, _, err = run_cli(tmp_path / "in", tmp_path / "out", hf_tokenizer,
                             "--on-bad-record", "fail", "--workers", workers)
    assert status == 1, err
    lines = one_line_error(err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert lines[0].endswith("x.jsonl:2: value of key 'text' is not a string or list of strings "
                             "(got int) (byte offset 15); use --on-bad-record skip to leave bad "
                             "records out and list them in _errors/")
    assert not (tmp_path / "out" / "_temporary").exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_is_one_line_and_the_rerun_resumes(big_input, hf_tokenizer, tmp_path, signum):
    out = tmp_path / "out"
    proc = start(big_input, out, hf_tokenizer, *SLOW, "--workers", 2)
    wait_for(lambda: has_progress(out), proc=proc, what="the run's first work")
    os.killpg(proc.pid, signum)  # as Ctrl-C does: the whole process group, workers included
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    (line,) = one_line_error(err)
    # what is kept: the shards committed and the share of the input done (issue 24)
    assert re.fullmatch(rf"interrupted \({name}\): \d+ of 24 shards committed, \d+% of the "
                        r"input's bytes tokenized and kept; rerun the same command to resume", line), line
    assert not (out / "_lock").exists()
    status, _, err = run_cli(big_input, out, hf_tokenizer)
    assert status == 0, err
    assert len(list((out / "_commits").glob("*.json"))) == 24


# --- item 9: workers die with the driver ---------------------------------------------------

def _session_processes(sid):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # session id; zombies are already dead
            found.append(int(pid))
    return found


def _state(out):
    return sorted((p, os.stat(os.path.join(d, p)).st_mtime_ns)
                  for d, _, fs in os.walk(out) for p in fs if "_temporary" not in d)


def test_workers_die_with_a_killed_driver(big_input, hf_tokenizer, tmp_path):
    out = tmp_path / "out"
    driver = start(big_input, out, hf_tokenizer, "--batch-documents", 4, "--workers", 2)
    commits = out / "_commits"
    # Mid-commit: the workers are finalizing shards (many parts each: finalizing takes a while).
    wait_for(lambda: commits.is_dir() and any(commits.iterdir()), proc=driver,
             what="the first commit")
    os.kill(driver.pid, signal.SIGKILL)  # the driver alone, as the OOM killer would
    driver.wait()
    at_death = _state(out)
    wait_for(lambda: not _session_processes(driver.pid), deadline_s=60,
             what="end of every worker after the driver died")
    time.sleep(1)
    assert _state(out) == at_death, "something was committed after the driver died"
    status, _, err = run_cli(big_input, out, hf_tokenizer)
    assert status == 0, err


# --- item 12 --------------------------------------------------------------------------------

def test_rerun_that_skips_everything_leaves_no_temporary(corpus_dir, hf_tokenizer, tmp_path):
    out = tmp_path / "out"
    assert run_cli(corpus_dir, out, hf_tokenizer)[0] == 0
    # A run killed after its last commit, before its cleanup, leaves _temporary/ behind.
    (out / "_temporary" / "20250101T000000Z-deadbeef" / "c0_web_text_document").mkdir(
        parents=True)
    status, stdout, err = run_cli(corpus_dir, out, hf_tokenizer)
    assert status == 0, err
    assert stdout.count("skip c") == 3
    assert not (out / "_temporary").exists()
