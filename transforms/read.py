"""ReadDocuments: the Beam shell around :func:`transforms.documents.read_documents` (kept apart
so that the reader's pure core, which the planner uses, imports no Beam)."""

from __future__ import annotations

import apache_beam as beam

from dataio import readers, workers
from transforms import coders  # noqa: F401 - registers the DocumentBatch coder
from transforms.documents import (ERRORS_TAG, FAILED_TAG, BadRecordReport, DocumentBatch,
                                  FailedShard, bad_record_error, read_documents)


class _ReadDocumentsFn(beam.DoFn):
    def __init__(self, keys, *, id_key, on_bad_record, max_docs, max_bytes, storage):
        self._keys, self._id_key, self._on_bad = list(keys), id_key, on_bad_record
        self._max_docs, self._max_bytes = max_docs, max_bytes
        self._storage = storage

    def setup(self):
        if self._storage is not None:
            self._storage.apply()

    def process(self, item: readers.WorkItem):
        workers.note_work(_describe(item))  # for the driver's line should this worker die
        try:
            for out in read_documents(item, self._keys, id_key=self._id_key,
                                      max_docs=self._max_docs, max_bytes=self._max_bytes):
                if isinstance(out, BadRecordReport):
                    if self._on_bad == "fail":
                        raise bad_record_error(out)
                    yield beam.pvalue.TaggedOutput(ERRORS_TAG, (item.stem, out))
                else:
                    yield out
        except (readers.CorruptFileError, OSError) as exc:
            yield beam.pvalue.TaggedOutput(FAILED_TAG, FailedShard(item.stem, str(exc)))


def _describe(item: readers.WorkItem) -> str:
    """``reading a.jsonl bytes 0-1000`` and the like: the work item, for a person."""
    if item.row_groups:
        where = f" row groups {item.row_groups[0]}-{item.row_groups[-1]}"
    elif item.start or item.end is not None:
        where = f" bytes {item.start}-{'end' if item.end is None else item.end}"
    else:
        where = ""
    return f"reading {item.path}{where}"


class ReadDocuments(beam.PTransform):
    """WorkItems -> DocumentBatch (main), (stem, BadRecordReport) ('errors'),
    FailedShard ('failed': a file that could not be read)."""

    def __init__(self, keys, *, id_key=None, on_bad_record="skip", max_docs=2048,
                 max_bytes=8 << 20, storage=None):
        super().__init__()
        self._fn = _ReadDocumentsFn(keys, id_key=id_key, on_bad_record=on_bad_record,
                                    max_docs=max_docs, max_bytes=max_bytes, storage=storage)

    def expand(self, items):
        # typed, so that Beam sizes the batches with coders.BatchCoder, not by pickling them
        return items | "Read" >> beam.ParDo(self._fn).with_output_types(
            DocumentBatch).with_outputs(ERRORS_TAG, FAILED_TAG, main="documents")
