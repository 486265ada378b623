"""transforms/tokenizer/hf_auto.py: a HuggingFace folder loaded as Megatron loads it, from any
storage; the vocabulary size (hence the dtype) is transformers' len(tokenizer)."""

import dataclasses
import json
import os

import fsspec
import numpy as np
import pytest

from dataio import indexed
from transforms import tokenizer as tk

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(TESTS, "data", "megatron_hf")
TEXTS = ["a <|im_start|>user\nhi<|im_end|> b", "plain text, the end", "<|endoftext|>"]


def _ids(tok, texts):
    ids, lengths = tok.encode_batch(texts)
    return [a.tolist() for a in np.split(ids.astype(np.int64), np.cumsum(lengths)[:-1])]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_folder_on_other_storage_is_copied_and_loaded_alike(cache):
    """An fsspec folder (memory:// here, as Azure Blob in a job) and a tokenizer.json under
    another name are staged into the cache folder, configs included, and give the local ids."""
    local = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer",
                                               model=os.path.join(DATA, "qwen2")))
    mem = fsspec.filesystem("memory")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(DATA, "qwen2", name), "rb") as f:
            mem.pipe(f"/hf_auto_test/qwen2/{name}", f.read())
    remote = tk.TokenizerSpec("HuggingFaceTokenizer", model="memory://hf_auto_test/qwen2")
    assert [os.path.basename(p) for p in tk.spec_files(remote)] == ["tokenizer.json",
                                                             "tokenizer_config.json"]
    staged = tk.load_tokenizer(remote)
    assert (staged.vocab_size, staged.eod) == (local.vocab_size, local.eod)
    assert _ids(staged, TEXTS) == _ids(local, TEXTS)
    assert os.listdir(cache / "tokenbeam" / "hf-folders")


def test_tokenizer_json_under_another_name(cache, tmp_path):
    folder = tmp_path / "renamed"
    folder.mkdir()
    for name, target in (("tokenizer.json", "qwen.json"),
                         ("tokenizer_config.json", "tokenizer_config.json")):
        with open(os.path.join(DATA, "qwen2", name), "rb") as f:
            (folder / target).write_bytes(f.read())
    spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=str(folder / "qwen.json"))
    assert [os.path.basename(p) for p in tk.spec_files(spec)] == ["qwen.json",
                                                                 "tokenizer_config.json"]
    local = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer",
                                               model=os.path.join(DATA, "qwen2")))
    assert _ids(tk.load_tokenizer(spec), TEXTS) == _ids(local, TEXTS)


def test_special_tokens_the_vocabulary_lacks_can_widen_the_dtype(tmp_path):
    """65,499 words + two special tokens named only in the config: len(tokenizer) is 65,501,
    so the shards are int32 (Megatron's rule on its vocab_size), not uint16."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(65_498)}
    vocab["[UNK]"] = 65_498
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]",
         "eos_token": "<eos>", "additional_special_tokens": ["<extra>"]}))
    ref = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=str(tmp_path)))
    assert ref.vocab_size == 65_501 and ref.eod == 65_499
    assert indexed.optimal_dtype(ref.vocab_size) == np.int32
    assert _ids(ref, ["w1 <extra> w65497 nope"]) == [[1, 65_500, 65_497, 65_498]]


def test_truncation_in_tokenizer_json_is_not_applied(tmp_path):
    """A tokenizer.json that carries a truncation (max_length 8, as some folders ship):
    Megatron's tokenize() never truncates, and neither does any backend here."""
    import dataclasses

    with open(os.path.join(DATA, "phi", "tokenizer.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst",
                            "stride": 0}
    (tmp_path / "tokenizer.json").write_text(json.dumps(config))
    (tmp_path / "tokenizer_config.json").write_text('{"eos_token": "<|endoftext|>"}')
    spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=str(tmp_path))
    text = "one two three four five six seven eight nine ten eleven twelve"
    tk.load_tokenizer.cache_clear()  # the Rust backends first: before any transformers call
    got = {b: _ids(tk.load_tokenizer(dataclasses.replace(spec, backend=b)), [text])
           for b in ("tokenizers", "fast")}
    want = _ids(tk.load_tokenizer(spec), [text])
    assert len(want[0]) > 8 and got == {"tokenizers": want, "fast": want}


def test_resume_key_moves_where_the_configs_change_the_ids(tmp_path):
    """Before issue 25 a folder's tokenizer_config.json was read for eos_token only; its other
    effects (here two special tokens the vocabulary lacks) change the ids now. A shard committed
    then must not be kept as if it were Megatron's: its key moves. Folders whose ids are the
    same keep their key (a half-done run resumes)."""
    source = os.path.join(DATA, "..", "megatron_preprocess", "tokenizer")
    keep = tmp_path / "keep"
    keep.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (keep / name).write_bytes(open(os.path.join(source, name), "rb").read())
    only = tmp_path / "only"
    only.mkdir()
    (only / "tokenizer.json").write_bytes((keep / "tokenizer.json").read_bytes())
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / "tokenizer.json").write_bytes((keep / "tokenizer.json").read_bytes())
    (moved / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>",
         "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}))
    for folder, special, options in ((only, False, None), (only, True, None), (keep, False, None),
                                     (moved, False, {"loader": "transformers"})):
        spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=str(folder),
                                add_special_tokens=special)
        assert tk.describe(spec, tk.load_tokenizer(spec)).get("options") == options, folder
        # as the planner describes it: the backend chosen, the spec resolved for the workers
        # (its tokenizer built as theirs is, without transformers' folder object)
        chosen = tk.choose_backend(spec, ["a sample text"])[0]
        planned = tk.for_workers(dataclasses.replace(spec, backend=chosen))
        assert tk.describe(planned, tk.load_tokenizer(planned)).get("options") == options, \
            (folder, chosen)
