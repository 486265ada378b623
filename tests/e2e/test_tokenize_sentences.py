"""`--split-sentences`: sentence-level shards through the whole job."""

import json
import os

import numpy as np
import pytest

from megatron_reference import megatron_documents, read_pair, reference_write
from dataio import indexed
from pipelines import tokenize
from transforms.sentences import choose_splitter, make_splitter

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py


def _run(inp, out, tok, *extra):
    return tokenize.run(["--input", str(inp), "--output", str(out), "--tokenizer-type",
                         "HuggingFaceTokenizer", "--tokenizer-model", str(tok), "--append-eod",
                         "--log-interval", "0", "--split-sentences", *extra])


def _sentence_shard(folder, stem):
    names = [n[:-4] for n in os.listdir(folder) if n.startswith(f"{stem}_text_sentence_dc=")
             and n.endswith(".idx")]
    assert len(names) == 1, os.listdir(folder)
    return os.path.join(folder, names[0])


@pytest.mark.parametrize("keep_newlines", [False, True])
def test_sentence_level_structure(corpus_dir, corpus_texts, hf_tokenizer, hf_encode, tmp_path,
                                  keep_newlines):
    _, encode, eod = hf_encode
    extra = ["--keep-newlines"] if keep_newlines else []
    out = tmp_path / "out"
    assert _run(corpus_dir, out, hf_tokenizer, *extra) == 0
    # the default (auto) is Megatron's punkt where its data is installed, else sentencex
    chosen = choose_splitter(splitter="auto", lang="english").name
    split = make_splitter(splitter=chosen, lang="english", keep_newlines=keep_newlines)
    for name, texts in corpus_texts.items():
        stem = name[: -len(".jsonl")]
        prefix = _sentence_shard(out, stem)
        # the shard equals Megatron's assembly of the splitter's sentences
        documents = megatron_documents([split(t) for t in texts], encode, eod=eod)
        ref = str(tmp_path / f"ref_{stem}_{keep_newlines}")
        reference_write(ref, documents, np.uint16)
        assert read_pair(prefix) == read_pair(ref)
        ds = indexed.IndexedDataset(prefix)
        per_doc = np.diff(ds.document_indices)
        assert ds.document_count == len(texts)
        assert per_doc.max() > 1  # documents really are grouped sentences
        assert all(per_doc[i] == 0 for i, t in enumerate(texts) if not t.strip())
        result = indexed.validate(prefix, eod_id=eod)
        assert result.ok, result.reason
        # EOD only on the last sentence of each document
        for j in range(min(ds.document_count, 50)):
            seqs = [ds[i].tolist() for i in range(ds.document_indices[j], ds.document_indices[j + 1])]
            assert all(eod not in s for s in seqs[:-1])
            assert not seqs or seqs[-1][-1] == eod
        dc, sc, tc = len(texts), int(per_doc.sum()), ds.token_count
        assert prefix.endswith(f"_dc={dc}_sc={sc}_tc={tc}")


