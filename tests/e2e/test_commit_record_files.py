"""A commit record counts only while the files it names are there with the recorded sizes:
``validate`` reports each record whose files are missing or resized, and a rerun redoes that
shard with one line saying why, checking against one listing of the output rather than a
request per file (issue 23, item 20)."""

import json
import os
import shutil

import pytest

from dataio import fs as fsutil
from dataio import manifest
from pipelines import tokenize, validate

pytestmark = pytest.mark.slow  # whole tokenize runs: see tests/conftest.py


def _argv(inputs, output, tokenizer, *extra):
    return [f"--input={inputs}", f"--output={output}", "--tokenizer-type", "HuggingFaceTokenizer",
            f"--tokenizer-model={tokenizer}", "--append-eod", "--log-interval", "0", *extra]


def _shard_files(folder):
    return {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder))
            if n.endswith((".bin", ".idx"))}


@pytest.fixture(scope="module")
def clean(corpus_dir, hf_tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("records") / "clean"
    assert tokenize.run(_argv(corpus_dir, out, hf_tokenizer, "--holdout-fraction", "0.2")) == 0
    return out


@pytest.fixture
def damaged(clean, tmp_path):
    """The clean output with c0's pair deleted (as a lost run's clean-up would) and c1's
    holdout .bin cut short; returns (folder, {shard: record})."""
    out = tmp_path / "out"
    shutil.copytree(clean, out)
    records = {s: manifest.read_commit_record(str(out), s)
               for s in ("c0_web_text_document", "holdout/c1_web_text_document")}
    for suffix in (".bin", ".idx"):
        os.remove(out / (records["c0_web_text_document"]["name"] + suffix))
    with open(out / (records["holdout/c1_web_text_document"]["name"] + ".bin"), "r+b") as f:
        f.truncate(10)
    return out, records


def test_validate_reports_records_whose_files_are_gone_or_resized(damaged, capsys):
    out, records = damaged
    assert validate.run([str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    gone = [line for line in lines if "_commits/c0_web_text_document.json" in line]
    assert len(gone) == 1 and gone[0].startswith("FAIL")
    assert records["c0_web_text_document"]["name"] + ".bin is missing" in gone[0]
    assert "rerun the tokenize command" in gone[0]
    assert validate.run([str(out / "holdout")]) == 1
    lines = capsys.readouterr().out.splitlines()
    cut = [line for line in lines if "_commits/holdout/c1_web_text_document.json" in line]
    assert len(cut) == 1 and "bin is 10 bytes but its commit record says" in cut[0]


def test_validate_of_the_output_checks_its_holdout_records_too(clean, tmp_path, capsys):
    """One ``validate OUT`` covers holdout/ (before, only ``validate OUT/holdout`` did)."""
    out = tmp_path / "out"
    shutil.copytree(clean, out)
    records = {s: manifest.read_commit_record(str(out), s)
               for s in ("holdout/c0_web_text_document", "holdout/c1_web_text_document")}
    os.remove(out / (records["holdout/c0_web_text_document"]["name"] + ".bin"))
    with open(out / (records["holdout/c1_web_text_document"]["name"] + ".idx"), "r+b") as f:
        f.truncate(40)
    capsys.readouterr()
    assert validate.run([str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    for shard, problem in (("c0", ".bin is missing"), ("c1", ".idx is 40 bytes but")):
        said = [line for line in lines if f"_commits/holdout/{shard}_web_text_document.json"
                in line]
        assert len(said) == 1 and said[0].startswith("FAIL") and problem in said[0], lines
    assert sum(line.startswith("FAIL") and "/holdout/c1_web" in line.split()[1]
               and "_commits" not in line.split()[1] for line in lines) == 1  # the .idx itself
    # named with its holdout/ too, or with a trailing slash: each record once
    assert validate.run([f"{out}/", str(out / "holdout")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert sum("_commits/holdout/c0_web_text_document.json" in line for line in lines) == 1
    assert validate.run([str(clean)]) == 0
    assert any("/holdout/" in line for line in capsys.readouterr().out.splitlines())


def test_rerun_redoes_those_shards_and_says_why(damaged, clean, corpus_dir, hf_tokenizer,
                                                capsys):
    out, records = damaged
    assert tokenize.run(_argv(corpus_dir, out, hf_tokenizer, "--holdout-fraction", "0.2")) == 0
    printed = capsys.readouterr().out
    c0 = records["c0_web_text_document"]["name"]
    assert f"redo c0_web_text_document: {c0}.bin is missing (its commit record names it)" \
        in printed
    assert "redo holdout/c1_web_text_document: " in printed and "is 10 bytes" in printed
    assert "skip c2_web_text_document:" in printed
    assert _shard_files(out) == _shard_files(clean)
    assert _shard_files(out / "holdout") == _shard_files(clean / "holdout")
    assert validate.run([str(out)]) == 0 and validate.run([str(out / "holdout")]) == 0


def test_planning_checks_record_files_from_one_listing(clean, corpus_dir, hf_tokenizer,
                                                       monkeypatch):
    """No exists/size request per shard file: the sizes come from listing the folders."""
    asked = []
    for name in ("exists", "size"):
        original = getattr(fsutil, name)

        def call(path, *args, _original=original, **kwargs):
            if str(path).endswith((".bin", ".idx")):
                asked.append(path)
            return _original(path, *args, **kwargs)
        monkeypatch.setattr(fsutil, name, call)
    _, options, _ = tokenize.setup(_argv(corpus_dir, clean, hf_tokenizer,
                                         "--holdout-fraction", "0.2", "--dry-run"))
    job = tokenize.plan(options, checked=True)
    assert len(job.shards) == 6 and all(s.skip for s in job.shards)
    assert asked == []


def test_a_record_with_other_sizes_is_not_committed(tmp_path):
    (tmp_path / "x_dc=1_sc=1_tc=2.bin").write_bytes(b"\1\0\2\0")
    (tmp_path / "x_dc=1_sc=1_tc=2.idx").write_bytes(b"\0" * 62)
    record = {"shard": "x", "name": "x_dc=1_sc=1_tc=2", "fingerprint": "f", "bin_size": 4,
              "idx_size": 62}
    path = manifest.commit_record_path(str(tmp_path), "x")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        json.dump(record, f)
    sizes = manifest.listed_sizes(str(tmp_path), [""])
    for given in (None, sizes):
        assert manifest.is_committed(str(tmp_path), "x", "f", sizes=given) == \
            (True, "committed with the same inputs, tokenizer and options")
    assert manifest.commit_record_problems(str(tmp_path)) == []
    (tmp_path / "x_dc=1_sc=1_tc=2.bin").write_bytes(b"\1\0")
    sizes = manifest.listed_sizes(str(tmp_path), [""])
    for given in (None, sizes):
        assert manifest.is_committed(str(tmp_path), "x", "f", sizes=given) == \
            (False, "x_dc=1_sc=1_tc=2.bin is 2 bytes but its commit record says 4")
    assert manifest.commit_record_problems(str(tmp_path)) == [
        ("x", "x_dc=1_sc=1_tc=2.bin is 2 bytes but its commit record says 4")]
