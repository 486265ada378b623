"""One bad record never takes the job down: records the parser, the tokenizer or the sentence
splitter cannot handle are skipped, listed in _errors/{stem}.jsonl with file:line and counted;
every other record is committed, byte-identical to Megatron's output for the good records."""

import base64
import json
import os
import random

import numpy as np
import pytest

from megatron_reference import megatron_documents, read_pair, reference_write
from pipelines import tokenize

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py


def _run(inputs, output, *extra):
    return tokenize.run([f"--input={inputs}", "--output", str(output), "--log-interval", "0",
                         *map(str, extra)])


def _hf(tokenizer):
    return ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", tokenizer]


def _shard(folder, stem, key="text", level="document"):
    names = [n[:-4] for n in os.listdir(folder) if n.startswith(f"{stem}_{key}_{level}_dc=")
             and n.endswith(".idx")]
    assert len(names) == 1, os.listdir(folder)
    return os.path.join(folder, names[0])


def _errors(out, stem):
    return [json.loads(x) for x in (out / "_errors" / f"{stem}.jsonl").read_text().splitlines()]


def _summary_bad_records(text):
    return int(next(line for line in text.splitlines() if "bad records" in line).split()[-1])


def test_parser_breaking_records_mid_file_are_bad_records(hf_tokenizer, hf_encode, tmp_path,
                                                          capsys):
    _, encode, eod = hf_encode
    deep = 10_000
    good = ["first good", "second good", "third good", "fourth good", "fifth good"]
    lines = [
        json.dumps({"text": good[0]}).encode(),
        b"[" * deep + b"]" * deep,  # RecursionError out of json.loads on today's main
        json.dumps({"text": good[1]}).encode(),
        b'{"text": "fine", "meta": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"}",
        json.dumps({"text": good[2]}).encode(),
        b'{"text": ' + b"[" * 1100 + b'"x"' + b"]" * 1100 + b"}",  # just past orjson's limit
        b'{"text": "x", "n": ' + b"7" * 5000 + b"}",  # more digits than Python converts
        json.dumps({"text": good[3]}).encode(),
        b"[" * deep,  # deep and unterminated
        json.dumps({"text": good[4]}).encode(),
    ]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "nested.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out"
    capsys.readouterr()
    # --split-bytes: later ranges start mid-file, so their line numbers are worked out
    # 5 of its 10 records are bad: more than --max-bad-fraction's default (0.1) fails it
    assert _run(tmp_path / "in", out, *_hf(hf_tokenizer), "--append-eod",
                "--split-bytes", "30000") == 1
    assert "5 of 10 records are bad (50.0%, more than --max-bad-fraction 0.1)" in \
        capsys.readouterr().err
    assert _run(tmp_path / "in", out, *_hf(hf_tokenizer), "--append-eod",
                "--split-bytes", "30000", "--max-bad-fraction", "0.5") == 0
    errors = _errors(out, "nested")
    assert [e["line"] for e in errors] == [2, 4, 6, 7, 9]
    offsets = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
    assert [e["offset"] for e in errors] == [offsets[i - 1] for i in (2, 4, 6, 7, 9)]
    assert all(e["file"].endswith("nested.jsonl") for e in errors)
    assert "nested more than 1024 levels" in errors[0]["reason"]
    assert "nested more than 1024 levels" in errors[1]["reason"]
    assert "4300 digits" in errors[3]["reason"]
    assert _summary_bad_records(capsys.readouterr().out) == 5
    ref = str(tmp_path / "ref")
    reference_write(ref, megatron_documents(good, encode, eod=eod), np.uint16)
    assert read_pair(_shard(out, "nested")) == read_pair(ref)


def _null_tokenizer_encode(text):
    return [int(t) for t in text.split()]


@pytest.mark.parametrize("bad_key", ["text", "title"])
def test_a_document_the_tokenizer_rejects_is_left_out_of_every_key(tmp_path, capsys, bad_key):
    """NullTokenizer (as Megatron's) reads whitespace-separated integers; a word raises
    ValueError, for real. The document goes from both keys' shards, the rest stay exact."""
    rng = random.Random(5)
    records = [{"text": " ".join(str(rng.randrange(90)) for _ in range(rng.randrange(1, 9))),
                "title": " ".join(str(rng.randrange(90)) for _ in range(rng.randrange(1, 4)))}
               for _ in range(40)]
    bad_rows = (7, 23)
    for r in bad_rows:
        records[r][bad_key] = records[r][bad_key] + " seven"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "ints.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out"
    capsys.readouterr()
    # one batch of 16 documents, so the first bad document's batch also has good ones
    assert _run(tmp_path / "in", out, "--tokenizer-type", "NullTokenizer", "--vocab-size", "100",
                "--json-keys", "text", "title", "--append-eod", "--batch-documents", "16") == 0
    errors = _errors(out, "ints")
    assert [e["line"] for e in errors] == [r + 1 for r in bad_rows]
    assert all(e["file"].endswith("ints.jsonl") for e in errors)
    assert all(f"the tokenizer failed on key {bad_key!r}" in e["reason"]
               and "ValueError" in e["reason"] and "seven" in e["reason"] for e in errors)
    assert _summary_bad_records(capsys.readouterr().out) == 2
    good = [r for i, r in enumerate(records) if i not in bad_rows]
    for key in ("text", "title"):
        ref = str(tmp_path / f"ref_{key}")
        reference_write(ref, megatron_documents([r[key] for r in good], _null_tokenizer_encode,
                                                eod=100), np.uint16)
        assert read_pair(_shard(out, "ints", key)) == read_pair(ref), key


