"""Control files are never written through a symbolic link planted in the output (issue 23
item 5): a link at ``_lock``, ``metadata.json`` or a control folder refuses the output in one
line (exit status 2); a link at a record's name (commit, failure, errors file) is replaced,
never followed; temporaries are created exclusively. Each test plants links to a victim outside
the output and checks the victim is untouched.

The whole-job runs; the unit tests are in tests/dataio/test_control_links.py."""

import gzip
import json
import os
import pytest
from pipelines import tokenize
from tests.dataio.test_control_links import VICTIM_TEXT, _state, _victim_dir, _victim_file


ROWS = b"".join(json.dumps({"text": f"document {i} " + "word " * i}).encode() + b"\n"
                for i in range(30)) + b'{"other": 1}\n'  # one bad record: an errors file


def _inputs(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "a.jsonl").write_bytes(ROWS)
    (inp / "b.jsonl.gz").write_bytes(gzip.compress(ROWS)[:-20])  # truncated: a failure record
    return inp


def _tokenize(inp, out, tokenizer):
    return tokenize.run([f"--input={inp}", "--output", str(out), "--tokenizer-type",
                         "HuggingFaceTokenizer", "--tokenizer-model", str(tokenizer),
                         "--log-interval", "0", "--append-eod"])


def test_links_at_record_names_are_replaced_not_followed(hf_tokenizer, tmp_path, capfd):
    inp, out = _inputs(tmp_path), tmp_path / "out"
    victims = {}
    for record in ("_commits/a_text_document.json", "_failures/b_text_document.json",
                   "_errors/a.jsonl"):
        (out / record).parent.mkdir(parents=True, exist_ok=True)
        victims[record] = _victim_file(tmp_path, record.replace("/", "-"))
        os.symlink(victims[record], out / record)
    code = _tokenize(inp, out, hf_tokenizer)
    err = capfd.readouterr().err
    assert code == 1, err  # b's input is truncated: its shard fails, a's commits
    assert "Traceback" not in err, err
    for record, victim in victims.items():
        assert victim.read_bytes() == VICTIM_TEXT, record
        assert not (out / record).is_symlink() and (out / record).stat().st_size > 0, record
    assert json.loads((out / "_commits/a_text_document.json").read_text())["documents"] == 30


@pytest.mark.parametrize("name", ["_lock", "metadata.json", "_commits", "_temporary"])
def test_links_at_the_lock_metadata_or_a_control_folder_refuse_the_run(hf_tokenizer, tmp_path,
                                                                        capfd, name):
    inp, out = _inputs(tmp_path), tmp_path / "out"
    out.mkdir()
    victim = _victim_dir(tmp_path) if name in ("_commits", "_temporary") else _victim_file(tmp_path)
    before = _state(victim)
    os.symlink(victim, out / name)
    code = _tokenize(inp, out, hf_tokenizer)
    err = capfd.readouterr().err
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "symbolic link" in errors[0] and "Traceback" not in err, err
    assert _state(victim) == before
    assert sorted(os.listdir(out)) == [name]


def test_a_linked_holdout_folder_refuses_the_run(hf_tokenizer, tmp_path, capfd):
    """holdout/ is where --holdout-fraction writes shards and deletes their stale versions: a
    link there would write into, and delete from, the folder it points to (another user's)."""
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    (inp / "a.jsonl").write_bytes(ROWS)
    out.mkdir()
    victim = tmp_path / "victimtok"
    victim.mkdir()
    for suffix in (".bin", ".idx"):  # what a run would take for its own stale holdout shard
        (victim / f"a_text_document_dc=1_sc=1_tc=1{suffix}").write_bytes(VICTIM_TEXT)
    before = _state(victim)
    os.symlink(victim, out / "holdout")
    code = tokenize.run([f"--input={inp}", "--output", str(out), "--tokenizer-type",
                         "HuggingFaceTokenizer", "--tokenizer-model", str(hf_tokenizer),
                         "--log-interval", "0", "--append-eod", "--max-bad-fraction", "1",
                         "--holdout-fraction", "0.5"])
    err = capfd.readouterr().err
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "symbolic link" in errors[0] and "Traceback" not in err, err
    assert str(out / "holdout") in errors[0]
    assert _state(victim) == before
    assert sorted(os.listdir(out)) == ["holdout"]
