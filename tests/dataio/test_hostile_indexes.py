"""Every reader of the Megatron format refuses a damaged or hostile ``.idx``/``.bin`` with one
line, as ``validate`` does: the loader (``get_dataset``, ``Shard``, ``IndexedDataset``),
``inspect``, ``count`` and ``merge`` (issue 23, item 14). In-process runs of the commands: fast."""

import numpy as np
import pytest

from dataio import dataset
from dataio import indexed as ix
from pipelines import count, inspect
from tests.dataio import hostile_indexes as hostile

CASES = sorted(hostile.CASES)


def _one_line_refusal(capsys, status):
    out, err = capsys.readouterr()
    assert status != 0, out
    assert "Traceback" not in err and "(a bug)" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return out, lines[0]


def test_the_good_dataset_passes_every_reader(tmp_path, capsys):
    prefix = str(tmp_path / "d")
    ix.write_documents(prefix, hostile.DOCS, dtype=np.uint16)
    assert ix.validate(prefix).ok
    assert dataset.get_dataset(str(tmp_path), 2).num_tokens() == 10
    assert ix.count_dataset(prefix).counts == ix.Counts(4, 4, 10)
    assert count.run(["--input", str(tmp_path)]) == 0
    assert inspect.run([str(tmp_path)]) == 0


@pytest.mark.parametrize("case", CASES)
def test_validate_refuses(tmp_path, case):
    result = ix.validate(hostile.make(tmp_path, case))
    assert not result.ok and result.reason


@pytest.mark.parametrize("case", CASES)
def test_loader_refuses(tmp_path, case):
    prefix = hostile.make(tmp_path, case)
    for opened in (lambda: dataset.get_dataset(str(tmp_path), 2),
                   lambda: dataset.get_dataset([prefix], 2),
                   lambda: ix.IndexedDataset(prefix)):
        with pytest.raises(ix.FormatError) as caught:
            opened()
        assert "\n" not in str(caught.value) and "d." in str(caught.value)


@pytest.mark.parametrize("case", CASES)
def test_inspect_refuses(tmp_path, capsys, case):
    hostile.make(tmp_path, case)
    _, line = _one_line_refusal(capsys, inspect.run([str(tmp_path)]))
    assert "d.idx" in line or "d.bin" in line


@pytest.mark.parametrize("case", CASES)
def test_count_refuses(tmp_path, capsys, case):
    prefix = hostile.make(tmp_path, case)
    with pytest.raises(ix.FormatError):
        ix.count_dataset(prefix)
    out, line = _one_line_refusal(capsys, count.run(["--input", str(tmp_path)]))
    assert "DAMAGED" in out and " -1 " not in out
    assert "1 of 1 datasets failed" in line


@pytest.mark.parametrize("case", CASES)
def test_merge_refuses_and_writes_nothing(tmp_path, case):
    prefix = hostile.make(tmp_path, case)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ix.FormatError):
        ix.merge([prefix], str(out / "m"))
    assert list(out.iterdir()) == []


def test_count_checks_in_bounded_chunks_across_chunk_boundaries(tmp_path, monkeypatch):
    """count_index's streamed checks see what read_index's see, whatever the chunk size: a
    decrease of document_indices exactly at a chunk boundary is found."""
    prefix = str(tmp_path / "c")
    ix.write_documents(prefix, [[list(range(1, n + 1))] for n in range(1, 12)], dtype=np.int32)
    monkeypatch.setattr(ix, "_LENGTH_CHUNK_BYTES", 16)  # 4 entries per chunk
    assert ix.count_index(ix.idx_path(prefix))[1] == ix.Counts(11, 11, 66)
    with open(ix.idx_path(prefix), "r+b") as f:  # document_indices[4] (first of chunk 2) = 2
        f.seek(34 + 12 * 11 + 8 * 4)
        f.write((2).to_bytes(8, "little"))
    with pytest.raises(ix.FormatError, match=r"document_indices decrease at 4 \(3 -> 2\)"):
        ix.count_index(ix.idx_path(prefix))
    monkeypatch.setattr(ix, "_CHUNK_ELEMENTS", 4)
    with pytest.raises(ix.FormatError, match=r"document_indices decrease at 4 \(3 -> 2\)"):
        ix.read_index(ix.idx_path(prefix))
