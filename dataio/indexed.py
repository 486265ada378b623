"""The Megatron-LM indexed dataset ("MMap", index version 1): the one place the format is specified.

A dataset is a pair ``{prefix}.idx`` + ``{prefix}.bin``.

``.idx`` (all integers little-endian, no padding, no alignment, no trailer)::

    offset  width  type    field
    0       9      bytes   magic  b"MMIDIDX\\x00\\x00"
    9       8      u64     version, always 1
    17      1      u8      dtype code of the tokens in .bin (DTYPE_CODES)
    18      8      u64     N = sequence count
    26      8      u64     D = length of document_indices (documents + 1)
    34      4*N    int32   sequence_lengths (tokens per sequence)
    34+4N   8*N    int64   sequence_pointers = itemsize * exclusive prefix sum of lengths
    34+12N  8*D    int64   document_indices: 0, then the sequence count after each document

``.bin`` is the raw concatenation of every sequence's token ids in the header's dtype.

A document with no sequences (empty after tokenization) shows as a repeated value in
document_indices. Megatron's reader asserts ``len(sequence_lengths) == document_indices[-1]``;
it checks nothing else, so :func:`validate` does.

Contract of this module:

- :class:`IndexedDatasetWriter` streams: tokens go straight to ``.bin``; lengths and document
  boundaries are buffered in small numpy arrays and spilled to anonymous temporary files, so peak
  memory does not grow with the number of tokens or sequences. Both files are written under
  temporary names and renamed on :meth:`~IndexedDatasetWriter.close` (``.bin`` first, ``.idx``
  last): an interrupted write never leaves a final-named ``.idx``, and a dataset is complete
  exactly when its ``.idx`` exists.
- Token ids that do not fit the dtype raise :class:`TokenRangeError` (never silent wrap-around).
- :class:`IndexedDataset` reads memory-mapped and also opens an empty dataset (a 0-byte ``.bin``),
  which Megatron's default reader cannot.
- :func:`merge` streams several datasets into one and checks dtypes before writing anything.
- Appending whole datasets (:meth:`~IndexedDatasetWriter.add_index`) moves no token through
  Python on local disk: ``.bin`` has no header and one dtype, so a dataset's ``.bin`` is exactly
  its parts' ``.bin`` one after another, copied by the kernel (``copy_file_range``, else
  ``sendfile``); a dataset made of one other (:meth:`~IndexedDatasetWriter.adopt`) hard-links its
  ``.bin`` and copies nothing. Object stores stream as before (a rename there is a copy anyway).
- :func:`validate` checks everything the format implies (see its docstring).
- The ``.idx`` is decoded here only: :func:`read_index` maps it whole (the reader, the writer's
  :meth:`~IndexedDatasetWriter.add_index`, :class:`dataio.dataset.Shard`), :func:`count_index`
  reads it in bounded chunks (memory bounded on huge indexes); both use :func:`decode_header`
  and :func:`index_size_error`, and both check every array before answering (the one set of
  checks, :class:`_IndexCheck`, which :func:`validate` runs too): no reader follows a length,
  pointer or document index that the two files' sizes do not bound.
- :func:`count_dataset` counts a dataset from its ``.idx`` alone plus the ``.bin``'s size.

Paths may be local or any fsspec URL; see :mod:`dataio.fs`.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import struct
import tempfile
from typing import BinaryIO, Iterable, Sequence

import numpy as np

from runtime import errors, faults
from dataio import fs as fsutil
from dataio import naming

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
HEADER_SIZE = 34  # 9 magic + 8 version + 1 dtype code + 8 N + 8 D
_HEADER = struct.Struct("<9sQBQQ")

# Codes of current megatron-core. 6 and 7 changed meaning between Megatron versions (float32 vs
# float64), no preprocessor ever wrote them, and token ids are integers, so they are refused.
DTYPE_CODES: dict[int, np.dtype] = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.int8),
    3: np.dtype(np.int16),
    4: np.dtype(np.int32),
    5: np.dtype(np.int64),
    8: np.dtype(np.uint16),
}
CODE_OF_DTYPE = {dtype: code for code, dtype in DTYPE_CODES.items()}
_AMBIGUOUS_CODES = {6: "float64 or float32", 7: "float32 or float64"}

# Megatron's DType.optimal_dtype: uint16 below 65500 (not 65536), else int32.
UINT16_VOCAB_LIMIT = 65500

# Elements per chunk when streaming index arrays (2 MiB of int64): small enough that a writer's
# close() stays well under 20 MB whatever the sequence count, large enough for numpy to be fast.
_CHUNK_ELEMENTS = 1 << 18
_COPY_BYTES = 1 << 24
# Bytes of the lengths array :func:`count_index` reads at a time (4M sequences).
_LENGTH_CHUNK_BYTES = 1 << 24
_WRITE_BUFFER_BYTES = 1 << 20


class FormatError(errors.RunError, ValueError):
    """A file that is not a valid Megatron indexed dataset (exit status 1: the data failed)."""


class TokenRangeError(ValueError):
    """A token id that does not fit the dataset's dtype."""


