"""The tokenize job's wiring (pipelines/tokenize/graph.py ``build``) in a TestPipeline, and its one
DoFn, _FinishFn (the last step of runs whose driver does not wait: runners/spark.py), driven
directly. The job is planned by the driver code itself (``tokenize.plan``) on a small JSONL
written here, with Megatron's NullTokenizer ("1 2 3" -> ids 1, 2, 3), so nothing is trained.
Whole runs through ``tokenize.run`` are the slow tier's (tests/e2e/test_tokenize.py)."""

import dataclasses
import json
import os

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from dataio import sink
from dataio.elements import ShardResult
from dataio.indexed import Counts
from runtime import errors
from pipelines import beam_options
from pipelines import tokenize
from pipelines.tokenize import driver, graph, outcome

RUN = "run-unit"


@pytest.fixture
def job(tmp_path, write_jsonl):
    write_jsonl("in/a.jsonl", [{"text": "1 2 3"}, {"text": "not numbers"}, {"text": "4"}])
    write_jsonl("in/b.jsonl", [{"text": "5 6"}])
    argv = ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
            "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--append-eod",
            "--log-interval", "0", "--max-bad-fraction", "0.5"]  # a.jsonl: 1 of 3 is bad
    planned = tokenize.plan(beam_options.parse(argv))
    planned.run_id = RUN
    return planned, argv


def test_build_writes_every_planned_shard_the_bad_records_and_finishes(job, make_pipeline):
    job, argv = job
    out = job.output
    with make_pipeline() as p:
        results = graph.build(p, job, finish_argv=argv)
        assert_that(results | beam.Map(lambda r: (r.shard, r.name, r.failed)), equal_to([
            ("a_text_document", "a_text_document_dc=2_sc=2_tc=6", None),
            ("b_text_document", "b_text_document_dc=1_sc=1_tc=3", None)]))
    errors = [json.loads(x) for x in open(os.path.join(out, "_errors", "a.jsonl"))]
    assert [(e["line"], e["reason"][:25]) for e in errors] == [(2, "the tokenizer failed on k")]
    meta = json.loads(open(os.path.join(out, "metadata.json")).read())  # written by _FinishFn
    assert meta["totals"] == {"shards": 2, "documents": 3, "sequences": 3, "tokens": 9}
    assert meta["run_id"] == RUN
    assert not os.path.exists(sink.temporary_dir(out, RUN))  # the run's parts are gone


def test_finish_fn_holds_no_options_ships_without_secrets_and_finishes(job, azure_storage_plan,
                                                                      ship, monkeypatch):
    from dataio import azure

    job, argv = job
    fn = graph._FinishFn(dataclasses.replace(job, options=None), argv, started="t0",
                            storage=azure_storage_plan)
    assert fn._job.options is None  # the options (flags, runner settings) stay on the driver
    worker = ship(fn)
    adopted = []
    monkeypatch.setattr(azure.state, "configure_worker", adopted.append)
    worker.setup()
    assert adopted == [azure_storage_plan]
    os.makedirs(sink.temporary_dir(job.output, RUN), exist_ok=True)
    assert list(worker.process(2, errors_written=[])) == []
    meta = json.loads(open(os.path.join(job.output, "metadata.json")).read())
    assert meta["started"] == "t0" and [s["status"] for s in meta["shards"]] == ["failed"] * 2
    assert not os.path.exists(sink.temporary_dir(job.output, RUN))
    worker.process(2, errors_written=[])  # idempotent: a retried bundle finishes again


class _Result:
    """A runner's result as the driver sees it: its counters, or none."""

    def __init__(self, counters=None, *, committed=True, fails=False):
        self._counters, self._committed, self._fails = counters or {}, committed, fails

    def metrics(self):
        if self._fails:
            raise NotImplementedError("this runner reports no metrics")
        from apache_beam.metrics.execution import MetricKey, MetricResult
        from apache_beam.metrics.metricbase import MetricName

        results = [MetricResult(MetricKey("WriteShards", MetricName(sink.METRICS, name)),
                                value if self._committed else None, value)
                   for name, value in self._counters.items()]

        class _Metrics:
            def query(self, _filter=None):
                return {"counters": results}

        return _Metrics()


def test_figures_come_from_committed_counters_and_none_when_the_runner_reports_none():

    counters = {"documents": 3, "tokens": 9, "shards_committed": 2}
    assert graph.figures(_Result(counters)) == counters
    # Portable runners (Flink's job server) may give attempted values only, Spark's jar none.
    assert graph.figures(_Result(counters, committed=False)) is None
    assert graph.figures(_Result(fails=True)) is None
    assert graph.figures(_Result({})) is None


def test_the_summary_takes_the_counters_else_the_commit_records(job, make_pipeline):
    job, argv = job
    with make_pipeline() as p:
        graph.build(p, job)
    results = outcome.collect_results(job)
    recorded = outcome.recorded_figures(job, results)
    assert recorded == outcome.Figures(documents=3, tokens=9, input_bytes=recorded.input_bytes,
                                        bad_records=1) and recorded.input_bytes > 0

    counters = graph.figures(p.result)
    assert outcome.counted_figures(job, results, counters) == recorded  # the same figures
    # counters that do not account for every committed shard are not trusted
    assert outcome.counted_figures(job, results, {**counters, "shards_committed": 1,
                                                   "documents": 99}) == recorded
    assert outcome.counted_figures(job, results, {**counters, "documents": 99}).documents == 99