def test_an_input_with_too_many_bad_records_fails_its_shards(tmp_path, capsys):
    """--max-bad-fraction F: an input whose bad records (the parser's and the tokenizer's
    alike) are more than F of its records fails every shard of it (all keys), naming the first;
    F of them exactly, it commits. The flag is not in the resume key: a shard it let through is
    not redone when it changes."""
    records = [{"text": f"{i % 90} {i % 7}", "title": str(i % 50)} for i in range(100)]
    lines = [json.dumps(r) for r in records]
    for i in (12, 30, 31, 50, 70, 90):  # 6 the parser rejects
        lines[i] = '{"text": "1 2", broken'
    for i in (3, 40, 41, 60):  # 4 the tokenizer rejects (NullTokenizer: integers only)
        lines[i] = json.dumps({"text": "5 six", "title": "1"})
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "ints.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "in" / "fine.jsonl").write_text(json.dumps({"text": "1", "title": "2"}) + "\n")
    out = tmp_path / "out"
    flags = ["--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--json-keys", "text",
             "title", "--batch-documents", "16", "--split-bytes", "1000"]
    capsys.readouterr()
    assert _run(tmp_path / "in", out, *flags) == 0  # 10 of 100: not more than 0.1
    assert _summary_bad_records(capsys.readouterr().out) == 10
    lines[80] = "not json"
    (tmp_path / "in" / "ints.jsonl").write_text("\n".join(lines) + "\n")
    assert _run(tmp_path / "in", out, *flags) == 1  # 11 of 100
    err = capsys.readouterr().err
    failed = sorted(line for line in err.splitlines() if line.startswith("error: FAILED "))
    assert [line.split(":")[1].strip() for line in failed] == ["FAILED ints_text_document",
                                                               "FAILED ints_title_document"]
    assert "ints.jsonl: 11 of 100 records are bad (11.0%, more than --max-bad-fraction 0.1), " \
           f"listed in {out / '_errors' / 'ints.jsonl'}; the first, line 4: the tokenizer " \
           "failed on key 'text'" in failed[0], failed[0]
    assert _run(tmp_path / "in", out, *flags, "--max-bad-fraction", "0.2") == 0
    assert _summary_bad_records(capsys.readouterr().out) == 11
    assert len([n for n in os.listdir(out) if n.startswith("ints_") and n.endswith(".idx")]) == 2
    # committed: a stricter fraction does not redo it; an input with one bad record fails at 0
    assert _run(tmp_path / "in", out, *flags, "--max-bad-fraction", "0") == 0
    assert "skip ints_text_document" in capsys.readouterr().out
    (tmp_path / "in" / "fine.jsonl").write_text('{"text": "1", "title": "2"}\n{"text": 3}\n')
    assert _run(tmp_path / "in", out, *flags, "--max-bad-fraction", "0") == 1
    assert "FAILED fine_text_document: " in capsys.readouterr().err
    assert _run(tmp_path / "in", out, *flags, "--max-bad-fraction", "1.5") == 2
    assert "--max-bad-fraction 1.5: give a fraction" in capsys.readouterr().err


def test_on_bad_record_fail_stops_at_a_document_the_tokenizer_rejects(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "x.jsonl").write_text('{"text": "1 2"}\n{"text": "3"}\n{"text": "4 x"}\n')
    try:
        status = _run(tmp_path / "in", tmp_path / "out", "--tokenizer-type", "NullTokenizer",
                      "--vocab-size", "10", "--on-bad-record", "fail")
    except Exception as exc:  # noqa: BLE001 - how the failure surfaces is item 7's business
        message = str(exc)
    else:
        assert status == 1
        message = capsys.readouterr().err
    assert "x.jsonl:3: the tokenizer failed on key 'text'" in message
    assert not [n for n in os.listdir(tmp_path / "out") if n.endswith(".idx")] \
        if (tmp_path / "out").exists() else True


