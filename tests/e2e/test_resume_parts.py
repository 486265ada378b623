"""Work finished is never done twice (issue 24 part 1): a work item's parts, once written whole,
survive the run's death (kill -9 of the whole job at a checkpoint, runtime/faults.py), and the
rerun of the same command reuses them (dataio/parts.py), byte-identical to a clean run; a stem
of one item is committed as soon as its item is done; a changed option never reuses stale parts;
the bad records of a reused item are still reported and counted; an interrupt says what is kept.

The kills are at checkpoints, by count (TOKENBEAM_FAULT, job-wide with a counter file), never by
clock; subprocess timeouts are hang detectors.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from runtime import faults
from dataio import parts
from dataio.manifest import COMMITS_DIR

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bench"))
import fault_injection as fi  # noqa: E402

pytestmark = pytest.mark.slow

SPLIT = ["--split-bytes", "20000"]  # the larger inputs are cut into several items


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Six inputs (some of several items), their tokenizer, and a clean traced run."""
    work = str(tmp_path_factory.mktemp("resume-parts"))
    corpus = fi.make_corpus(os.path.join(work, "corpus"), files=6, documents=120)
    tokenizer = fi.make_tokenizer(corpus, os.path.join(work, "tokenizer"))
    clean = os.path.join(work, "clean")
    trace = os.path.join(work, "trace")
    status, err = fi.run(fi.job_command(corpus, clean, tokenizer) + SPLIT,
                         env=fi._env(**{faults.TRACE_ENV: trace}))
    assert status == 0, err
    with open(trace, encoding="utf-8") as f:
        items = sum(1 for line in f if line.strip() == "sink.item_recorded")
    total = sum(os.path.getsize(os.path.join(corpus, n)) for n in os.listdir(corpus))
    return fi.Setup(corpus, tokenizer, clean, fi.shard_files(clean), {"items": items}, 0.0), total


def _records(output: str) -> list[dict]:
    folder = os.path.join(output, COMMITS_DIR)
    if not os.path.isdir(folder):
        return []
    return [json.load(open(os.path.join(folder, n), encoding="utf-8"))
            for n in sorted(os.listdir(folder)) if n.endswith(".json") and not n.startswith(".")]


def _run_id(output: str) -> str:
    with open(os.path.join(output, "metadata.json"), encoding="utf-8") as f:
        return json.load(f)["run_id"]


def _kept(output: str) -> tuple[int, int]:
    """(shards committed, item records kept) after a kill."""
    items = sum(len(keys) for keys in parts.done_items(output).values())
    return len(_records(output)), items


