"""transforms/tokenizer/files.py: tokenizer files of another kind than --tokenizer-type reads are
named as what they are, with the --tokenizer-type and flags that fit them, in one line (exit 2,
no traceback, nothing written)."""

import base64
import json
import os
import shutil

import pytest

from runtime import errors
from pipelines import tokenize
from transforms.tokenizer import files as tf
from transforms.tokenizer import registry

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data")
SPM = os.path.normpath(os.path.join(DATA, "megatron_tokenizers", "spm", "bpe.model"))
UNIGRAM = os.path.normpath(os.path.join(DATA, "megatron_tokenizers", "spm", "unigram.model"))
TIKTOKEN = os.path.normpath(os.path.join(DATA, "megatron_tokenizers", "tiktoken", "vocab.json"))
WORDPIECE = os.path.normpath(os.path.join(DATA, "megatron_tokenizers", "wordpiece", "vocab.txt"))
HF = os.path.normpath(os.path.join(DATA, "megatron_hf", "gemma"))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokfiles")
    gpt2 = root / "gpt2"
    gpt2.mkdir()
    (gpt2 / "vocab.json").write_text(json.dumps({"!": 0, "a": 1, "b": 2, "ab": 3,
                                                 "<|endoftext|>": 4}))
    (gpt2 / "merges.txt").write_text("#version: 0.2\na b\n")
    (root / "cl100k.tiktoken").write_text("".join(
        f"{base64.b64encode(bytes([i])).decode()} {i}\n" for i in range(256)))
    sp_folder = root / "llama_slow"  # a HuggingFace folder of the slow tokenizer only
    sp_folder.mkdir()
    shutil.copy(SPM, sp_folder / "tokenizer.model")
    (sp_folder / "tokenizer_config.json").write_text('{"tokenizer_class": "LlamaTokenizer"}')
    both = root / "llama_both"  # tokenizer.json beside tokenizer.model, as Llama folders have
    shutil.copytree(HF, both)
    shutil.copy(SPM, both / "tokenizer.model")
    damaged = root / "llama_damaged"  # its tokenizer.json cut short: not taken for an SP folder
    shutil.copytree(both, damaged)
    (damaged / "tokenizer.json").write_bytes(b"\x00garbage")
    (root / "in.jsonl").write_text('{"text": "hello world"}\n')
    # bert-base-uncased's vocab.txt layout: [PAD], 99 [unusedN], then [UNK] [CLS] [SEP] [MASK]
    # at lines 101-104, then the word pieces
    (root / "bert_vocab.txt").write_text("\n".join(
        ["[PAD]", *(f"[unused{i}]" for i in range(99)), "[UNK]", "[CLS]", "[SEP]", "[MASK]",
         "!", "the", "##s", "hello", "world"]) + "\n")
    return root


@pytest.mark.parametrize("path, kind", [
    (SPM, tf.SENTENCEPIECE), (UNIGRAM, tf.SENTENCEPIECE), (os.path.join(HF, "tokenizer.json"),
                                                           tf.HF_JSON),
    (TIKTOKEN, tf.TIKTOKEN_JSON), (WORDPIECE, tf.WORDPIECE),
    ("gpt2/vocab.json", tf.GPT2_VOCAB), ("gpt2/merges.txt", tf.GPT2_MERGES),
    ("cl100k.tiktoken", tf.TIKTOKEN_BPE), ("in.jsonl", None), ("no-such-file", None),
    ("bert_vocab.txt", tf.WORDPIECE),   # its [UNK] on line 101 (was read to line 50 only)
    (os.path.join(HF, "tokenizer_config.json"), None),
])
def test_kind_of_file(files, path, kind):
    assert tf.kind_of_file(str(files / path)) == kind


def _run(files, capsys, *flags):
    out = files / "out"
    status = tokenize.run(["--input", str(files / "in.jsonl"), "--output", str(out), *flags])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert status == errors.EXIT_USAGE, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert not out.exists()
    return lines[0]


def test_a_sentencepiece_model_given_as_a_huggingface_folder(files, capsys):
    assert _run(files, capsys, "--tokenizer-type", "HuggingFaceTokenizer",
                "--tokenizer-model", SPM) == (
        f"error: --tokenizer-type HuggingFaceTokenizer: --tokenizer-model {SPM} is a "
        f"SentencePiece model, not a HuggingFace tokenizer.json; did you mean --tokenizer-type "
        f"SentencePieceTokenizer --tokenizer-model {SPM}?")


def test_a_folder_with_tokenizer_model_and_no_tokenizer_json(files, capsys):
    folder = files / "llama_slow"
    assert _run(files, capsys, "--tokenizer-type", "HuggingFaceTokenizer",
                "--tokenizer-model", str(folder)) == (
        f"error: --tokenizer-type HuggingFaceTokenizer: --tokenizer-model {folder} holds a "
        f"SentencePiece model (tokenizer.model) and no tokenizer.json; did you mean "
        f"--tokenizer-type SentencePieceTokenizer --tokenizer-model {folder}/tokenizer.model?")


