"""transforms/progress.py: the progress line (documents, MB, tokens, rates, ETA), when it comes,
the one job-level line the driver makes of several local workers' counts, and a cluster worker's
labelled line."""

import io
import logging
import multiprocessing
import os
import re

import pytest

from runtime import log
from runtime import workers
from transforms import progress

MB = 10**6  # the unit tokenbeam prints


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def lines(monkeypatch):
    log.setup("info")
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    handler = Keep()
    logging.getLogger(log.ROOT_NAME).addHandler(handler)
    yield seen
    logging.getLogger(log.ROOT_NAME).removeHandler(handler)


def test_a_line_at_each_interval_counted_at_batch_ends(lines):
    clock = Clock()
    meter = progress.Meter(progress.ProgressPlan(interval=1000, bar=False), clock=clock)
    clock.now += 50  # set-up and the stages before the first batch do not count
    meter.begin()
    for _ in range(5):  # 400 documents a batch: lines at the batch ends past 1000 and 2000
        clock.now += 1
        meter.add(documents=400, num_bytes=MB, tokens=5000)
    assert len(lines) == 2
    assert lines[0].startswith("Processed 1,200 documents, 3.0 MB, 15,000 tokens (400 docs/s, "
                               "1.00 MB/s, 5,000 tokens/s)")
    assert lines[1].startswith("Processed 2,000 documents")
    meter.add(documents=5000, num_bytes=0, tokens=0)
    assert len(lines) == 3 and lines[2].startswith("Processed 7,000")  # one line, not five


def test_no_progress_with_interval_zero(lines):
    meter = progress.Meter(progress.ProgressPlan(interval=0, bar=False))
    assert meter.add(documents=10**6, num_bytes=1, tokens=1) is None
    assert lines == []


def test_eta_of_the_job():
    plan = progress.ProgressPlan(planned_bytes=100 * MB)
    text = progress.line(plan, documents=10, num_bytes=25 * MB, tokens=7, elapsed=10.0)
    assert text.endswith("; 25% of 100.0 MB planned, ETA 0:30")
    assert "25.0 MB" in text and "2.50 MB/s" in text  # MB = 10^6 bytes, lines and rates alike


def test_no_eta_without_a_comparable_plan():
    assert progress.eta(progress.ProgressPlan(), done_bytes=10, elapsed=1.0) == ""
    assert progress.planned_bytes([("jsonl", 10), ("jsonl", 5)]) == 15
    assert progress.planned_bytes([("jsonl", 10), ("jsonl.gz", 5)]) == 0
    assert progress.planned_bytes([("parquet", 10)]) == 0
    assert progress.planned_bytes([]) == 0


def test_routed_texts_add_up():
    meter = progress.Meter(progress.ProgressPlan(interval=1, bar=False))
    meter.add(documents=1, num_bytes=1, tokens=1, routed=2)
    text = meter.add(documents=1, num_bytes=1, tokens=1, routed=3)
    assert "; 5 texts routed to the reference tokenizer" in text


def test_a_cluster_workers_line_says_it_is_its_own(lines):
    meter = progress.Meter(progress.ProgressPlan(interval=1, labelled=True))
    text = meter.add(documents=1, num_bytes=1, tokens=1)
    assert text.startswith(f"worker {os.getpid()}@") and "(this process only): Processed 1 " in text


def _worker(folder, batches, ready, go):
    """A local worker process: adds ``batches`` of 10 documents (1 MB each) to its meter."""
    meter = progress.Meter(progress.ProgressPlan(interval=10, folder=folder, planned_bytes=10 * MB))
    ready.set()
    go.wait(30)
    for _ in range(batches):
        assert meter.add(documents=10, num_bytes=MB, tokens=100) is None  # no line of its own
    meter.flush()  # the bundle's end: what the throttle held back reaches the driver


