"""Real corpus layouts, end to end (issue 24 part 3): FineWeb's dumps (``CC-MAIN-*/000_00000.parquet``)
and dolma's sources (``documents/<source>/0000.json.gz``) repeat file names in their folders.
A run over them gives distinct, documented names (docs/usage.md "Shard names"), shards byte-identical to
Megatron over each file alone, a rerun that skips every shard, and, with ``--output-layout
mirror``, shards in the input's folders that the loader, validate, count, inspect and merge
find (holdout shards too)."""

import gzip
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from megatron_reference import megatron_documents, read_pair, reference_write
from dataio import dataset, indexed
from dataio import dataset_find
from pipelines import count, demo, inspect, merge, tokenize, validate

pytestmark = pytest.mark.slow  # whole-job runs: see tests/conftest.py


def _run(inputs, output, tokenizer, *extra):
    argv = [f"--input={p}" for p in inputs]
    argv += ["--output", str(output), "--tokenizer-type", "HuggingFaceTokenizer",
             "--tokenizer-model", str(tokenizer), "--log-interval", "0", "--append-eod", *extra]
    return tokenize.run([str(a) for a in argv])


def _texts(seed, n):
    return [r["text"] for r in demo.documents(seed, n, empty_every=11)]


@pytest.fixture(scope="module")
def fineweb(tmp_path_factory):
    """{relative path: texts} of a FineWeb-like Parquet tree: two dumps, one name in both."""
    root = tmp_path_factory.mktemp("fineweb") / "data"
    texts = {"CC-MAIN-2024-10/000_00000.parquet": _texts(1, 40),
             "CC-MAIN-2024-18/000_00000.parquet": _texts(2, 30),
             "CC-MAIN-2024-18/001_00000.parquet": _texts(3, 20),
             # a Spark dataset folder below: one dataset, its part a shard
             "CC-MAIN-2024-18/t.parquet/part-00000-1.snappy.parquet": _texts(7, 10)}
    for rel, values in texts.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"text": values}), root / rel, row_group_size=7)
    return root, texts


@pytest.fixture(scope="module")
def dolma(tmp_path_factory):
    """{relative path: texts} of a dolma-like JSONL tree: documents/<source>/0000.json.gz."""
    root = tmp_path_factory.mktemp("dolma") / "documents"
    texts = {"books/0000.json.gz": _texts(4, 25), "wiki/0000.json.gz": _texts(5, 35),
             "wiki/0001.json": _texts(6, 15)}
    for rel, values in texts.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps({"text": t, "id": k}) + "\n" for k, t in enumerate(values))
        data = lines.encode()
        (root / rel).write_bytes(gzip.compress(data) if rel.endswith(".gz") else data)
    return root, texts


def _shards(out):
    """{shard name below out (counts stripped): prefix} of the committed train shards."""
    return {os.path.relpath(p, out).split("_dc=")[0]: p for p in dataset_find.resolve_prefixes(str(out))}


def _assert_megatron_bytes(shards, names, texts, hf_encode, tmp_path):
    _, encode, eod = hf_encode
    for rel, name in names.items():
        ref = str(tmp_path / f"ref_{name.replace('/', '_')}")
        reference_write(ref, megatron_documents(texts[rel], encode, eod=eod), np.uint16)
        assert read_pair(shards[f"{name}_text_document"]) == read_pair(ref), rel


def test_fineweb_tree_flat_names_bytes_and_rerun(fineweb, hf_tokenizer, hf_encode, tmp_path,
                                                 capsys):
    root, texts = fineweb
    out = tmp_path / "out"
    assert _run([f"{root}/"], out, hf_tokenizer) == 0  # a folder: read recursively
    names = {"CC-MAIN-2024-10/000_00000.parquet": "CC-MAIN-2024-10_000_00000",
             "CC-MAIN-2024-18/000_00000.parquet": "CC-MAIN-2024-18_000_00000",
             "CC-MAIN-2024-18/001_00000.parquet": "001_00000",  # no repeat: today's name
             "CC-MAIN-2024-18/t.parquet/part-00000-1.snappy.parquet": "t_part-00000-1"}
    shards = _shards(out)
    assert set(shards) == {f"{n}_text_document" for n in names.values()}
    _assert_megatron_bytes(shards, names, texts, hf_encode, tmp_path)
    # two worker processes: the same names, the same bytes
    assert _run([f"{root}/"], tmp_path / "out2", hf_tokenizer, "--workers", "2") == 0
    two = _shards(tmp_path / "out2")
    assert {n: os.path.basename(p) for n, p in two.items()} == \
        {n: os.path.basename(p) for n, p in shards.items()}
    assert all(read_pair(two[n]) == read_pair(shards[n]) for n in shards)
    meta = json.loads((out / "metadata.json").read_text())
    assert sorted(os.path.relpath(i["path"], root) for i in meta["inputs"]) == sorted(texts)
    capsys.readouterr()
    # the rerun (the same inputs given as a glob) skips every shard: the resume keys are stable
    assert _run([f"{root}/**/*.parquet"], out, hf_tokenizer) == 0
    said = capsys.readouterr().out
    assert said.count("skip ") == 4 and "nothing to do: 4 shards already committed" in said


