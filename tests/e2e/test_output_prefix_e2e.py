"""Megatron's ``--output-prefix P``: one input, its shards exactly ``P_{key}_{level}.bin/.idx``
(no counts in the name: they stay in the commit record and metadata.json); the prefix's folder
is the output folder (its _commits/, metadata.json and lock), so resume and --overwrite work as
with ``--output``, two prefixes in one folder keep apart, and a shard committed under the other
naming (with counts, by ``--output DIR``) is redone and replaced, never kept twice.

The whole-job runs; the unit tests are in tests/pipelines/test_output_prefix.py."""

import json
import os


from pipelines import count
from tests.megatron_reference import read_pair
from tests.pipelines.test_output_prefix import _run
from tests.pipelines.test_output_prefix import ids  # noqa: F401 (fixture)


def _datasets(folder):
    return sorted(n for n in os.listdir(folder) if n.endswith((".bin", ".idx")))


def test_prefix_names_resume_and_overwrite(ids, tmp_path, capsys):
    out = tmp_path / "data"
    status, _, _ = _run(capsys, "--input", ids, "--output-prefix", str(out / "my-corpus"))
    assert status == 0
    assert _datasets(out) == ["my-corpus_text_document.bin", "my-corpus_text_document.idx"]
    first = read_pair(str(out / "my-corpus_text_document"))
    record = json.loads((out / "_commits" / "my-corpus_text_document.json").read_text())
    meta = json.loads((out / "metadata.json").read_text())
    assert record["name"] == "my-corpus_text_document" and record["documents"] > 0
    assert meta["totals"]["documents"] == record["documents"]
    # the same command again: skipped, untouched
    status, stdout, _ = _run(capsys, "--input", ids, "--output-prefix", str(out / "my-corpus"))
    assert status == 0 and "skip my-corpus_text_document: committed" in stdout
    # --overwrite: written again, the same bytes under the same name
    status, stdout, _ = _run(capsys, "--input", ids, "--output-prefix", str(out / "my-corpus"),
                             "--overwrite")
    assert status == 0 and "redo my-corpus_text_document: --overwrite" in stdout
    assert _datasets(out) == ["my-corpus_text_document.bin", "my-corpus_text_document.idx"]
    assert read_pair(str(out / "my-corpus_text_document")) == first
    # count --rename adds the recorded counts to the names later, if wanted
    assert count.run(["--input", str(out), "--rename"]) == 0
    counted = (f"my-corpus_text_document_dc={record['documents']}_sc={record['sequences']}"
               f"_tc={record['tokens']}")
    assert _datasets(out) == [counted + ".bin", counted + ".idx"]


def test_two_prefixes_in_one_folder_and_the_other_naming(ids, tmp_path, capsys):
    out = tmp_path / "data"
    assert _run(capsys, "--input", ids, "--output-prefix", str(out / "a"))[0] == 0
    assert _run(capsys, "--input", ids, "--output-prefix", str(out / "b"))[0] == 0
    assert _datasets(out) == ["a_text_document.bin", "a_text_document.idx",
                              "b_text_document.bin", "b_text_document.idx"]
    assert read_pair(str(out / "a_text_document")) == read_pair(str(out / "b_text_document"))
    status, stdout, _ = _run(capsys, "--input", ids, "--output-prefix", str(out / "a"))
    assert status == 0 and "skip a_text_document" in stdout
    # --output DIR names the same input's shard ids_text_document_dc=..: a prefix "ids" is the
    # same shard under the other naming, redone and replaced (one copy of its documents)
    assert _run(capsys, "--input", ids, "--output", str(out))[0] == 0
    counted = [n for n in _datasets(out) if n.startswith("ids_")]
    assert len(counted) == 2 and "_dc=" in counted[0]
    status, stdout, _ = _run(capsys, "--input", ids, "--output-prefix", str(out / "ids"))
    assert status == 0 and "redo ids_text_document: written now without counts" in stdout
    assert [n for n in _datasets(out) if n.startswith("ids_")] == [
        "ids_text_document.bin", "ids_text_document.idx"]


def test_prefix_whose_name_starts_with_a_dash(ids, tmp_path, capsys):
    """Megatron takes --output-prefix data/-x (its argparse sees one value); the name must not
    become a flag of its own once the prefix is split into folder and name."""
    status, _, err = _run(capsys, "--input", ids, "--output-prefix", str(tmp_path / "-x"),
                          "--dry-run")
    assert status == 0, err
    out = tmp_path / "-out"
    status, _, err = _run(capsys, "--input", ids, "--output-prefix", str(out / "-x"))
    assert status == 0, err
    assert _datasets(out) == ["-x_text_document.bin", "-x_text_document.idx"]
