"""End to end: `python -m pipelines.tokenize` against an independent reference (tests/conftest.py)."""

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from megatron_reference import megatron_documents, read_pair, reference_write, shard_files
from dataio import indexed
from pipelines import tokenize

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py


def run_job(inputs, output, tokenizer, *extra):
    argv = [f"--input={p}" for p in ([inputs] if isinstance(inputs, (str, os.PathLike)) else inputs)]
    argv += ["--output", str(output), "--tokenizer-type", "HuggingFaceTokenizer",
             "--tokenizer-model", str(tokenizer), "--log-interval", "0", *extra]
    return tokenize.run([str(a) for a in argv])


def committed(folder, stem, key="text", level="document"):
    names = [n[:-4] for n in os.listdir(folder) if n.startswith(f"{stem}_{key}_{level}_dc=")
             and n.endswith(".idx")]
    assert len(names) == 1, names
    return os.path.join(folder, names[0])


def test_bytes_equal_reference(corpus_dir, corpus_texts, hf_tokenizer, hf_encode, tmp_path):
    _, encode, eod = hf_encode
    out = tmp_path / "out"
    assert run_job(corpus_dir, out, hf_tokenizer, "--append-eod") == 0
    for name, texts in corpus_texts.items():
        stem = name[: -len(".jsonl")]
        ref = str(tmp_path / f"ref_{stem}")
        documents = megatron_documents(texts, encode, eod=eod)
        reference_write(ref, documents, np.uint16)
        prefix = committed(out, stem)
        assert read_pair(prefix) == read_pair(ref), stem
        n_seq = sum(len(d) for d in documents)
        n_tok = sum(len(s) for d in documents for s in d)
        assert prefix.endswith(f"_dc={len(texts)}_sc={n_seq}_tc={n_tok}")
        assert indexed.validate(prefix, eod_id=eod, vocab_size=1200).ok
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["tokenizer"]["eod_id"] == eod and meta["dtype"] == "uint16"
    assert meta["tokenizer"]["files"][0]["sha256"]
    assert {"tokenbeam", "apache-beam", "tokenizers"} <= set(meta["versions"])
    assert len(meta["inputs"]) == 3 and all(i["size"] > 0 for i in meta["inputs"])
    assert meta["totals"]["documents"] == sum(len(t) for t in corpus_texts.values())
    assert meta["started"] <= meta["finished"]
    assert not (out / "_temporary").exists()


def test_formats_give_the_same_bytes(corpus_dir, hf_tokenizer, tmp_path):
    src = corpus_dir / "c0_web.jsonl"
    raw = src.read_bytes()
    records = [json.loads(line) for line in raw.decode().split("\n") if line]
    variants = {
        "gz": ("c0_web.jsonl.gz", gzip.compress(raw)),
        "zst": ("c0_web.jsonl.zst", zstandard.ZstdCompressor().compress(raw)),
    }
    outputs = {}
    for kind, (name, data) in variants.items():
        (tmp_path / kind).mkdir()
        (tmp_path / kind / name).write_bytes(data)
    (tmp_path / "parquet").mkdir()
    table = pa.table({"id": [r["id"] for r in records], "text": [r["text"] for r in records]})
    pq.write_table(table, tmp_path / "parquet" / "c0_web.parquet", row_group_size=50)
    for kind in ("gz", "zst", "parquet"):
        assert run_job(tmp_path / kind, tmp_path / f"out_{kind}", hf_tokenizer, "--append-eod") == 0
        outputs[kind] = shard_files(tmp_path / f"out_{kind}")
    assert run_job(src, tmp_path / "out_jsonl", hf_tokenizer, "--append-eod") == 0
    reference = shard_files(tmp_path / "out_jsonl")
    assert len(reference) == 2
    for kind, files in outputs.items():
        assert files == reference, kind