def test_list_values_are_taken_as_sentences(hf_tokenizer, hf_encode, tmp_path):
    _, encode, eod = hf_encode
    records = [{"text": ["One sentence here.", "", "Another one."]},
               {"text": "Plain text. Gets split! Does it?"}, {"text": []}]
    (tmp_path / "l.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert _run(tmp_path / "l.jsonl", tmp_path / "out", hf_tokenizer) == 0
    split = make_splitter(splitter=choose_splitter().name)
    expected = [records[0]["text"], split(records[1]["text"]), []]
    ref = str(tmp_path / "ref")
    reference_write(ref, megatron_documents(expected, encode, eod=eod), np.uint16)
    prefix = _sentence_shard(tmp_path / "out", "l")
    assert read_pair(prefix) == read_pair(ref)
    assert indexed.IndexedDataset(prefix).document_indices.tolist() == [0, 2, 5, 5]


def test_bad_splitter_options_fail_before_work(hf_tokenizer, tmp_path, capsys):
    (tmp_path / "x.jsonl").write_text('{"text": "a. b."}\n')
    assert _run(tmp_path / "x.jsonl", tmp_path / "o", hf_tokenizer,
                "--sentence-splitter", "nope") == 2
    assert "--sentence-splitter" in capsys.readouterr().err
    assert _run(tmp_path / "x.jsonl", tmp_path / "o", hf_tokenizer, "--sentence-splitter", "nltk",
                "--lang", str(tmp_path / "no_such_punkt")) == 2
    assert not (tmp_path / "o").exists()


def test_nltk_splitter_in_the_job(hf_tokenizer, hf_encode, tmp_path):
    """With a punkt model (trained here), the job's sentences are NLTK punkt's, as in Megatron."""
    punkt = pytest.importorskip("nltk.tokenize.punkt", reason="NLTK is not installed")
    from punkt_data import write_punkt_tab

    _, encode, eod = hf_encode
    from pipelines import demo

    texts = [demo.document(demo.random.Random(i), "en") for i in range(120)]
    trainer = punkt.PunktTrainer()
    trainer.train("\n".join(texts), finalize=True)
    model_dir = tmp_path / "punkt_tab" / "english"
    model_dir.mkdir(parents=True)
    write_punkt_tab(trainer.get_params(), str(model_dir))
    (tmp_path / "e.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts) + "\n")
    assert _run(tmp_path / "e.jsonl", tmp_path / "out", hf_tokenizer, "--sentence-splitter",
                "nltk", "--lang", str(model_dir)) == 0
    tokenizer = punkt.PunktSentenceTokenizer(trainer.get_params())
    expected = [tokenizer.tokenize(t) for t in texts]  # Megatron: splitter.tokenize(text)
    ref = str(tmp_path / "ref")
    reference_write(ref, megatron_documents(expected, encode, eod=eod), np.uint16)
    assert read_pair(_sentence_shard(tmp_path / "out", "e")) == read_pair(ref)


def _punkt_data(tmp_path, texts):
    """NLTK data with a punkt model trained here: DIR/tokenizers/punkt_tab/english/."""
    punkt = pytest.importorskip("nltk.tokenize.punkt", reason="NLTK is not installed")
    from punkt_data import write_punkt_tab

    trainer = punkt.PunktTrainer()
    trainer.train("\n".join(texts), finalize=True)
    root = tmp_path / "nltk_data"
    model_dir = root / "tokenizers" / "punkt_tab" / "english"
    model_dir.mkdir(parents=True)
    write_punkt_tab(trainer.get_params(), str(model_dir))
    return str(root), punkt.PunktSentenceTokenizer(trainer.get_params())


def _use_nltk_data(monkeypatch, root):
    """NLTK_DATA=root, for this process (NLTK read it at import) and any worker it starts."""
    import nltk

    monkeypatch.setenv("NLTK_DATA", root)
    monkeypatch.setattr(nltk.data, "path", [root])


def _settings(out):
    (name,) = [n for n in os.listdir(out / "_commits") if n.endswith(".json")]
    with open(out / "_commits" / name, encoding="utf-8") as f:
        return json.load(f)["resume_key"]["settings"]


def test_default_splitter_is_megatrons_punkt_when_its_data_is_installed(
        hf_tokenizer, hf_encode, tmp_path, monkeypatch, capsys):
    from pipelines import demo

    _, encode, eod = hf_encode
    texts = [demo.document(demo.random.Random(i), "en") for i in range(80)]
    root, megatrons = _punkt_data(tmp_path, texts)
    # where the two splitters differ: leading whitespace (punkt keeps it), "Dr." (sentencex
    # knows it; this punkt model does not)
    texts += ["  Dr. Smith came home. It rained.", "Mr. Jones left early. Dr. No stayed."]
    _use_nltk_data(monkeypatch, root)
    (tmp_path / "e.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts) + "\n")
    assert _run(tmp_path / "e.jsonl", tmp_path / "out", hf_tokenizer) == 0  # no splitter flag
    lines = [ln for ln in capsys.readouterr().err.splitlines()
             if ln.startswith("sentence splitter:")]
    assert len(lines) == 1 and lines[0].startswith("sentence splitter: nltk punkt, Megatron's")
    expected = [megatrons.tokenize(t) for t in texts]  # Megatron: splitter.tokenize(text)
    assert expected != [make_splitter(splitter="sentencex")(t) for t in texts]
    ref = str(tmp_path / "ref")
    reference_write(ref, megatron_documents(expected, encode, eod=eod), np.uint16)
    assert read_pair(_sentence_shard(tmp_path / "out", "e")) == read_pair(ref)
    assert _settings(tmp_path / "out")["splitter"] == "nltk"  # a new resume key: new sentences


def test_default_splitter_without_punkt_data_says_which_runs(hf_tokenizer, hf_encode, tmp_path,
                                                             monkeypatch, capsys):
    _, encode, eod = hf_encode
    pytest.importorskip("nltk", reason="NLTK is not installed")
    (tmp_path / "empty").mkdir()
    _use_nltk_data(monkeypatch, str(tmp_path / "empty"))
    texts = ["Dr. Smith came home. It rained all day. Then it stopped!", "One more. Two."]
    (tmp_path / "s.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts) + "\n")
    assert _run(tmp_path / "s.jsonl", tmp_path / "out", hf_tokenizer) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines()
             if ln.startswith("sentence splitter:")]
    assert len(lines) == 1
    assert lines[0].startswith("sentence splitter: sentencex, not Megatron's NLTK punkt")
    assert "NLTK_DATA=DIR" in lines[0]
    split = make_splitter(splitter="sentencex")
    ref = str(tmp_path / "ref")
    reference_write(ref, megatron_documents([split(t) for t in texts], encode, eod=eod),
                    np.uint16)
    assert read_pair(_sentence_shard(tmp_path / "out", "s")) == read_pair(ref)
    assert _settings(tmp_path / "out")["splitter"] == "auto"  # the resume key as before
    assert os.listdir(tmp_path / "empty") == []  # nothing downloaded
