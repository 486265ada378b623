"""Byte-identity with Megatron-LM core_v0.16.1 ``tools/preprocess_data.py`` for HuggingFace
tokenizer folders whose ``tokenizer_config.json`` / ``special_tokens_map.json`` change the ids
(issue 25 part 1): Llama (legacy true/false, add_bos), Mistral, Gemma, Qwen2, Phi, GPT-NeoX,
GPT-2 (add_prefix_space), BERT (do_lower_case, an [UNK] literal in text), T5 (extra_ids),
special tokens named in the config but absent from tokenizer.json, named tokens already in the
vocabulary, split_special_tokens, no eos (sep fallback), --tokenizer-hf-include-special-tokens,
--tokenizer-hf-use-fast and --tokenizer-special-tokens.

The expected bytes in tests/data/megatron_hf/megatron/ (gzipped) were written by Megatron's own
script (run_megatron.sh there; variants.tsv lists each variant's flags). Every variant is checked
through the tokenizer with the reference (transformers) and with the backend ``auto`` picks
(gigatoken or the folder's own tokenizers.Tokenizer, each only after its self-check), and each
distinct output once through the whole tokenize job.
"""

import dataclasses
import gzip
import json
import os
import shutil

import numpy as np
import pytest


from dataio import indexed
from megatron_reference import megatron_documents, read_pair, reference_write
from pipelines import beam_options
from transforms import tokenizer as tk

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data", "megatron_hf")
OUT = "corpus_text_document"


def _variants():
    with open(os.path.join(DATA, "variants.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return [pytest.param(name, stored, flags.split(), id=name) for name, stored, flags in rows]


VARIANTS = _variants()


def _flags(flags):
    """Megatron's flags as tokenbeam takes them (same names), the folder made absolute."""
    out = list(flags)
    for i, flag in enumerate(out[:-1]):
        if flag in ("--tokenizer-model", "--vocab-file", "--merge-file"):
            out[i + 1] = os.path.join(DATA, out[i + 1])
    return out


def _expected(stored):
    prefix = os.path.join(DATA, "megatron", stored, OUT)
    with gzip.open(prefix + ".bin.gz") as b, gzip.open(prefix + ".idx.gz") as i:
        return b.read(), i.read()


def _texts():
    with open(os.path.join(DATA, "corpus.jsonl"), encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def _megatron_bytes(tmp_path, tok, flags):
    texts = _texts()
    segments = [s for v in texts for s in (v if isinstance(v, list) else [v])]
    ids, lengths = tok.encode_batch(segments)
    by_text = dict(zip(segments, np.split(ids.astype(np.int64), np.cumsum(lengths)[:-1])))
    documents = megatron_documents(texts, lambda t: by_text[t].tolist(),
                                   eod=tok.eod if "--append-eod" in flags else None)
    reference_write(str(tmp_path / "got"), documents, indexed.optimal_dtype(tok.vocab_size))
    return read_pair(str(tmp_path / "got"))


def test_every_case_has_its_fixture():
    folders = {f for f in os.listdir(DATA) if os.path.isdir(os.path.join(DATA, f))} - {"megatron"}
    named = {p.values[2][p.values[2].index("--tokenizer-model") + 1] for p in VARIANTS}
    assert folders == named
    for param in VARIANTS:
        assert len(_expected(param.values[1])[1]) > 34


@pytest.mark.parametrize("name, stored, flags", VARIANTS)
@pytest.mark.parametrize("backend", ["reference", "auto", "auto-worker"])
def test_tokenizer_gives_megatron_bytes(tmp_path, backend, name, stored, flags):
    """auto-worker: what a worker process builds from the driver's resolved tokenizer
    (transforms/tokenizer/hf_resolved.py), without transformers."""
    flags = _flags(flags)
    worker = backend == "auto-worker"
    backend = "auto" if worker else backend
    options = beam_options.parse(["--input", "x", "--output", "y", *flags,
                          "--tokenizer-backend", backend])
    spec = options.view_as(beam_options.TokenizerOptions).tokenizer_spec()
    chosen, why = tk.choose_backend(spec, _texts()[:20])
    if backend == "reference":
        assert chosen == "reference"
    else:
        # the common path stays in Rust: gigatoken, else the folder's own tokenizers.Tokenizer
        assert chosen in ("fast", "tokenizers"), why
    spec = dataclasses.replace(spec, backend=chosen)
    if worker:
        spec = tk.for_workers(spec)
        assert spec.resolved is not None
    tok = tk.load_tokenizer(spec)
    if worker:
        assert isinstance(tok.reference, tk.ResolvedHFTokenizer)
    got = _megatron_bytes(tmp_path, tok, flags)
    expected = _expected(stored)
    assert got[1] == expected[1], "the .idx differs (lengths, documents or dtype)"
    assert got[0] == expected[0], "the .bin differs (token ids)"


def test_config_effects_change_ids():
    """The fixture tests something: with tokenizer.json alone (the configs ignored, as before
    issue 25) these folders give other ids, vocabulary sizes or EOD."""
    import tokenizers

    differs = []
    for folder in ("llama_legacy_true", "gemma", "qwen2", "gpt_neox", "gpt2_prefix_space",
                   "missing_specials", "named_in_vocab", "split_special_tokens",
                   "bert_lower_true", "t5"):
        raw = tokenizers.Tokenizer.from_file(os.path.join(DATA, folder, "tokenizer.json"))
        spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=os.path.join(DATA, folder))
        ref = tk.load_tokenizer(spec)
        texts = [t for v in _texts() for t in (v if isinstance(v, list) else [v])]
        plain = [e.ids for e in raw.encode_batch(texts, add_special_tokens=False)]
        ids, lengths = ref.encode_batch(texts)
        if plain != [a.tolist() for a in np.split(ids.astype(np.int64),
                                                   np.cumsum(lengths)[:-1])] \
                or raw.get_vocab_size() != ref.vocab_size:
            differs.append(folder)
    assert len(differs) == 10, differs


def test_eod_falls_back_to_sep():
    spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=os.path.join(DATA, "no_eos_sep"))
    tok = tk.load_tokenizer(spec)
    assert tok.eod is not None and tok.eod == tok.backend.token_to_id("<|endoftext|>")


def test_folder_without_configs_keeps_its_resume_key(tmp_path):
    """tokenizer.json alone: same files, options and EOD as before transformers loaded it."""
    shutil.copy(os.path.join(DATA, "phi", "tokenizer.json"), tmp_path / "tokenizer.json")
    spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=str(tmp_path))
    assert tk.spec_files(spec) == [str(tmp_path / "tokenizer.json")] and tk.spec_options(spec) == {}
    assert tk.load_tokenizer(spec).eod is None