def optimal_dtype(vocab_size: int | None) -> np.dtype:
    """Megatron's rule: uint16 if the vocabulary has fewer than 65500 entries, else int32."""
    if vocab_size is not None and vocab_size < UINT16_VOCAB_LIMIT:
        return np.dtype(np.uint16)
    return np.dtype(np.int32)


def dtype_code(dtype) -> int:
    dtype = np.dtype(dtype)
    if dtype not in CODE_OF_DTYPE:
        raise ValueError(f"dtype {dtype} cannot be stored in a Megatron index; use one of "
                         f"{sorted(str(d) for d in CODE_OF_DTYPE)}")
    return CODE_OF_DTYPE[dtype]


def dtype_of_code(code: int) -> np.dtype:
    if code in DTYPE_CODES:
        return DTYPE_CODES[code]
    if code in _AMBIGUOUS_CODES:
        raise FormatError(f"dtype code {code} ({_AMBIGUOUS_CODES[code]} depending on the Megatron "
                          "version) is a float type; token datasets use integer codes 1-5 or 8")
    raise FormatError(f"unknown dtype code {code}")


def idx_path(prefix: str) -> str:
    return prefix + ".idx"


def bin_path(prefix: str) -> str:
    return prefix + ".bin"


def prefix_of(path: str) -> str:
    """The dataset prefix of a path given as a prefix, a .bin or an .idx."""
    for suffix in (".bin", ".idx"):
        if path.endswith(suffix):
            return path[: -len(suffix)]
    return path


# ---------------------------------------------------------------------------------------------
# header


@dataclasses.dataclass(frozen=True)
class IndexHeader:
    dtype: np.dtype
    sequence_count: int  # N
    document_index_count: int  # D = documents + 1

    @property
    def document_count(self) -> int:
        return self.document_index_count - 1

    @property
    def idx_size(self) -> int:
        return HEADER_SIZE + 12 * self.sequence_count + 8 * self.document_index_count


def encode_header(dtype, sequence_count: int, document_index_count: int) -> bytes:
    return _HEADER.pack(MAGIC, VERSION, dtype_code(dtype), sequence_count, document_index_count)


def decode_header(raw: bytes) -> IndexHeader:
    if len(raw) < HEADER_SIZE:
        raise FormatError(f"index is {len(raw)} bytes, shorter than the {HEADER_SIZE}-byte header")
    magic, version, code, n, d = _HEADER.unpack_from(raw)
    if magic != MAGIC:
        if magic.startswith(b"TNTIDX"):
            raise FormatError("legacy lazy/cached index (TNTIDX); only MMIDIDX is supported")
        raise FormatError(f"bad magic {magic!r}; expected {MAGIC!r}")
    if version != VERSION:
        raise FormatError(f"index version {version}; expected {VERSION}")
    if d < 1:
        raise FormatError("document_indices is empty (D=0); it must hold at least the leading 0")
    return IndexHeader(dtype_of_code(code), n, d)


def read_header(prefix: str) -> IndexHeader:
    with fsutil.open_file(idx_path(prefix), "rb") as f:
        return decode_header(f.read(HEADER_SIZE))


@dataclasses.dataclass(frozen=True)
class Counts:
    """What a dataset (or a part of one) holds: the one counts record of tokenbeam."""

    documents: int = 0
    sequences: int = 0
    tokens: int = 0

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(self.documents + other.documents, self.sequences + other.sequences,
                      self.tokens + other.tokens)


def file_sizes(counts: Counts, dtype) -> tuple[int, int]:
    """(.bin, .idx) sizes in bytes of a dataset holding ``counts`` of ``dtype`` tokens."""
    header = IndexHeader(np.dtype(dtype), counts.sequences, counts.documents + 1)
    return counts.tokens * header.dtype.itemsize, header.idx_size


def index_size_error(path: str, size: int, header: IndexHeader) -> FormatError:
    return FormatError(f"{path} is {size} bytes but its header (N={header.sequence_count}, "
                       f"D={header.document_index_count}) needs {header.idx_size}")


@dataclasses.dataclass(frozen=True)
class Index:
    """A decoded ``.idx``: its header and its three arrays, read-only views of the file's bytes
    (they keep the map alive, so they stay valid after the :class:`Index` is gone)."""

    header: IndexHeader
    sequence_lengths: np.ndarray  # int32, N
    sequence_pointers: np.ndarray  # int64, N
    document_indices: np.ndarray  # int64, D


