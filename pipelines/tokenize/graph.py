"""The tokenize job's Beam graph: the one module of the job that imports Beam, imported only
where a pipeline runs (pipelines/tokenize/driver.py ``execute``, runners/spark.py), so that
``--help``, ``--dry-run`` and planning need no Beam. See DESIGN.md for the data flow.

The planned job (pipelines/tokenize/planner.py) is carried in whole: the settings record, the
shards' names and fingerprints; nothing here decides them again. What the run did comes back
through the runner's result: the sink's Beam counters (:func:`figures`) and the shards it
committed (:func:`shard_results`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
import zlib

import apache_beam as beam
from apache_beam import typehints
from apache_beam.options.pipeline_options import DirectOptions, StandardOptions
from apache_beam.metrics.metric import MetricsFilter

from runtime import errors, log
from dataio import fs as fsutil
from dataio import manifest, parts, sink
from pipelines import beam_options
from pipelines import options as opts
from pipelines.tokenize import outcome, planner
from transforms import documents as docs
from transforms.read import ReadDocuments
from dataio.elements import ShardResult
from dataio.storage_fn import StorageDoFn
from transforms.tokenize import TokenizeDocuments

errors.anticipate(docs.BadRecord, status=errors.EXIT_FAILED)
_LOG = log.get("tokenize")


def build(pipeline: beam.Pipeline, job: planner.Job, *, storage=None, finish_argv=None,
          started: str = ""):
    """Wire the job into ``pipeline``; returns the PCollection of ShardResult.

    ``finish_argv``: the pipeline ends with :func:`pipelines.tokenize.outcome.finish`
    (metadata.json, this run's temporaries removed; ``started`` is the run's start), for
    runners whose driver is not this process (runners/spark.py submits the pipeline as a jar
    and may not wait)."""
    io = opts.flags(job.options)
    todo = job.to_process
    shards_of_stem: dict[str, list[str]] = {}
    for s in todo:
        shards_of_stem.setdefault(s.stem, []).append(s.shard)
    # Each item planned with where its parts are kept (and whether an earlier run finished it):
    # one listing of the output's _parts/ (dataio/parts.py).
    planned_items = job.items()
    plans = job.stem_plans(planned_items, parts.done_items(job.output))
    kept = planner.reused_items(planned_items, plans)
    if kept:
        _LOG.info("resuming: %d of %d work items were finished by an earlier run; their parts "
                  "are reused", kept, len(planned_items))
    planned_items = [dataclasses.replace(i, keep=plans.get(i.stem)) for i in planned_items]
    plan_folder = fsutil.join(manifest.temporary_dir(job.output, job.run_id), "plan")
    items = pipeline | "PlanItems" >> _Create(planned_items, folder=plan_folder, name="items",
                                               guard=job.guard, storage=storage)
    if not _one_process(pipeline):
        # Spread over the workers (and, on a cluster, a checkpoint a retry starts from). In one
        # process nothing is spread, and the shuffle costs about 0.1 ms per work item.
        items = items | "Distribute" >> beam.Reshuffle()
    read = items | "ReadDocuments" >> ReadDocuments(
        job.config.keys, id_key=job.config.id_key, on_bad_record=io.on_bad_record,
        max_docs=io.batch_documents, max_bytes=io.batch_bytes, storage=storage,
        output=job.output)
    failed = (read[docs.FAILED_TAG]
              | "FailedShards" >> beam.FlatMap(
                  lambda f, by_stem: [(s, f.reason) for s in by_stem.get(f.stem, [])],
                  by_stem=shards_of_stem))
    planned = pipeline | "PlannedShards" >> _Create(
        [(s.shard, (s.fingerprint, s.resume_key)) for s in todo], folder=plan_folder,
        name="shards", guard=job.guard, storage=storage)
    tokens = read["documents"] | "TokenizeDocuments" >> TokenizeDocuments(
        job.spec, job.config, shard_names=job.shard_names(), on_bad_record=io.on_bad_record,
        storage=storage)
    results = tokens["tokens"] | "WriteShards" >> sink.WriteShards(
        job.output, dtype=job.dtype, planned=planned, failed=failed, storage=storage,
        run_id=job.run_id, guard=job.guard, stale=job.stale,
        max_bad_fraction=job.config.max_bad_fraction, counted_names=job.counted_names)
    # Records the parser rejected and documents the splitter or tokenizer raised on: one file.
    errors_written = ((read[docs.ERRORS_TAG], tokens[docs.ERRORS_TAG]) | "BadRecords" >> beam.Flatten()
                      | "WriteErrors" >> sink.WriteErrors(job.output, storage=storage,
                                                           guard=job.guard))
    if finish_argv is not None:
        # After every shard (one element once all are done) and every error file (side input).
        (results | "AllShardsDone" >> beam.combiners.Count.Globally()
         | "Finish" >> beam.ParDo(_FinishFn(dataclasses.replace(job, options=None), finish_argv,
                                            started=started, storage=storage),
                                  errors_written=beam.pvalue.AsList(errors_written)))
    return results


def _one_process(pipeline: beam.Pipeline) -> bool:
    """Whether the pipeline runs on the local runner in this process alone (``--workers 1``)."""
    options = pipeline.options
    return (options.view_as(StandardOptions).runner == "FnApiRunner"
            and options.view_as(DirectOptions).direct_running_mode == "in_memory")


class _Create(beam.PTransform):
    """``beam.Create(values)`` for the plan's long lists (a value per work item or shard),
    neither inferring types (Beam's Create visits every value: about a millisecond each) nor
    carried in the graph. Beam pickles a step's function and compresses it with bz2 at level 9
    twice as it builds the graph, and unpickles it each time it builds the step: values carried
    there cost about 0.1 ms per work item (10,000 one-line files: 1.2 s). So the values go
    once, as one zlib pickle, to the run's temporaries (``{output}/_temporary/{run id}/plan/``,
    where every worker reads and writes anyway), and the step carries the file's name and
    SHA-256: it reads the file when it runs and unpickles it only when the hash matches (no
    pickle planted there is ever loaded)."""

    def __init__(self, values, *, folder: str, name: str, guard=None, storage=None):
        super().__init__()
        self._storage = storage
        blob = zlib.compress(pickle.dumps(list(values), protocol=pickle.HIGHEST_PROTOCOL), 1)
        self._where = fsutil.join(folder, name)
        if guard is not None:
            guard.verify()
        fsutil.write_bytes_atomic(self._where, blob, durable=False)
        self._digest = hashlib.sha256(blob).hexdigest()

    def expand(self, pbegin):
        return (pbegin | "Impulse" >> beam.Impulse()
                | "Values" >> beam.ParDo(_LoadValuesFn(self._where, self._digest, self._storage))
                .with_output_types(typehints.Any))


class _LoadValuesFn(StorageDoFn):
    def __init__(self, where: str, digest: str, storage=None):
        self._where, self._digest, self._storage = where, digest, storage

    def process(self, _):
        blob = fsutil.read_bytes(self._where)
        if hashlib.sha256(blob).hexdigest() != self._digest:
            raise errors.RunError(f"{self._where}: the run's plan was changed or damaged while "
                                  "the run went on; rerun the same command")
        yield from pickle.loads(zlib.decompress(blob))


def run(job: planner.Job, *, workers: int | None, storage=None) -> outcome.Reported:
    """Run the job's pipeline to its end from this process (``workers``: the local processes
    decided, None on another runner); returns what the runner reported of it."""
    options = beam_options.pipeline_options(job.options, workers=workers)
    with beam.Pipeline(options=options) as pipeline:
        build(pipeline, job, storage=storage)
    return outcome.Reported(counters=figures(pipeline.result),
                            results=shard_results(pipeline.result))


def figures(result) -> dict[str, int] | None:
    """The sink's committed counters (dataio/sink.py: documents, tokens, input_bytes,
    bad_records, parts, shards_committed, ...) from a finished pipeline's result; None when the
    runner reports none (portable runners may not return metrics to the driver)."""
    try:
        counters = result.metrics().query(MetricsFilter().with_namespace(sink.METRICS))["counters"]
    except Exception:  # noqa: BLE001 - a runner without metrics support: the records say it
        return None
    values: dict[str, int] = {}
    for counter in counters:
        if counter.committed is None:
            return None
        name = counter.key.metric.name
        values[name] = values.get(name, 0) + int(counter.committed)
    return values or None


def shard_results(result) -> dict[str, ShardResult] | None:
    """shard -> ShardResult as the sink reported them (dataio/sink.py SHARD_RESULTS), from a
    finished pipeline's result; None when the runner reports none."""
    try:
        sets = [s for s in result.metrics().query(MetricsFilter().with_namespace(
            sink.METRICS))["string_sets"] if s.key.metric.name.startswith(sink.SHARD_RESULTS)]
    except Exception:  # noqa: BLE001 - a runner without metrics support: the records say it
        return None
    if not sets or any(s.committed is None for s in sets):
        return None
    found = [manifest.decode_result(text) for s in sets for text in s.committed]
    return {r.shard: r for r in found}


class _FinishFn(StorageDoFn):
    def __init__(self, job: planner.Job, argv, *, started: str, storage=None):
        self._job, self._argv, self._started, self._storage = job, list(argv), started, storage

    def process(self, _count, errors_written):
        outcome.finish(self._job, self._argv, started=self._started)
        return []