@pytest.mark.parametrize("model", [os.path.join(HF, "tokenizer.json"), HF])
def test_a_tokenizer_json_given_to_sentencepiece(files, capsys, model):
    line = _run(files, capsys, "--tokenizer-type", "SentencePieceTokenizer",
                "--tokenizer-model", model)
    assert line.startswith(f"error: --tokenizer-type SentencePieceTokenizer: --tokenizer-model "
                           f"{model} ")
    assert "HuggingFace tokenizer.json" in line and "damaged" not in line
    assert line.endswith(f"did you mean --tokenizer-type HuggingFaceTokenizer "
                         f"--tokenizer-model {HF}?")


def test_a_gpt2_vocab_as_tokenizer_model(files, capsys):
    vocab, merges = files / "gpt2" / "vocab.json", files / "gpt2" / "merges.txt"
    for kind in ("HuggingFaceTokenizer", "GPT2BPETokenizer"):
        line = _run(files, capsys, "--tokenizer-type", kind, "--tokenizer-model", str(vocab))
        assert f"--tokenizer-model {vocab} is a GPT-2 vocab.json" in line
        assert line.endswith(f"did you mean --tokenizer-type GPT2BPETokenizer --vocab-file "
                             f"{vocab} --merge-file {merges}?")


def test_a_tiktoken_file(files, capsys):
    line = _run(files, capsys, "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
                TIKTOKEN)
    assert line.endswith(f"is a tiktoken vocabulary JSON, not a HuggingFace tokenizer.json; did "
                         f"you mean --tokenizer-type TikTokenizer --tokenizer-model {TIKTOKEN} "
                         "(with --vocab-size and --tiktoken-pattern)?")
    text_form = files / "cl100k.tiktoken"
    line = _run(files, capsys, "--tokenizer-type", "TikTokenizer", "--tokenizer-model",
                str(text_form), "--vocab-size", "1300", "--tiktoken-pattern", "v2")
    assert f"{text_form} is an OpenAI .tiktoken file" in line and "JSON list form" in line


def test_a_wordpiece_vocab_as_a_huggingface_model(files, capsys):
    line = _run(files, capsys, "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
                WORDPIECE)
    assert line.endswith(f"did you mean --tokenizer-type BertWordPieceLowerCase (or "
                         f"BertWordPieceCase) --vocab-file {WORDPIECE} --legacy-tokenizer?")


def test_a_standard_bert_vocab_as_a_huggingface_model(files, capsys):
    vocab = files / "bert_vocab.txt"
    line = _run(files, capsys, "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
                str(vocab))
    assert line.endswith(f"did you mean --tokenizer-type BertWordPieceLowerCase (or "
                         f"BertWordPieceCase) --vocab-file {vocab} --legacy-tokenizer?"), line


@pytest.mark.parametrize("kind, given", [
    ("HuggingFaceTokenizer", {"--tokenizer-model": HF}),
    ("HuggingFaceTokenizer", {"--tokenizer-model": "llama_both"}),
    ("HuggingFaceTokenizer", {"--tokenizer-model": "llama_damaged"}),  # the load names it
    ("HuggingFaceTokenizer", {"--tokenizer-model": os.path.join(HF, "tokenizer.json")}),
    ("SentencePieceTokenizer", {"--tokenizer-model": SPM}),
    ("Llama2Tokenizer", {"--tokenizer-model": UNIGRAM}),
    # a folder holding a .model: the folder check names the file in it
    ("SentencePieceTokenizer", {"--tokenizer-model": "llama_both"}),
    ("TikTokenizer", {"--tokenizer-model": TIKTOKEN}),
    ("BertWordPieceCase", {"--vocab-file": WORDPIECE}),
    ("GPT2BPETokenizer", {"--vocab-file": "gpt2/vocab.json", "--merge-file": "gpt2/merges.txt",
                          "--tokenizer-model": SPM}),  # ignored beside the two files, as Megatron
    ("NullTokenizer", {"--tokenizer-model": SPM}),
    ("HuggingFaceTokenizer", {"--tokenizer-model": "no-such-folder"}),
])
def test_files_that_fit_or_are_missing_say_nothing(files, kind, given):
    given = {flag: str(files / path) for flag, path in given.items()}
    assert registry.kind(kind).mismatch(given) is None


@pytest.mark.parametrize("first", ["model", "version", "decoder", "padding"])
def test_a_gpt2_vocab_whose_first_token_is_a_tokenizer_json_key_says_nothing(tmp_path, first):
    """A GPT-2 vocab.json is token -> id: its first token may be "model" or "version" (a
    tokenizer.json's keys, whose values are never numbers); it was taken for a tokenizer.json."""
    vocab = tmp_path / "vocab.json"
    vocab.write_text(json.dumps({first: 0, "a": 1, "b": 2, "ab": 3, "<|endoftext|>": 4}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\n")
    assert tf.kind_of_file(str(vocab)) == tf.GPT2_VOCAB
    assert registry.kind("GPT2BPETokenizer").mismatch({"--vocab-file": str(vocab),
                                            "--merge-file": str(tmp_path / "merges.txt")}) is None