class _IndexCheck:
    """The format's invariants, checked array chunk by array chunk (memory bounded, vectorised):
    the one home of these checks, for :func:`read_index` (every reader of a mapped ``.idx``),
    :func:`count_index` (chunks read from the file) and :func:`validate`.

    Lengths are not negative; each pointer is the item size times the tokens before it;
    document_indices start at 0, never decrease and end at N; the ``.bin`` holds exactly the
    tokens the lengths sum to. Together these bound every pointer, length and document index by
    the sizes of the two files, so a reader that passed them cannot read outside either."""

    def __init__(self, header: IndexHeader, path: str):
        self.header = header
        self.path = path  # the .idx, named by every error
        self.tokens = 0  # tokens of the sequences checked so far
        self._last_document_index = None

    def sequences(self, start: int, lengths: np.ndarray, pointers: np.ndarray) -> None:
        """Sequences ``start..start+len(lengths)-1``, in order."""
        if lengths.size and lengths.min() < 0:
            raise FormatError(f"{self.path}: negative sequence length at sequence "
                              f"{start + int(np.argmax(lengths < 0))}")
        chunk = lengths.astype(np.int64)
        ends = np.cumsum(chunk) + self.tokens
        expected = (ends - chunk) * self.header.dtype.itemsize
        bad = np.flatnonzero(pointers != expected)
        if bad.size:
            k = int(bad[0])
            raise FormatError(f"{self.path}: sequence_pointers[{start + k}] = {int(pointers[k])}, "
                              f"expected "
                              f"{int(expected[k])} (item size times the tokens before it)")
        if ends.size:
            self.tokens = int(ends[-1])

    def document_indices(self, start: int, values: np.ndarray) -> None:
        """document_indices ``start..start+len(values)-1``, in order."""
        if not values.size:
            return
        if start == 0 and values[0] != 0:
            raise FormatError(f"{self.path}: document_indices[0] = {int(values[0])}, expected 0")
        previous = self._last_document_index
        joined = values if previous is None else np.concatenate(([previous], values))
        steps = np.diff(joined)
        if steps.size and steps.min() < 0:
            k = int(np.argmax(steps < 0))
            at = start + k + (previous is None)
            raise FormatError(f"{self.path}: document_indices decrease at {at} "
                              f"({int(joined[k])} -> {int(joined[k + 1])})")
        self._last_document_index = int(values[-1])

    def finish(self, *, bin_size: int | None) -> Counts:
        """After every chunk: the last document index, and the ``.bin``'s size when given."""
        h = self.header
        if self._last_document_index != h.sequence_count:
            raise FormatError(f"{self.path}: document_indices end at "
                              f"{self._last_document_index}, expected N={h.sequence_count}")
        expected = self.tokens * h.dtype.itemsize
        if bin_size is not None and bin_size != expected:
            raise FormatError(f"{bin_path(prefix_of(self.path))} is {bin_size} bytes but the index "
                              f"holds {self.tokens} {h.dtype} tokens ({expected} bytes): the pair "
                              "is truncated or mismatched")
        return Counts(h.document_count, h.sequence_count, self.tokens)


def check_index(index: "Index", path: str, *, bin_size: int | None = None) -> Counts:
    """Check a decoded index (see :class:`_IndexCheck`) and return its counts; ``bin_size``:
    also check the ``.bin`` holds exactly its tokens. Raises :class:`FormatError` naming
    ``path`` (the ``.idx``) or its ``.bin``."""
    check = _IndexCheck(index.header, path)
    lengths, pointers = index.sequence_lengths, index.sequence_pointers
    for start in range(0, lengths.size, _CHUNK_ELEMENTS):
        stop = start + _CHUNK_ELEMENTS
        check.sequences(start, lengths[start:stop], pointers[start:stop])
    doc_idx = index.document_indices
    for start in range(0, doc_idx.size, _CHUNK_ELEMENTS):
        check.document_indices(start, doc_idx[start:start + _CHUNK_ELEMENTS])
    return check.finish(bin_size=bin_size)


def read_index(path: str, *, bin_size: int | None = None) -> Index:
    """The ``.idx`` at ``path``, memory-mapped (local) or read whole (other URLs), checked
    (:func:`check_index`; with ``bin_size``, against its ``.bin``'s size too) before anything
    is returned: a damaged index is a :class:`FormatError` naming ``path`` and the first
    problem, never arrays pointing outside the files. Its size must be exactly what its header
    implies."""
    raw = fsutil.map_or_read(path)
    try:
        header = decode_header(bytes(raw[:HEADER_SIZE]))
    except FormatError as exc:
        raise FormatError(f"{path}: {exc}") from None
    if len(raw) != header.idx_size:
        raise index_size_error(path, len(raw), header)
    n, d = header.sequence_count, header.document_index_count
    index = Index(header,
                  np.frombuffer(raw, dtype="<i4", count=n, offset=HEADER_SIZE),
                  np.frombuffer(raw, dtype="<i8", count=n, offset=HEADER_SIZE + 4 * n),
                  np.frombuffer(raw, dtype="<i8", count=d, offset=HEADER_SIZE + 12 * n))
    check_index(index, path, bin_size=bin_size)
    return index