def test_a_document_the_splitter_raises_on_is_a_bad_record(hf_tokenizer, hf_encode, tmp_path,
                                                           monkeypatch, capsys):
    """No real splitter failure is known once NLTK's is fixed (next test), so one is injected:
    a splitter that raises on one document's text."""
    from transforms import sentences

    real = sentences.make_splitter

    def make_splitter(**kwargs):
        split = real(**kwargs)

        def exploding(text):
            if "EXPLODE" in text:
                raise RecursionError("maximum recursion depth exceeded")
            return split(text)
        return exploding

    monkeypatch.setattr(sentences, "make_splitter", make_splitter)
    _, encode, eod = hf_encode
    texts = ["One sentence. Two sentences.", "Here it goes. EXPLODE now.", "Last one. Really."]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "s.jsonl").write_text("".join(json.dumps({"text": t}) + "\n"
                                                     for t in texts))
    out = tmp_path / "out"
    # one of its three records is bad: more than the default --max-bad-fraction (0.1)
    assert _run(tmp_path / "in", out, *_hf(hf_tokenizer), "--append-eod",
                "--split-sentences", "--max-bad-fraction", "0.5") == 0
    errors = _errors(out, "s")
    assert [e["line"] for e in errors] == [2]
    assert "sentence splitter failed on key 'text' (RecursionError" in errors[0]["reason"]
    assert "EXPLODE" in errors[0]["snippet"]
    split = real(splitter="auto", lang="english", keep_newlines=False)
    ref = str(tmp_path / "ref")
    reference_write(ref, megatron_documents([split(t) for i, t in enumerate(texts) if i != 1],
                                            encode, eod=eod), np.uint16)
    assert read_pair(_shard(out, "s", level="sentence")) == read_pair(ref)


def _megatron_punkt(params, *, keep_newlines):
    """Megatron-LM's splitter (tools/preprocess_data.py), NLTK's own code, time limit and all."""
    from nltk.tokenize import punkt

    from punkt_data import megatron_language_vars

    CustomLanguageVars = megatron_language_vars()
    lang_vars = CustomLanguageVars() if keep_newlines else punkt.PunktLanguageVars()
    return punkt.PunktSentenceTokenizer(train_text=params, lang_vars=lang_vars)


def test_nltk_long_run_without_spaces(hf_tokenizer, hf_encode, tmp_path):
    """A 200,000-character base64 blob with --keep-newlines: Megatron's punkt pattern is
    quadratic on a run with no sentence end, so NLTK raised TimeoutError and the job exited 1
    with no shard (Megatron's own run stops there). Now the document is split exactly as punkt
    splits it, and the other documents with it."""
    pytest.importorskip("nltk.tokenize.punkt", reason="NLTK is not installed")
    from nltk.tokenize import punkt

    from pipelines import demo
    from punkt_data import write_punkt_tab

    _, encode, eod = hf_encode
    texts = [demo.document(demo.random.Random(i), "en") for i in range(60)]
    trainer = punkt.PunktTrainer()
    trainer.train("\n".join(texts), finalize=True)
    model_dir = tmp_path / "punkt_tab" / "english"
    model_dir.mkdir(parents=True)
    write_punkt_tab(trainer.get_params(), str(model_dir))

    blob = base64.b64encode(random.Random(1).randbytes(150_000)).decode()
    assert len(blob) == 200_000 and not set(blob) & set(".?!")

    def document(payload):
        return (f"The image follows.\nIt is inline: data:image/png;base64,{payload} and that "
                "was the whole image. Thank you!\n\nBye.")

    docs = [texts[0], document(blob), texts[1]]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "blob.jsonl").write_text("".join(json.dumps({"text": t}) + "\n"
                                                        for t in docs))
    out = tmp_path / "out"
    assert _run(tmp_path / "in", out, *_hf(hf_tokenizer), "--append-eod", "--split-sentences",
                "--sentence-splitter", "nltk", "--lang", model_dir, "--keep-newlines") == 0
    assert not (out / "_errors").exists()
    # The reference: Megatron's splitter (NLTK's code, unchanged) on the same document with a
    # short blob, then the blob put back. Punkt decides each boundary from the tokens around
    # it; the blob is in no boundary's context, so its length changes no decision.
    splitter = _megatron_punkt(trainer.get_params(), keep_newlines=True)
    short = blob[:64]
    expected = [splitter.tokenize(texts[0]),
                [s.replace(short, blob) for s in splitter.tokenize(document(short))],
                splitter.tokenize(texts[1])]
    assert sum(s.count(blob) for s in expected[1]) == 1
    ref = str(tmp_path / "ref")
    reference_write(ref, megatron_documents(expected, encode, eod=eod), np.uint16)
    assert read_pair(_shard(out, "blob", level="sentence")) == read_pair(ref)
