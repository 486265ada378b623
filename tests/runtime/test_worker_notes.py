"""runtime.workers: what a local worker notes about its work, and the driver's line when one dies;
runtime.loopback: wildcard gRPC addresses become 127.0.0.1 (the jobs: tests/e2e/test_local_workers.py)."""

import os
import signal

import pytest

from runtime import loopback, workers


def test_note_is_read_back_by_pid(tmp_path, monkeypatch):
    monkeypatch.setenv(workers.NOTES_ENV, str(tmp_path))
    assert workers.noted_work(str(tmp_path), os.getpid()) is None
    workers.note_work("reading a.jsonl bytes 0-10")
    workers.note_work("committing shard a_text_document")
    assert workers.noted_work(str(tmp_path), os.getpid()) == "committing shard a_text_document"
    assert sorted(p.name for p in tmp_path.iterdir()) == [str(os.getpid())]  # no temporary left
    workers.note_work("reading b")  # shorter than the last: nothing of the last is read
    assert workers.noted_work(str(tmp_path), os.getpid()) == "reading b"


def test_a_long_note_is_cut_whole_characters_within_the_files_first_page(tmp_path, monkeypatch):
    monkeypatch.setenv(workers.NOTES_ENV, str(tmp_path))
    workers.note_work("reading /" + "é" * 5000)
    noted = workers.noted_work(str(tmp_path), os.getpid())
    assert noted.startswith("reading /é") and set(noted[9:]) == {"é"}
    assert (tmp_path / str(os.getpid())).stat().st_size <= 4096


def test_a_forked_worker_notes_in_its_own_file(tmp_path, monkeypatch):
    monkeypatch.setenv(workers.NOTES_ENV, str(tmp_path))
    workers.note_work("parent's item")
    pid = os.fork()
    if pid == 0:
        workers.note_work("child's item")
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    assert workers.noted_work(str(tmp_path), pid) == "child's item"
    assert workers.noted_work(str(tmp_path), os.getpid()) == "parent's item"


def test_a_damaged_note_reads_as_none(tmp_path):
    (tmp_path / "5").write_bytes(b"garbage")
    assert workers.noted_work(str(tmp_path), 5) is None


def test_note_outside_a_worker_or_after_the_driver_is_a_no_op(tmp_path, monkeypatch):
    monkeypatch.delenv(workers.NOTES_ENV, raising=False)
    workers.note_work("reading a.jsonl")  # no folder: nothing written, nothing raised
    monkeypatch.setenv(workers.NOTES_ENV, str(tmp_path / "gone"))
    workers.note_work("reading a.jsonl")


@pytest.mark.parametrize("status, last, expected", [
    (-signal.SIGKILL, "reading /d/a.jsonl bytes 0-100",
     "worker 2 of 3 (pid 77) was killed by SIGKILL (out of memory?); its last work item: "
     "reading /d/a.jsonl bytes 0-100; the other workers were stopped; rerun the same command "
     "to resume"),
    (-signal.SIGSEGV, None,
     "worker 2 of 3 (pid 77) was killed by SIGSEGV; it had taken no work yet; the other "
     "workers were stopped; rerun the same command to resume"),
    (3, "committing shard a\nb", "worker 2 of 3 (pid 77) exited with status 3; its last work "
     "item: committing shard a\\nb; the other workers were stopped; rerun the same command to "
     "resume"),
])
def test_death_message_is_one_line(status, last, expected):
    assert workers.death_message(number=2, total=3, pid=77, status=status, last=last) == expected


@pytest.mark.parametrize("given, expected", [
    ("[::]:0", "127.0.0.1:0"), ("0.0.0.0:80", "127.0.0.1:80"), ("*:5", "127.0.0.1:5"),
    (":7", "127.0.0.1:7"), ("10.0.0.2:9", "10.0.0.2:9"), ("localhost:9", "localhost:9"),
])
def test_only_wildcard_addresses_are_rewritten(given, expected):
    assert loopback.loopback_address(given) == expected