def count_index(path: str, *, bin_size: int | None = None) -> tuple[IndexHeader, Counts]:
    """The header and counts of the ``.idx`` at ``path``, checked as :func:`read_index` checks
    (with ``bin_size``, against the ``.bin``'s size too) but read in bounded chunks (never the
    whole file, whatever its size); the file's size must be exactly what its header implies."""
    actual = fsutil.size(path)
    with fsutil.open_file(path, "rb") as f:
        try:
            header = decode_header(f.read(HEADER_SIZE))
        except FormatError as exc:
            raise FormatError(f"{path}: {exc}") from None
        if actual != header.idx_size:
            raise index_size_error(path, actual, header)
        n, d = header.sequence_count, header.document_index_count
        step = max(1, _LENGTH_CHUNK_BYTES // 4)
        check = _IndexCheck(header, path)
        for start in range(0, n, step):
            count = min(step, n - start)
            f.seek(HEADER_SIZE + 4 * start)
            lengths = np.frombuffer(_read_exactly(f, 4 * count, path), dtype="<i4")
            f.seek(HEADER_SIZE + 4 * n + 8 * start)
            pointers = np.frombuffer(_read_exactly(f, 8 * count, path), dtype="<i8")
            check.sequences(start, lengths, pointers)
        f.seek(HEADER_SIZE + 12 * n)
        for start in range(0, d, step):
            count = min(step, d - start)
            values = np.frombuffer(_read_exactly(f, 8 * count, path), dtype="<i8")
            check.document_indices(start, values)
        counts = check.finish(bin_size=bin_size)
    return header, counts


def _read_exactly(f, size: int, path: str) -> bytes:
    raw = f.read(size)
    if len(raw) != size:
        raise FormatError(f"{path} ended early (it changed while being read?)")
    return raw


@dataclasses.dataclass(frozen=True)
class CountedDataset:
    """A dataset's prefix, dtype and :class:`Counts`, as :func:`count_dataset` found them."""

    prefix: str
    dtype: np.dtype
    counts: Counts

    @property
    def name(self) -> str:
        return os.path.basename(self.prefix)

    def counted_name(self) -> str:
        """The name with ``_dc=N_sc=N_tc=N`` of these counts appended."""
        c = self.counts
        return naming.with_counts(self.name, c.documents, c.sequences, c.tokens)


def count_dataset(prefix: str) -> CountedDataset:
    """Counts of one dataset from its ``.idx`` (:func:`count_index`) and the size of its
    ``.bin`` (never read); raises :class:`FormatError` when the two disagree or the index is
    damaged, FileNotFoundError when a file is missing."""
    header, counts = count_index(idx_path(prefix), bin_size=fsutil.size(bin_path(prefix)))
    return CountedDataset(prefix, header.dtype, counts)


# ---------------------------------------------------------------------------------------------
# writer


class _SpillBuffer:
    """An append-only numpy array spilled to an anonymous temporary file when its buffer fills."""

    def __init__(self, dtype, capacity: int = 1 << 16):
        self.dtype = np.dtype(dtype)
        self._capacity = capacity
        self._buffer = np.empty(capacity, dtype=self.dtype)
        self._used = 0
        self._spilled = 0
        self._file: BinaryIO | None = None

    @property
    def count(self) -> int:
        return self._spilled + self._used

    def extend(self, values: np.ndarray) -> None:
        n = len(values)
        used = self._used
        if used + n > self._capacity:
            self._flush()
            used = 0
            if n > self._capacity:
                self._spill().write(np.ascontiguousarray(values, dtype=self.dtype).data)
                self._spilled += n
                return
        self._buffer[used:used + n] = values
        self._used = used + n

    def append(self, value: int) -> None:
        # Called once or twice per document by add_document: as few attribute writes as possible.
        used = self._used
        if used == self._capacity:
            self._flush()
            used = 0
        self._buffer[used] = value
        self._used = used + 1

    def _spill(self) -> BinaryIO:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="tokenbeam-index-")
        return self._file

    def _flush(self) -> None:
        if self._used:
            self._spill().write(self._buffer[:self._used].data)
            self._spilled += self._used
            self._used = 0

    def chunks(self) -> Iterable[np.ndarray]:
        """Every value in order, in bounded chunks."""
        if self._file is not None:
            self._file.flush()
            self._file.seek(0)
            step = _CHUNK_ELEMENTS * self.dtype.itemsize
            while raw := self._file.read(step):
                yield np.frombuffer(raw, dtype=self.dtype)
        if self._used:
            yield self._buffer[:self._used]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _check_range(tokens: np.ndarray, dtype: np.dtype) -> None:
    if tokens.size == 0:
        return
    info = np.iinfo(dtype)
    low, high = tokens.min(), tokens.max()
    if low < info.min or high > info.max:
        bad = low if low < info.min else high
        raise TokenRangeError(f"token id {int(bad)} does not fit dtype {dtype} "
                              f"(range {info.min}..{info.max}); choose a wider --dtype")


