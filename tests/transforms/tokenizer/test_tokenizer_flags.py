"""Megatron core_v0.16.1 preprocess_data.py's tokenizer flags beyond the files
(transforms/tokenizer/flags.py): what is accepted, ignored with a note, or refused in one line,
and that the ignored ones leave the tokenizer's resume key where it was. The ids themselves are
checked byte for byte against real Megatron output in tests/transforms/tokenizer/test_megatron_tokenizers.py
(spm/*_special, *_ignored variants)."""

import dataclasses
import json
import os

import pytest

from pipelines import beam_options
from transforms import tokenizer as tk
from transforms.tokenizer import check
from transforms.tokenizer import flags as tkf

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(TESTS, "data", "megatron_tokenizers")
SPM = ["--tokenizer-type", "SentencePieceTokenizer", "--tokenizer-model",
       os.path.join(DATA, "spm", "bpe.model")]
TIKTOKEN = ["--tokenizer-type", "TikTokenizer", "--tokenizer-model",
            os.path.join(DATA, "tiktoken", "vocab.json"), "--vocab-size", "2024"]
SPM_METADATA = os.path.join(DATA, "spm", "tokenizer_metadata.json")


def _flags(*argv):
    return beam_options.parse(["--input", "x", "--output", "y", *argv]).view_as(beam_options.TokenizerOptions)


def _spec(*argv):
    return _flags(*argv).tokenizer_spec()


IGNORED = ["--vocab-extra-ids", "7", "--padded-vocab-size", "4096", "--tiktoken-special-tokens",
           "<x>", "--tokenizer-metadata", SPM_METADATA]


@pytest.mark.parametrize("base, extra", [
    (SPM, IGNORED),
    (SPM, ["--tokenizer-sentencepiece-legacy"]),  # no special tokens: no id changes
    (SPM + ["--legacy-tokenizer"], ["--tokenizer-sentencepiece-legacy",
                                    "--tokenizer-special-tokens", "<X>", *IGNORED]),
    (TIKTOKEN, IGNORED[:6] + ["--tokenizer-metadata",
                              os.path.join(DATA, "tiktoken", "tokenizer_metadata.json")]),
    (["--tokenizer-type", "NullTokenizer", "--vocab-size", "10"],
     ["--tokenizer-special-tokens", "<X>", "--tokenizer-metadata", "/nonexistent.json"]),
])
def test_ignored_flags_keep_the_resume_key(base, extra):
    plain, with_extra = _spec(*base), _spec(*base, *extra)
    assert tk.spec_options(with_extra) == tk.spec_options(plain)
    assert with_extra.special_tokens == plain.special_tokens
    assert check._check_key(with_extra) == check._check_key(plain)


def test_notes_name_each_ignored_flag():
    notes = _flags(*SPM, "--legacy-tokenizer", "--tokenizer-sentencepiece-legacy",
                   "--tokenizer-special-tokens", "<X>", "--vocab-size", "5",
                   *IGNORED).tokenizer_notes()
    text = "\n".join(notes)
    for flag in ("--tokenizer-special-tokens", "--tiktoken-special-tokens",
                 "--tokenizer-sentencepiece-legacy", "--tokenizer-metadata", "--vocab-size",
                 "--vocab-extra-ids", "--padded-vocab-size"):
        assert f"{flag} is ignored" in text, flag
    assert all("\n" not in n for n in notes) and len(notes) == 7
    assert _flags(*SPM).tokenizer_notes() == []
    assert _flags(*TIKTOKEN, "--tokenizer-special-tokens", "<unk>", "<s>", "</s>", "<mask>",
                  "<pad>", "<cls>", "<sep>").tokenizer_notes() == []


def test_sentencepiece_special_tokens_change_the_key_and_run_on_the_reference():
    spec = _spec(*SPM, "--tokenizer-sentencepiece-legacy", "--tokenizer-special-tokens",
                 "<CLS>", "<s>")
    assert tk.spec_options(spec) == {"special_tokens": ["<CLS>", "<s>"]}
    backend, why = tk.choose_backend(dataclasses.replace(spec, backend="auto"), ["a b"])
    assert backend == "reference" and "--tokenizer-special-tokens" in why
    tok = tk.load_tokenizer(dataclasses.replace(spec, backend="reference"))
    assert tok.vocab_size == 1001  # <CLS> added after the 1000 pieces; <s> is piece 1
    ids, _ = tok.encode_batch(["<s><CLS>"])
    assert ids.tolist() == [1, 1000]


@pytest.mark.parametrize("argv, message", [
    (SPM + ["--tokenizer-special-tokens", "<X>"], "needs --tokenizer-sentencepiece-legacy"),
    (SPM + ["--tokenizer-sentencepiece-legacy", "--append-eod"], "has no eos"),
    (SPM + ["--tokenizer-sentencepiece-legacy", "--tokenizer-special-tokens", "<X>", ""],
     "an empty token"),
    (["--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "v.json", "--merge-file",
      "m.txt", "--tokenizer-special-tokens", "<X>"], "hub's 'gpt2'"),
])
def test_refusals_are_one_line(argv, message):
    with pytest.raises(tk.TokenizerConfigError) as info:
        _spec(*argv)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("metadata, message", [
    ({"library": "huggingface"}, "library 'huggingface'"),
    ({"model_type": "gpt"}, "library None"),
    ({"library": "sentencepiece", "model_type": "llama"}, "model_type 'llama'"),
    ({"library": "sentencepiece", "model_type": None}, "model_type None"),
    ({"library": "sentencepiece", "tokenizer_class": "X"}, "tokenizer_class"),
    ({"library": "sentencepiece", "path": "/other.model"}, "key 'path'"),
    ([1], "not a JSON object"),
])
def test_metadata_that_would_change_or_break_megatron_is_refused(tmp_path, metadata, message):
    path = tmp_path / "tokenizer_metadata.json"
    path.write_text(json.dumps(metadata))
    with pytest.raises(tk.TokenizerConfigError) as info:
        tkf.check_megatron_metadata("Llama2Tokenizer", str(path))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_metadata_accepted_forms(tmp_path):
    tkf.check_megatron_metadata("Llama2Tokenizer", SPM_METADATA)
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"library": "megatron", "class_name": None, "class_path": None,
                                "model_type": "bert", "chat_template": "{{x}}"}))
    tkf.check_megatron_metadata("GPT2BPETokenizer", str(path))
    path.write_text("{not json")
    with pytest.raises(tk.TokenizerConfigError, match="not a JSON file"):
        tkf.check_megatron_metadata("GPT2BPETokenizer", str(path))
    with pytest.raises(tk.TokenizerConfigError, match="no such file"):
        _spec(*SPM, "--tokenizer-metadata", str(tmp_path / "none.json"))
    _spec(*SPM, "--legacy-tokenizer", "--tokenizer-metadata", str(tmp_path / "none.json"))
