"""A HuggingFace folder's Rust backend on a worker (transforms/tokenizer/hf_resolved.py): built
from what the driver resolved and self-checked, without importing transformers; the same ids, the same
description and resume key as the tokenizer the driver loaded with transformers."""

import dataclasses
import os

import numpy as np
import pytest

from transforms import tokenizer as tk

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
DATA = os.path.join(ROOT, "tests", "data", "megatron_hf")
TEXTS = ["Hello World, it's 3.14!", "  leading <|endoftext|> and <s> [UNK] x", "", "ÄÖÜ ß 你好"]


def _driver_spec(folder, **kw):
    spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=os.path.join(DATA, folder),
                            backend="auto", **kw)
    chosen, why = tk.choose_backend(spec, TEXTS)
    assert chosen in ("fast", "tokenizers"), why
    return tk.for_workers(dataclasses.replace(spec, backend=chosen))


def _ids(tok, texts=TEXTS):
    ids, lengths = tok.encode_batch(texts)
    return np.asarray(ids, dtype=np.int64).tolist(), lengths.tolist()


@pytest.mark.parametrize("folder", ["gemma", "qwen2", "split_special_tokens", "no_eos_sep"])
def test_workers_tokenizer_is_the_checked_one(folder):
    """The driver's Rust tokenizer and the worker's come from the same bytes; description
    (metadata.json, resume key) and settings unchanged by carrying them."""
    spec = _driver_spec(folder)
    plain = dataclasses.replace(spec, resolved=None)
    driver, worker = tk.load_tokenizer(plain), tk.load_tokenizer(spec)
    assert isinstance(worker.reference, tk.ResolvedHFTokenizer)
    assert isinstance(driver.reference, tk.HuggingFaceTokenizer)
    assert worker.reference.backend.to_str() == driver.reference.backend.to_str()
    assert worker.reference.backend.encode_special_tokens == \
        driver.reference.backend.encode_special_tokens
    assert tk.describe(spec, worker) == tk.describe(plain, driver)
    assert (tk.spec_options(spec), tk.spec_files(spec)) == (tk.spec_options(plain),
                                                            tk.spec_files(plain))
    assert _ids(worker) == _ids(driver) == _ids(driver.reference)


def test_split_special_tokens_travels():
    """``encode_special_tokens`` is not part of tokenizers' to_str(): it is carried beside."""
    spec = _driver_spec("split_special_tokens")
    assert spec.resolved.encode_special_tokens is True
    assert tk.load_tokenizer(spec).reference.backend.encode_special_tokens is True


def test_eod_override_applies_on_the_worker():
    spec = _driver_spec("qwen2", eod_id=7)
    assert tk.load_tokenizer(spec).eod == 7
    assert spec.resolved.eod != 7  # the folder's own, the override applied where loaded


def test_other_tokenizers_version_loads_the_folder_as_before():
    spec = _driver_spec("qwen2")
    other = dataclasses.replace(spec, resolved=dataclasses.replace(
        spec.resolved, tokenizers_version="0.0.0"))
    tok = tk.load_tokenizer(other)
    assert isinstance(tok.reference, tk.HuggingFaceTokenizer)
    assert _ids(tok) == _ids(tk.load_tokenizer(spec))


def test_reference_and_other_kinds_carry_nothing():
    spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=os.path.join(DATA, "qwen2"))
    assert tk.for_workers(spec).resolved is None  # backend reference: transformers itself
    # a reference spec that carries one anyway is the reference
    carried = dataclasses.replace(spec, resolved=_driver_spec("qwen2").resolved)
    assert tk.load_tokenizer(carried) is tk.load_tokenizer(spec)
    null = tk.TokenizerSpec("NullTokenizer", vocab_size=10, backend="reference")
    assert tk.for_workers(null) is null


def test_resolved_reference_never_encodes():
    base = tk.load_tokenizer(_driver_spec("qwen2")).reference
    with pytest.raises(tk.TokenizerConfigError):
        base.encode_batch(["x"])