def as_tokens(tokens, dtype: np.dtype) -> np.ndarray:
    """``tokens`` as a contiguous array of ``dtype``, refusing ids that do not fit."""
    arr = np.asarray(tokens)
    if arr.dtype == dtype:
        return np.ascontiguousarray(arr)
    if arr.size == 0:
        return np.empty(0, dtype=dtype)
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.mod(arr, 1) == 0):
            arr = arr.astype(np.int64)
        else:
            raise TokenRangeError(f"token ids must be integers, got dtype {arr.dtype}")
    _check_range(arr, dtype)
    return arr.astype(dtype)


class IndexedDatasetWriter:
    """Streams documents into ``{prefix}.bin/.idx``; see the module docstring for guarantees.

    Use as a context manager: leaving the block normally commits, an exception aborts (the
    temporary files are removed and no final-named file is created).
    """

    def __init__(self, prefix: str, *, dtype):
        self.prefix = prefix
        self.dtype = np.dtype(dtype)
        dtype_code(self.dtype)
        self._fs, self._path = fsutil.filesystem_and_path(prefix)
        token = fsutil.unique_token()
        self._tmp_bin = _temporary_name(self._path + ".bin", token)
        self._tmp_idx = _temporary_name(self._path + ".idx", token)
        self._local = fsutil.is_local(prefix)
        # Local files skip fsspec's Python-level wrapper (a measurable cost per document) and
        # get a larger buffer than the default 8 KiB, so small documents make few syscalls.
        # "xb": temporaries are new files (O_EXCL: never a link someone planted at the name).
        # The folder is made where it is missing (not asked first: requests per shard).
        if self._local:
            self._bin = fsutil.create_in(os.path.dirname(self._path), lambda: open(
                self._tmp_bin, "xb", buffering=_WRITE_BUFFER_BYTES))
        else:
            fsutil.makedirs(self._fs, os.path.dirname(self._path))
            self._bin = self._fs.open(self._tmp_bin, "wb")
        self._write = self._bin.write
        self._lengths = _SpillBuffer(np.int32)
        self._doc_ends = _SpillBuffer(np.int64)
        self._doc_ends.append(0)
        self._tokens = 0
        self._closed = False
        self._adopted = False  # .bin is a hard link to another dataset's: nothing more may go in

    # -- appending ---------------------------------------------------------------------------

    @property
    def sequence_count(self) -> int:
        return self._lengths.count

    @property
    def document_count(self) -> int:
        return self._doc_ends.count - 1

    @property
    def token_count(self) -> int:
        return self._tokens

    def add_document(self, tokens, lengths: Sequence[int] | None = None) -> None:
        """One document: ``tokens`` split into sequences of ``lengths`` (default: one sequence,
        or none when ``tokens`` is empty, i.e. an empty document)."""
        self._refuse_if_adopted()
        arr = as_tokens(tokens, self.dtype)
        if lengths is None:
            n = arr.size
            if n:
                self._write(arr)
                self._lengths.append(n)
                self._tokens += n
            self._doc_ends.append(self._lengths.count)
            return
        lengths_arr = np.asarray(lengths, dtype=np.int64)
        self._append(arr, lengths_arr, np.array([len(lengths_arr)], dtype=np.int64))

    def add_batch(self, tokens, sequence_lengths, sequences_per_document) -> None:
        """Many documents at once: a flat token array, every sequence's length, and how many
        sequences each document has (0 = empty document)."""
        self._refuse_if_adopted()
        self._append(as_tokens(tokens, self.dtype), np.asarray(sequence_lengths, dtype=np.int64),
                     np.asarray(sequences_per_document, dtype=np.int64))

    def _append(self, tokens: np.ndarray, lengths: np.ndarray, per_doc: np.ndarray) -> None:
        if int(lengths.sum()) != tokens.size:
            raise ValueError(f"sequence lengths sum to {int(lengths.sum())} but {tokens.size} "
                             "tokens were given")
        if lengths.size and (lengths.min() < 0 or lengths.max() > np.iinfo(np.int32).max):
            raise ValueError("sequence lengths must be in 0..2**31-1 (int32 in the index)")
        if int(per_doc.sum()) != lengths.size:
            raise ValueError(f"documents claim {int(per_doc.sum())} sequences but "
                             f"{lengths.size} lengths were given")
        if tokens.size:
            self._write(tokens)
        self._lengths.extend(lengths)
        self._doc_ends.extend(self._lengths.count - lengths.size + np.cumsum(per_doc))
        self._tokens += tokens.size

    def add_index(self, prefix: str) -> None:
        """Append a whole existing dataset (its dtype must equal ours)."""
        self._refuse_if_adopted()
        tokens = self._add_index_arrays(prefix)
        expected = tokens * self.dtype.itemsize
        if self._local and fsutil.is_local(prefix):
            self._bin.flush()
            copied = _copy_local(bin_path(prefix).removeprefix("file://"), self._bin)
        else:
            copied = 0
            with fsutil.open_file(bin_path(prefix), "rb") as src:
                while raw := src.read(_COPY_BYTES):
                    self._bin.write(raw)
                    copied += len(raw)
        if copied != expected:
            raise FormatError(f"{bin_path(prefix)} is {copied} bytes; its index says {tokens} "
                              f"tokens of {self.dtype} = {expected} bytes")

    def adopt(self, prefix: str) -> None:
        """Become exactly the dataset at ``prefix`` (dtype equal to ours) while this writer is
        still empty: on local disk its ``.bin`` is hard-linked under our temporary name (no
        byte copied; ``prefix`` stays intact, so a retried commit finds it again), elsewhere,
        or where links are refused, appended as by :meth:`add_index`. Nothing can be added
        after a link."""
        if self.sequence_count or self.document_count or not (
                self._local and fsutil.is_local(prefix)):
            self.add_index(prefix)
            return
        source = bin_path(prefix).removeprefix("file://")
        self._bin.close()
        os.unlink(self._tmp_bin)
        try:
            os.link(source, self._tmp_bin)
        except OSError:  # a filesystem without hard links (some FUSE, SMB): copy instead
            self._bin = open(self._tmp_bin, "xb", buffering=_WRITE_BUFFER_BYTES)
            self._write = self._bin.write
            self.add_index(prefix)
            return
        self._adopted = True
        tokens = self._add_index_arrays(prefix)
        size = os.stat(self._tmp_bin).st_size
        if size != tokens * self.dtype.itemsize:
            raise FormatError(f"{bin_path(prefix)} is {size} bytes; its index says {tokens} "
                              f"tokens of {self.dtype} = {tokens * self.dtype.itemsize} bytes")

    def _refuse_if_adopted(self) -> None:
        if self._adopted:
            raise ValueError(f"{self.prefix}: adopt() linked another dataset's .bin; nothing "
                             "can be appended to it")

    def _add_index_arrays(self, prefix: str) -> int:
        """Append ``prefix``'s lengths and document boundaries; returns its token count."""
        # Only the index is loaded: IndexedDataset would also read a remote .bin whole.
        index = read_index(idx_path(prefix))
        if index.header.dtype != self.dtype:
            raise ValueError(f"{prefix}: dtype {index.header.dtype} differs from the output's "
                             f"{self.dtype}")
        lengths = index.sequence_lengths
        offset = self._lengths.count
        for start in range(0, len(lengths), _CHUNK_ELEMENTS):
            self._lengths.extend(lengths[start:start + _CHUNK_ELEMENTS])
        doc_idx = index.document_indices
        for start in range(1, len(doc_idx), _CHUNK_ELEMENTS):
            self._doc_ends.extend(doc_idx[start:start + _CHUNK_ELEMENTS] + offset)
        tokens = int(lengths.sum(dtype=np.int64))
        self._tokens += tokens
        return tokens

    # -- committing --------------------------------------------------------------------------

    def close(self) -> None:
        """Write the index and commit: rename ``.bin`` then ``.idx`` to their final names."""
        if self._closed:
            return
        try:
            self._bin.close()
            # (a buffer size given: no isatty() asked of each new file)
            with (open(self._tmp_idx, "xb", buffering=_WRITE_BUFFER_BYTES) if self._local
                  else self._fs.open(self._tmp_idx, "wb")) as out:
                out.write(encode_header(self.dtype, self._lengths.count, self._doc_ends.count))
                for chunk in self._lengths.chunks():
                    out.write(np.ascontiguousarray(chunk, dtype="<i4").data)
                carry = 0
                for chunk in self._lengths.chunks():
                    ends = np.cumsum(chunk, dtype=np.int64)
                    pointers = (ends - chunk + carry) * self.dtype.itemsize
                    out.write(pointers.astype("<i8", copy=False).data)
                    carry += int(ends[-1]) if len(ends) else 0
                for chunk in self._doc_ends.chunks():
                    out.write(np.ascontiguousarray(chunk, dtype="<i8").data)
            faults.checkpoint("indexed.bin_written")
            fsutil.replace(self._fs, self._tmp_bin, self._path + ".bin", linked=self._adopted)
            faults.checkpoint("indexed.between_renames")
            fsutil.replace(self._fs, self._tmp_idx, self._path + ".idx", linked=False)
        except BaseException:
            self.abort()
            raise
        finally:
            self._release()

    def abort(self) -> None:
        """Drop everything written so far; no final-named file is created or changed."""
        if not self._bin.closed:
            self._bin.close()
        for tmp in (self._tmp_bin, self._tmp_idx):
            try:
                self._fs.rm(tmp)
            except FileNotFoundError:
                pass
        self._release()

    def _release(self) -> None:
        self._closed = True
        self._lengths.close()
        self._doc_ends.close()

    def __enter__(self) -> "IndexedDatasetWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        elif not self._closed:
            self.abort()