def test_workers_ranges_and_batches_do_not_change_bytes(corpus_dir, hf_tokenizer, tmp_path):
    assert run_job(corpus_dir, tmp_path / "a", hf_tokenizer, "--append-eod") == 0
    assert run_job(corpus_dir, tmp_path / "b", hf_tokenizer, "--append-eod", "--workers", "2",
                   "--split-bytes", "20000", "--batch-documents", "7",
                   "--tokenizer-backend", "reference") == 0
    a, b = shard_files(tmp_path / "a"), shard_files(tmp_path / "b")
    assert a and a == b


def test_bad_records_are_counted_and_listed(hf_tokenizer, hf_encode, tmp_path):
    _, encode, eod = hf_encode
    good = ["first good", "second good", "", "third good"]
    lines = [
        json.dumps({"text": good[0]}).encode(),
        b"{broken json",
        b"",
        json.dumps({"text": good[1]}).encode(),
        json.dumps({"title": "no text"}).encode(),
        json.dumps({"text": 42}).encode(),
        b'{"text": "bad \xff utf8"}',
        b'{"text": "lone \\udc00 surrogate"}',
        json.dumps({"text": good[2]}).encode(),
        json.dumps({"text": good[3]}).encode(),
    ]
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "mixed.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    demo_good = [json.dumps({"text": f"doc {i}"}) for i in range(5)]
    (inp / "clean.jsonl").write_text("\n".join(demo_good) + "\n")
    out = tmp_path / "out"
    # 6 of its 10 records are bad: more than --max-bad-fraction's default (0.1) allows
    assert run_job(inp, out, hf_tokenizer, "--append-eod", "--split-bytes", "64",
                   "--max-bad-fraction", "0.6") == 0
    errors = [json.loads(x) for x in (out / "_errors" / "mixed.jsonl").read_text().splitlines()]
    assert [e["line"] for e in errors] == [2, 3, 5, 6, 7, 8]
    reasons = " | ".join(e["reason"] for e in errors)
    for expected in ("not valid JSON", "blank line", "missing key 'text'", "got int",
                     "invalid UTF-8", "lone surrogate"):
        assert expected in reasons
    offsets = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
    assert [e["offset"] for e in errors] == [offsets[i - 1] for i in (2, 3, 5, 6, 7, 8)]
    assert all(e["file"].endswith("mixed.jsonl") and len(e["snippet"]) <= 200 for e in errors)
    assert not (out / "_errors" / "clean.jsonl").exists()
    ref = str(tmp_path / "ref")
    reference_write(ref, megatron_documents(good, encode, eod=eod), np.uint16)
    assert read_pair(committed(out, "mixed")) == read_pair(ref)


def test_on_bad_record_fail_names_file_and_line(hf_tokenizer, tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "x.jsonl").write_text('{"text": "ok"}\n{"text": 1}\n')
    assert run_job(tmp_path / "in", tmp_path / "out", hf_tokenizer, "--on-bad-record",
                   "fail") == 1
    assert re.search(r"^error: .*x\.jsonl:2: value of key 'text'", capsys.readouterr().err, re.M)
    assert not [n for n in os.listdir(tmp_path / "out") if n.endswith(".idx")] \
        if (tmp_path / "out").exists() else True


def test_corrupt_file_fails_only_its_shard(corpus_dir, hf_tokenizer, tmp_path, capsys):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "good.jsonl").write_bytes((corpus_dir / "c1_web.jsonl").read_bytes())
    (inp / "broken.jsonl.gz").write_bytes(gzip.compress(b'{"text": "x"}\n' * 1000)[:60])
    out = tmp_path / "out"
    assert run_job(inp, out, hf_tokenizer, "--append-eod") == 1
    err = capsys.readouterr().err
    assert "FAILED broken_text_document" in err and "cannot decompress" in err
    committed(out, "good")
    assert not [n for n in os.listdir(out) if n.startswith("broken")]
    meta = json.loads((out / "metadata.json").read_text())
    status = {s["shard"]: s["status"] for s in meta["shards"]}
    assert status == {"broken_text_document": "failed", "good_text_document": "written"}


