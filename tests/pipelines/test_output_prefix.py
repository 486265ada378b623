"""Megatron's ``--output-prefix P``: one input, its shards exactly ``P_{key}_{level}.bin/.idx``
(no counts in the name: they stay in the commit record and metadata.json); the prefix's folder
is the output folder (its _commits/, metadata.json and lock), so resume and --overwrite work as
with ``--output``, two prefixes in one folder keep apart, and a shard committed under the other
naming (with counts, by ``--output DIR``) is redone and replaced, never kept twice."""

import os
import shutil

import pytest

from pipelines import tokenize

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
IDS = os.path.join(DATA, "megatron_tokenizers", "nulltok", "corpus.jsonl")
TOKENIZER = ["--tokenizer-type", "NullTokenizer", "--vocab-size", "1000", "--append-eod",
             "--workers", "1"]


def _run(capsys, *argv):
    status = tokenize.run(list(argv) + TOKENIZER)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def ids(tmp_path):
    path = tmp_path / "ids.jsonl"
    shutil.copyfile(IDS, path)
    return str(path)


def test_prefix_refused_with_output_or_several_inputs(ids, tmp_path, capsys):
    status, _, err = _run(capsys, "--input", ids, "--output-prefix", str(tmp_path / "p"),
                          "--output", str(tmp_path))
    assert status == 2 and err.startswith("error: --output-prefix with --output: give one")
    assert len(err.splitlines()) == 1
    shutil.copyfile(ids, tmp_path / "more.jsonl")
    status, _, err = _run(capsys, "--input", str(tmp_path / "*.jsonl"), "--output-prefix",
                          str(tmp_path / "out" / "p"))
    assert status == 2 and len(err.splitlines()) == 1
    assert "takes one input file" in err and "gives 2" in err and "--output DIR" in err
    assert not (tmp_path / "out").exists()
    status, _, err = _run(capsys, "--input", ids, "--output-prefix", str(tmp_path) + "/")
    assert status == 2 and err.startswith("error: --output-name ''")