def test_local_workers_make_one_job_line(lines):
    """Two worker processes with uneven shares (8 and 2 batches): the driver's lines are the
    job's (all documents, one fraction of the job's planned bytes), never a worker's."""
    folder = progress.worker_folder()
    plan = progress.ProgressPlan(interval=10, planned_bytes=10 * MB, folder=folder, bar=False)
    job = progress.JobProgress(plan, poll=3600)  # read by hand below, not by its thread
    context = multiprocessing.get_context("fork")
    ready, go = context.Event(), context.Event()
    procs = [context.Process(target=_worker, args=(folder, n, ready, go)) for n in (8, 2)]
    for p in procs:
        p.start()
    ready.wait(30)
    go.set()
    while any(p.is_alive() for p in procs):
        job.update()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    job.close()
    assert not os.path.exists(folder)
    assert lines and all(line.startswith("Processed ") for line in lines), lines
    documents = [int(re.match(r"Processed ([\d,]+) documents", line)[1].replace(",", ""))
                 for line in lines]
    percents = [int(re.search(r"; (\d+)% of 10.0 MB planned, ETA ", line)[1]) for line in lines]
    assert documents == sorted(documents) and percents == sorted(percents)
    assert documents[-1] == 100 and percents[-1] == 100 and lines[-1].endswith("ETA 0:00")
    assert "10.0 MB, 1,000 tokens" in lines[-1]


def test_a_worker_notes_at_most_every_note_every_seconds_and_at_a_bundles_end():
    clock, folder = Clock(), progress.worker_folder()
    meter = progress.Meter(progress.ProgressPlan(interval=1, folder=folder), clock=clock)
    meter.add(documents=1, num_bytes=1, tokens=1)
    meter.add(documents=1, num_bytes=1, tokens=1)
    assert [n["documents"] for n in workers.noted_counts(folder)] == [1]
    clock.now += progress.NOTE_EVERY
    meter.add(documents=1, num_bytes=1, tokens=1)
    meter.add(documents=1, num_bytes=1, tokens=1)
    assert [n["documents"] for n in workers.noted_counts(folder)] == [3]
    meter.flush()
    assert [n["documents"] for n in workers.noted_counts(folder)] == [4]
    progress.JobProgress(progress.ProgressPlan(interval=1, folder=folder, bar=False)).close()


def test_the_driver_reports_nothing_before_any_count(lines):
    folder = progress.worker_folder()
    job = progress.JobProgress(progress.ProgressPlan(interval=1, folder=folder, bar=False))
    assert job.update() is None
    job.close()
    assert lines == [] and workers.noted_counts(folder) == []


def test_duration():
    assert progress.duration(59.6) == "1:00"
    assert progress.duration(3725) == "1:02:05"
    assert progress.duration(-3) == "0:00"


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_bar_on_a_terminal(lines):
    out = Terminal()
    meter = progress.Meter(progress.ProgressPlan(interval=10, planned_bytes=1000), stream=out)
    assert meter.add(documents=20, num_bytes=500, tokens=50) is None
    meter.close()
    assert "tokenize" in out.getvalue() and lines == []
    # a local worker process notes its counts, whatever its stderr: the driver shows the bar
    folder = progress.worker_folder()
    worker = progress.Meter(progress.ProgressPlan(interval=10, folder=folder), stream=Terminal())
    assert worker.add(documents=20, num_bytes=500, tokens=50) is None
    driver_out = Terminal()
    job = progress.JobProgress(progress.ProgressPlan(interval=10, planned_bytes=1000,
                                                     folder=folder), stream=driver_out)
    assert job.update() is None
    assert (job.meter.documents, job.meter.num_bytes) == (20, 500)
    job.close()
    assert "tokenize" in driver_out.getvalue() and "1.00k" in driver_out.getvalue()
    assert lines == []


def test_a_terminal_of_no_width_gets_lines_not_a_bar(lines):
    """`script` with no controlling terminal gives a pty of 0 columns, where tqdm draws nothing:
    the progress is told in lines there."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
    with os.fdopen(follower, "w") as out:
        meter = progress.Meter(progress.ProgressPlan(interval=10, planned_bytes=1000), stream=out)
        assert meter.add(documents=20, num_bytes=500, tokens=50) is not None  # a line
        meter.close()
    os.close(leader)


def test_one_meter_per_process_and_run():
    plan = progress.ProgressPlan(interval=5, run="r1")
    assert progress.meter(plan) is progress.meter(plan)
    assert progress.meter(plan) is not progress.meter(progress.ProgressPlan(interval=5, run="r2"))
    progress.close_all()