def _copy_local(source: str, out) -> int:
    """Append the file ``source`` to the open local file ``out`` (flushed) in the kernel;
    returns the bytes copied. ``out``'s Python position is brought to the new end."""
    dst = out.fileno()
    with open(source, "rb") as src:
        remaining = os.fstat(src.fileno()).st_size
        total = remaining
        for copy in (_copy_file_range, _sendfile):
            try:
                while remaining:
                    n = copy(src.fileno(), dst, remaining)
                    if n == 0:
                        break  # the source shrank under us: the caller's size check says so
                    remaining -= n
                break
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP,
                                     errno.EBADF) or remaining != total:
                    raise
        else:  # neither call: through Python (rare: old kernels, exotic filesystems)
            os.lseek(dst, 0, os.SEEK_END)
            with open(dst, "wb", closefd=False) as raw:
                shutil.copyfileobj(src, raw, _COPY_BYTES)
            remaining = 0
    out.seek(0, os.SEEK_END)
    return total - remaining


def _copy_file_range(src: int, dst: int, count: int) -> int:
    if not hasattr(os, "copy_file_range"):
        raise OSError(errno.ENOSYS, "no copy_file_range")
    return os.copy_file_range(src, dst, min(count, 1 << 30))


def _sendfile(src: int, dst: int, count: int) -> int:
    if not hasattr(os, "sendfile"):
        raise OSError(errno.ENOSYS, "no sendfile")
    return os.sendfile(dst, src, None, min(count, 1 << 30))


