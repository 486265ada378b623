"""Issue 23 item 11, across runs: a name added to an input folder after a run (a hard link, a
symlink) or given alone in a later run must not write the same data into the output a second
time. Through the tokenize command, on a tiny corpus; the output is checked with the loader's
token count and ``validate``. The unit tests of discovery are in
tests/dataio/test_input_identity.py."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from dataio import dataset
from pipelines import tokenize, validate

pytestmark = pytest.mark.slow  # whole-job runs: see tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RAW = b"".join(json.dumps({"text": f"document {i} " + "word " * (i % 30)}).encode() + b"\n"
               for i in range(60))


def _argv(inputs, output, tokenizer, *extra):
    return [*(f"--input={p}" for p in inputs), "--output", str(output),
            "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", str(tokenizer),
            "--log-interval", "0", "--append-eod", *extra]


def _stems(folder):
    return sorted({n.split("_text_document")[0] for n in os.listdir(folder) if n.endswith(".idx")})


def _tokens(out):
    """The tokens the loader reads from the output."""
    return dataset.get_dataset(str(out), 1).num_tokens()


def _first_run(tmp_path, hf_tokenizer, how):
    """``in/`` holding v3.jsonl (for "store": a symlink to a file elsewhere), tokenized once."""
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    if how == "store":
        (tmp_path / "store").mkdir()
        (tmp_path / "store" / "blob-17.jsonl").write_bytes(RAW)
        os.symlink(tmp_path / "store" / "blob-17.jsonl", inp / "v3.jsonl")
    else:
        (inp / "v3.jsonl").write_bytes(RAW)
    assert tokenize.run(_argv([inp], out, hf_tokenizer)) == 0
    return inp, out, _tokens(out)


def _add_alias(inp, tmp_path, how):
    if how == "hard link":
        os.link(inp / "v3.jsonl", inp / "latest.jsonl")
    elif how == "symlink":
        os.symlink("v3.jsonl", inp / "latest.jsonl")
    else:  # both names are links to one file elsewhere: neither is the file's own name
        os.symlink(tmp_path / "store" / "blob-17.jsonl", inp / "latest.jsonl")


@pytest.mark.parametrize("how", ["hard link", "symlink", "store"])
def test_an_alias_added_later_writes_no_second_copy(hf_tokenizer, tmp_path, capfd, how):
    inp, out, tokens = _first_run(tmp_path, hf_tokenizer, how)
    _add_alias(inp, tmp_path, how)
    capfd.readouterr()
    # "latest" sorts first: before, the rerun kept it and wrote latest_* beside v3_*
    assert tokenize.run(_argv([inp], out, hf_tokenizer)) == 0
    err = capfd.readouterr().err
    assert "latest.jsonl (the same file as" in err and "Traceback" not in err
    assert _stems(out) == ["v3"]
    assert _tokens(out) == tokens
    assert validate.run([str(out)]) == 0


@pytest.mark.parametrize("how", ["hard link", "symlink", "store"])
def test_an_alias_given_alone_is_planned_under_the_committed_name(hf_tokenizer, tmp_path,
                                                                   capfd, how):
    inp, out, tokens = _first_run(tmp_path, hf_tokenizer, how)
    _add_alias(inp, tmp_path, how)
    capfd.readouterr()
    before = (out / "metadata.json").read_bytes()
    # through the command line, as a user runs it
    done = subprocess.run([sys.executable, "-m", "pipelines.tokenize",
                           *_argv([inp / "latest.jsonl"], out, hf_tokenizer)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "not written twice" in line]
    assert len(said) == 1 and "latest.jsonl is the same file as" in said[0], done.stderr
    assert "skip v3_text_document" in done.stdout
    assert _stems(out) == ["v3"] and _tokens(out) == tokens
    # nothing to do: the run says so and leaves the first run's metadata.json as it was
    assert "nothing to do: 1 shards already committed" in done.stdout, done.stdout
    assert (out / "metadata.json").read_bytes() == before


@pytest.mark.parametrize("verify", [[], ["--no-verify-inputs"]], ids=["verify", "no-verify"])
def test_a_copy_under_a_new_name_is_another_input(hf_tokenizer, tmp_path, verify):
    """Only the file's identity counts, never its content: a copy is written as a clean run
    over the same inputs writes it (a rerun after a kill must equal a clean run)."""
    inp, out, _ = _first_run(tmp_path, hf_tokenizer, "file")
    shutil.copy(inp / "v3.jsonl", inp / "copy.jsonl")
    assert tokenize.run(_argv([inp], out, hf_tokenizer, *verify)) == 0
    assert _stems(out) == ["copy", "v3"]


def test_a_backup_of_an_input_since_edited_is_written(hf_tokenizer, tmp_path, capfd):
    """Its content is that of a committed shard the rerun redoes: the output keeps it only if
    the backup is written."""
    inp, out, _ = _first_run(tmp_path, hf_tokenizer, "file")
    (inp / "v3-backup.jsonl").write_bytes(RAW)
    (inp / "v3.jsonl").write_bytes(RAW + b'{"text": "one more document"}\n')
    capfd.readouterr()
    assert tokenize.run(_argv([inp], out, hf_tokenizer)) == 0
    assert "not written twice" not in capfd.readouterr().err
    assert _stems(out) == ["v3", "v3-backup"]
