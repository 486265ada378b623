"""Read tokenize output back for training: fixed-length windows with document ids and masks.

``get_dataset(path_or_prefixes, context_length, *, split=None)`` opens every dataset of a
tokenize output folder (or the prefixes given) and treats their tokens, in name order, as one
stream cut into consecutive windows of ``context_length`` tokens; the last incomplete window is
dropped and windows may span shard boundaries. Contract:

- ``ds[i]`` (Python or numpy integer, negative counts from the end) is a :class:`Window`:
  ``token_ids`` in the shards' dtype (a read-only view of the memory map when the window lies in
  one local shard, a copy otherwise), ``document_ids`` (int64, per token: the index of its
  document across the whole dataset, shards numbered in order, empty documents included) and
  ``document_mask()`` (block-causal, built only when called).
- Document ids come from the ``.idx`` arrays alone (document_indices -> first sequence ->
  sequence pointer), found by binary search and filled with ``np.repeat``: no scan for EOD ids.
  The only copy of ``.idx`` data is an aligned 1/256 sample of two arrays per shard, built on
  first use (see :class:`_SortedSearch`).
- Local files are memory-mapped (no copy). Other fsspec URLs read each ``.idx`` whole and the
  ``.bin`` by ranged reads through fsspec's block cache (1 MiB blocks, at most 8 per shard, for
  the 16 most recently used shards).
- ``split``: ``None`` or ``"train"`` = the datasets directly in the folder; ``"holdout"`` = those
  in its ``holdout/`` subfolder (where the tokenize job writes holdout shards); a pair
  ``(start, end)`` of fractions = the windows ``[floor(start*n), floor(end*n))`` of the packed
  stream (a contiguous, Megatron-style split that also works on a list of prefixes).
- A tokenize output folder whose commit records show shards of more than one tokenizer (an
  ``--overwrite`` run with another tokenizer rewrites only the shards it plans) is refused
  (:class:`MixedTokenizersError`, one line naming both and the fix); a list of prefixes is
  loaded as given. Every ``.idx`` is checked as ``validate`` checks it before it is used.
- ``vocab_size`` comes from ``metadata.json`` beside the shards (for ``holdout/``, the one in the
  parent folder): ``{"tokenizer": {"vocab_size": N}}``; ``None`` without one.
- A dataset pickles without its open maps and files (they reopen lazily), so it can be handed
  to worker processes (e.g. a torch ``DataLoader``; see :mod:`dataio.torch_dataset`).

Finding datasets (every command's :func:`~dataio.dataset_find.find_datasets` and
:func:`~dataio.dataset_find.list_datasets`) is dataio/dataset_find.py; this module is the loader.
"""

from __future__ import annotations

import bisect
import functools
import math
import operator
import os
from typing import Sequence

import numpy as np

from dataio import fs as fsutil
from dataio import indexed
# MixedTokenizersError: the loader's refusal of a folder of two tokenizers (docs/loading.md), named here
from dataio.dataset_find import MixedTokenizersError, read_vocab_size, resolve_prefixes

__all__ = ["get_dataset", "TokenDataset", "ShuffledDataset", "Window", "Shard",
           "MixedTokenizersError", "shuffled_indices"]

# Remote .bin reads: fsspec's block cache; small blocks because windows are small and random.
REMOTE_BLOCK_SIZE = 1 << 20
REMOTE_MAX_BLOCKS = 8
# At most this many remote .bin files stay open (each with its cache) per dataset.
REMOTE_MAX_OPEN = 16


# ---------------------------------------------------------------------------------------------
# one shard


