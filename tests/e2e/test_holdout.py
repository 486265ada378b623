"""--holdout-fraction: a stable, runner-independent split by document id hash."""

import json
import os

import pytest

from megatron_reference import shard_files
from dataio import indexed
from pipelines import tokenize

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py



def _run(corpus, out, tok, *extra):
    return tokenize.run(["--input", str(corpus), "--output", str(out), "--tokenizer-type",
                         "HuggingFaceTokenizer", "--tokenizer-model", str(tok), "--append-eod",
                         "--log-interval", "0", "--holdout-fraction", "0.2", "--id-key", "id",
                         *extra])


def _docs(folder):
    """{shard: [document token tuples]} of every dataset in folder."""
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".idx"):
            ds = indexed.IndexedDataset(os.path.join(folder, name[:-4]))
            out[name[:-4]] = [tuple(ds.document(j).tolist()) for j in range(ds.document_count)]
    return out


def test_holdout_split_is_stable_and_disjoint(corpus_dir, corpus_texts, hf_tokenizer, tmp_path):
    assert _run(corpus_dir, tmp_path / "a", hf_tokenizer) == 0
    assert _run(corpus_dir, tmp_path / "b", hf_tokenizer, "--workers", "2",
                "--batch-documents", "5", "--split-bytes", "30000") == 0
    files_a = shard_files(tmp_path / "a")
    assert files_a == shard_files(tmp_path / "b")
    assert any(name.startswith("holdout" + os.sep) for name in files_a)
    train, hold = _docs(tmp_path / "a"), _docs(tmp_path / "a" / "holdout")
    for stem, texts in corpus_texts.items():
        stem = stem[: -len(".jsonl")]
        t = next(v for k, v in train.items() if k.startswith(stem + "_text_document_dc="))
        h = next(v for k, v in hold.items() if k.startswith(stem + "_text_document_dc="))
        assert len(t) + len(h) == len(texts)  # every document exactly once
        assert 0.05 * len(texts) < len(h) < 0.4 * len(texts)
    # which ids went to holdout is decided by the id alone: recompute from the input
    from transforms.tokenize import holdout_mask

    ids = [json.loads(line)["id"] for line in (corpus_dir / "c0_web.jsonl").open(encoding="utf-8")]
    expected = int(holdout_mask(ids, [""] * len(ids), 0.2).sum())
    h0 = next(v for k, v in hold.items() if k.startswith("c0_web_text_document_dc="))
    assert len(h0) == expected
    meta = json.loads((tmp_path / "a" / "metadata.json").read_text())
    assert {s["shard"] for s in meta["shards"]} >= {"holdout/c0_web_text_document",
                                                     "c0_web_text_document"}


def test_holdout_rerun_skips_and_validates(corpus_dir, hf_tokenizer, tmp_path, capsys):
    assert _run(corpus_dir, tmp_path / "o", hf_tokenizer) == 0
    capsys.readouterr()
    assert _run(corpus_dir, tmp_path / "o", hf_tokenizer) == 0
    assert capsys.readouterr().out.count("skip ") == 6
    for folder in (tmp_path / "o", tmp_path / "o" / "holdout"):
        for name in os.listdir(folder):
            if name.endswith(".idx"):
                assert indexed.validate(str(folder / name[:-4]), eod_id=0).ok
