"""Input file names with control characters (issue 23 item 1): a newline, tab, escape, DEL or C1
control in a name that would become a shard name is refused at planning time with one line
naming the file, before anything is written; the YAML tokenbeam renders for Flink parses back
to what it was given, whatever the values hold. (Blend's data_path.sh and report:
tests/pipelines/test_blend.py; the sbatch script: tests/runners/test_sbatch_render.py.)

The whole-job runs; the unit tests are in tests/pipelines/test_hostile_names.py."""

import json
import os

import pytest
from pipelines import reshard, tokenize


ROWS = b"".join(json.dumps({"text": f"document {i} " + "word " * i}).encode() + b"\n"
                for i in range(20))


def _tokenize(inp, out, tokenizer, *extra):
    return tokenize.run([f"--input={inp}", "--output", str(out), "--tokenizer-type",
                         "HuggingFaceTokenizer", "--tokenizer-model", str(tokenizer),
                         "--log-interval", "0", "--append-eod", *extra])


@pytest.mark.parametrize("dry_run", [False, True])
def test_tokenize_refuses_an_input_named_with_a_newline(hf_tokenizer, tmp_path, capfd, dry_run,
                                                         monkeypatch):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "good.jsonl").write_bytes(ROWS)
    hostile = "evil\n$(touch PWNED);`touch PWNED2`.jsonl"
    (inp / hostile).write_bytes(ROWS)
    out = tmp_path / "out"
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code = _tokenize(inp, out, hf_tokenizer, *(["--dry-run"] if dry_run else []))
    err = capfd.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"input {inp}/evil\\n$(touch PWNED);`touch PWNED2`.jsonl" in lines[0]
    assert "rename" in lines[0]
    assert not (out / "_commits").exists() and not list(out.glob("*.bin")) if out.exists() else True
    assert os.listdir(work) == []


def test_reshard_refuses_a_name_field_with_a_control_character(tmp_path, capfd):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "en.jsonl").write_bytes(ROWS)
    (inp / "de\x1b[2J.jsonl").write_bytes(ROWS)
    out = tmp_path / "out"
    code = reshard.run([f"--input={inp}", f"--output={out}", "--name-regex",
                        r"^(?P<language>[^.]+)\.", "--domain", "web", "--subdomain", "x",
                        "--target-size", "20KB"])
    err = capfd.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "de\\x1b[2J" in err and "{language}" in err
    assert not out.exists() or os.listdir(out) == []