class _SortedSearch:
    """``searchsorted(x, side="right")`` over a sorted array read from an ``.idx``, without
    copying it. The arrays of an ``.idx`` are not 8-byte aligned (they follow a 34-byte header
    and 4-byte lengths), and numpy's searchsorted copies an unaligned array whole on every call.
    So: search an aligned sample of every ``STRIDE``-th value,
    then only the ``STRIDE`` values between two samples."""

    STRIDE = 256

    def __init__(self, values: np.ndarray):
        self.values = values
        self.sample = np.ascontiguousarray(values[::self.STRIDE])  # aligned, 1/STRIDE the size

    def right(self, x: int) -> int:
        b = int(self.sample.searchsorted(x, side="right"))
        if b == 0:
            return 0
        low = (b - 1) * self.STRIDE
        return low + int(self.values[low:low + self.STRIDE].searchsorted(x, side="right"))


class Shard:
    """One ``.bin/.idx`` pair. The ``.idx`` is opened and checked at once (the format's checks
    and the ``.bin``'s size: :func:`dataio.indexed.read_index`), the ``.bin`` on the first read;
    after unpickling both reopen (and the ``.idx`` is checked again) on first use."""

    def __init__(self, prefix: str):
        self.prefix = indexed.prefix_of(prefix)
        self.local = fsutil.is_local(self.prefix)
        self._arrays = None
        self._search = None  # (_SortedSearch of pointers, of document_indices), built on use
        self._tokens = None  # local: numpy view of the .bin map
        self._file = None  # remote: an fsspec file with a block cache
        lengths, pointers, doc_idx = self.arrays()
        self.dtype: np.dtype = self.header.dtype
        self.sequence_count = self.header.sequence_count
        self.document_count = self.header.document_count
        # Tokens = end of the last sequence; O(1), unlike summing every length (read_index
        # checked that the pointers are the lengths' prefix sums).
        self.token_count = (int(pointers[-1]) // self.dtype.itemsize + int(lengths[-1])
                            if len(lengths) else 0)

    @property
    def name(self) -> str:
        return os.path.basename(self.prefix.rstrip("/"))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(sequence_lengths, sequence_pointers, document_indices)`` of the ``.idx``."""
        if self._arrays is None:
            # Checked against the format and the .bin's size (dataio/indexed.py: check_index)
            # before any pointer is followed: a damaged pair is one FormatError naming it.
            path = indexed.idx_path(self.prefix)
            try:
                index = indexed.read_index(
                    path, bin_size=fsutil.size(indexed.bin_path(self.prefix)))
            except indexed.FormatError as exc:
                raise indexed.FormatError(f"{exc}; check it with: python -m pipelines.validate "
                                          f"{self.prefix}") from None
            self.header = index.header
            self._arrays = (index.sequence_lengths, index.sequence_pointers,
                            index.document_indices)
        return self._arrays

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``[start, stop)`` of this shard."""
        if self.local:
            if self._tokens is None:
                raw = fsutil.map_or_read(indexed.bin_path(self.prefix))
                self._tokens = np.frombuffer(raw, dtype=self.dtype.newbyteorder("<"))
            return self._tokens[start:stop]
        if self._file is None:
            self._file = fsutil.open_file(indexed.bin_path(self.prefix), "rb",
                                          block_size=REMOTE_BLOCK_SIZE, cache_type="blockcache",
                                          cache_options={"maxblocks": REMOTE_MAX_BLOCKS})
        size = self.dtype.itemsize
        self._file.seek(start * size)
        raw = self._file.read((stop - start) * size)
        return np.frombuffer(raw, dtype=self.dtype.newbyteorder("<"))

    def document_starts(self, first: int, stop: int) -> np.ndarray:
        """Token offset where each document ``first..stop-1`` begins; an empty document begins
        where the next non-empty one does (or at the shard's end)."""
        lengths, pointers, doc_idx = self.arrays()
        seq = doc_idx[first:stop]
        starts = np.full(len(seq), self.token_count, dtype=np.int64)
        inside = seq < self.sequence_count
        starts[inside] = pointers[seq[inside]] // self.dtype.itemsize
        return starts

    def document_ids(self, start: int, stop: int, offset: int = 0) -> np.ndarray:
        """Per token of ``[start, stop)`` (non-empty, inside the shard), ``offset`` plus the
        number of its document in this shard.

        Two binary searches over the .idx arrays find the documents of the first and last
        token: 'right' on the pointers picks the last of equal pointers (skipping zero-length
        sequences), 'right' on document_indices the last document starting at or before that
        sequence (skipping empty documents). The documents in between start at the pointer of
        their first sequence; ``repeat`` spreads their numbers over the tokens they own.
        """
        lengths, pointers, doc_idx = self._arrays or self.arrays()
        if self._search is None:
            self._search = (_SortedSearch(pointers), _SortedSearch(doc_idx))
        by_pointer, by_document = self._search
        size = self.dtype.itemsize
        first = by_document.right(by_pointer.right(start * size) - 1) - 1
        last = by_document.right(by_pointer.right((stop - 1) * size) - 1) - 1
        if first == last:  # the common case for long documents: one run
            return np.full(stop - start, first + offset, dtype=np.int64)
        # Documents first+1..last start inside the window, so their first sequence exists.
        starts = pointers[doc_idx[first + 1:last + 1]] // size
        runs = np.empty(last - first + 1, dtype=np.int64)
        runs[0] = starts[0] - start
        runs[1:-1] = starts[1:] - starts[:-1]
        runs[-1] = stop - starts[-1]
        return np.arange(first + offset, last + offset + 1, dtype=np.int64).repeat(runs)

    def document_lengths(self) -> np.ndarray:
        """Tokens per document, every document (0 for empty ones)."""
        starts = self.document_starts(0, self.document_count + 1)
        return np.diff(starts)

    def document_tokens(self, j: int) -> np.ndarray:
        start, stop = self.document_starts(j, j + 2)
        return self.tokens(int(start), int(stop))

    def close_bin(self) -> None:
        """Drop the remote file and its cache (it reopens on the next read)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        self.close_bin()
        self._arrays = self._search = self._tokens = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state.update(_arrays=None, _search=None, _tokens=None, _file=None)
        return state


# ---------------------------------------------------------------------------------------------
# windows


@functools.lru_cache(maxsize=4)
def _causal(length: int) -> np.ndarray:
    mask = np.tri(length, dtype=bool)
    mask.setflags(write=False)
    return mask


class Window:
    """One item: ``token_ids``, ``document_ids`` and the helpers derived from them."""

    __slots__ = ("token_ids", "document_ids")

    def __init__(self, token_ids: np.ndarray, document_ids: np.ndarray):
        self.token_ids = token_ids
        self.document_ids = document_ids

    def segment_bounds(self) -> np.ndarray:
        """Window-local starts of each document run plus the window length (``cu_seqlens`` of
        variable-length attention kernels)."""
        change = np.flatnonzero(self.document_ids[1:] != self.document_ids[:-1]) + 1
        return np.concatenate(([0], change, [len(self.document_ids)])).astype(np.int64)

    def position_ids(self) -> np.ndarray:
        """Position of each token inside its document's part of this window."""
        bounds = self.segment_bounds()
        starts = np.repeat(bounds[:-1], np.diff(bounds))
        return np.arange(len(self.document_ids), dtype=np.int64) - starts

    def document_mask(self) -> np.ndarray:
        """``mask[t, s]`` is True iff token ``t`` may attend to ``s``: ``s <= t`` and both in the
        same document. An L x L bool array, so built only when asked for."""
        n = len(self.document_ids)
        mask = np.zeros((n, n), dtype=bool)
        causal = _causal(n)
        bounds = self.segment_bounds()
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            mask[a:b, a:b] = causal[:b - a, :b - a]
        return mask

    def __len__(self) -> int:
        return len(self.token_ids)

    def __repr__(self) -> str:
        docs = np.unique(self.document_ids)
        return f"Window({len(self)} tokens, documents {docs.tolist()[:8]}{'...' * (len(docs) > 8)})"


