"""Shard names of nested corpora (issue 24 part 3; docs/usage.md "Shard names"): discovery.discover names
each input from its path below the input root where names repeat (FineWeb's dumps, dolma's
sources), keeps every other name as it always was, refuses what would still collide, and reads
a folder recursively. Discovery stats files only: the inputs here are empty."""

import os

import pytest

from dataio import readers
from dataio import discovery


def _touch(root, *paths):
    for path in paths:
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(b"")
    return root


def _stems(files):
    return {os.path.relpath(f.path, start=f.path[:f.path.index("/data/") + 6]): f.stem
            for f in files}


FINEWEB = ("data/CC-MAIN-2024-10/000_00000.parquet", "data/CC-MAIN-2024-10/001_00000.parquet",
           "data/CC-MAIN-2024-18/000_00000.parquet")


def test_fineweb_dumps_are_named_by_their_folder_where_names_repeat(tmp_path):
    _touch(tmp_path, *FINEWEB)
    expected = {"CC-MAIN-2024-10/000_00000.parquet": "CC-MAIN-2024-10_000_00000",
                "CC-MAIN-2024-10/001_00000.parquet": "001_00000",  # no other: today's name
                "CC-MAIN-2024-18/000_00000.parquet": "CC-MAIN-2024-18_000_00000"}
    data = tmp_path / "data"
    # the same names whichever way the inputs are given, in whichever order
    for patterns in ([f"{data}/"], [str(data)], [f"{data}/**/*.parquet"], [f"{data}/CC-*/*"],
                     [str(data / "CC-MAIN-2024-10"), str(data / "CC-MAIN-2024-18")],
                     [str(data / "CC-MAIN-2024-18"), str(data / "CC-MAIN-2024-10")]):
        assert _stems(discovery.discover(patterns)) == expected, patterns
    mirrored = _stems(discovery.discover([str(data)], layout="mirror"))
    assert mirrored == {p: p.rsplit(".", 1)[0] for p in expected}


def test_dolma_sources_are_named_by_their_folder(tmp_path):
    _touch(tmp_path, "data/documents/books/0000.json.gz", "data/documents/wiki/0000.json.gz",
           "data/documents/wiki/0001.json.gz", "data/documents/cc_en_head/cc_en_head-0000.json.gz")
    files = discovery.discover([str(tmp_path / "data" / "documents" / "*" / "*.json.gz")])
    assert _stems(files) == {"documents/books/0000.json.gz": "books_0000",
                             "documents/wiki/0000.json.gz": "wiki_0000",
                             "documents/wiki/0001.json.gz": "0001",
                             "documents/cc_en_head/cc_en_head-0000.json.gz": "cc_en_head-0000"}
    # the input root is the folder given: a folder above it adds its name
    files = discovery.discover([str(tmp_path / "data")])
    assert _stems(files)["documents/books/0000.json.gz"] == "documents_books_0000"


def test_names_without_a_repeat_are_unchanged(tmp_path):
    _touch(tmp_path, "data/a/en_web.jsonl", "data/b/c/de_books.parquet", "data/top.jsonl.zst")
    files = discovery.discover([str(tmp_path / "data")])
    assert sorted(f.stem for f in files) == ["de_books", "en_web", "top"]
    assert all(not f.shard_stem for f in files)  # the stem is the file's own, as before


def test_names_that_still_collide_are_refused_naming_both_files_and_the_fix(tmp_path):
    # x_y/z and x/y/z both flatten to x_y_z: refused, never numbered
    _touch(tmp_path, "data/x_y/z.jsonl", "data/x/y/z.jsonl")
    with pytest.raises(readers.InputError) as refused:
        discovery.discover([str(tmp_path / "data")])
    message = str(refused.value)
    assert "data/x/y/z.jsonl" in message and "data/x_y/z.jsonl" in message
    assert "would both write shards named x_y_z_*" in message
    assert "--output-layout mirror" in message
    # mirrored, the folders stay folders: no collision
    files = discovery.discover([str(tmp_path / "data")], layout="mirror")
    assert sorted(f.stem for f in files) == ["x/y/z", "x_y/z"]
    # a file beside the folders named like a flattened name collides with it too
    _touch(tmp_path, "data/x_y_z.jsonl")
    with pytest.raises(readers.InputError, match="would both write shards named x_y_z_"):
        discovery.discover([str(tmp_path / "data")])


