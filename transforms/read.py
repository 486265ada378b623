"""ReadDocuments: the Beam shell around :func:`transforms.documents.read_documents` (kept apart
so that the reader's pure core, which the planner uses, imports no Beam)."""

from __future__ import annotations

import apache_beam as beam

from dataio import fs as fsutil
from dataio.storage_fn import StorageDoFn
from dataio import parts, readers
from runtime import workers
from dataio.elements import DocumentBatch, WorkItem
from transforms import coders
from transforms.documents import (ERRORS_TAG, FAILED_TAG, BadRecordReport, FailedShard,
                                  bad_record_error, read_documents)

coders.register(DocumentBatch)


class _ReadDocumentsFn(StorageDoFn):
    def __init__(self, keys, *, id_key, on_bad_record, max_docs, max_bytes, storage, output=""):
        self._keys, self._id_key, self._on_bad = list(keys), id_key, on_bad_record
        self._max_docs, self._max_bytes = max_docs, max_bytes
        self._storage, self._output = storage, output

    def process(self, item: WorkItem):
        plan = item.keep if self._output else None
        key = parts.item_key(item.index, item.start, item.end, item.row_groups) if plan else ""
        if plan is not None and key in plan.done:
            record = parts.read_record(self._output, plan.folder, key)
            if record is not None and _parts_present(self._output, plan.folder, key, record):
                yield from self._replay(item, parts.ItemMark(plan, key, "reused", path=item.path,
                                                             record=record))
                return
        workers.note_work(_describe(item))  # for the driver's line should this worker die
        mark = parts.ItemMark(plan, key, "end", path=item.path,
                              file_bytes=_file_bytes(item, plan)) if plan is not None else None
        place = (plan.folder, key) if plan is not None else ()
        try:
            for out in read_documents(item, self._keys, id_key=self._id_key,
                                      max_docs=self._max_docs, max_bytes=self._max_bytes):
                if isinstance(out, BadRecordReport):
                    if self._on_bad == "fail":
                        raise bad_record_error(out)
                    if mark is not None:
                        mark.note_bad(out.as_json(), found="read")
                    yield beam.pvalue.TaggedOutput(ERRORS_TAG, (item.stem, out))
                else:
                    out.place = place
                    if mark is not None:
                        mark.records += len(out)
                        mark.num_bytes += out.num_bytes
                    yield out
        except (readers.CorruptFileError, OSError) as exc:
            yield beam.pvalue.TaggedOutput(FAILED_TAG, FailedShard(item.stem, str(exc)))
            return
        if mark is not None:
            yield self._marked(item, mark)

    def _replay(self, item: WorkItem, mark: parts.ItemMark):
        """An item an earlier run finished: what it found bad when reading, then its mark."""
        for found in mark.record.get("bad_read", ()):
            report = BadRecordReport(**found)
            if self._on_bad == "fail":
                raise bad_record_error(report)
            yield beam.pvalue.TaggedOutput(ERRORS_TAG, (item.stem, report))
        yield self._marked(item, mark)

    def _marked(self, item: WorkItem, mark: parts.ItemMark) -> DocumentBatch:
        return DocumentBatch(item.stem, item.index, -1, {k: [] for k in self._keys}, [], 0,
                             item.path, place=(mark.plan.folder, mark.key), mark=mark)


def _file_bytes(item: WorkItem, plan: parts.StemPlan) -> int:
    """The item's share of its file's size: its byte range, or the file over its items."""
    size = item.size or 0
    if item.end is not None:
        return item.end - item.start
    return size // max(plan.items, 1)


def _parts_present(output: str, folder: str, key: str, record: dict) -> bool:
    """Whether every part the item record names is there with its recorded sizes (one listing
    of the item's folder)."""
    sizes = fsutil.file_sizes(fsutil.join(parts.root(output), folder, key))
    return all(sizes.get(p["name"] + ext) == p[size]
               for p in record["parts"] for ext, size in ((".bin", "bin_size"), (".idx", "idx_size")))


def _describe(item: WorkItem) -> str:
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
    FailedShard ('failed': a file that could not be read).

    With ``output``, an item planned with a StemPlan (``WorkItem.keep``, dataio/parts.py) is
    followed by a batch carrying its "end" mark once read whole; an item an earlier run finished
    is not read at all: its bad records are reported again and a batch carries its "reused"
    mark (the sink hands its kept parts on)."""

    def __init__(self, keys, *, id_key=None, on_bad_record="skip", max_docs=2048,
                 max_bytes=8 << 20, storage=None, output=""):
        super().__init__()
        self._fn = _ReadDocumentsFn(keys, id_key=id_key, on_bad_record=on_bad_record,
                                    max_docs=max_docs, max_bytes=max_bytes, storage=storage,
                                    output=output)

    def expand(self, items):
        # typed, so that Beam sizes the batches with coders.BatchCoder, not by pickling them
        return items | "Read" >> beam.ParDo(self._fn).with_output_types(
            DocumentBatch).with_outputs(ERRORS_TAG, FAILED_TAG, main="documents")