class TokenDataset:
    """Consecutive ``context_length`` windows over the tokens of ``shards`` (see module docs)."""

    def __init__(self, shards: Sequence[Shard], context_length: int, *,
                 window_range: tuple[int, int] | None = None, vocab_size: int | None = None):
        _check_context_length(context_length)
        if not shards:
            raise ValueError("a dataset needs at least one shard")
        dtypes = {s.dtype for s in shards}
        if len(dtypes) > 1:
            listing = ", ".join(f"{s.name} ({s.dtype})" for s in shards)
            raise ValueError(f"shards have different dtypes: {listing}; re-tokenize or load them "
                             "separately")
        self.shards = list(shards)
        self.context_length = int(context_length)
        self.dtype: np.dtype = shards[0].dtype
        self.vocab_size = vocab_size
        self._token_starts = np.concatenate(
            ([0], np.cumsum([s.token_count for s in shards]))).astype(np.int64)
        self._doc_starts = np.concatenate(
            ([0], np.cumsum([s.document_count for s in shards]))).astype(np.int64)
        self._token_start_list = self._token_starts.tolist()
        self._doc_start_list = self._doc_starts.tolist()
        total_windows = int(self._token_starts[-1]) // self.context_length
        first, stop = window_range if window_range is not None else (0, total_windows)
        if not 0 <= first <= stop <= total_windows:
            raise ValueError(f"window range {first}..{stop} is outside 0..{total_windows}")
        self._first, self._len = first, stop - first
        self._open_remote: dict[int, None] = {}  # insertion-ordered: least recently used first

    # -- sizes -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._len

    def num_tokens(self) -> int:
        """Tokens in all shards (including the dropped tail and windows outside the split)."""
        return int(self._token_starts[-1])

    def num_files(self) -> int:
        return len(self.shards)

    def num_documents(self) -> int:
        return int(self._doc_starts[-1])

    # -- items -----------------------------------------------------------------------------

    def __getitem__(self, i) -> Window:
        if isinstance(i, (bool, np.bool_)):
            raise TypeError("dataset index must be an integer, not a bool")
        try:
            i = operator.index(i)
        except TypeError:
            raise TypeError(f"dataset index must be an integer, got {type(i).__name__}") from None
        if not -self._len <= i < self._len:
            raise IndexError(f"window {i} out of range for a dataset of {self._len} windows")
        if i < 0:
            i += self._len
        start = (self._first + i) * self.context_length
        return self.window(start, start + self.context_length)

    def window(self, start: int, stop: int) -> Window:
        """Tokens ``[start, stop)`` of the whole stream, with their document ids."""
        if stop <= start:
            return Window(np.empty(0, dtype=self.dtype), np.empty(0, dtype=np.int64))
        # Python lists + bisect: cheaper than numpy calls for a handful of shards.
        k = bisect.bisect_right(self._token_start_list, start) - 1
        base = self._token_start_list[k]
        shard = self.shards[k]
        if stop - base <= shard.token_count:  # inside one shard: no copy of the tokens
            ids = shard.document_ids(start - base, stop - base, self._doc_start_list[k])
            window = Window(shard.tokens(start - base, stop - base), ids)
        else:
            token_parts, id_parts = [], []
            position, j = start, k
            while position < stop:
                base = self._token_start_list[j]
                end = min(stop, base + self.shards[j].token_count)
                if end > position:
                    token_parts.append(self.shards[j].tokens(position - base, end - base))
                    id_parts.append(self.shards[j].document_ids(position - base, end - base,
                                                                self._doc_start_list[j]))
                position = end
                j += 1
            window = Window(np.concatenate(token_parts), np.concatenate(id_parts))
        if not shard.local:
            self._touch_remote(k, stop)
        return window

    def _touch_remote(self, k: int, stop: int) -> None:
        """Mark the remote shards that a read from shard ``k`` up to token ``stop`` used as
        recently used; close the least recently used beyond ``REMOTE_MAX_OPEN`` (cache memory)."""
        last = int(self._token_starts.searchsorted(stop - 1, side="right")) - 1
        for j in range(k, max(k, last) + 1):
            self._open_remote.pop(j, None)
            self._open_remote[j] = None
        while len(self._open_remote) > REMOTE_MAX_OPEN:
            oldest = next(iter(self._open_remote))
            del self._open_remote[oldest]
            self.shards[oldest].close_bin()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_open_remote"] = {}
        return state

    def __iter__(self):
        for i in range(self._len):
            yield self[i]

    # -- documents (whole, not windows) ----------------------------------------------------

    def document(self, j: int) -> np.ndarray:
        """The tokens of document ``j`` (global numbering)."""
        if not 0 <= j < self.num_documents():
            raise IndexError(f"document {j} out of range 0..{self.num_documents() - 1}")
        k = int(np.searchsorted(self._doc_starts, j, side="right")) - 1
        return self.shards[k].document_tokens(j - int(self._doc_starts[k]))

    # -- order -----------------------------------------------------------------------------

    def permutation(self, seed: int, *, epoch: int = 0) -> np.ndarray:
        """A deterministic shuffled order of ``range(len(self))`` for ``(seed, epoch)``."""
        return shuffled_indices(self._len, seed=seed, epoch=epoch)

    def shuffled(self, seed: int, *, epoch: int = 0) -> "ShuffledDataset":
        return ShuffledDataset(self, self.permutation(seed, epoch=epoch))

    # -- resources -------------------------------------------------------------------------

    def close(self) -> None:
        for shard in self.shards:
            shard.close()

    def __repr__(self) -> str:
        return (f"TokenDataset({self.num_files()} files, {self.num_tokens()} tokens, "
                f"{len(self)} windows of {self.context_length}, dtype={self.dtype})")


