"""The tokenize job's Beam graph (pipelines/tokenize.py ``build``): imported only when a pipeline
is built, so that ``--help``, ``--dry-run`` and planning need no Beam import. See DESIGN.md for
the data flow.
"""

from __future__ import annotations

import dataclasses

import apache_beam as beam

from dataio import errors, sink
from pipelines import options as opts
from pipelines import tokenize
from transforms import documents as docs
from transforms.tokenize import TokenizeConfig, TokenizeDocuments

errors.anticipate(docs.BadRecord, status=errors.EXIT_FAILED)


def build(pipeline: beam.Pipeline, job: tokenize.Job, *, storage=None, finish_argv=None):
    """Wire the job into ``pipeline``; returns the PCollection of ShardResult.

    ``finish_argv``: the pipeline ends with :func:`pipelines.tokenize.finish` (metadata.json, this run's temporaries
    removed), for runners whose driver is not this process (runners/spark.py submits the
    pipeline as a jar and may not wait for it)."""
    io = seg = opts.flags(job.options)
    todo = job.to_process
    shards_of_stem: dict[str, list[str]] = {}
    for s in todo:
        shards_of_stem.setdefault(s.stem, []).append(s.shard)
    items = (pipeline | "PlanItems" >> beam.Create(job.items()) | "Distribute" >> beam.Reshuffle())
    read = items | "ReadDocuments" >> docs.ReadDocuments(
        job.config.keys, id_key=seg.id_key, on_bad_record=io.on_bad_record,
        max_docs=io.batch_documents, max_bytes=io.batch_bytes, storage=storage)
    failed = (read[docs.FAILED_TAG]
              | "FailedShards" >> beam.FlatMap(
                  lambda f, by_stem: [(s, f.reason) for s in by_stem.get(f.stem, [])],
                  by_stem=shards_of_stem))
    planned = pipeline | "PlannedShards" >> beam.Create(
        [(s.shard, (s.fingerprint, s.resume_key)) for s in todo])
    tokens = read["documents"] | "TokenizeDocuments" >> TokenizeDocuments(
        job.spec, TokenizeConfig(**vars(job.config)), on_bad_record=io.on_bad_record,
        storage=storage)
    results = tokens["tokens"] | "WriteShards" >> sink.WriteShards(
        job.output, dtype=job.dtype, planned=planned, failed=failed, storage=storage,
        run_id=job.run_id)
    # Records the parser rejected and documents the splitter or tokenizer raised on: one file.
    errors_written = ((read[docs.ERRORS_TAG], tokens[docs.ERRORS_TAG]) | "BadRecords" >> beam.Flatten()
                      | "WriteErrors" >> sink.WriteErrors(job.output, storage=storage))
    if finish_argv is not None:
        # After every shard (one element once all are done) and every error file (side input).
        (results | "AllShardsDone" >> beam.combiners.Count.Globally()
         | "Finish" >> beam.ParDo(_FinishFn(dataclasses.replace(job, options=None), finish_argv,
                                            started=tokenize._now(), storage=storage),
                                  errors_written=beam.pvalue.AsList(errors_written)))
    return results


class _FinishFn(beam.DoFn):
    def __init__(self, job: tokenize.Job, argv, *, started: str, storage=None):
        self._job, self._argv, self._started, self._storage = job, list(argv), started, storage

    def setup(self):
        if self._storage is not None:
            self._storage.apply()

    def process(self, _count, errors_written):
        tokenize.finish(self._job, self._argv, started=self._started)
        return []
