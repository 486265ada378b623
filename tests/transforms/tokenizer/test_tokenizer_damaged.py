"""A damaged tokenizer file is a configuration error naming the file (issue 23, item 17a).

A truncated ``tokenizer.json`` used to end the job with "unexpected UnicodeDecodeError (a bug)"
and a traceback (or "unexpected Exception" when cut between ASCII bytes). Whatever the
tokenizer's library raises on a file it cannot parse, ``load_tokenizer`` (the driver's check and
every worker's ``setup``) raises TokenizerConfigError (exit 2): one line, the flag, the file,
"damaged or truncated", and the fix.
"""

import json
import os
import shutil

import pytest

from pipelines import demo
from transforms import tokenizer as tk

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data", "megatron_tokenizers")


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf") / "tok"
    return demo.train_bpe(["hello world é ü 中文 " * 20, "more text"] * 5, str(folder),
                          vocab_size=300)


def _copy(hf_folder, tmp_path, name, cut):
    folder = tmp_path / name
    shutil.copytree(hf_folder, folder)
    data = (folder / "tokenizer.json").read_bytes()
    (folder / "tokenizer.json").write_bytes(cut(data))
    return str(folder)


def _in_a_character(data: bytes) -> bytes:
    return data[:next(i for i, b in enumerate(data) if b >= 0xC0) + 1]  # a UTF-8 lead byte


CUTS = {"inside a UTF-8 character": _in_a_character,
        "between ASCII bytes": lambda d: d[: len(d) // 2],
        "empty": lambda d: b"",
        "random bytes": lambda d: os.urandom(2000)}


def _refusal(spec) -> str:
    with pytest.raises(tk.TokenizerConfigError) as caught:
        tk.load_tokenizer(spec)
    message = str(caught.value)
    assert "\n" not in message and "damaged or truncated" in message
    return message


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_a_damaged_tokenizer_json_names_the_file(hf_folder, tmp_path, cut):
    folder = _copy(hf_folder, tmp_path, "t", CUTS[cut])
    message = _refusal(tk.TokenizerSpec(kind="HuggingFaceTokenizer", model=folder))
    assert f"--tokenizer-model {folder}/tokenizer.json" in message


def test_a_damaged_tokenizer_config_json_is_the_file_named(hf_folder, tmp_path):
    folder = _copy(hf_folder, tmp_path, "t", lambda d: d)
    with open(os.path.join(folder, "tokenizer_config.json"), "r+b") as f:
        f.truncate(10)
    message = _refusal(tk.TokenizerSpec(kind="HuggingFaceTokenizer", model=folder))
    assert "tokenizer_config.json" in message and "tokenizer.json:" not in message


def test_a_whole_tokenizer_still_loads(hf_folder):
    tok = tk.load_tokenizer(tk.TokenizerSpec(kind="HuggingFaceTokenizer", model=hf_folder))
    assert tok.vocab_size > 0


@pytest.mark.parametrize("cut", ["half", "random bytes"])
def test_a_damaged_sentencepiece_model(tmp_path, cut):
    data = open(os.path.join(DATA, "spm", "bpe.model"), "rb").read()
    model = tmp_path / "bad.model"
    model.write_bytes(data[: len(data) // 2] if cut == "half" else os.urandom(4000))
    message = _refusal(tk.TokenizerSpec(kind="SentencePieceTokenizer", model=str(model)))
    assert f"--tokenizer-model {model}" in message


def test_damaged_gpt2_vocab_or_merges_name_the_one_at_fault(tmp_path):
    vocab, merges = tmp_path / "vocab.json", tmp_path / "merges.txt"
    vocab.write_text(json.dumps({"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3})[:-9])
    merges.write_text("#version: 0.2\na b\n")
    spec = tk.TokenizerSpec(kind="GPT2BPETokenizer", vocab_file=str(vocab),
                            merge_file=str(merges))
    assert f"--vocab-file {vocab}:" in _refusal(spec)
    vocab.write_text(json.dumps({"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3}))
    merges.write_bytes(b"#version: 0.2\na \xc3")
    message = _refusal(spec)
    assert f"--merge-file {merges}:" in message and "--vocab-file" not in message


def test_a_damaged_wordpiece_vocab(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(open(os.path.join(DATA, "wordpiece", "vocab.txt"), "rb").read()[:50]
                      + b"\xff\xfe\xc3")
    message = _refusal(tk.TokenizerSpec(kind="BertWordPieceLowerCase", vocab_file=str(vocab)))
    assert f"--vocab-file {vocab}:" in message
