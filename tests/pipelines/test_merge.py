"""`python -m pipelines.merge`: equals writing everything at once, order, names, failures."""

import os

import fsspec
import numpy as np
import pytest

from megatron_reference import read_pair
from dataio import indexed
from dataio import dataset_find
from pipelines import merge

PARTS = {
    "en_web_a_split_2_text_document": [[[1, 2], [3]], []],
    "en_web_a_split_10_text_document": [[[4, 5, 6]], [[7]], []],
    "en_web_a_split_1_text_document": [[[8]]],
}
# Megatron's merge_datasets.py order (plain sorted(): "10_" before "1_" before "2_"), the default
ORDER = ["en_web_a_split_10_text_document", "en_web_a_split_1_text_document",
         "en_web_a_split_2_text_document"]
# --natural-order: split_2 before split_10
NATURAL_ORDER = ["en_web_a_split_1_text_document", "en_web_a_split_2_text_document",
                 "en_web_a_split_10_text_document"]


def _parts(folder, dtype=np.uint16):
    folder.mkdir(exist_ok=True)
    for name, docs in PARTS.items():
        indexed.write_documents(str(folder / name), docs, dtype=dtype)
    return folder


@pytest.mark.parametrize("order, flags", [(ORDER, []), (NATURAL_ORDER, ["--natural-order"])])
def test_merge_equals_writing_all_documents_at_once(tmp_path, capsys, order, flags):
    parts = _parts(tmp_path / "parts")
    everything = [doc for name in order for doc in PARTS[name]]
    reference = str(tmp_path / "reference")
    indexed.write_documents(reference, everything, dtype=np.uint16)
    assert merge.run(["--input", str(parts / "*.idx"),
                      "--output", str(tmp_path / "out" / "en_web"), *flags]) == 0
    merged = str(tmp_path / "out" / "en_web_dc=6_sc=5_tc=8")
    assert read_pair(merged) == read_pair(reference)
    assert sorted(os.listdir(tmp_path / "out")) == ["en_web_dc=6_sc=5_tc=8.bin",
                                                    "en_web_dc=6_sc=5_tc=8.idx"]
    assert "merged 3 datasets" in capsys.readouterr().out
    assert indexed.validate(merged).ok


def test_output_names(tmp_path, capsys):
    parts = _parts(tmp_path / "parts")
    good = str(tmp_path / "a_dc=6_sc=5_tc=8")
    assert merge.run(["--input", str(parts), "--output", good]) == 0
    assert os.path.exists(good + ".idx")
    assert merge.run(["--input", str(parts), "--output", str(tmp_path / "b_dc=6_sc=5_tc=9")]) == 1
    assert "says dc=6 sc=5 tc=9 but the inputs hold dc=6 sc=5 tc=8" in capsys.readouterr().err
    assert merge.run(["--input", str(parts), "--output", str(tmp_path / "c.bin"),
                      "--no-counts"]) == 0
    assert os.path.exists(tmp_path / "c.idx") and os.path.exists(tmp_path / "c.bin")
    assert not any(n.startswith("b_") for n in os.listdir(tmp_path))


def test_existing_output_and_overwrite(tmp_path, capsys):
    parts = _parts(tmp_path / "parts")
    out = str(tmp_path / "m")
    assert merge.run(["--input", str(parts), "--output", out]) == 0
    assert merge.run(["--input", str(parts), "--output", out]) == 1
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert merge.run(["--input", str(parts), "--output", out, "--overwrite"]) == 0


def test_output_that_is_an_input(tmp_path, capsys):
    parts = _parts(tmp_path / "parts")
    target = str(parts / ORDER[0])
    assert merge.run(["--input", str(parts), "--output", target, "--no-counts",
                      "--overwrite"]) == 2  # a bad command line (tests/pipelines/test_same_path.py)
    assert "would write over the input" in capsys.readouterr().err


def test_dtype_mismatch_writes_nothing(tmp_path, capsys):
    parts = _parts(tmp_path / "parts")
    indexed.write_documents(str(parts / "en_web_a_split_3_text_document"), [[1]], dtype=np.int32)
    (tmp_path / "out").mkdir()
    assert merge.run(["--input", str(parts), "--output", str(tmp_path / "out" / "m")]) == 1
    err = capsys.readouterr().err
    assert "different dtypes (int32: en_web_a_split_3_text_document; uint16:" in err
    assert "nothing was written" in err
    assert os.listdir(tmp_path / "out") == []


def test_failure_midway_leaves_nothing(tmp_path, monkeypatch):
    # Fault injection: the second input fails while being copied (as a storage error would).
    parts = _parts(tmp_path / "parts")
    real = indexed.IndexedDatasetWriter.add_index
    calls = []

    def failing(self, prefix):
        calls.append(prefix)
        if len(calls) == 2:
            raise OSError("simulated read error")
        return real(self, prefix)

    monkeypatch.setattr(indexed.IndexedDatasetWriter, "add_index", failing)
    (tmp_path / "out").mkdir()
    with pytest.raises(OSError, match="simulated"):
        merge.merge_datasets(dataset_find.find_datasets([str(parts)]), str(tmp_path / "out" / "m"))
    assert os.listdir(tmp_path / "out") == []  # no final name, no temporary file


def test_no_inputs(tmp_path, capsys):
    assert merge.run(["--input", str(tmp_path / "*.idx"), "--output", str(tmp_path / "m")]) == 1
    assert "no .bin/.idx datasets match" in capsys.readouterr().err
    assert merge.run(["--output", "x"]) == 2


def test_fsspec_urls(tmp_path):
    parts = _parts(tmp_path / "parts")
    mem = fsspec.filesystem("memory")
    for name in PARTS:
        for ext in (".bin", ".idx"):
            mem.pipe(f"/merge-test/in/{name}{ext}", (parts / (name + ext)).read_bytes())
    try:
        assert merge.run(["--input", "memory://merge-test/in/*.bin",
                          "--output", "memory://merge-test/out/en_web"]) == 0
        assert sorted(mem.ls("/merge-test/out", detail=False)) == [
            "/merge-test/out/en_web_dc=6_sc=5_tc=8.bin",
            "/merge-test/out/en_web_dc=6_sc=5_tc=8.idx"]
        local = str(tmp_path / "local")
        merge.run(["--input", str(parts), "--output", local, "--no-counts"])
        assert mem.cat("/merge-test/out/en_web_dc=6_sc=5_tc=8.bin") == read_pair(local)[0]
        assert mem.cat("/merge-test/out/en_web_dc=6_sc=5_tc=8.idx") == read_pair(local)[1]
    finally:
        mem.rm("/merge-test", recursive=True)
