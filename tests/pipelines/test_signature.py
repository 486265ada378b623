"""`python -m pipelines.signature` and the --input expansion shared by count, blend and merge
(dataio.dataset_find.find_datasets)."""

import json
import os

import fsspec
import numpy as np
import pytest

from dataio import indexed, readers
from dataio import dataset_find
from pipelines import signature

NAMES = ["en_web_a_split_00010_text_document_dc=1_sc=1_tc=2",
         "ar_books_b_split_00002_text_document_dc=1_sc=1_tc=2",
         "en_web_a_split_00002_text_document_dc=1_sc=1_tc=2"]


def _folder(root):
    root.mkdir(exist_ok=True)
    for name in NAMES:
        indexed.write_documents(str(root / name), [[1, 2]], dtype=np.uint16)
    (root / "metadata.json").write_text("{}")
    (root / "holdout").mkdir()
    indexed.write_documents(str(root / "holdout" / "en_web_x_text_document_dc=1_sc=1_tc=1"),
                            [[3]], dtype=np.uint16)
    (root / f".late.bin{indexed.TEMPORARY_MARK}abc").write_bytes(b"")  # an unfinished write
    return root


def test_sorted_prefixes_of_the_folder_only(tmp_path, capsys):
    folder = _folder(tmp_path / "tok")
    out = tmp_path / "sig" / "signature.json"
    assert signature.run(["--input", str(folder), "--output", str(out)]) == 0
    assert json.loads(out.read_text()) == sorted(NAMES)
    assert "3 datasets" in capsys.readouterr().out


def test_incomplete_dataset(tmp_path, capsys):
    folder = _folder(tmp_path / "tok")
    os.remove(folder / (NAMES[0] + ".idx"))
    out = tmp_path / "signature.json"
    assert signature.run(["--input", str(folder), "--output", str(out)]) == 1
    assert f"{NAMES[0]}.bin has no {NAMES[0]}.idx" in capsys.readouterr().err
    assert not out.exists()
    assert signature.run(["--input", str(folder), "--output", str(out),
                          "--skip-incomplete"]) == 0
    assert json.loads(out.read_text()) == sorted(NAMES[1:])


def test_missing_or_empty_folder(tmp_path, capsys):
    assert signature.run(["--input", str(tmp_path / "nope"), "--output", "-"]) == 1
    assert "is not a folder" in capsys.readouterr().err
    assert signature.run(["--input", str(tmp_path), "--output", "-"]) == 1
    assert "no .bin/.idx datasets" in capsys.readouterr().err
    assert signature.run(["--input", str(tmp_path)]) == 2


def test_fsspec_url_in_and_out(tmp_path):
    mem = fsspec.filesystem("memory")
    local = _folder(tmp_path / "tok")
    for name in NAMES:
        for ext in (".bin", ".idx"):
            mem.pipe(f"/sig-test/data/{name}{ext}", (local / (name + ext)).read_bytes())
    try:
        assert signature.run(["--input", "memory://sig-test/data",
                              "--output", "memory://sig-test/signature.json"]) == 0
        assert json.loads(mem.cat("/sig-test/signature.json")) == sorted(NAMES)
    finally:
        mem.rm("/sig-test", recursive=True)


def test_expand_inputs_forms(tmp_path):
    folder = _folder(tmp_path / "tok")
    every = sorted(str(folder / n) for n in NAMES)
    assert dataset_find.find_datasets([str(folder)]) == every
    assert dataset_find.find_datasets([str(folder / "*")]) == every  # metadata.json ignored
    assert dataset_find.find_datasets([str(folder / "en_*.bin"), str(folder / "en_*.idx")]) == \
        [p for p in every if "/en_" in p]
    assert dataset_find.find_datasets([str(folder / NAMES[1])]) == [str(folder / NAMES[1])]
    with pytest.raises(readers.InputError, match="no .bin/.idx datasets match"):
        dataset_find.find_datasets([str(folder / "zz_*")])


def test_file_urls(tmp_path):
    folder = _folder(tmp_path / "tok")
    out = tmp_path / "signature.json"
    assert signature.run(["--input", f"file://{folder}", "--output", f"file://{out}"]) == 0
    assert json.loads(out.read_text()) == sorted(NAMES)
    assert [os.path.basename(p) for p in dataset_find.find_datasets([f"file://{folder}/en_*.idx"])] \
        == sorted(n for n in NAMES if n.startswith("en_"))
