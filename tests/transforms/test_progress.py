"""transforms/progress.py: the progress line (documents, MB, tokens, rates, ETA), when it comes,
and the ETA with several workers."""

import io
import logging

import pytest

from dataio import log
from transforms import progress


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
        meter.add(documents=400, num_bytes=2**20, tokens=5000)
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


def test_eta_of_one_worker():
    plan = progress.ProgressPlan(planned_bytes=100 * 2**20)
    text = progress.line(plan, documents=10, num_bytes=25 * 2**20, tokens=7, elapsed=10.0)
    assert text.endswith("; 25% of 100.0 MB planned, ETA 0:30")


def test_eta_of_a_workers_share_says_so():
    plan = progress.ProgressPlan(planned_bytes=100 * 2**20, workers=2)
    text = progress.eta(plan, done_bytes=25 * 2**20, elapsed=10.0)
    assert text == "; 50% of its share (100.0 MB planned / 2 workers), ETA of its share 0:10"
    past = progress.eta(plan, done_bytes=60 * 2**20, elapsed=10.0)
    assert "100% of its share" in past and past.endswith("0:00")


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


def test_several_workers_name_the_process(lines):
    meter = progress.Meter(progress.ProgressPlan(interval=1, workers=2))
    text = meter.add(documents=1, num_bytes=1, tokens=1)
    assert text.startswith("worker ") and ": Processed 1 documents" in text


def test_duration():
    assert progress.duration(59.6) == "1:00"
    assert progress.duration(3725) == "1:02:05"
    assert progress.duration(-3) == "0:00"


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_bar_on_a_terminal_with_one_worker(lines):
    out = Terminal()
    meter = progress.Meter(progress.ProgressPlan(interval=10, planned_bytes=1000), stream=out)
    assert meter.add(documents=20, num_bytes=500, tokens=50) is None
    meter.close()
    assert "tokenize" in out.getvalue() and lines == []
    several = progress.Meter(progress.ProgressPlan(interval=10, workers=2), stream=Terminal())
    assert several.add(documents=20, num_bytes=500, tokens=50) is not None  # lines, no bars


def test_one_meter_per_process_and_run():
    plan = progress.ProgressPlan(interval=5, run="r1")
    assert progress.meter(plan) is progress.meter(plan)
    assert progress.meter(plan) is not progress.meter(progress.ProgressPlan(interval=5, run="r2"))
    progress.close_all()
