"""`python -m pipelines.count`: counts from the .idx alone, verification, --rename, recovery."""

import os

import fsspec
import numpy as np

from megatron_reference import read_pair
from dataio import indexed
from pipelines import count


DOCS = [[[1, 2], [3]], [], [[4, 5, 6]], [[7]]]  # 4 documents (one empty), 4 sequences, 7 tokens


def _write(prefix, docs=DOCS, dtype=np.uint16):
    indexed.write_documents(str(prefix), docs, dtype=dtype)
    return str(prefix)


def _files(folder):
    return sorted(os.listdir(folder))


def test_counts_from_the_index(tmp_path):
    prefix = _write(tmp_path / "en_web_a_text_document")
    counted = indexed.count_dataset(prefix)
    assert counted.counts == indexed.Counts(documents=4, sequences=4, tokens=7)
    assert counted.dtype == np.uint16
    assert counted.counted_name() == "en_web_a_text_document_dc=4_sc=4_tc=7"
    ds = indexed.IndexedDataset(prefix)  # the independent answer: the full reader
    assert (ds.document_count, ds.sequence_count, ds.token_count) == (4, 4, 7)


def test_the_bin_is_never_read(tmp_path):
    prefix = _write(tmp_path / "x_text_document")
    size = os.path.getsize(prefix + ".bin")
    with open(prefix + ".bin", "wb") as f:  # same size, nonsense content
        f.write(b"\xff" * size)
    assert indexed.count_dataset(prefix).counts == indexed.Counts(4, 4, 7)


def test_table_and_no_rename_by_default(tmp_path, capsys):
    _write(tmp_path / "en_web_a_text_document")
    _write(tmp_path / "ar_web_b_text_document", [[[1]]])
    before = _files(tmp_path)
    assert count.run(["--input", str(tmp_path / "*.idx")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["dataset", "dtype", "documents", "sequences", "tokens", "status"]
    assert out[1].split()[:5] == ["ar_web_b_text_document", "uint16", "1", "1", "1"]
    assert out[2].split()[:5] == ["en_web_a_text_document", "uint16", "4", "4", "7"]
    assert out[3].split()[-3:] == ["5", "5", "8"]
    assert _files(tmp_path) == before


def test_rename_appends_counts_to_both_files(tmp_path, capsys):
    prefix = _write(tmp_path / "en_web_a_text_document")
    content = read_pair(prefix)
    assert count.run(["--input", str(tmp_path), "--rename"]) == 0
    renamed = str(tmp_path / "en_web_a_text_document_dc=4_sc=4_tc=7")
    assert _files(tmp_path) == [os.path.basename(renamed) + ".bin",
                                os.path.basename(renamed) + ".idx"]
    assert read_pair(renamed) == content
    capsys.readouterr()
    assert count.run(["--input", str(tmp_path), "--rename"]) == 0  # idempotent: now verified
    assert "verified" in capsys.readouterr().out
    assert indexed.validate(renamed).ok


def test_mismatch_is_an_error_and_nothing_is_renamed(tmp_path, capsys):
    _write(tmp_path / "en_web_a_text_document_dc=4_sc=4_tc=8")  # tc is wrong
    _write(tmp_path / "en_web_b_text_document")
    before = _files(tmp_path)
    assert count.run(["--input", str(tmp_path), "--rename"]) == 1
    captured = capsys.readouterr()
    assert "MISMATCH name says tc=8 but the index holds 7" in captured.out
    assert "nothing was renamed" in captured.err
    assert _files(tmp_path) == before


def test_existing_target_blocks_every_rename(tmp_path, capsys):
    _write(tmp_path / "a_web_text_document")
    _write(tmp_path / "a_web_text_document_dc=4_sc=4_tc=7")  # where the rename would go
    _write(tmp_path / "b_web_text_document")
    before = _files(tmp_path)
    assert count.run(["--input", str(tmp_path / "*_document.idx"), "--rename"]) == 1
    assert "TARGET EXISTS" in capsys.readouterr().out
    assert _files(tmp_path) == before


def test_damaged_index_is_reported(tmp_path, capsys):
    prefix = _write(tmp_path / "a_web_text_document")
    with open(prefix + ".idx", "r+b") as f:
        f.truncate(os.path.getsize(prefix + ".idx") - 8)
    _write(tmp_path / "b_web_text_document")
    assert count.run(["--input", str(tmp_path), "--rename"]) == 1
    out = capsys.readouterr().out
    assert "DAMAGED" in out and "but its header" in out
    assert "b_web_text_document.idx" in _files(tmp_path)  # nothing renamed


def test_bin_size_mismatch_is_reported(tmp_path, capsys):
    prefix = _write(tmp_path / "a_web_text_document")
    with open(prefix + ".bin", "ab") as f:
        f.write(b"\x00\x00")
    assert count.run(["--input", prefix]) == 1
    assert "holds 7 uint16 tokens (14 bytes)" in capsys.readouterr().out


def test_incomplete_dataset_is_an_error(tmp_path, capsys):
    prefix = _write(tmp_path / "a_web_text_document")
    os.remove(prefix + ".idx")
    assert count.run(["--input", str(tmp_path / "*")]) == 1
    assert "has no a_web_text_document.idx" in capsys.readouterr().err


def test_no_match_is_an_error(tmp_path, capsys):
    assert count.run(["--input", str(tmp_path / "*.idx")]) == 1
    assert "no .bin/.idx datasets match" in capsys.readouterr().err
    assert count.run([]) == 2


def test_interrupted_rename_is_finished(tmp_path, capsys):
    prefix = _write(tmp_path / "a_web_text_document")
    content = read_pair(prefix)
    target = prefix + "_dc=4_sc=4_tc=7"
    os.rename(prefix + ".bin", target + ".bin")  # cut off after the first of the two renames
    assert count.run(["--input", str(tmp_path / "*"), "--rename"]) == 0
    assert "finished an interrupted rename" in capsys.readouterr().out
    assert _files(tmp_path) == [os.path.basename(target) + ".bin",
                                os.path.basename(target) + ".idx"]
    assert read_pair(target) == content


def test_fsspec_urls(tmp_path):
    mem = fsspec.filesystem("memory")
    local = _write(tmp_path / "en_web_a_text_document")
    for ext in (".bin", ".idx"):
        mem.pipe(f"/count-test/en_web_a_text_document{ext}", open(local + ext, "rb").read())
    try:
        assert count.run(["--input", "memory://count-test/*.idx", "--rename"]) == 0
        assert sorted(mem.ls("/count-test", detail=False)) == [
            "/count-test/en_web_a_text_document_dc=4_sc=4_tc=7.bin",
            "/count-test/en_web_a_text_document_dc=4_sc=4_tc=7.idx"]
        assert count.run(["--input", "memory://count-test"]) == 0
    finally:
        mem.rm("/count-test", recursive=True)
