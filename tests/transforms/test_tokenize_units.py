"""Pure functions of the tokenize job: record parsing, byte ranges, assembly, holdout hashing."""

import gzip
import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataio import readers
from dataio import discovery
from dataio.elements import WorkItem
from transforms import documents as docs
from transforms.tokenize import assemble, holdout_mask


# --- parsing records ---------------------------------------------------------------------------

@pytest.mark.parametrize("line, reason", [
    (b"", "blank line"),
    (b"   ", "blank line"),
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "a JSON list, not an object"),
    (b'{"other": "x"}', "missing key 'text'"),
    (b'{"text": 5}', r"not a string or list of strings \(got int\)"),
    (b'{"text": null}', "missing or null"),
    (b'{"text": ["a", 1]}', "not a string or list of strings"),
    (b'{"text": "caf\xe9"}', "invalid UTF-8"),
    (b'{"text": "x \\ud800 y"}', "lone surrogate"),
])
def test_bad_records(line, reason):
    with pytest.raises(docs.BadRecord, match=reason):
        docs.parse_json_line(line, ["text"])


def test_good_records():
    assert docs.parse_json_line(b'{"text": "a\\u00e9 \\ud83d\\ude00"}', ["text"]) == {"text": "a\u00e9 \U0001F600"}
    assert docs.parse_json_line(b'{"text": ["s1", ""]}', ["text"]) == {"text": ["s1", ""]}
    # orjson refuses integers past 64 bits; the standard library (as Megatron uses) accepts them
    assert docs.parse_json_line(b'{"n": 123456789012345678901234567890, "text": "x"}',
                                ["text"]) == {"text": "x"}


# --- byte ranges -------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(lines=st.lists(st.text(alphabet="ab\u00e9 ", max_size=30), max_size=40),
       split=st.integers(1, 60), trailing_newline=st.booleans())
def test_ranges_yield_every_line_once(tmp_path_factory, lines, split, trailing_newline):
    path = tmp_path_factory.mktemp("r") / "f.jsonl"
    data = "\n".join(lines).encode() + (b"\n" if trailing_newline and lines else b"")
    path.write_bytes(data)
    f = readers.InputFile(str(path), len(data), "x")
    got = []
    for item in readers.plan_items([f], split_bytes=split):
        got.extend(readers.read_jsonl(item))
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()
    assert [r.data for r in got] == expected
    assert [r.offset for r in got] == [sum(len(x) + 1 for x in expected[:i]) for i in range(len(expected))]
    for r in got:  # line numbers, resolved lazily for ranges not starting at 0
        line = r.line if r.line is not None else readers.line_number_at(str(path), r.offset)
        assert line == expected.index(r.data, 0) + 1 or expected[line - 1] == r.data


def _text_mode_lines(data: bytes) -> list[bytes]:
    """The lines of ``data`` as Python's text mode reads them (Megatron's ``open(path, "r")``:
    universal newlines), without their line ends. latin-1 maps each byte to one character, and
    UTF-8 holds CR and LF bytes only as those characters, so byte and text splits agree."""
    text = io.TextIOWrapper(io.BytesIO(data), encoding="latin-1", newline=None)
    return [line.removesuffix("\n").encode("latin-1") for line in text]


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.sampled_from([b"a", b"\xc3\xa9", b"{}", b"\n", b"\r", b"\r\n"]),
                       max_size=40),
       split=st.integers(1, 12), block=st.integers(1, 9))
def test_cr_crlf_and_mixed_line_ends_read_as_python_text_mode(tmp_path_factory, pieces, split,
                                                              block):
    """Every line once, as Python's text mode splits them (a CR alone ends a line; CR LF is one
    line end, also where a range or block boundary falls between the CR and the LF), with its
    byte offset and the line number text mode gives it."""
    data = b"".join(pieces)
    path = tmp_path_factory.mktemp("r") / "f.jsonl"
    path.write_bytes(data)
    want = _text_mode_lines(data)
    old = readers._BLOCK
    readers._BLOCK = block
    try:
        got = []
        for item in readers.plan_items([readers.InputFile(str(path), len(data), "x")],
                                       split_bytes=split):
            got.extend(readers.read_jsonl(item))
        assert [r.data for r in got] == want
        for n, r in enumerate(got, start=1):
            assert data[r.offset:r.offset + len(r.data)] == r.data
            assert (r.line or readers.line_number_at(str(path), r.offset)) == n
        path.with_suffix(".jsonl.gz").write_bytes(gzip.compress(data))
        whole = WorkItem(path=str(path.with_suffix(".jsonl.gz")), stem="f",
                                 format="jsonl.gz", index=0)
        assert [(r.data, r.line) for r in readers.read_jsonl(whole)] == \
            [(line, n) for n, line in enumerate(want, start=1)]
    finally:
        readers._BLOCK = old