TEMPORARY_MARK = ".inprogress-"


def _temporary_name(final_path: str, token: str) -> str:
    head, tail = os.path.split(final_path)
    return os.path.join(head, f".{tail}{TEMPORARY_MARK}{token}")


def is_temporary_name(name: str) -> bool:
    return TEMPORARY_MARK in os.path.basename(name)


def write_documents(prefix: str, documents: Iterable, *, dtype) -> None:
    """Convenience: each document is a token list (one sequence) or a list of sequences."""
    with IndexedDatasetWriter(prefix, dtype=dtype) as writer:
        for doc in documents:
            if len(doc) and isinstance(doc[0], (list, tuple, np.ndarray)):
                lengths = [len(s) for s in doc if len(s)]
                flat = np.concatenate([np.asarray(s, dtype=np.int64) for s in doc if len(s)]) \
                    if lengths else np.empty(0, dtype=np.int64)
                writer.add_document(flat, lengths)
            else:
                writer.add_document(doc)


# ---------------------------------------------------------------------------------------------
# reader


class IndexedDataset:
    """Read-only, memory-mapped view of ``{prefix}.bin/.idx`` (local files) or a fully read one
    (other fsspec URLs; see :mod:`dataio.dataset` for ranged remote reads).

    ``ds[i]`` is sequence ``i``; ``ds.document(j)`` is document ``j``'s tokens. Arrays returned
    keep the underlying map alive, so they stay valid after the dataset object is gone.
    """

    def __init__(self, prefix: str):
        self.prefix = prefix_of(prefix)
        binary = bin_path(self.prefix)
        # A local .bin is mapped first (cheap), so that its size is the mapped file's and a FIFO
        # or device there is refused as such; a remote one is read only once its index passed.
        self._bin = fsutil.map_or_read(binary) if fsutil.is_local(binary) else None
        index = read_index(idx_path(self.prefix), bin_size=fsutil.size(binary)
                           if self._bin is None else len(self._bin))
        self.header = index.header
        self.sequence_lengths = index.sequence_lengths
        self.sequence_pointers = index.sequence_pointers
        self.document_indices = index.document_indices
        if self._bin is None:
            self._bin = fsutil.map_or_read(binary)
        self.tokens = np.frombuffer(self._bin, dtype=self.dtype.newbyteorder("<"),
                                    count=len(self._bin) // self.dtype.itemsize)

    @property
    def dtype(self) -> np.dtype:
        return self.header.dtype

    @property
    def sequence_count(self) -> int:
        return self.header.sequence_count

    @property
    def document_count(self) -> int:
        return self.header.document_count

    @property
    def token_count(self) -> int:
        return int(self.sequence_lengths.sum(dtype=np.int64))

    def __len__(self) -> int:
        return self.sequence_count

    def __getitem__(self, i: int) -> np.ndarray:
        if not -self.sequence_count <= i < self.sequence_count:
            raise IndexError(f"sequence {i} out of range 0..{self.sequence_count - 1}")
        i %= self.sequence_count
        start = int(self.sequence_pointers[i]) // self.dtype.itemsize
        return self.tokens[start:start + int(self.sequence_lengths[i])]

    def document(self, j: int) -> np.ndarray:
        """All tokens of document ``j`` (its sequences are contiguous in ``.bin``)."""
        first, end = int(self.document_indices[j]), int(self.document_indices[j + 1])
        if first == end:
            return self.tokens[:0]
        start = int(self.sequence_pointers[first]) // self.dtype.itemsize
        stop = int(self.sequence_pointers[end - 1]) // self.dtype.itemsize + int(
            self.sequence_lengths[end - 1])
        return self.tokens[start:stop]

    def documents(self) -> Iterable[list[np.ndarray]]:
        """Every document as its list of sequences."""
        for j in range(self.document_count):
            first, end = int(self.document_indices[j]), int(self.document_indices[j + 1])
            yield [self[i] for i in range(first, end)]


