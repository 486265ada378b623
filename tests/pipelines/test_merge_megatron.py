"""`python -m pipelines.merge` against Megatron-LM's own tools/merge_datasets.py.

tests/data/megatron_merge/ holds four small datasets whose names sort differently in plain and in
natural order, and what core_v0.16.1's merge_datasets.py made of them (its make_fixtures.py has
the command). The committed bytes are the reference; the last test re-runs Megatron when a python
with megatron-core and a Megatron-LM checkout are given, and is skipped otherwise, saying why.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest


from dataio import indexed
from megatron_reference import read_pair
from pipelines import merge

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "megatron_merge")
INPUTS = os.path.join(HERE, "inputs")
MEGATRON_MERGED = os.path.join(HERE, "megatron", "merged")
with open(os.path.join(HERE, "documents.json"), encoding="utf-8") as _f:
    MANIFEST = json.load(_f)


def _inputs_copy(tmp_path):
    folder = tmp_path / "inputs"
    shutil.copytree(INPUTS, folder)
    return folder


def test_fixture_order_differs_between_sorted_and_natural():
    names = list(MANIFEST["inputs"])
    assert MANIFEST["megatron_order"] == sorted(names)
    assert merge.merge_order(names) == MANIFEST["megatron_order"]
    assert merge.merge_order(names, natural=True) != merge.merge_order(names)


@pytest.mark.parametrize("flags", [["--output-prefix", "{out}"],
                                   ["--output", "{out}", "--no-counts"]])
def test_default_order_is_byte_identical_to_megatron_merge_datasets(tmp_path, capsys, flags):
    inputs = _inputs_copy(tmp_path)
    out = str(tmp_path / "out" / "merged")
    argv = ["--input", str(inputs)] + [f.format(out=out) for f in flags]
    assert merge.run(argv) == 0, capsys.readouterr().err
    assert sorted(os.listdir(tmp_path / "out")) == ["merged.bin", "merged.idx"]
    assert read_pair(out) == read_pair(MEGATRON_MERGED)


def test_output_prefix_is_taken_literally_as_megatron_does(tmp_path, capsys):
    out = str(tmp_path / "merged.bin")  # Megatron writes merged.bin.bin / merged.bin.idx
    assert merge.run(["--input", INPUTS, "--output-prefix", out]) == 0, capsys.readouterr().err
    assert read_pair(out) == read_pair(MEGATRON_MERGED)


def test_natural_order_on_request(tmp_path, capsys):
    inputs = _inputs_copy(tmp_path)
    out = str(tmp_path / "natural")
    assert merge.run(["--input", str(inputs), "--output-prefix", out, "--natural-order"]) == 0
    documents = [doc for name in merge.merge_order(list(MANIFEST["inputs"]), natural=True)
                 for doc in MANIFEST["inputs"][name]]
    reference = str(tmp_path / "reference")
    with indexed.IndexedDatasetWriter(reference, dtype=np.uint16) as writer:
        for doc in documents:  # zero-length sequences kept, as make_fixtures.py wrote them
            writer.add_document(np.asarray([t for s in doc for t in s], dtype=np.int64),
                                [len(s) for s in doc])
    assert read_pair(out) == read_pair(reference)
    assert read_pair(out) != read_pair(MEGATRON_MERGED)


def test_multimodal_is_refused_in_one_line(tmp_path, capsys):
    assert merge.run(["--input", INPUTS, "--output-prefix", str(tmp_path / "m"),
                      "--multimodal"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--multimodal" in err
    assert "tools/merge_datasets.py --multimodal" in err
    assert os.listdir(tmp_path) == []


def test_output_and_output_prefix_exclude_each_other(tmp_path, capsys):
    assert merge.run(["--input", INPUTS, "--output", str(tmp_path / "a"),
                      "--output-prefix", str(tmp_path / "b")]) == 2
    assert "not allowed with argument" in capsys.readouterr().err
