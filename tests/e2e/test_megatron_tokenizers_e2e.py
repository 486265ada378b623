"""Byte-identity with Megatron-LM core_v0.16.1 ``tools/preprocess_data.py`` for every tokenizer
family beyond HuggingFace: NullTokenizer, SentencePiece (default and ``--legacy-tokenizer``
paths of SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer), TikTokenizer and
BertWordPiece{LowerCase,Case}.

The whole-job runs; the unit tests are in tests/transforms/tokenizer/test_megatron_tokenizers.py."""

import json
import os
import shutil
import pytest

import megatron_live
from megatron_reference import read_pair
from pipelines import tokenize
from tests.transforms.tokenizer.test_megatron_tokenizers import (DATA, OUT, VARIANTS, _expected,
                                                                 _flags, _input)


FULL = [p for p in VARIANTS if p.values[1] == p.values[2]]  # each distinct output once


@pytest.mark.parametrize("family, name, stored, flags", FULL)
def test_tokenize_job_identical_to_megatron(tmp_path, family, name, stored, flags):
    shutil.copy(_input(family), tmp_path / "corpus.jsonl")
    out = tmp_path / "out"
    argv = ["--input", str(tmp_path / "corpus.jsonl"), "--output", str(out),
            "--json-keys", "text", "--log-interval", "0", *_flags(family, flags)]
    assert tokenize.run(argv) == 0
    names = [n[:-4] for n in os.listdir(out) if n.endswith(".idx")]
    assert len(names) == 1 and names[0].startswith(f"{OUT}_dc=")
    assert read_pair(str(out / names[0])) == _expected(family, stored)
    assert not (out / "_errors").exists()  # every record Megatron accepted is accepted
    with open(out / "metadata.json", encoding="utf-8") as f:
        backend = json.load(f)["tokenizer"]["backend"]
    print(f"{family}/{name}: backend {backend}")