# ---------------------------------------------------------------------------------------------
# merge


def merge(prefixes: Sequence[str], output_prefix: str, *, dtype=None) -> IndexHeader:
    """Concatenate datasets in the order given into ``output_prefix``; dtypes (and the
    readability of every input) are checked before anything is written."""
    if not prefixes:
        raise ValueError("merge needs at least one input dataset")
    headers = [(p, read_header(p)) for p in prefixes]
    dtypes = {h.dtype for _, h in headers}
    target = np.dtype(dtype) if dtype is not None else headers[0][1].dtype
    mismatched = [f"{p} ({h.dtype})" for p, h in headers if h.dtype != target]
    if mismatched:
        raise ValueError(f"cannot merge datasets of different dtypes {sorted(map(str, dtypes))}: "
                         f"{', '.join(mismatched)} differ from {target}; nothing was written")
    with IndexedDatasetWriter(output_prefix, dtype=target) as writer:
        for p in prefixes:
            writer.add_index(p)
    return read_header(output_prefix)


# ---------------------------------------------------------------------------------------------
# validate


@dataclasses.dataclass(frozen=True)
class ValidationResult:
    prefix: str
    ok: bool
    reason: str = ""
    counts: Counts | None = None
    dtype: np.dtype | None = None

    def line(self) -> str:
        if self.ok:
            c = self.counts
            return (f"OK   {self.prefix}  dtype={self.dtype} documents={c.documents} "
                    f"sequences={c.sequences} tokens={c.tokens}")
        return f"FAIL {self.prefix}  {self.reason}"


def validate(prefix: str, *, vocab_size: int | None = None, eod_id: int | None = None,
             check_name: bool = True) -> ValidationResult:
    """Check one dataset and return the first problem found, or its counts.

    Checks: magic, version, dtype code; .idx size equals 34 + 12N + 8D; pointers equal the
    exclusive prefix sums of lengths times the item size (64-bit); document_indices start at 0,
    never decrease and end at N; .bin size equals item size times the sum of lengths; with
    ``vocab_size``, every id is below it; with ``eod_id``, every non-empty document ends with it;
    with ``check_name``, ``dc=``/``sc=``/``tc=`` in the name equal the documents / sequences /
    tokens in the files.
    """
    prefix = prefix_of(prefix)

    def fail(reason: str) -> ValidationResult:
        return ValidationResult(prefix, False, reason)

    for path in (idx_path(prefix), bin_path(prefix)):
        if not fsutil.exists(path):
            return fail(f"missing {os.path.basename(path)}")
    try:
        ds = IndexedDataset(prefix)  # the format's checks: read_index (check_index)
    except (FormatError, fsutil.NotRegularFileError) as exc:  # a FIFO, a device: this one FAILs
        return fail(str(exc))
    h = ds.header
    lengths, pointers, doc_idx = ds.sequence_lengths, ds.sequence_pointers, ds.document_indices
    steps = np.diff(doc_idx)
    total_tokens = ds.token_count
    if vocab_size is not None:
        for start in range(0, ds.tokens.size, _CHUNK_ELEMENTS):
            chunk = ds.tokens[start:start + _CHUNK_ELEMENTS]
            bad = np.flatnonzero((chunk >= vocab_size) | (chunk < 0))
            if bad.size:
                return fail(f"token id {int(chunk[bad[0]])} at position {start + int(bad[0])} "
                            f"is not below the vocab size {vocab_size}")
    if eod_id is not None:
        nonempty = np.flatnonzero(steps > 0)
        last_seq = doc_idx[1:][nonempty] - 1
        last_pos = pointers[last_seq] // ds.dtype.itemsize + lengths[last_seq] - 1
        zero_len = lengths[last_seq] == 0
        ok = ~zero_len
        ok[ok] = ds.tokens[last_pos[ok]] == eod_id
        if not ok.all():
            k = int(nonempty[np.argmin(ok)])
            return fail(f"document {k} does not end with the EOD id {eod_id}")
    counts = Counts(h.document_count, h.sequence_count, total_tokens)
    if check_name:
        named = naming.parse_counts(os.path.basename(prefix))
        if named is not None:
            for field, want, have in zip(("dc", "sc", "tc"), named, dataclasses.astuple(counts)):
                if want != have:
                    return fail(f"name says {field}={want} but the files hold {have}")
    return ValidationResult(prefix, True, counts=counts, dtype=ds.dtype)