def shuffled_indices(n: int, *, seed: int, epoch: int = 0) -> np.ndarray:
    """A permutation of ``range(n)`` that depends only on ``(n, seed, epoch)``."""
    return np.random.default_rng([int(seed), int(epoch)]).permutation(n)


class ShuffledDataset:
    """``base`` read in the order ``order``; same item interface."""

    def __init__(self, base: TokenDataset, order: np.ndarray):
        self.base = base
        self.order = order

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i) -> Window:
        return self.base[self.order[operator.index(i)]]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


# ---------------------------------------------------------------------------------------------
# entry point


def _check_context_length(context_length) -> None:
    if isinstance(context_length, (bool, np.bool_)) or \
            not isinstance(context_length, (int, np.integer)) or context_length < 1:
        raise ValueError(f"context_length must be a positive integer, got {context_length!r}")


def get_dataset(path_or_prefixes, context_length: int, *, split=None) -> TokenDataset:
    """Open a tokenize output folder (or a list of prefixes) as packed windows; see the module
    docstring for ``split`` and the guarantees."""
    _check_context_length(context_length)
    window_split = None
    if split is not None and not isinstance(split, str):
        try:
            low, high = (float(x) for x in split)
        except (TypeError, ValueError):
            raise ValueError(f"split={split!r}: use 'train', 'holdout', or a (start, end) pair "
                             "of fractions") from None
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"split={split!r}: fractions must satisfy 0 <= start <= end <= 1")
        window_split = (low, high)
    prefixes = resolve_prefixes(path_or_prefixes, split if isinstance(split, str) else None)
    shards = [Shard(p) for p in prefixes]
    vocab_size = read_vocab_size(prefixes)
    window_range = None
    if window_split is not None:
        total = sum(s.token_count for s in shards) // int(context_length)
        window_range = (math.floor(window_split[0] * total), math.floor(window_split[1] * total))
    return TokenDataset(shards, context_length, window_range=window_range, vocab_size=vocab_size)
