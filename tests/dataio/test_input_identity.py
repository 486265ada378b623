"""discovery.find_inputs (the one input discovery, of tokenize and reshard) and what it does with
inputs that are not plain files of their own (issue 23):

- item 11: every name of one file (a symlink ``latest.jsonl -> v3.jsonl``, a hard link, the same
  file named twice) is read once, the file's own name kept, with one line saying so;
- item 16: a FIFO or a device (``/dev/zero``), named, matched or linked to, is refused with one
  line before anything opens it;
- item 17: a Spark-style dataset folder (``t.parquet/`` of part files, ``_SUCCESS``, ``.crc``)
  is read as its part files, in name order, shards named ``t_{part}``.
"""

import os
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataio import input_hashes, readers
from dataio import discovery

DOC = b'{"text": "the same documents"}\n'


def _names(files):
    return [os.path.basename(f.path) for f in files]


# --- item 11: aliases ------------------------------------------------------------------------

def test_a_symlink_beside_its_file_is_read_once(tmp_path, capsys):
    (tmp_path / "v3.jsonl").write_bytes(DOC)
    os.symlink("v3.jsonl", tmp_path / "latest.jsonl")
    (tmp_path / "other.jsonl").write_bytes(DOC)  # the same bytes, another file: kept
    for pattern in (str(tmp_path), str(tmp_path / "*.jsonl")):
        assert _names(discovery.discover([pattern])) == ["other.jsonl", "v3.jsonl"]
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "read once" in err
        assert f"{tmp_path}/latest.jsonl (the same file as {tmp_path}/v3.jsonl)" in err


def test_links_only_keep_the_first_name_in_sorted_order(tmp_path, capsys):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "real.jsonl").write_bytes(DOC)
    (tmp_path / "in").mkdir()
    for name in ("b.jsonl", "a.jsonl"):
        os.symlink(tmp_path / "store" / "real.jsonl", tmp_path / "in" / name)
    assert _names(discovery.find_inputs([str(tmp_path / "in")])) == ["a.jsonl"]
    assert "b.jsonl (the same file as" in capsys.readouterr().err


def test_a_hard_link_is_read_once(tmp_path, capsys):
    (tmp_path / "v3.jsonl").write_bytes(DOC)
    os.link(tmp_path / "v3.jsonl", tmp_path / "copy.jsonl")
    assert _names(discovery.find_inputs([str(tmp_path)])) == ["copy.jsonl"]
    assert "v3.jsonl (the same file as" in capsys.readouterr().err


def test_a_name_whose_shards_are_committed_is_kept_over_the_others(tmp_path, capsys):
    """The tokenize planner's ``prefer`` (its shards are in the output) comes first, so a name
    added later never takes over (tests/e2e/test_alias_across_runs.py runs the job)."""
    (tmp_path / "v3.jsonl").write_bytes(DOC)
    os.link(tmp_path / "v3.jsonl", tmp_path / "latest.jsonl")
    asked = []

    def committed(f):
        asked.append(os.path.basename(f.path))
        return f.path.endswith("v3.jsonl")

    assert _names(discovery.find_inputs([str(tmp_path)], prefer=committed)) == ["v3.jsonl"]
    assert "latest.jsonl (the same file as" in capsys.readouterr().err
    assert sorted(asked) == ["latest.jsonl", "v3.jsonl"]  # only names with aliases are asked
    # both names' shards committed (by a version that kept sorted-first names): said in a line
    assert _names(discovery.find_inputs([str(tmp_path)], prefer=lambda f: True)) == ["latest.jsonl"]
    err = capsys.readouterr().err.splitlines()
    twice = [line for line in err if "there twice" in line]
    assert len(twice) == 1 and "delete the shards named v3_*" in twice[0]
    (tmp_path / "alone.jsonl").write_bytes(DOC)
    asked.clear()
    discovery.find_inputs([str(tmp_path / "alone.jsonl")], prefer=committed)
    assert asked == []


def test_a_file_named_twice_is_read_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.jsonl").write_bytes(DOC)
    # a relative name and the absolute path the glob gives: before, two inputs with one stem
    files = discovery.discover(["a.jsonl", "*.jsonl"])
    assert [f.path for f in files] == [str(tmp_path / "a.jsonl")]
    assert "a.jsonl (the same file as" in capsys.readouterr().err
    assert [f.path for f in discovery.discover(["a.jsonl", "a.jsonl"])] == ["a.jsonl"]
    assert "a.jsonl (named twice)" in capsys.readouterr().err


def test_reshard_finds_each_file_once_too(tmp_path, capsys):
    (tmp_path / "v3.jsonl").write_bytes(DOC)
    os.symlink("v3.jsonl", tmp_path / "latest.jsonl")
    assert _names(discovery.find_inputs([str(tmp_path)], skip_unsupported=True)) == ["v3.jsonl"]


def test_remote_spellings_of_one_url_are_one_input():
    import fsspec

    mem = fsspec.filesystem("memory")
    mem.pipe("/identity/x.jsonl", DOC)
    try:
        files = discovery.find_inputs(["memory://identity/x.jsonl", "memory://identity/*.jsonl"])
        assert len(files) == 1, files
    finally:
        mem.rm("/identity", recursive=True)