def test_stems_and_formats():
    assert readers.file_stem("a/en_books_split_00.jsonl.gz") == "en_books_split_00"
    assert readers.file_format("x.JSONL.ZST") == "jsonl.zst"
    with pytest.raises(readers.InputError, match="unsupported file type"):
        readers.file_format("x.csv")


def test_discover_errors(tmp_path):
    with pytest.raises(readers.InputError, match="no such file"):
        discovery.discover([str(tmp_path / "missing.jsonl")])
    with pytest.raises(readers.InputError, match="matches no supported file"):
        discovery.discover([str(tmp_path / "*.jsonl")])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x.jsonl").write_text("{}\n")
    (tmp_path / "b" / "x.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    # one name in two folders: each named by its folder below the inputs' common root (issue 24)
    assert [f.stem for f in discovery.discover([str(tmp_path / "a"), str(tmp_path / "b")])] == \
        ["a_x", "b_x"]
    (tmp_path / "a" / "x.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))  # one folder: refused
    with pytest.raises(readers.InputError, match="would both write shards named a_x_"):
        discovery.discover([str(tmp_path / "a"), str(tmp_path / "b")])


def test_corrupt_gzip_is_a_file_error(tmp_path):
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(gzip.compress(json.dumps({"text": "x"}).encode() * 100)[:40])
    item = WorkItem(path=str(path), stem="bad", format="jsonl.gz", index=0)
    with pytest.raises(readers.CorruptFileError, match="cannot decompress"):
        list(readers.read_jsonl(item))


# --- assembly ----------------------------------------------------------------------------------

def test_assemble_megatron_semantics():
    # doc0: segments [1,2],[3]; doc1: empty; doc2: one empty segment and [4]
    ids = np.array([1, 2, 3, 4])
    seg_lengths = np.array([2, 1, 0, 0, 1])
    seg_doc = np.array([0, 0, 1, 2, 2])
    tokens, lengths, per_doc, kept = assemble(ids, seg_lengths, seg_doc, 3, eod=9,
                                              skip_empty=False)
    assert tokens.tolist() == [1, 2, 3, 9, 4, 9]
    assert lengths.tolist() == [2, 2, 2]
    assert per_doc.tolist() == [2, 0, 1]
    tokens, lengths, per_doc, kept = assemble(ids, seg_lengths, seg_doc, 3, eod=None,
                                              skip_empty=True)
    assert tokens.tolist() == [1, 2, 3, 4] and per_doc.tolist() == [2, 1]
    assert kept.tolist() == [True, False, True]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32])
@pytest.mark.parametrize("eod", [None, 0, 7])
@pytest.mark.parametrize("skip_empty", [False, True])
@pytest.mark.parametrize("seg_lengths", [[3], [0], [2, 1], [0, 3]])
def test_assemble_of_one_document_is_the_general_case(dtype, eod, skip_empty, seg_lengths):
    """One document of one segment takes a short path: the same arrays, dtypes included, as
    the general case (a second, empty document sends the same data down it)."""
    ids = np.arange(1, sum(seg_lengths) + 1, dtype=dtype)
    one = assemble(ids, np.array(seg_lengths), np.zeros(len(seg_lengths), np.int64), 1,
                   eod=eod, skip_empty=skip_empty)
    general = assemble(ids, np.array(seg_lengths + [0]),
                       np.array([0] * len(seg_lengths) + [1]), 2, eod=eod,
                       skip_empty=skip_empty)
    general = (general[0], general[1], general[2][:1], general[3][:1])
    for got, want in zip(one, general):
        assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_holdout_is_stable_and_proportional():
    ids = [f"doc-{i}" for i in range(20000)]
    a = holdout_mask(ids, [""] * len(ids), 0.1)
    b = holdout_mask(list(ids), [""] * len(ids), 0.1)
    assert (a == b).all()
    assert 0.08 < a.mean() < 0.12
    assert not holdout_mask(ids[:10], [""] * 10, 0.0).any()
    by_text = holdout_mask([None, None], ["same text", "same text"], 0.5)
    assert by_text[0] == by_text[1]