def test_resume_skips_committed_and_overwrite_redoes(corpus_dir, hf_tokenizer, tmp_path, capsys):
    out = tmp_path / "out"
    assert run_job(corpus_dir, out, hf_tokenizer, "--append-eod") == 0
    first = shard_files(out)
    capsys.readouterr()
    assert run_job(corpus_dir, out, hf_tokenizer, "--append-eod") == 0
    text = capsys.readouterr().out
    assert text.count("skip c") == 3 and "nothing to do: 3 shards already committed" in text
    # a changed option is a different shard: redone, the old files replaced
    assert run_job(corpus_dir, out, hf_tokenizer) == 0
    without_eod = shard_files(out)
    assert set(without_eod) != set(first) and len(without_eod) == len(first)
    capsys.readouterr()
    assert run_job(corpus_dir, out, hf_tokenizer, "--overwrite") == 0
    assert re.search(r"shards written +3\n", capsys.readouterr().out)
    assert shard_files(out) == without_eod


def test_dry_run_writes_nothing(corpus_dir, hf_tokenizer, tmp_path, capsys):
    out = tmp_path / "out"
    assert run_job(corpus_dir, out, hf_tokenizer, "--dry-run") == 0
    text = capsys.readouterr().out
    assert not out.exists()
    assert "write c0_web_text_document_dc=?" in text and "documents, ~" in text
    assert "3 shards to write, 0 to skip" in text
    assert run_job(corpus_dir, out, hf_tokenizer) == 0
    capsys.readouterr()
    assert run_job(corpus_dir, out, hf_tokenizer, "--dry-run") == 0
    text = capsys.readouterr().out
    assert "0 shards to write, 3 to skip" in text
    # a shard it skips is shown with the counts its commit recorded
    committed = sorted(n[:-4] for n in os.listdir(out) if n.endswith(".idx"))
    assert len(committed) == 3 and all(f"skip  {n}  (" in text for n in committed), text
    assert "dc=?" not in text


def test_a_redone_shard_says_what_changed(corpus_dir, hf_tokenizer, tmp_path, capsys):
    out = tmp_path / "out"
    assert run_job(corpus_dir, out, hf_tokenizer) == 0
    capsys.readouterr()
    assert run_job(corpus_dir, out, hf_tokenizer, "--dry-run", "--append-eod") == 0
    assert "write c0_web_text_document_dc=?_sc=?_tc=?  (options changed: append_eod False -> " \
           "True)" in capsys.readouterr().out
    assert run_job(corpus_dir, out, hf_tokenizer, "--append-eod") == 0
    assert "redo c0_web_text_document: options changed: append_eod False -> True" in \
        capsys.readouterr().out


def test_other_options_into_the_same_output_are_refused_unless_overwrite(corpus_dir, hf_tokenizer,
                                                                         tmp_path, capsys):
    out = tmp_path / "out"
    assert run_job(corpus_dir, out, hf_tokenizer) == 0
    before = sorted(os.listdir(out))
    capsys.readouterr()
    # sentence level writes other names: it would mix two kinds of shards in one folder
    assert run_job(corpus_dir, out, hf_tokenizer, "--split-sentences") == 2
    err = capsys.readouterr().err
    assert "holds shards written with another tokenizer or other options" in err
    assert "options changed: " in err and "level 'document' -> 'sentence'" in err
    assert "--overwrite" in err
    assert sorted(os.listdir(out)) == before  # nothing written
    assert run_job(corpus_dir, out, hf_tokenizer, "--split-sentences", "--overwrite") == 0
    assert any(n.endswith(".idx") and "_sentence_" in n for n in os.listdir(out))


def test_multiple_keys_skip_empty_and_lists(hf_tokenizer, hf_encode, tmp_path):
    _, encode, eod = hf_encode
    records = [{"text": "alpha beta", "title": "T1"}, {"text": "", "title": "T2"},
               {"text": ["pre split one", "", "two"], "title": ""}]
    (tmp_path / "in").mkdir()
    demo_path = tmp_path / "in" / "k.jsonl"
    demo_path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    out = tmp_path / "out"
    assert run_job(demo_path, out, hf_tokenizer, "--append-eod", "--json-keys", "text",
                   "title") == 0
    for key in ("text", "title"):
        ref = str(tmp_path / f"ref_{key}")
        reference_write(ref, megatron_documents([r[key] for r in records], encode, eod=eod),
                        np.uint16)
        assert read_pair(committed(out, "k", key)) == read_pair(ref)
    ds = indexed.IndexedDataset(committed(out, "k", "text"))
    assert ds.document_indices.tolist() == [0, 1, 1, 3]  # the list value gave two sequences
    out2 = tmp_path / "out2"
    assert run_job(demo_path, out2, hf_tokenizer, "--append-eod", "--skip-empty") == 0
    assert indexed.IndexedDataset(committed(out2, "k")).document_count == 2