# --- item 16: FIFOs and devices --------------------------------------------------------------

@pytest.mark.parametrize("how", ["named", "in-folder", "glob", "link"])
def test_a_fifo_is_refused_before_it_is_opened(tmp_path, how):
    (tmp_path / "good.jsonl").write_bytes(DOC)
    os.mkfifo(tmp_path / "pipe.jsonl")
    if how == "link":
        os.symlink(tmp_path / "pipe.jsonl", tmp_path / "in.jsonl")
    pattern = {"named": str(tmp_path / "pipe.jsonl"), "in-folder": str(tmp_path),
               "glob": str(tmp_path / "*.jsonl"), "link": str(tmp_path / "in.jsonl")}[how]
    with pytest.raises(readers.InputError) as caught:
        discovery.find_inputs([pattern])  # a FIFO opened for reading would block here
    message = str(caught.value)
    assert "pipe.jsonl" in message and "FIFO" in message and "\n" not in message
    assert caught.value.exit_status == 2


def test_dev_zero_and_a_link_to_it_are_refused(tmp_path):
    os.symlink("/dev/zero", tmp_path / "zero.jsonl")
    for pattern in ("/dev/zero", str(tmp_path / "zero.jsonl"), str(tmp_path)):
        with pytest.raises(readers.InputError, match="a character device, not a regular file"):
            discovery.find_inputs([pattern])


def test_a_fifo_named_metadata_json_does_not_block_discovery(tmp_path):
    (tmp_path / "good.jsonl").write_bytes(DOC)
    os.mkfifo(tmp_path / "metadata.json")
    done = []
    worker = threading.Thread(target=lambda: done.append(_refusal(str(tmp_path))), daemon=True)
    worker.start()
    worker.join(60)  # a hang detector, not a timing: the open of a FIFO blocks forever
    assert done and "metadata.json" in done[0] and "FIFO" in done[0]


def _refusal(pattern):
    try:
        discovery.find_inputs([pattern])
    except readers.InputError as exc:
        return str(exc)
    return ""


def test_input_hashing_never_opens_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "pipe.jsonl")
    done = []
    worker = threading.Thread(target=lambda: done.append(
        input_hashes.content_hashes([str(tmp_path / "pipe.jsonl")])), daemon=True)
    worker.start()
    worker.join(60)  # hang detector
    assert done == [{str(tmp_path / "pipe.jsonl"): None}]


# --- item 17: Spark-style dataset folders ----------------------------------------------------

UUID = "1b2c3d4e-aaaa-bbbb-cccc-0123456789ab"


def _spark_folder(folder):
    """What Spark's df.write.parquet(folder) leaves: part files, their .crc, _SUCCESS."""
    folder.mkdir(parents=True)
    for k in range(3):
        name = f"part-{k:05d}-{UUID}-c000.snappy.parquet"
        pq.write_table(pa.Table.from_pylist([{"text": f"doc {k} {i}"} for i in range(4)]),
                       folder / name)
        (folder / f".{name}.crc").write_bytes(b"crc")
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / "._SUCCESS.crc").write_bytes(b"crc")


@pytest.mark.parametrize("given", ["parent", "glob", "itself", "itself/"])
def test_a_spark_folder_is_read_as_its_part_files(tmp_path, capsys, given):
    _spark_folder(tmp_path / "data" / "t.parquet")
    (tmp_path / "data" / "u.jsonl").write_bytes(DOC)
    pattern = {"parent": tmp_path / "data", "glob": tmp_path / "data" / "*.parquet",
               "itself": tmp_path / "data" / "t.parquet",
               "itself/": f"{tmp_path / 'data' / 't.parquet'}/"}[given]
    files = discovery.discover([str(pattern)])
    parts = [f for f in files if f.format == "parquet"]
    assert [f.stem for f in parts] == [f"t_part-{k:05d}-{UUID}-c000" for k in range(3)]
    assert all(os.path.dirname(f.path).endswith("t.parquet") for f in parts)
    assert "dataset folder: read as its 3 part file(s)" in capsys.readouterr().err
    items = readers.plan_items(parts)
    assert [(i.stem, i.row_groups, i.error) for i in items] == [
        (f.stem, (0,), "") for f in parts]


def test_a_dataset_folder_without_part_files_says_what_to_give(tmp_path):
    (tmp_path / "p.parquet" / "lang=en").mkdir(parents=True)
    with pytest.raises(readers.InputError, match=r"is a folder .* give the files inside it, "
                                                 r"e.g. --input '.*p.parquet/\*/\*.parquet'"):
        discovery.discover([str(tmp_path / "p.parquet")])


def test_a_tokenizer_file_that_is_a_fifo_is_refused(tmp_path):
    from runtime import errors
    from pipelines.tokenize import checks
    from transforms import tokenizer as tk

    (tmp_path / "tok").mkdir()
    os.mkfifo(tmp_path / "tok" / "tokenizer.json")
    spec = tk.TokenizerSpec(kind="HuggingFaceTokenizer", model=str(tmp_path / "tok"))
    with pytest.raises(errors.ConfigError, match="tokenizer.json: not a regular file"):
        checks.check_tokenizer_files(spec)
