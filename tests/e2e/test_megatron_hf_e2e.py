"""Byte-identity with Megatron-LM core_v0.16.1 ``tools/preprocess_data.py`` for HuggingFace
tokenizer folders whose ``tokenizer_config.json`` / ``special_tokens_map.json`` change the ids
(issue 25 part 1): Llama (legacy true/false, add_bos), Mistral, Gemma, Qwen2, Phi, GPT-NeoX,
GPT-2 (add_prefix_space), BERT (do_lower_case, an [UNK] literal in text), T5 (extra_ids),
special tokens named in the config but absent from tokenizer.json, named tokens already in the
vocabulary, split_special_tokens, no eos (sep fallback), --tokenizer-hf-include-special-tokens,
--tokenizer-hf-use-fast and --tokenizer-special-tokens.

The whole-job runs; the unit tests are in tests/transforms/tokenizer/test_megatron_hf.py."""

import json
import os
import shutil
import subprocess
import pytest

import megatron_live
from megatron_reference import read_pair
from pipelines import tokenize
from tests.transforms.tokenizer.test_megatron_hf import DATA, OUT, VARIANTS, _expected, _flags


FULL = [p for p in VARIANTS if p.values[0] == p.values[1]]  # each distinct output once


@pytest.mark.parametrize("name, stored, flags", FULL)
def test_tokenize_job_identical_to_megatron(tmp_path, name, stored, flags):
    shutil.copy(os.path.join(DATA, "corpus.jsonl"), tmp_path / "corpus.jsonl")
    out = tmp_path / "out"
    argv = ["--input", str(tmp_path / "corpus.jsonl"), "--output", str(out),
            "--json-keys", "text", "--log-interval", "0", *_flags(flags)]
    assert tokenize.run(argv) == 0
    names = [n[:-4] for n in os.listdir(out) if n.endswith(".idx")]
    assert len(names) == 1
    assert read_pair(str(out / names[0])) == _expected(stored)


@pytest.mark.parametrize("flags, message", [
    (["--trust-remote-code"], "--trust-remote-code: tokenbeam never runs"),
    (["--tokenizer-backend", "fast", "--tokenizer-hf-include-special-tokens"],
     "--tokenizer-backend fast"),
    ([], "names its own tokenizer code (auto_map)"),  # Megatron: transformers' ValueError
])
def test_refusals_are_one_line_and_status_2(tmp_path, capsys, flags, message):
    (tmp_path / "in.jsonl").write_text('{"text": "a b"}\n')
    folder = os.path.join(DATA, "qwen2")
    if not flags:  # a folder whose config asks for its own code
        folder = tmp_path / "custom"
        folder.mkdir()
        shutil.copy(os.path.join(DATA, "qwen2", "tokenizer.json"), folder / "tokenizer.json")
        (folder / "tokenizer_config.json").write_text(json.dumps(
            {"tokenizer_class": "MyTokenizer", "auto_map": {"AutoTokenizer": ["t.MyTokenizer",
                                                                             None]}}))
    status = tokenize.run(["--input", str(tmp_path / "in.jsonl"), "--output",
                           str(tmp_path / "out"), "--tokenizer-type", "HuggingFaceTokenizer",
                           "--tokenizer-model", str(folder), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0], err
    assert not list(tmp_path.rglob("*.bin"))  # refused before any shard is written


def test_live_megatron_rerun_gives_the_stored_bytes(tmp_path):
    """Megatron itself on two variants, now: the stored outputs are still what it writes."""
    megatron_python, megatron_lm = megatron_live.live_or_skip("transformers 5.24")
    rows = [p for p in VARIANTS if p.values[0] in ("bert_lower_true_eod", "t5_eod")]
    with open(tmp_path / "v.tsv", "w", encoding="utf-8") as f:
        for p in rows:
            f.write(f"{p.values[0]}\t{DATA}\t--input corpus.jsonl {' '.join(p.values[2])}\n")
    driver = os.path.join(os.path.dirname(DATA), "megatron_tokenizers", "megatron_driver.py")
    subprocess.run([megatron_python, "-W", "ignore", driver, megatron_lm, str(tmp_path / "v.tsv"),
                    str(tmp_path / "out")], check=True, timeout=600, capture_output=True)
    for p in rows:
        assert read_pair(str(tmp_path / "out" / p.values[0] / OUT)) == _expected(p.values[1])


def test_token_without_id_is_a_bad_record_as_megatron_fails(tmp_path):
    """A folder with no unk_token whose model emits a piece outside its vocabulary (T5's
    Unigram on a character it never saw): convert_tokens_to_ids gives None and Megatron's
    builder raises TypeError, ending its job. tokenbeam sends that record to _errors with the
    reason, and keeps the reference backend for the folder (the Rust ones would give ids)."""
    folder = tmp_path / "tok"
    folder.mkdir()
    shutil.copy(os.path.join(DATA, "t5", "tokenizer.json"), folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text('{"eos_token": "</s>"}')
    (tmp_path / "in.jsonl").write_text('{"text": "plain text"}\n'
                                       '{"text": "a snowman \\u2603 here"}\n')
    out = tmp_path / "out"
    assert tokenize.run(["--input", str(tmp_path / "in.jsonl"), "--output", str(out),
                         "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
                         str(folder), "--append-eod", "--max-bad-fraction", "1",
                         "--log-interval", "0"]) == 0
    (errors,) = os.listdir(out / "_errors")
    record = json.loads((out / "_errors" / errors).read_text().splitlines()[0])
    assert record["line"] == 2 and "names no unk_token" in record["reason"]
    with open(out / "metadata.json", encoding="utf-8") as f:
        assert json.load(f)["tokenizer"]["backend"] == "reference"
