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
import subprocess

import numpy as np
import pytest

import megatron_live

from dataio import indexed
from megatron_reference import megatron_documents, read_pair, reference_write
from pipelines import beam_options
from pipelines import tokenize
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


FULL = [p for p in VARIANTS if p.values[0] == p.values[1]]  # each distinct output once


@pytest.mark.slow  # runs the whole tokenize job: see tests/conftest.py
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


@pytest.mark.slow  # whole tokenize jobs
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


@pytest.mark.slow  # real Megatron, where its python is installed
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


@pytest.mark.slow  # a whole tokenize job
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
