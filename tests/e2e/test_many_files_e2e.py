"""Many inputs (issue 24 part 2): what a run asks storage for grows with the files, not with
their square. No timings (bench/many_files.py measures them): listings of the output folder are
counted, and a Parquet file of many row groups is checked to plan few items and read right.

The whole-job runs; the unit tests are in tests/pipelines/test_many_files.py."""

from __future__ import annotations

import json
import os

import fsspec.implementations.local as fsspec_local
from tests.pipelines.test_many_files import SHARDS
from tests.pipelines.test_many_files import many_row_groups  # noqa: F401 (fixture)


def _tokenize(inp, out, tokenizer, *extra) -> int:
    from pipelines import tokenize

    return tokenize.run(["--input", str(inp), "--output", str(out), "--tokenizer-type",
                         "HuggingFaceTokenizer", "--tokenizer-model", str(tokenizer),
                         "--append-eod", "--log-interval", "0", "--workers", "1", *extra])


def _shard_files(out) -> list[str]:
    return sorted(n for n in os.listdir(out) if n.endswith((".bin", ".idx")))


def test_committing_many_shards_lists_the_output_folder_a_fixed_number_of_times(
        tmp_path, hf_tokenizer, monkeypatch):
    """Each commit removes the shard's files of older counts; finding them must not list the
    whole output folder per commit (a folder of 10,000 shards: 99 ms each, 5,000 files 210 s).
    The planner's one listing names them."""
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    for i in range(SHARDS):
        (inp / f"f{i:03d}.jsonl").write_text(json.dumps({"text": f"document {i}"}) + "\n")
    assert _tokenize(inp, out, hf_tokenizer) == 0
    old = _shard_files(out)
    assert len(old) == 2 * SHARDS
    for i in range(SHARDS):  # every input grows: every shard is redone under other counts
        with open(inp / f"f{i:03d}.jsonl", "a") as f:
            f.write(json.dumps({"text": f"another document {i}"}) + "\n")

    listed: list[str] = []
    original = fsspec_local.LocalFileSystem.ls

    def ls(self, path, *args, **kwargs):
        listed.append(os.path.normpath(self._strip_protocol(path)))
        return original(self, path, *args, **kwargs)

    monkeypatch.setattr(fsspec_local.LocalFileSystem, "ls", ls)
    assert _tokenize(inp, out, hf_tokenizer) == 0
    new = _shard_files(out)
    assert len(new) == 2 * SHARDS and not set(new) & set(old)  # each old version removed
    of_output = listed.count(os.path.normpath(str(out)))
    assert of_output <= 3, f"the output folder was listed {of_output} times for {SHARDS} shards"


def test_20000_one_row_groups_give_the_bytes_of_the_same_rows_in_4_groups(
        many_row_groups, tmp_path, hf_tokenizer):
    outputs = {}
    for layout in ("one", "few"):
        out = tmp_path / layout
        assert _tokenize(many_row_groups / layout, out, hf_tokenizer) == 0
        outputs[layout] = {n: (out / n).read_bytes() for n in _shard_files(out)}
    assert len(outputs["one"]) == 2
    assert all(n.startswith("rows_text_document_dc=20000_sc=20000_") for n in outputs["one"])
    assert outputs["one"] == outputs["few"]