def test_dolma_tree_mirrored_is_found_by_every_reader(dolma, hf_tokenizer, hf_encode, tmp_path,
                                                      capsys):
    root, texts = dolma
    out = tmp_path / "out"
    assert _run([f"{root}/*/*.json*"], out, hf_tokenizer, "--output-layout", "mirror") == 0
    names = {rel: rel.split(".")[0] for rel in texts}  # books/0000, wiki/0000, wiki/0001
    shards = _shards(out)
    assert sorted(shards) == sorted(f"{n}_text_document" for n in names.values())
    assert (out / "books").is_dir() and (out / "_commits" / "wiki").is_dir()
    _assert_megatron_bytes(shards, names, texts, hf_encode, tmp_path)
    # the loader reads them in name order: books/ before wiki/
    ds = dataset.get_dataset(str(out), 16)
    documents = sum(len(t) for t in texts.values())
    assert ds.num_files() == 3 and ds.num_documents() == documents
    assert validate.run([str(out)]) == 0
    assert count.run(["--input", str(out)]) == 0
    assert "total (3 datasets)" in capsys.readouterr().out
    assert merge.run(["--input", str(out), "--output", str(tmp_path / "merged" / "all")]) == 0
    (merged,) = [p for p in os.listdir(tmp_path / "merged") if p.endswith(".idx")]
    merged_counts = indexed.prefix_of(merged).split("_dc=")[1].split("_")
    assert merged_counts[0] == str(documents) and merged_counts[2] == f"tc={ds.num_tokens()}"
    # the rerun skips every shard
    capsys.readouterr()
    assert _run([f"{root}/*/*.json*"], out, hf_tokenizer, "--output-layout", "mirror") == 0
    assert "nothing to do: 3 shards already committed" in capsys.readouterr().out
    # the flat layout into it would write the same inputs again under other names: refused
    assert _run([f"{root}/*/*.json*"], out, hf_tokenizer) == 2
    err = capsys.readouterr().err
    assert "holds the shards of" in err and "as books/0000_text_document" in err
    assert "names them books_0000_text_document (another --output-layout)" in err
    assert sorted(_shards(out)) == sorted(f"{n}_text_document" for n in names.values())


def test_mirrored_holdout_shards_are_found(dolma, hf_tokenizer, tmp_path, capsys):
    root, texts = dolma
    out = tmp_path / "out"
    assert _run([root], out, hf_tokenizer, "--output-layout", "mirror",
                "--holdout-fraction", "0.3") == 0
    holdout = dataset_find.resolve_prefixes(str(out), "holdout")
    assert sorted(os.path.relpath(p, out).split("_dc=")[0] for p in holdout) == \
        ["holdout/books/0000_text_document", "holdout/wiki/0000_text_document",
         "holdout/wiki/0001_text_document"]
    train = dataset.get_dataset(str(out), 8)
    held = dataset.get_dataset(str(out), 8, split="holdout")
    assert train.num_documents() + held.num_documents() == sum(len(t) for t in texts.values())
    assert held.vocab_size == train.vocab_size == 1200  # metadata.json of the output above
    capsys.readouterr()
    assert validate.run([str(out)]) == 0
    said = capsys.readouterr().out
    assert said.count("OK ") == 6 and "6 datasets: 6 OK, 0 FAIL" in said
    assert inspect.run([str(out), "--split", "holdout"]) == 0


def test_an_input_of_the_same_name_added_later_leaves_the_committed_name(
        fineweb, hf_tokenizer, tmp_path, capsys):
    root, _ = fineweb
    data = tmp_path / "data"
    (data / "CC-MAIN-2024-10").mkdir(parents=True)
    first = data / "CC-MAIN-2024-10" / "000_00000.parquet"
    first.write_bytes((root / "CC-MAIN-2024-10" / "000_00000.parquet").read_bytes())
    out = tmp_path / "out"
    assert _run([data], out, hf_tokenizer) == 0
    assert set(_shards(out)) == {"000_00000_text_document"}
    (data / "CC-MAIN-2024-18").mkdir()
    (data / "CC-MAIN-2024-18" / "000_00000.parquet").write_bytes(
        (root / "CC-MAIN-2024-18" / "000_00000.parquet").read_bytes())
    capsys.readouterr()
    assert _run([data], out, hf_tokenizer) == 0
    captured = capsys.readouterr()
    # the committed input keeps its name (its data is not written twice); the new one is named
    # by its folder
    assert set(_shards(out)) == {"000_00000_text_document",
                                 "CC-MAIN-2024-18_000_00000_text_document"}
    assert "skip 000_00000_text_document" in captured.out
    assert f"{first} keeps the shard name 000_00000_*" in captured.err