def test_mirror_refuses_folders_named_as_tokenbeams_own(tmp_path):
    _touch(tmp_path, "data/holdout/a.jsonl", "data/b.jsonl")
    assert sorted(f.stem for f in discovery.discover([str(tmp_path / "data")])) == ["a", "b"]
    with pytest.raises(readers.InputError, match="folder holdout/.*rename that folder"):
        discovery.discover([str(tmp_path / "data")], layout="mirror")
    _touch(tmp_path, "more/_private/c.jsonl")
    with pytest.raises(readers.InputError, match="_private"):
        discovery.discover([str(tmp_path / "more" / "*" / "*.jsonl")], layout="mirror")


def test_a_folder_is_read_recursively_as_before_where_flat(tmp_path):
    _touch(tmp_path, "data/a.jsonl", "data/sub/deeper/b.jsonl", "data/.git/objects/c.jsonl",
           "data/_commits/d.jsonl", "data/sub/README.md", "data/t/_delta_log/0000.json",
           # a Spark dataset folder below: one dataset, not entered as a folder
           "data/sub/t.parquet/part-00000-1234-c000.snappy.parquet",
           "data/sub/t.parquet/_SUCCESS", "data/sub/t.parquet/.part-00000.crc")
    files = discovery.discover([str(tmp_path / "data")])
    assert [(f.folder, f.stem, f.dataset) for f in files] == [
        ("", "a", ""), ("sub/deeper", "b", ""), ("sub", "t_part-00000-1234-c000", "t")]
    # paths spelled as a listing spells them (absolute): resume keys hold them
    assert all(os.path.isabs(f.path) for f in files)
    # a glob of the parts of a dataset folder (and the folder) reads each part once
    files = discovery.discover([str(tmp_path / "data" / "**" / "*.parquet")])
    assert [f.stem for f in files] == ["t_part-00000-1234-c000"]


def test_an_empty_tree_says_that_subfolders_were_searched(tmp_path):
    _touch(tmp_path, "data/sub/notes.txt", "data/.hidden/x.jsonl")
    with pytest.raises(readers.InputError, match="in it or any folder below it"):
        discovery.discover([str(tmp_path / "data")])


def test_the_input_root_of_each_kind_of_input():
    assert discovery._input_root("/d/data/**/*.jsonl", "glob") == "/d/data"
    assert discovery._input_root("/d/data/CC-*/x.jsonl", "glob") == "/d/data"
    assert discovery._input_root("/d/data/", "folder") == "/d/data"
    assert discovery._input_root("/d/data/x.jsonl", "file") == "/d/data"
    assert discovery._input_root("az://c/data/**/*.parquet", "glob") == "az://c/data"
    assert discovery._common_root(["/d/data/a", "/d/data/b"]) == "/d/data"
    assert discovery._common_root(["az://c/data/a", "az://c/data/b"]) == "az://c/data"
    assert discovery._common_root(["az://c/a", "az://d/b"]) is None
    assert discovery._common_root(["/d/a", "az://c/a"]) is None


def test_listings_show_the_folders_of_names_alike_in_two_folders():
    from dataio import dataset_find

    assert dataset_find.shown_names(["/o/a_x", "/o/b_x"]) == ["a_x", "b_x"]  # as ever
    assert dataset_find.shown_names(["/o/CC-10/000_d", "/o/CC-18/000_d", "/o/CC-18/001_d"]) == \
        ["CC-10/000_d", "CC-18/000_d", "CC-18/001_d"]
    assert dataset_find.shown_names(["az://c/o/a/x", "az://c/o/b/x"]) == ["a/x", "b/x"]
