"""`python -m pipelines.inspect`: table, totals, vocab size, percentiles, decoding, histogram."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from dataio import indexed as ix
from pipelines import demo
from pipelines import inspect as inspect_cli

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    from tokenizers import Tokenizer

    root = tmp_path_factory.mktemp("inspect")
    shards = [[r["text"] for r in demo.documents(seed, 40, long_every=13, empty_every=7)]
              for seed in (11, 12)]
    tok_dir = demo.train_bpe([t for s in shards for t in s if t], str(root / "tokenizer"),
                             vocab_size=500)
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    eod = tok.token_to_id("<|endoftext|>")
    out = root / "out"
    lengths = []
    for k, texts in enumerate(shards):
        docs = [enc.ids + [eod] if text else []
                for enc, text in zip(tok.encode_batch(texts), texts)]
        lengths += [len(d) for d in docs]
        ix.write_documents(str(out / f"web_{k}_text_document"), docs, dtype=np.uint16)
    ix.write_documents(str(out / "holdout" / "web_0_text_document"), [[1, 2, eod]],
                       dtype=np.uint16)
    (out / "metadata.json").write_text(json.dumps({"tokenizer": {"vocab_size": 500}}))
    return {"out": str(out), "tokenizer": tok_dir, "texts": shards, "lengths": lengths,
            "root": root}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "pipelines.inspect", *args],
                          capture_output=True, text=True)


def _decoded(stdout):
    parts = re.split(r"^--- document (\d+) \((\d+) tokens\) ---\n", stdout, flags=re.M)
    return {int(j): body[:-1] if body.endswith("\n") else body
            for j, _, body in zip(parts[1::3], parts[2::3], parts[3::3])}


def test_cli_table_decode_and_plot(output, tmp_path):
    png = tmp_path / "lengths.png"
    proc = _cli(output["out"], "--decode", "4", "--tokenizer-model", output["tokenizer"],
                "--max-chars", "0", "--plot", str(png))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["dataset", "documents", "sequences", "tokens", "dtype"]
    lengths = output["lengths"]
    nonempty = [n for n in lengths if n]
    row0 = lines[1].split()
    assert row0 == ["web_0_text_document", "40", str(sum(1 for n in lengths[:40] if n)),
                    str(sum(lengths[:40])), "uint16"]
    total = lines[3].split()
    assert total[:3] == ["total", "(2", "datasets)"]
    assert total[3:] == ["80", str(len(nonempty)), str(sum(lengths)), "uint16"]
    assert "vocab size: 500" in proc.stdout
    assert f"empty documents: {len(lengths) - len(nonempty)}" in proc.stdout
    assert f"p50 {np.percentile(nonempty, 50):,.0f}" in proc.stdout
    assert f"max {max(nonempty):,}" in proc.stdout
    assert "holdout/: 1 dataset (show them with --split holdout)" in proc.stdout
    decoded = _decoded(proc.stdout.split("histogram:")[0])
    assert sorted(decoded) == [0, 1, 2, 3]
    for j in range(4):  # byte-level BPE is lossless; the EOD is left out
        assert decoded[j] == output["texts"][0][j]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_holdout_split_and_prefix(output, capsys):
    assert inspect_cli.run([output["out"], "--split", "holdout"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^web_0_text_document\s+1\s+1\s+3\s+uint16$", text, flags=re.M)
    assert "vocab size: 500" in text
    assert inspect_cli.run([os.path.join(output["out"], "web_1_text_document.idx")]) == 0
    text = capsys.readouterr().out
    assert "total (1 dataset)" in text and "web_0" not in text


def test_sentencepiece_decode(output, tmp_path, capsys):
    import sentencepiece as spm

    texts = [t for t in output["texts"][0] if t]
    model = demo.train_sentencepiece(texts, str(tmp_path / "spm"), vocab_size=800)
    sp = spm.SentencePieceProcessor(model_file=model)
    docs = [sp.encode(t) + [sp.eos_id()] for t in texts[:3]]
    ix.write_documents(str(tmp_path / "sp" / "d"), docs, dtype=np.uint16)
    assert inspect_cli.run([str(tmp_path / "sp"), "--decode", "2", "--tokenizer-model", model,
                            "--max-chars", "0"]) == 0
    decoded = _decoded(capsys.readouterr().out)
    assert decoded == {0: sp.decode(docs[0]), 1: sp.decode(docs[1])}
    assert decoded[0].split() == texts[0].split()  # SentencePiece normalizes whitespace only


def test_max_chars_cuts_long_documents(output, capsys):
    assert inspect_cli.run([output["out"], "--decode", "13", "--tokenizer-model",
                            output["tokenizer"], "--max-chars", "50"]) == 0
    decoded = _decoded(capsys.readouterr().out)
    long_doc = decoded[12]  # every 13th demo document is long
    assert long_doc == output["texts"][0][12][:50] + " [...]"


def test_errors(output, tmp_path):
    proc = _cli(str(tmp_path / "missing"))
    assert proc.returncode == 2 and "no dataset at" in proc.stderr
    proc = _cli(str(tmp_path))
    assert proc.returncode == 2 and "no .bin/.idx datasets in" in proc.stderr
    proc = _cli(output["out"], "--decode", "2")
    assert proc.returncode == 2 and "--decode needs --tokenizer-model" in proc.stderr
    proc = _cli(output["out"], "--decode", "2", "--tokenizer-model", str(tmp_path))
    assert proc.returncode != 0 and "has no tokenizer.json" in proc.stderr


def test_decode_defaults_to_the_recorded_tokenizer(output, tmp_path, capsys):
    tok_dir = output["tokenizer"]
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    ix.write_documents(str(tmp_path / "d"), [tok.encode("Recorded tokenizer.").ids],
                       dtype=np.uint16)
    (tmp_path / "metadata.json").write_text(json.dumps({"tokenizer": {"vocab_size": 500,
                                                                      "model": tok_dir}}))
    assert inspect_cli.run([str(tmp_path), "--decode", "1"]) == 0
    assert _decoded(capsys.readouterr().out) == {0: "Recorded tokenizer."}


def test_fsspec_url_gives_the_same_table(output, capsys):
    import fsspec

    fs = fsspec.filesystem("memory")
    for name in os.listdir(output["out"]):
        path = os.path.join(output["out"], name)
        if os.path.isfile(path):
            fs.pipe(f"/inspect-test/{name}", open(path, "rb").read())
    try:
        assert inspect_cli.run([output["out"]]) == 0
        local = capsys.readouterr().out
        assert inspect_cli.run(["memory:///inspect-test"]) == 0
        remote = capsys.readouterr().out
    finally:
        fs.rm("/inspect-test", recursive=True)
    assert remote.splitlines()[:7] == local.splitlines()[:7]


def test_a_job_run_with_relative_paths_is_decoded_from_another_folder(output, tmp_path,
                                                                        monkeypatch, capsys):
    # metadata.json records resolved paths (tokenizer, its files, inputs), so `inspect --decode`
    # finds the tokenizer without --tokenizer-model from any folder.
    from pipelines import tokenize

    work = tmp_path / "work"
    (work / "in").mkdir(parents=True)
    (work / "in" / "a.jsonl").write_text(json.dumps({"text": "Decoded from elsewhere."}) + "\n")
    os.symlink(output["tokenizer"], work / "tok")
    monkeypatch.chdir(work)
    assert tokenize.run(["--input", "in", "--output", "out", "--tokenizer-type",
                         "HuggingFaceTokenizer", "--tokenizer-model", "tok",
                         "--log-interval", "0"]) == 0
    meta = json.loads((work / "out" / "metadata.json").read_text())
    assert meta["tokenizer"]["model"] == str(work / "tok")
    assert {f["path"] for f in meta["tokenizer"]["files"]} >= {str(work / "tok" / "tokenizer.json")}
    assert all(f["path"].startswith(str(work / "tok") + os.sep) for f in meta["tokenizer"]["files"])
    assert [i["path"] for i in meta["inputs"]] == [str(work / "in" / "a.jsonl")]
    assert [s["input"] for s in meta["shards"]] == [str(work / "in" / "a.jsonl")]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert inspect_cli.run([str(work / "out"), "--decode", "1"]) == 0
    assert _decoded(capsys.readouterr().out) == {0: "Decoded from elsewhere."}


# --- a damaged tokenizer, or one that does not fit the dataset (issue 23 item 17, review) --------

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "megatron_tokenizers")


def _one_error_line(proc, status):
    assert proc.returncode == status, proc.stderr
    assert "Traceback" not in proc.stderr and "a bug" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_a_truncated_tokenizer_json_is_a_configuration_error(output, tmp_path):
    text = open(os.path.join(output["tokenizer"], "tokenizer.json"), "rb").read()
    bad = tmp_path / "tokenizer.json"
    bad.write_bytes(text[: len(text) // 2])
    line = _one_error_line(_cli(output["out"], "--decode", "1", "--tokenizer-model", str(bad)), 2)
    assert line.startswith(f"error: --tokenizer-model {bad}: not a usable HuggingFaceTokenizer")


def test_a_truncated_sentencepiece_model_is_a_configuration_error(output, tmp_path):
    data = open(os.path.join(DATA, "spm", "bpe.model"), "rb").read()
    bad = tmp_path / "bad.model"
    bad.write_bytes(data[: len(data) // 2])
    line = _one_error_line(_cli(output["out"], "--decode", "1", "--tokenizer-model", str(bad)), 2)
    assert line.startswith(f"error: --tokenizer-model {bad}: not a usable SentencePieceTokenizer")


@pytest.mark.parametrize("kind", ["sentencepiece", "huggingface"])
def test_ids_outside_the_vocabulary_are_refused_not_decoded(output, tmp_path, kind):
    import sentencepiece as spm

    model = (os.path.join(DATA, "spm", "bpe.model") if kind == "sentencepiece"
             else output["tokenizer"])
    size = (spm.SentencePieceProcessor(model_file=model).get_piece_size()
            if kind == "sentencepiece" else 500)
    ix.write_documents(str(tmp_path / "ds" / "d"), [[1, 2, 3], [4, size + 7, 5]],
                       dtype=np.uint16)
    proc = _cli(str(tmp_path / "ds"), "--decode", "2", "--tokenizer-model", model)
    line = _one_error_line(proc, 1)
    assert line == (f"error: id {size + 7} at document 1 is outside the tokenizer's vocabulary "
                    f"(size {size}): wrong --tokenizer-model for this dataset?")
    assert "--- document 0 (3 tokens) ---" in proc.stdout  # the documents before it are shown