def test_what_was_committed_comes_back_through_the_pipeline_as_the_records_say(job,
                                                                             make_pipeline):

    job, argv = job
    with make_pipeline() as p:
        graph.build(p, job)
    reported = graph.shard_results(p.result)
    from_records = outcome.collect_results(job)
    assert sorted(reported) == [s.shard for s in job.to_process]
    assert outcome.collect_results(job, reported) == from_records
    # metadata.json is the same whichever told the driver what was committed
    by_pipeline = outcome.finish(job, argv, started="t0", reported=reported)
    meta = json.loads(open(os.path.join(job.output, "metadata.json")).read())
    assert outcome.finish(job, argv, started="t0") == by_pipeline
    again = json.loads(open(os.path.join(job.output, "metadata.json")).read())
    assert {**meta, "finished": None} == {**again, "finished": None}
    assert [s["status"] for s in meta["shards"]] == ["written", "written"]
    # a shard the report misses (over the metrics' size limit) is read from its records
    second = job.to_process[1].shard
    assert outcome.collect_results(job, {second: reported[second]}) == from_records
    told = ShardResult(second, "told", Counts(7, 7, 7))
    assert outcome.collect_results(job, {second: told}) == [from_records[0], told]


def test_the_runner_hands_back_more_results_than_one_string_set_holds(make_pipeline):
    # Beam drops what a string set gets past 1 MB: 20,000 results of about 80 bytes are over it.
    many = [ShardResult(f"dump/part_{k:06d}_text_document", f"dump/part_{k:06d}_text_document"
                        "_dc=1_sc=1_tc=15", Counts(1, 1, 15), input_bytes=90)
            for k in range(20_000)]
    assert sum(len(sink.encode_result(r)) for r in many) > 1_000_000

    def report(_):
        for r in many:
            sink.report_result(r)
        return []

    with make_pipeline() as p:
        _ = p | beam.Create([None]) | beam.FlatMap(report)
    assert graph.shard_results(p.result) == {r.shard: r for r in many}


def test_progress_is_the_jobs_locally_and_labelled_per_process_on_a_cluster(job):
    """How progress is told (transforms/progress.py): one local process prints the job's lines;
    several note their counts for the driver's one line; a cluster's workers (None) label
    theirs, without an ETA."""
    job, _ = job
    job.config = dataclasses.replace(job.config, log_interval=10)
    planned = sum(f.size for f in job.files)
    one = driver.progress_plan(job, workers=1)
    assert (one.folder, one.labelled, one.planned_bytes) == ("", False, planned)
    several = driver.progress_plan(job, workers=2)
    try:
        assert os.path.isdir(several.folder) and oct(os.stat(several.folder).st_mode)[-3:] == "700"
        assert not several.labelled and several.planned_bytes == planned
    finally:
        os.rmdir(several.folder)
    cluster = driver.progress_plan(job, workers=None)
    assert (cluster.folder, cluster.labelled, cluster.planned_bytes) == ("", True, 0)
    job.config = dataclasses.replace(job.config, log_interval=0)  # no progress: no folder
    assert driver.progress_plan(job, workers=2).folder == ""


def test_the_summary_gives_wall_and_job_seconds_in_mb_of_10_6_bytes(job, capsys):
    job, _ = job
    figures = outcome.Figures(documents=3, tokens=9, input_bytes=5_000_000, bad_records=0)
    outcome.report(job, [], seconds=2.0, wall=4.0, figures=figures)
    rows = dict(line.strip().rsplit(None, 1) for line in capsys.readouterr().out.splitlines()[1:])
    assert rows["input MB"] == "5.00" and rows["MB/s"] == "1.25"  # by the wall time
    assert rows["wall seconds"] == "4.0" and rows["job seconds"] == "2.0"
    outcome.report(job, [], seconds=2.0, figures=figures)  # the wall time unknown
    rows = dict(line.strip().rsplit(None, 1) for line in capsys.readouterr().out.splitlines()[1:])
    assert rows["wall seconds"] == "-" and rows["MB/s"] == "2.50"


@pytest.mark.parametrize("workers, shuffled", [(1, False), (2, True)])
def test_the_work_items_are_shuffled_only_where_there_are_workers_to_spread_them(job, workers,
                                                                                  shuffled):
    """One process on the local runner (``--workers 1``) reads the work items as planned: the
    Reshuffle that spreads them over workers would spread nothing there, at a cost per item.
    With several workers (and on a cluster runner) they are spread. The plan's long lists are
    not in the graph: they travel in a file of the run's temporaries, checked by SHA-256."""
    job, argv = job
    options = beam_options.pipeline_options(beam_options.parse(argv), workers=workers)
    p = beam.Pipeline(options=options)
    graph.build(p, job)
    labels = {t.full_label for t in p.transforms_stack[0].parts}
    assert ("Distribute" in labels) == shuffled
    plan = os.path.join(sink.temporary_dir(job.output, RUN), "plan")
    assert sorted(os.listdir(plan)) == ["items", "shards"]


def test_the_plans_values_come_back_from_their_file_only_while_it_is_unchanged(tmp_path):
    create = graph._Create([("a", 1), ("b", 2)], folder=str(tmp_path / "plan"), name="x")
    loader = graph._LoadValuesFn(create._where, create._digest)
    assert list(loader.process(None)) == [("a", 1), ("b", 2)]
    with open(create._where, "ab") as f:  # changed: refused, never unpickled
        f.write(b"\0")
    with pytest.raises(errors.RunError, match="changed or damaged while the run went on"):
        list(loader.process(None))


def test_a_stems_plan_says_whether_its_parts_folder_held_files(job):
    job, _ = job
    items = job.items()
    plans = job.stem_plans(items, {})
    assert plans and not any(p.found for p in plans.values())
    first = next(iter(plans.values()))
    again = job.stem_plans(items, {first.folder: set()})
    assert [p.found for p in again.values()] == [p is first for p in plans.values()]
    assert all(p.found for p in job.stem_plans(items).values())  # not listed: assumed there