def test_skip_empty_keeps_several_keys_aligned(hf_tokenizer, hf_encode, tmp_path):
    """--skip-empty with several keys: a record empty under any key is left out of every key's
    shard, so document i of each shard comes from the same record (as the README promises)."""
    _, encode, eod = hf_encode
    records = [{"text": "alpha beta", "title": "T1"}, {"text": "", "title": "T2"},
               {"text": "gamma", "title": ""}, {"text": ["", ""], "title": "T4"},
               {"text": "delta epsilon", "title": ["T5", ""]}, {"text": "", "title": ""},
               {"text": "zeta", "title": "T7"}]
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "k.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    out = tmp_path / "out"
    assert run_job(path, out, hf_tokenizer, "--append-eod", "--skip-empty", "--json-keys",
                   "text", "title", "--batch-documents", "3") == 0
    kept = [records[i] for i in (0, 4, 6)]
    for key in ("text", "title"):
        ref = str(tmp_path / f"ref_{key}")
        reference_write(ref, megatron_documents([r[key] for r in kept], encode, eod=eod),
                        np.uint16)
        assert read_pair(committed(out, "k", key)) == read_pair(ref), key


def test_eod_required_when_tokenizer_has_none(hf_tokenizer, tmp_path, capsys):
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes(open(os.path.join(hf_tokenizer, "tokenizer.json"), "rb").read())
    (tmp_path / "x.jsonl").write_text('{"text": "a"}\n')
    assert run_job(tmp_path / "x.jsonl", tmp_path / "out", folder, "--append-eod") == 2
    assert "give --eod-id" in capsys.readouterr().err
    assert run_job(tmp_path / "x.jsonl", tmp_path / "out", folder, "--append-eod",
                   "--eod-id", "0") == 0


def test_unknown_flag_is_refused(hf_tokenizer, tmp_path, capsys):
    assert run_job(tmp_path, tmp_path / "o", hf_tokenizer, "--json-key", "text") == 2
    assert "unknown flag --json-key" in capsys.readouterr().err


def test_sentencepiece_and_gpt2_kinds(corpus_dir, corpus_texts, hf_tokenizer, tmp_path):
    import sentencepiece

    from pipelines import demo

    texts = corpus_texts["c2_web.jsonl"]
    model = demo.train_sentencepiece([t for t in texts if t], str(tmp_path / "spm"), vocab_size=600)
    sp = sentencepiece.SentencePieceProcessor(model_file=model)
    src = corpus_dir / "c2_web.jsonl"
    argv = ["--input", str(src), "--output", str(tmp_path / "sp"), "--tokenizer-type",
            "SentencePieceTokenizer", "--tokenizer-model", model, "--append-eod", "--log-interval", "0"]
    assert tokenize.run(argv) == 0
    ref = str(tmp_path / "ref_sp")
    reference_write(ref, megatron_documents(texts, sp.encode, eod=sp.eos_id()), np.uint16)
    assert read_pair(committed(tmp_path / "sp", "c2_web")) == read_pair(ref)

    # GPT-2 style vocab.json + merges.txt taken from the trained byte-level BPE: same ids
    tok = json.load(open(os.path.join(hf_tokenizer, "tokenizer.json"), encoding="utf-8"))
    (tmp_path / "vocab.json").write_text(json.dumps(tok["model"]["vocab"]), encoding="utf-8")
    merges = [" ".join(m) if isinstance(m, list) else m for m in tok["model"]["merges"]]
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n",
                                         encoding="utf-8")
    argv = ["--input", str(src), "--output", str(tmp_path / "g2"), "--tokenizer-type",
            "GPT2BPETokenizer", "--vocab-file", str(tmp_path / "vocab.json"), "--merge-file",
            str(tmp_path / "merges.txt"), "--append-eod", "--log-interval", "0"]
    assert tokenize.run(argv) == 0
    assert run_job(src, tmp_path / "hf", hf_tokenizer, "--append-eod") == 0
    assert shard_files(tmp_path / "g2") == shard_files(tmp_path / "hf")