@pytest.mark.parametrize("flags, message", [
    (["--tokenizer-type", "TikTokenizer", "--tokenizer-model", "tiktoken/vocab.json",
      "--tiktoken-pattern", "v2"], "TikTokenizer needs --vocab-size"),
    (["--tokenizer-type", "TikTokenizer", "--tokenizer-model", "tiktoken/missing.json",
      "--vocab-size", "2024"], "--tokenizer-model"),
    (["--tokenizer-type", "TikTokenizer", "--tokenizer-model", "tiktoken/vocab.json",
      "--vocab-size", "4000"], "give --vocab-size 2024 or less"),
    (["--tokenizer-type", "TikTokenizer", "--tokenizer-model", "tiktoken/vocab.json",
      "--vocab-size", "2024", "--legacy-tokenizer"], "--tiktoken-pattern v1 or v2"),
    (["--tokenizer-type", "SentencePieceTokenizer", "--tokenizer-model", "spm/bpe.model",
      "--tokenizer-special-tokens", "<X>"], "needs --tokenizer-sentencepiece-legacy"),
    (["--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", "spm/bpe.model",
      "--tokenizer-sentencepiece-legacy", "--append-eod"], "Megatron core_v0.16.1 fails"),
    (["--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "spm/x.json", "--merge-file",
      "spm/x.txt", "--tokenizer-special-tokens", "<X>"], "use HuggingFaceTokenizer"),
    (["--tokenizer-type", "TikTokenizer", "--tokenizer-model", "tiktoken/vocab.json",
      "--vocab-size", "2024", "--tokenizer-metadata", "spm/tokenizer_metadata.json"],
     "library 'sentencepiece', but --tokenizer-type TikTokenizer runs 'tiktoken'"),
    (["--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", "spm/bpe.model",
      "--tokenizer-metadata", "spm/none.json"], "--tokenizer-metadata"),
    (["--tokenizer-type", "TikTokenizer", "--tokenizer-model", "tiktoken/vocab.json",
      "--vocab-size", "2024", "--tokenizer-special-tokens", "<s>", "</s>"], "must include"),
    (["--tokenizer-type", "BertWordPieceCase", "--vocab-file", "wordpiece/vocab.txt"],
     "needs --legacy-tokenizer"),
    (["--tokenizer-type", "BertWordPieceLowerCase", "--legacy-tokenizer"],
     "needs --vocab-file"),
    (["--tokenizer-type", "BertWordPieceLowerCase", "--legacy-tokenizer", "--vocab-file",
      "wordpiece/none.txt"], "--vocab-file"),
    (["--tokenizer-type", "NullTokenizer"], "NullTokenizer needs --vocab-size"),
])
def test_bad_tokenizer_configuration_is_one_line_and_status_2(tmp_path, capsys, flags, message):
    (tmp_path / "in.jsonl").write_text('{"text": "1 2"}\n')
    flags = [os.path.join(DATA, f) if f.endswith((".json", ".txt", ".model")) else f for f in flags]
    status = tokenize.run(["--input", str(tmp_path / "in.jsonl"), "--output",
                           str(tmp_path / "out"), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0], err
    assert not (tmp_path / "out").exists()  # refused before anything is written


@pytest.mark.parametrize("tokenizer, expected", [("tokenizer", "megatron"),
                                                 ("tokenizer_bos", "megatron_bos_include_special")])
def test_hf_legacy_tokenizer(tmp_path, tokenizer, expected):
    """Megatron's --legacy-tokenizer HuggingFace class (tokenizer(text).input_ids) gave exactly
    the bytes of the default path with --tokenizer-hf-include-special-tokens (README.md here:
    run on ../megatron_preprocess/ with core_v0.16.1), so the flag means --add-special-tokens."""
    data = os.path.join(os.path.dirname(DATA), "megatron_preprocess")
    shutil.copy(os.path.join(data, "corpus.jsonl"), tmp_path / "corpus.jsonl")
    out = tmp_path / "out"
    assert tokenize.run(["--input", str(tmp_path / "corpus.jsonl"), "--output", str(out),
                         "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
                         os.path.join(data, tokenizer), "--append-eod", "--legacy-tokenizer",
                         "--log-interval", "0"]) == 0
    (name,) = [n[:-4] for n in os.listdir(out) if n.endswith(".idx")]
    assert read_pair(str(out / name)) == read_pair(os.path.join(data, expected, OUT))


def test_ignored_flags_give_megatron_bytes_and_one_note_each(tmp_path, capsys):
    """Flags Megatron's preprocess_data.py takes and ignores (spm/variants.tsv:
    bpe_SentencePieceTokenizer_eod_ignored, same bytes as ..._eod) are ignored here too, each
    said once in a ``note:`` line."""
    ((flags, stored),) = [(p.values[3], p.values[2]) for p in VARIANTS
                          if p.values[1] == "bpe_SentencePieceTokenizer_eod_ignored"]
    shutil.copy(_input("spm"), tmp_path / "corpus.jsonl")
    out = tmp_path / "out"
    assert tokenize.run(["--input", str(tmp_path / "corpus.jsonl"), "--output", str(out),
                         "--log-interval", "0", *_flags("spm", flags)]) == 0
    (name,) = [n[:-4] for n in os.listdir(out) if n.endswith(".idx")]
    assert read_pair(str(out / name)) == _expected("spm", stored)
    err = capsys.readouterr().err
    for flag in ("--tokenizer-metadata", "--vocab-extra-ids", "--padded-vocab-size",
                 "--vocab-size", "--tiktoken-special-tokens"):
        line = f"note: {flag} is ignored"
        assert err.count(line) == (0 if flag == "--tokenizer-metadata" else 1), (flag, err)


LIVE = [p for p in VARIANTS if p.values[1].endswith(("_special", "_ignored", "_splegacy"))
        and p.values[1].startswith("bpe_")]


def _megatron():
    return megatron_live.live_or_skip("sentencepiece")


def test_live_megatron_still_gives_the_stored_bytes(tmp_path):
    """The issue-25 SentencePiece variants re-run through real Megatron where it is installed:
    the same bytes as stored, and --tokenizer-sentencepiece-legacy with --append-eod fails
    there: no .idx, though the script exits 0 (why tokenbeam refuses it)."""
    import subprocess
    import sys

    python, checkout = _megatron()
    family_dir = os.path.join(DATA, "spm")
    rows = [(p.values[1], p.values[2], p.values[3]) for p in LIVE]
    with open(tmp_path / "v.tsv", "w", encoding="utf-8") as f:
        for name, _, flags in rows:
            f.write(f"{name}\t{family_dir}\t--input ../corpus.jsonl {' '.join(flags)}\n")
    driver = os.path.join(DATA, "megatron_driver.py")
    proc = subprocess.run([python, "-W", "ignore", driver, checkout, str(tmp_path / "v.tsv"),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name, stored, _ in rows:
        got = read_pair(str(tmp_path / "out" / name / OUT))
        assert got == _expected("spm", stored), name
    with open(tmp_path / "fail.tsv", "w", encoding="utf-8") as f:
        f.write(f"eod\t{family_dir}\t--input ../corpus.jsonl --tokenizer-type "
                "SentencePieceTokenizer --tokenizer-model bpe.model "
                "--tokenizer-sentencepiece-legacy --append-eod\n")
    proc = subprocess.run([python, "-W", "ignore", driver, checkout, str(tmp_path / "fail.tsv"),
                           str(tmp_path / "fail")], capture_output=True, text=True, timeout=900)
    log = (tmp_path / "fail" / "eod.log").read_text(encoding="utf-8") + proc.stderr
    # the partition's process dies on tokenizer.eod; the script still exits 0, without a .idx
    assert "AttributeError" in log and "'eod'" in log, log[-2000:]
    assert not (tmp_path / "fail" / "eod" / f"{OUT}.idx").exists()
    print(f"live Megatron ({sys.version_info[:2]} here): {len(rows)} variants identical")
