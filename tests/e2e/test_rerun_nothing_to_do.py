"""A rerun whose shards are all committed already says so in one line, with what their commit
records add up to, and leaves metadata.json as it was; a rerun that writes some says what it
wrote and what was there already (issue 26, item 5)."""

import json
import re

import pytest

from pipelines import tokenize

pytestmark = pytest.mark.slow  # whole-job runs: see tests/conftest.py


def _run(inputs, output, tokenizer, *extra):
    argv = [f"--input={p}" for p in inputs]
    argv += ["--output", str(output), "--tokenizer-type", "HuggingFaceTokenizer",
             "--tokenizer-model", str(tokenizer), "--log-interval", "0", "--append-eod", *extra]
    return tokenize.run([str(a) for a in argv])


def test_an_all_skipped_rerun_says_nothing_to_do_and_keeps_metadata(corpus_dir, hf_tokenizer,
                                                                      tmp_path, capsys):
    out = tmp_path / "out"
    assert _run([corpus_dir], out, hf_tokenizer) == 0
    before = (out / "metadata.json").read_bytes()
    totals = json.loads(before)["totals"]
    capsys.readouterr()
    assert _run([corpus_dir], out, hf_tokenizer) == 0
    said = capsys.readouterr().out
    line = (f"nothing to do: 3 shards already committed ({totals['documents']:,} documents, "
            f"{totals['tokens']:,} tokens)")
    assert said.splitlines()[-1] == line, said
    assert "summary" not in said and "0 documents" not in said
    assert (out / "metadata.json").read_bytes() == before
    # metadata.json gone (a run killed before its last step): the rerun writes it again
    (out / "metadata.json").unlink()
    assert _run([corpus_dir], out, hf_tokenizer) == 0
    assert line in capsys.readouterr().out
    again = json.loads((out / "metadata.json").read_text())
    assert again["totals"] == totals and [{**s, "status": "written"} for s in again["shards"]] \
        == json.loads(before)["shards"]


def test_a_partly_done_rerun_reports_what_it_did_and_what_was_there(corpus_dir, hf_tokenizer,
                                                                     tmp_path, capsys):
    out = tmp_path / "out"
    first = sorted(corpus_dir.glob("*.jsonl"))[:2]
    assert _run(first, out, hf_tokenizer) == 0
    there = json.loads((out / "metadata.json").read_text())["totals"]
    capsys.readouterr()
    assert _run([corpus_dir], out, hf_tokenizer) == 0
    said = capsys.readouterr().out
    assert re.search(r"shards written +1\n", said) and re.search(r"shards skipped +2\n", said)
    assert (f"already committed: 2 shards ({there['documents']:,} documents, "
            f"{there['tokens']:,} tokens), skipped") in said
    meta = json.loads((out / "metadata.json").read_text())
    written = [s for s in meta["shards"] if s["status"] == "written"]
    documents = int(re.search(r"documents +([\d,]+)\n", said).group(1).replace(",", ""))
    assert len(written) == 1 and written[0]["documents"] == documents
    assert meta["totals"]["documents"] == there["documents"] + documents