def test_killed_run_then_rerun_equals_clean_run(corpus_dir, hf_tokenizer, tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    for k in range(8):  # more shards than finalize can commit in an instant
        for src in sorted(corpus_dir.glob("*.jsonl")):
            (inp / f"{src.stem}_{k}.jsonl").write_bytes(src.read_bytes())
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    assert run_job(inp, clean, hf_tokenizer, "--append-eod") == 0
    cmd = [sys.executable, "-m", "pipelines.tokenize", "--input", str(inp), "--output",
           str(killed), "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
           str(hf_tokenizer), "--append-eod", "--log-interval", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    commits = killed / "_commits"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if commits.exists() and any(commits.iterdir()):
            break
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # whatever was interrupted, no final-named dataset is incomplete
    for name in os.listdir(killed):
        if name.endswith(".idx") and not indexed.is_temporary_name(name):
            assert indexed.validate(str(killed / name)).ok, name
    assert run_job(inp, killed, hf_tokenizer, "--append-eod") == 0
    assert shard_files(killed) == shard_files(clean)
    assert [n for n in os.listdir(killed) if indexed.is_temporary_name(n)] == []


def test_very_long_document(hf_tokenizer, hf_encode, tmp_path):
    """A 100 MB single document: periodic text, so the reference ids are a tiled period."""
    tok, encode, eod = hf_encode
    unit = " the river carries quiet stones across old valleys."  # pre-tokens never span units
    repeats = (100 << 20) // len(unit)
    period = encode(unit)
    assert encode(unit * 3) == period * 3  # the tiling holds for this text
    path = tmp_path / "long.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"text": "')
        for _ in range(repeats // 10_000):
            f.write(unit * 10_000)
        f.write(unit * (repeats % 10_000))
        f.write('"}\n')
    out = tmp_path / "out"
    assert run_job(path, out, hf_tokenizer, "--append-eod") == 0
    ds = indexed.IndexedDataset(committed(out, "long"))
    assert ds.sequence_lengths.tolist() == [len(period) * repeats + 1]
    tokens = ds[0]
    assert int(tokens[-1]) == eod
    body = np.asarray(tokens[:-1]).reshape(repeats, len(period))
    assert (body == np.asarray(period, dtype=body.dtype)).all()


def test_rerun_removes_temporaries_of_redone_shards(corpus_dir, hf_tokenizer, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    stale = out / ".c0_web_text_document_dc=1_sc=1_tc=1.bin.inprogress-0123456789ab"
    stale.write_bytes(b"half written")
    unrelated = out / ".other_text_document_dc=1_sc=1_tc=1.bin.inprogress-0123456789ab"
    unrelated.write_bytes(b"not ours")
    assert run_job(corpus_dir, out, hf_tokenizer) == 0
    assert not stale.exists() and unrelated.exists()


def test_rerun_removes_a_killed_metadata_write(corpus_dir, hf_tokenizer, tmp_path):
    """A kill inside metadata.json's atomic write leaves its temporary; the next run over the
    output (here one with nothing to redo) clears it, so a resumed output holds no leftovers."""
    out = tmp_path / "out"
    assert run_job(corpus_dir, out, hf_tokenizer) == 0
    left = out / ".metadata.json.inprogress-k1ll3d"
    left.write_bytes(b'{"half": ')
    assert run_job(corpus_dir, out, hf_tokenizer) == 0
    assert not left.exists()
    assert json.loads((out / "metadata.json").read_text())["totals"]["shards"] == 3
