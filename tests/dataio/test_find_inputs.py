"""discovery.find_inputs, the one input discovery: sizes and compression kinds of what the patterns
name, and ``skip_unsupported`` (reshard) passing over hidden and other-type files where the
tokenize job's ``discover`` refuses them."""

import os

import pytest

from dataio import readers
from dataio import discovery


def _folder(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(b'{"text": "a"}\n')
    (tmp_path / "b.jsonl.zst").write_bytes(b"zst")
    (tmp_path / "c.parquet").write_bytes(b"pq")
    (tmp_path / ".hidden.jsonl").write_bytes(b"{}\n")
    (tmp_path / "README.md").write_text("about the corpus")
    return tmp_path


def test_sizes_and_kinds_of_a_folder_without_hidden_or_other_files(tmp_path):
    found = discovery.find_inputs([str(_folder(tmp_path))], skip_unsupported=True)
    assert [(os.path.basename(f.path), f.format, f.size, f.error) for f in found] == [
        ("a.jsonl", "jsonl", 14, ""), ("b.jsonl.zst", "jsonl.zst", 3, ""),
        ("c.parquet", "parquet", 2, "")]


def test_a_glob_with_other_files_is_refused_unless_they_are_skipped(tmp_path):
    pattern = str(_folder(tmp_path) / "*")
    with pytest.raises(readers.InputError, match="unsupported file type"):
        discovery.find_inputs([pattern])
    found = discovery.find_inputs([pattern], skip_unsupported=True)
    assert [os.path.basename(f.path) for f in found] == ["a.jsonl", "b.jsonl.zst", "c.parquet"]


def test_nothing_left_says_so_in_each_jobs_words(tmp_path):
    (tmp_path / "README.md").write_text("x")
    with pytest.raises(readers.InputError, match="matches no input file"):
        discovery.find_inputs([str(tmp_path / "*")], skip_unsupported=True)
    with pytest.raises(readers.InputError, match="matches no supported file"):
        discovery.find_inputs([str(tmp_path)])


def test_discover_keeps_the_tokenize_jobs_stem_check_find_inputs_does_not(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(b"{}\n")
    (tmp_path / "a.jsonl.gz").write_bytes(b"gz")
    assert len(discovery.find_inputs([str(tmp_path)], skip_unsupported=True)) == 2
    with pytest.raises(readers.InputError, match="would both write shards named a_"):
        discovery.discover([str(tmp_path)])
