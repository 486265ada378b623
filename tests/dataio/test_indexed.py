"""The Megatron indexed format: golden bytes, round trips, merge, validation of corruptions."""

import hashlib
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataio import indexed as ix

GOLDEN_DOCS = [[[1, 2, 3], [4, 5]], [], [[6]], [[7, 8, 9, 10]]]


def md5(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


def test_golden_uint16(tmp_path):
    prefix = str(tmp_path / "g")
    ix.write_documents(prefix, GOLDEN_DOCS, dtype=np.uint16)
    assert os.path.getsize(prefix + ".idx") == 122
    assert md5(prefix + ".idx") == "3ab5d71a84c0bfd62e6da0796fb78d9c"
    assert md5(prefix + ".bin") == "3d2663cd739ac08e6478ce40ef830904"
    raw = open(prefix + ".idx", "rb").read()
    assert raw[:34].hex() == ("4d4d49444944580000" "0100000000000000" "08"
                              "0400000000000000" "0500000000000000")
    ds = ix.IndexedDataset(prefix)
    assert ds.sequence_lengths.tolist() == [3, 2, 1, 4]
    assert ds.sequence_pointers.tolist() == [0, 6, 10, 12]
    assert ds.document_indices.tolist() == [0, 2, 2, 3, 4]


def test_golden_int32(tmp_path):
    prefix = str(tmp_path / "g")
    ix.write_documents(prefix, GOLDEN_DOCS, dtype=np.int32)
    assert md5(prefix + ".idx") == "d94468a1e5a771f3856ce73f281b3112"
    assert md5(prefix + ".bin") == "c457b6addd2869161f8a853c0f247aaf"
    assert ix.IndexedDataset(prefix).sequence_pointers.tolist() == [0, 12, 20, 24]


def test_golden_merge(tmp_path):
    a, b, out = (str(tmp_path / n) for n in ("a", "b", "merged"))
    ix.write_documents(a, GOLDEN_DOCS, dtype=np.uint16)
    ix.write_documents(b, [[[11, 12]], [[13, 14, 15]]], dtype=np.uint16)
    ix.merge([a, b], out)
    assert md5(out + ".idx") == "3884b6c1357197711bf0b36d5704e4eb"
    assert md5(out + ".bin") == "a6e27ff9a77402d49d4868b55c644ed9"
    ds = ix.IndexedDataset(out)
    assert ds.document_indices.tolist() == [0, 2, 2, 3, 4, 5, 6]
    assert ds.sequence_pointers.tolist() == [0, 6, 10, 12, 20, 24]


def test_golden_empty_dataset_opens(tmp_path):
    prefix = str(tmp_path / "empty")
    ix.write_documents(prefix, [], dtype=np.uint16)
    assert os.path.getsize(prefix + ".idx") == 42
    assert md5(prefix + ".idx") == "0ddd0c0f2faca24670535c6623b04960"
    assert os.path.getsize(prefix + ".bin") == 0
    ds = ix.IndexedDataset(prefix)  # Megatron's default mmap reader cannot open this one
    assert len(ds) == 0 and ds.document_count == 0
    assert ds.document_indices.tolist() == [0]
    assert ix.validate(prefix).ok


def test_empty_document_is_repeated_index(tmp_path):
    prefix = str(tmp_path / "e")
    ix.write_documents(prefix, [[1], [], [2], [3], [4]], dtype=np.uint16)
    ds = ix.IndexedDataset(prefix)
    assert ds.document_indices.tolist() == [0, 1, 1, 2, 3, 4]
    assert len(ds) == 4


def test_dtype_rule():
    assert ix.optimal_dtype(32000) == np.uint16
    assert ix.optimal_dtype(65499) == np.uint16
    assert ix.optimal_dtype(65500) == np.int32  # Megatron's threshold, not 65536
    assert ix.optimal_dtype(None) == np.int32


@pytest.mark.parametrize("bad", [[70000], [-1], [65536]])
def test_out_of_range_id_is_an_error_not_a_wrap(tmp_path, bad):
    prefix = str(tmp_path / "r")
    with pytest.raises(ix.TokenRangeError, match="does not fit dtype uint16"):
        with ix.IndexedDatasetWriter(prefix, dtype=np.uint16) as w:
            w.add_document(np.array(bad, dtype=np.int64))
    assert os.listdir(tmp_path) == []  # nothing final-named, no temporaries left


def test_interrupted_write_leaves_no_final_file(tmp_path):
    prefix = str(tmp_path / "x")
    w = ix.IndexedDatasetWriter(prefix, dtype=np.uint16)
    w.add_document([1, 2, 3])
    # a crash here: the writer is never closed
    assert not os.path.exists(prefix + ".bin") and not os.path.exists(prefix + ".idx")
    assert all(ix.is_temporary_name(n) for n in os.listdir(tmp_path))
    w.abort()
    assert os.listdir(tmp_path) == []


def test_add_batch_equals_add_document(tmp_path):
    docs = [[5, 6, 7], [], [8], [9, 10]]
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    ix.write_documents(a, docs, dtype=np.uint16)
    with ix.IndexedDatasetWriter(b, dtype=np.uint16) as w:
        w.add_batch(np.array([5, 6, 7, 8, 9, 10]), [3, 1, 2], [1, 0, 1, 1])
    assert open(a + ".idx", "rb").read() == open(b + ".idx", "rb").read()
    assert open(a + ".bin", "rb").read() == open(b + ".bin", "rb").read()


def test_spill_buffers_beyond_capacity(tmp_path):
    """More sequences than the in-memory buffer holds: index goes through the spill files."""
    prefix = str(tmp_path / "s")
    n = 200_000
    lengths = (np.arange(n) % 7) + 1
    tokens = np.arange(int(lengths.sum())) % 60000
    with ix.IndexedDatasetWriter(prefix, dtype=np.uint16) as w:
        for start in range(0, n, 30_000):
            part = lengths[start:start + 30_000]
            offset = int(lengths[:start].sum())
            w.add_batch(tokens[offset:offset + int(part.sum())], part, np.ones(len(part), int))
    ds = ix.IndexedDataset(prefix)
    assert ds.sequence_lengths.tolist() == lengths.tolist()
    assert ds.document_indices.tolist() == list(range(n + 1))
    assert np.array_equal(ds.tokens, tokens.astype(np.uint16))
    assert ix.validate(prefix).ok


def test_merge_checks_dtype_before_writing(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    ix.write_documents(a, [[1]], dtype=np.uint16)
    ix.write_documents(b, [[1]], dtype=np.int32)
    with pytest.raises(ValueError, match="different dtypes"):
        ix.merge([a, b], str(tmp_path / "out"))
    assert sorted(os.listdir(tmp_path)) == ["a.bin", "a.idx", "b.bin", "b.idx"]


# --- property tests --------------------------------------------------------------------------

sequences = st.lists(st.integers(0, 65_499), min_size=1, max_size=8)
documents = st.lists(st.lists(sequences, max_size=4), max_size=12)
settings.register_profile("tb", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.function_scoped_fixture])
settings.load_profile("tb")


@given(docs=documents, dtype=st.sampled_from([np.uint16, np.int32]))
def test_roundtrip(tmp_path_factory, docs, dtype):
    prefix = str(tmp_path_factory.mktemp("rt") / "d")
    ix.write_documents(prefix, docs, dtype=dtype)
    ds = ix.IndexedDataset(prefix)
    back = [[s.tolist() for s in doc] for doc in ds.documents()]
    assert back == docs
    result = ix.validate(prefix)
    assert result.ok, result.reason
    assert result.counts == ix.Counts(len(docs), sum(map(len, docs)),
                                      sum(len(s) for d in docs for s in d))


@given(parts=st.lists(documents, min_size=1, max_size=4))
def test_merge_equals_single_write(tmp_path_factory, parts):
    root = tmp_path_factory.mktemp("mg")
    prefixes = []
    for i, docs in enumerate(parts):
        prefixes.append(str(root / f"p{i}"))
        ix.write_documents(prefixes[-1], docs, dtype=np.uint16)
    ix.merge(prefixes, str(root / "merged"))
    ix.write_documents(str(root / "whole"), [d for docs in parts for d in docs], dtype=np.uint16)
    for suffix in (".idx", ".bin"):
        assert (root / ("merged" + suffix)).read_bytes() == (root / ("whole" + suffix)).read_bytes()


# --- corruptions -------------------------------------------------------------------------------

def _good(tmp_path, name="c_text_document_dc=4_sc=4_tc=10"):
    prefix = str(tmp_path / name)
    ix.write_documents(prefix, GOLDEN_DOCS, dtype=np.uint16)
    return prefix


def _patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_validate_accepts_good_with_name_counts(tmp_path):
    result = ix.validate(_good(tmp_path), vocab_size=11, eod_id=None)
    assert result.ok, result.reason


def test_validate_truncated_bin(tmp_path):
    prefix = _good(tmp_path)
    with open(prefix + ".bin", "r+b") as f:
        f.truncate(18)
    assert "bin is 18 bytes" in ix.validate(prefix).reason


def test_validate_wrong_dtype_code(tmp_path):
    prefix = _good(tmp_path)
    _patch(prefix + ".idx", 17, bytes([4]))  # int32: the .bin is now too short for the lengths
    assert not ix.validate(prefix).ok
    _patch(prefix + ".idx", 17, bytes([6]))
    assert "float" in ix.validate(prefix).reason
    _patch(prefix + ".idx", 17, bytes([42]))
    assert "unknown dtype code 42" in ix.validate(prefix).reason


def test_validate_bad_magic_and_version(tmp_path):
    prefix = _good(tmp_path)
    _patch(prefix + ".idx", 9, (2).to_bytes(8, "little"))
    assert "version 2" in ix.validate(prefix).reason
    _patch(prefix + ".idx", 0, b"XXIDIDX")
    assert "bad magic" in ix.validate(prefix).reason


def test_validate_bad_pointer(tmp_path):
    prefix = _good(tmp_path)
    _patch(prefix + ".idx", 34 + 4 * 4 + 8, (7).to_bytes(8, "little"))  # pointers[1] = 7
    assert "sequence_pointers[1] = 7" in ix.validate(prefix).reason


def test_validate_non_monotone_document_indices(tmp_path):
    prefix = _good(tmp_path)
    _patch(prefix + ".idx", 34 + 12 * 4 + 8 * 2, (1).to_bytes(8, "little"))  # [0,2,1,3,4]
    assert "decrease" in ix.validate(prefix).reason


def test_validate_document_indices_end(tmp_path):
    prefix = _good(tmp_path)
    _patch(prefix + ".idx", 34 + 12 * 4 + 8 * 4, (3).to_bytes(8, "little"))  # [0,2,2,3,3]
    assert "end at 3" in ix.validate(prefix).reason


def test_validate_wrong_count_in_name(tmp_path):
    prefix = _good(tmp_path, name="c_text_document_dc=4_sc=4_tc=11")
    assert ix.validate(prefix).reason == "name says tc=11 but the files hold 10"
    assert ix.validate(prefix, check_name=False).ok


def test_validate_vocab_and_eod(tmp_path):
    prefix = str(tmp_path / "v")
    ix.write_documents(prefix, [[[5, 6], [7, 0]], [], [[3, 0]]], dtype=np.uint16)
    assert ix.validate(prefix, eod_id=0).ok
    assert "document 2" not in ix.validate(prefix, eod_id=0).reason
    assert "document 0 does not end" in ix.validate(prefix, eod_id=7).reason
    assert "token id 7" in ix.validate(prefix, vocab_size=7).reason


def test_validate_truncated_idx(tmp_path):
    prefix = _good(tmp_path)
    with open(prefix + ".idx", "r+b") as f:
        f.truncate(100)
    assert "needs 122" in ix.validate(prefix).reason


# --- the one .idx decoder: read_index (whole, mapped) and count_index (header + lengths only) ---

def test_read_index_gives_the_three_arrays(tmp_path):
    prefix = str(tmp_path / "r")
    ix.write_documents(prefix, [[[1, 2], [3]], [], [[4, 5, 6]]], dtype=np.uint16)
    index = ix.read_index(ix.idx_path(prefix))
    assert (index.header.sequence_count, index.header.document_count) == (3, 3)
    assert index.sequence_lengths.tolist() == [2, 1, 3]
    assert index.sequence_pointers.tolist() == [0, 4, 6]
    assert index.document_indices.tolist() == [0, 2, 2, 3]
    with open(ix.idx_path(prefix), "r+b") as f:
        f.truncate(ix.HEADER_SIZE + 4)
    with pytest.raises(ix.FormatError, match=r"r\.idx is 38 bytes but its header .* needs 102"):
        ix.read_index(ix.idx_path(prefix))


def test_count_index_reads_the_lengths_in_bounded_chunks(tmp_path, monkeypatch):
    prefix = str(tmp_path / "c")
    docs = [[list(range(1, n + 1))] for n in range(1, 40)]
    ix.write_documents(prefix, docs, dtype=np.int32)
    reads = []
    real_open = ix.fsutil.open_file

    class Recording:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def read(self, n=-1):
            reads.append(n)
            return self.f.read(n)

        def seek(self, offset):
            return self.f.seek(offset)

    def recording_open(path, mode="rb", **kwargs):
        return Recording(real_open(path, mode, **kwargs))

    monkeypatch.setattr(ix, "_LENGTH_CHUNK_BYTES", 16)
    monkeypatch.setattr(ix.fsutil, "open_file", recording_open)
    header, counts = ix.count_index(ix.idx_path(prefix))
    assert counts == ix.Counts(documents=39, sequences=39, tokens=sum(range(1, 40)))
    assert header.dtype == np.int32
    # never the whole file: lengths 16 bytes, pointers and document indices 32 at a time
    assert reads[0] == ix.HEADER_SIZE and max(reads[1:]) == 32
    # every array read once, to check it as read_index does (tests/dataio/test_hostile_indexes.py)
    assert sum(reads[1:]) == 12 * 39 + 8 * 40


def test_count_index_wants_the_exact_size(tmp_path):
    prefix = str(tmp_path / "x")
    ix.write_documents(prefix, [[1, 2]], dtype=np.uint16)
    with open(ix.idx_path(prefix), "ab") as f:
        f.write(b"\0")
    with pytest.raises(ix.FormatError, match="is 63 bytes but its header"):
        ix.count_index(ix.idx_path(prefix))
    with open(ix.idx_path(prefix), "r+b") as f:
        f.write(b"NOTMAGIC!")
    with pytest.raises(ix.FormatError, match=r"x\.idx: bad magic"):
        ix.count_index(ix.idx_path(prefix))


def test_count_dataset_checks_the_bin_size_only(tmp_path):
    prefix = str(tmp_path / "en_web_text_document")
    ix.write_documents(prefix, [[1, 2], [], [3]], dtype=np.uint16)
    counted = ix.count_dataset(prefix)
    assert counted.counts == ix.Counts(3, 2, 3) and counted.dtype == np.uint16
    assert counted.name == "en_web_text_document"
    assert counted.counted_name() == "en_web_text_document_dc=3_sc=2_tc=3"
    with open(ix.bin_path(prefix), "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(ix.FormatError, match=r"is 8 bytes but the index holds 3 uint16 tokens"):
        ix.count_dataset(prefix)


def test_format_error_is_a_run_error():
    from runtime import errors

    assert issubclass(ix.FormatError, errors.RunError) and issubclass(ix.FormatError, ValueError)
    assert errors.describe(ix.FormatError("x.idx: bad magic")) == ("x.idx: bad magic", 1)
