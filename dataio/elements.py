"""The elements that flow between the tokenize job's steps, in one place.

    WorkItem       planner -> ReadDocuments: a byte range / row groups of one input file
    DocumentBatch  ReadDocuments -> TokenizeDocuments: consecutive good documents of one item
    TokenBatch     TokenizeDocuments -> WriteShards: their tokens, for one shard
    PartInfo       WriteShards' part writer -> its finaliser: a part written under the temp area
    ShardResult    WriteShards -> the driver (Beam metrics or records): what became of a shard

Plain dataclasses, Beam-free: the planner and ``--help`` import this module without Beam
(tests/pipelines/test_fixed_cost.py). Their coder (sizing batches without pickling them) needs
Beam and sits with the Beam shell that registers it, transforms/coders.py. Nothing here imports
transforms/, pipelines/ or runners/, so every layer can use these names.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dataio.indexed import Counts


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkItem:
    """One unit of reading: a byte range of a JSONL file, a whole compressed file, or a list
    of Parquet row groups. ``index`` orders the items of one file."""

    path: str
    stem: str
    format: str
    index: int
    start: int = 0
    end: int | None = None
    row_groups: tuple[int, ...] = ()
    # Parquet: the file's row index of the item's first row, as planned (None: the reader
    # counts the rows of the groups before it in the footer)
    first_row: int | None = None
    error: str = ""  # why planning could not read the file: the reader fails the item with it
    # Planning samples only (:func:`sample_item`): read at most this many bytes, stored and
    # decompressed, and only the whole records in them.
    head: int | None = None
    # The file as planned (see confirm_unchanged): its size (None: not checked, e.g. the
    # planner's own samples), version (mtime or etag) and, for local files whose content hash is
    # in the resume key, the identity the hash was taken under (input_hashes.stamp).
    size: int | None = None
    version: str = ""
    stamp: str = ""
    # Where the item's parts are kept and how its input is committed (dataio/parts.py StemPlan;
    # None: the parts are this run's temporaries only).
    keep: object = None


@dataclasses.dataclass
class DocumentBatch:
    """Consecutive good documents of one work item. ``texts[key][i]`` = document i's value: a
    string, or a list of strings (pre-split sentences)."""

    stem: str
    item: int
    batch: int
    texts: dict[str, list[str | list[str]]]
    ids: list[str | None]  # document ids (for holdout), None where there is none
    num_bytes: int
    # Where each document came from, for the bad records the tokenize step finds: the input
    # path, each document's 1-based line (row for Parquet; None where a byte range did not start
    # at 0, resolved only when reported) and byte offset (row index for Parquet).
    path: str = ""
    lines: list[int | None] = dataclasses.field(default_factory=list)
    offsets: list[int] = dataclasses.field(default_factory=list)
    # Where the item's parts are kept: (stem folder, item key) of dataio/parts.py, or () for this
    # run's temporaries; and the item's mark (dataio/parts.py ItemMark) on the batch that
    # carries one (no documents).
    place: tuple = ()
    mark: object = None

    def __len__(self) -> int:
        return len(self.ids)

    def estimated_size(self) -> int:
        """Bytes, roughly, for Beam's metrics (transforms/coders.py): the documents' JSON size."""
        return self.num_bytes


@dataclasses.dataclass(kw_only=True)
class TokenBatch:
    """Documents of one batch for one shard: flat tokens, every sequence's length, and the
    number of sequences of each document (0 = empty document)."""

    shard: str  # relative shard name without counts, e.g. "holdout/x_text_document"
    item: int
    batch: int
    tokens: np.ndarray
    sequence_lengths: np.ndarray
    sequences_per_document: np.ndarray
    num_bytes: int
    place: tuple = ()  # as DocumentBatch.place
    mark: object = None  # as DocumentBatch.mark: a batch of no tokens that carries it

    @property
    def order(self) -> tuple[int, int]:
        return self.item, self.batch

    @property
    def documents(self) -> int:
        return len(self.sequences_per_document)

    def estimated_size(self) -> int:
        """Bytes, roughly, for Beam's metrics (transforms/coders.py)."""
        return self.tokens.nbytes + self.sequence_lengths.nbytes + self.sequences_per_document.nbytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class PartInfo:
    """A part the sink wrote: where it is and where it goes in its shard."""

    order: tuple[int, int]  # (work item, batch): the part's place in input order
    prefix: str
    counts: Counts
    # The shard's final name where the part writer committed the shard itself (an input of one
    # item, written from memory: ``prefix`` is then the shard's final files)
    committed: str = ""


@dataclasses.dataclass(frozen=True)
class ShardResult:
    """What became of a shard this run had to write: committed as ``name`` with ``counts``
    from ``input_bytes`` of input, or ``failed`` with the reason."""

    shard: str
    name: str | None
    counts: Counts
    _: dataclasses.KW_ONLY
    input_bytes: int = 0
    failed: str | None = None