@pytest.mark.parametrize("workers", [1, 2])
def test_a_killed_run_keeps_its_finished_items_and_the_rerun_does_not_redo_them(
        setup, tmp_path, workers):
    s, total = setup
    output = str(tmp_path / "out")
    kill_at = max(2, s.arrivals["items"] // 2)
    cmd = fi.job_command(s.corpus, output, s.tokenizer, workers=workers) + SPLIT
    status, err = fi.run(cmd, env=fi._env(**{
        faults.FAULT_ENV: f"sink.item_recorded:{kill_at}",
        faults.COUNTER_ENV: str(tmp_path / "hits")}))
    assert status == -signal.SIGKILL, err
    committed, items = _kept(output)
    assert committed + items >= 1, "the kill left nothing finished"
    problems, _ = fi.inspect_killed(output)
    assert problems == []

    status, err = fi.run(cmd, env=fi._env())
    assert status == 0, err
    assert fi.shard_files(output) == s.reference  # byte-identical to the clean run
    assert fi.leftovers(output) == []  # no _parts/, no _temporary/, no temporaries
    rerun = _run_id(output)
    records = _records(output)
    tokenized = sum(r["input_bytes"] - r.get("reused_bytes", 0) for r in records
                    if r.get("run_id") == rerun)
    redone_everything = sum(r["input_bytes"] for r in records)
    # finished work was not done again: the killed run's commits and kept items count
    assert tokenized < redone_everything
    assert any(r.get("run_id") != rerun for r in records) or \
        any(r.get("reused_bytes") for r in records)


def test_a_changed_option_never_reuses_stale_parts(setup, tmp_path):
    s, _ = setup
    output = str(tmp_path / "out")
    cmd = fi.job_command(s.corpus, output, s.tokenizer) + SPLIT
    status, err = fi.run(cmd, env=fi._env(**{faults.FAULT_ENV: "sink.item_recorded:3",
                                            faults.COUNTER_ENV: str(tmp_path / "hits")}))
    assert status == -signal.SIGKILL, err
    assert _kept(output)[1] >= 1
    # the rerun without --append-eod: other fingerprints, so nothing kept may be used
    other = [a for a in cmd if a != "--append-eod"]
    status, err = fi.run(other, env=fi._env())
    assert status == 0, err
    reference = str(tmp_path / "reference")
    status, err = fi.run([a if a != output else reference for a in other], env=fi._env())
    assert status == 0, err
    assert fi.shard_files(output) == fi.shard_files(reference)
    assert all(not r.get("reused_bytes") for r in _records(output))
    assert not os.path.exists(os.path.join(output, parts.PARTS_DIR))


def test_a_reused_item_still_reports_and_counts_its_bad_records(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    lines = []
    for k in range(300):
        lines.append(json.dumps({"text": f"document {k} about rivers and stones " * 3}))
        if k % 50 == 7:
            lines.append("{not json")  # a bad record in every item
    good = tmp_path / "good"
    good.mkdir()
    (good / "good.jsonl").write_text("\n".join(x for x in lines if x.startswith("{\"")) + "\n",
                                     encoding="utf-8")
    tokenizer = fi.make_tokenizer(str(good), str(tmp_path / "tokenizer"))
    (corpus / "big.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    clean, output = str(tmp_path / "clean"), str(tmp_path / "out")
    split = ["--split-bytes", "6000"]
    status, err = fi.run(fi.job_command(str(corpus), clean, tokenizer) + split, env=fi._env())
    assert status == 0, err
    cmd = fi.job_command(str(corpus), output, tokenizer) + split
    status, err = fi.run(cmd, env=fi._env(**{faults.FAULT_ENV: "sink.item_recorded:3"}))
    assert status == -signal.SIGKILL, err
    assert _kept(output) == (0, 3)  # a stem of many items commits at the end: none yet
    plan = subprocess.run(cmd + ["--dry-run"], capture_output=True, text=True, cwd=fi.ROOT,
                          env=fi._env(), timeout=300)
    assert re.search(r"\d+ work items \(3 finished by an earlier run, reused\)", plan.stdout), \
        plan.stdout + plan.stderr
    status, err = fi.run(cmd, env=fi._env())
    assert status == 0, err
    assert re.search(r"resuming: 3 of \d+ work items were finished by an earlier run", err), err
    assert fi.shard_files(output) == fi.shard_files(clean)
    errors_file = os.path.join("_errors", "big.jsonl")
    with open(os.path.join(clean, errors_file), encoding="utf-8") as a, \
            open(os.path.join(output, errors_file), encoding="utf-8") as b:
        assert a.read() == b.read()  # the reused items' bad records listed again, in order
    (record,) = _records(output)
    assert 0 < record["reused_bytes"] < record["input_bytes"]


def test_an_interrupt_says_what_is_kept(setup, tmp_path):
    s, _ = setup
    output = str(tmp_path / "out")
    cmd = fi.job_command(s.corpus, output, s.tokenizer) + SPLIT
    env = fi._env(**{faults.FAULT_ENV: "sink.item_recorded:4", faults.SIGNAL_ENV: "STOP"})
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            cwd=fi.ROOT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        # paused at the 4th finished item (SIGSTOP of its group): interrupt it there
        _wait_stopped(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        os.killpg(proc.pid, signal.SIGCONT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stderr = stderr.decode()
    assert proc.returncode == 130, stderr
    line = [x for x in stderr.splitlines() if x.startswith("interrupted")]
    assert len(line) == 1, stderr
    found = re.fullmatch(r"interrupted \(SIGINT\): (\d+) of (\d+) shards committed, (\d+)% of "
                         r"the input's bytes tokenized and kept; rerun the same command to resume", line[0])
    assert found, line[0]
    committed, planned, share = map(int, found.groups())
    assert planned == 6 and committed == len(_records(output)) and 0 < share < 100


def _wait_stopped(pid: int, timeout: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.02)
    raise AssertionError("the job never reached its pause")


def test_parts_of_an_input_no_longer_planned_are_left_with_a_note(setup, tmp_path):
    """An input renamed since the kill (here: a file of the same name added in another folder,
    so both are named by their folder): its old kept items are not this run's to remove (another
    --input into this output could still use them); the run says so in one line."""
    s, _ = setup
    corpus = tmp_path / "nest"
    (corpus / "A").mkdir(parents=True)
    source = os.path.join(s.corpus, sorted(os.listdir(s.corpus))[0])
    with open(source, "rb") as f:
        (corpus / "A" / "x.jsonl").write_bytes(f.read())
    output = str(tmp_path / "out")
    cmd = fi.job_command(str(corpus), output, s.tokenizer) + SPLIT
    status, err = fi.run(cmd, env=fi._env(**{faults.FAULT_ENV: "sink.item_recorded:2"}))
    assert status == -signal.SIGKILL, err
    (corpus / "B").mkdir()
    (corpus / "B" / "x.jsonl").write_bytes((corpus / "A" / "x.jsonl").read_bytes())
    status, err = fi.run(cmd, env=fi._env())
    assert status == 0, err
    assert "holds the finished work items of 1 input(s) this run did not plan" in err, err
    assert len(parts.folders(output)) == 1


def test_an_input_of_one_item_writes_no_part_on_its_way_to_its_shards(setup, tmp_path):
    """Inputs of one item each (no --split-bytes): killed when the third is about to commit,
    the output holds no part of it (its batches were held in memory, to be written once, under
    their final names); the two before are committed, and the rerun equals a clean run."""
    s, _ = setup
    output = str(tmp_path / "out")
    cmd = fi.job_command(s.corpus, output, s.tokenizer)
    status, err = fi.run(cmd, env=fi._env(**{faults.FAULT_ENV: "sink.item_recorded:3"}))
    assert status == -signal.SIGKILL, err
    kept = os.path.join(output, parts.PARTS_DIR)
    written = [name for _, _, names in os.walk(kept) for name in names]
    assert written == [], f"parts written for one-item inputs: {written}"
    assert len(_records(output)) == 2
    status, err = fi.run(cmd, env=fi._env())
    assert status == 0, err
    clean = str(tmp_path / "clean")
    status, err = fi.run(fi.job_command(s.corpus, clean, s.tokenizer), env=fi._env())
    assert status == 0, err
    assert fi.shard_files(output) == fi.shard_files(clean)
    assert fi.leftovers(output) == []
