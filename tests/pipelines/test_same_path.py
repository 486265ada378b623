"""A command never writes over its own input, however the output path is spelled.

`merge --overwrite --no-counts` once replaced an input given back as DIR/./NAME, DIR//NAME, through
`..` or a symlink. Every command that writes where it reads compares places
(:func:`dataio.locations.same_location`), refuses with one line naming both paths and the fix, and exits 2;
the input is left byte-identical.
"""

import hashlib
import json
import os

import numpy as np
import pytest

from dataio import locations
from dataio import indexed
from pipelines import blend, count, inspect, merge, reshard, signature


def _digest(*paths) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def _datasets(folder):
    folder.mkdir(parents=True, exist_ok=True)
    indexed.write_documents(str(folder / "en_web_a"), [[[1, 2], [3]], [[4]]], dtype=np.uint16)
    indexed.write_documents(str(folder / "en_web_b"), [[[5, 6, 7]]], dtype=np.uint16)
    return [str(folder / "en_web_a"), str(folder / "en_web_b")]


def _files(prefix):
    return [prefix + ".bin", prefix + ".idx"]


def _spell(tmp_path, how: str) -> str:
    """The prefix tmp_path/parts/en_web_a, spelled another way."""
    parts = str(tmp_path / "parts")
    if how == "dot":
        return parts + "/./en_web_a"
    if how == "double-slash":
        return parts + "//en_web_a"
    if how == "dotdot":
        (tmp_path / "elsewhere").mkdir()
        return str(tmp_path / "elsewhere") + "/../parts/en_web_a"
    if how == "symlink-to-file":
        for suffix in (".bin", ".idx"):
            os.symlink(parts + "/en_web_a" + suffix, str(tmp_path / "alias") + suffix)
        return str(tmp_path / "alias")
    if how == "symlink-to-folder":
        os.symlink(parts, tmp_path / "linked")
        return str(tmp_path / "linked" / "en_web_a")
    raise AssertionError(how)


SPELLINGS = ["dot", "double-slash", "dotdot", "symlink-to-file", "symlink-to-folder"]


@pytest.mark.parametrize("how", SPELLINGS)
def test_merge_refuses_an_output_that_is_an_input(tmp_path, capsys, how):
    prefixes = _datasets(tmp_path / "parts")
    before = {p: _digest(*_files(p)) for p in prefixes}
    listing = sorted(os.listdir(tmp_path / "parts"))
    output = _spell(tmp_path, how)
    code = merge.run(["--input", str(tmp_path / "parts"), "--output", output, "--overwrite",
                      "--no-counts"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"{prefixes[0]}.bin" in err and f"{output}.bin" in err  # both spellings named
    assert "choose another --output" in err
    assert {p: _digest(*_files(p)) for p in prefixes} == before
    assert sorted(os.listdir(tmp_path / "parts")) == listing  # no temporaries left either
    if how.startswith("symlink"):
        assert os.path.islink(tmp_path / ("alias.bin" if how == "symlink-to-file" else "linked"))


def test_merge_still_writes_a_different_output(tmp_path):
    _datasets(tmp_path / "parts")
    out = str(tmp_path / "parts") + "/./merged"  # an odd spelling of a new name is fine
    assert merge.run(["--input", str(tmp_path / "parts"), "--output", out, "--no-counts"]) == 0
    assert indexed.validate(str(tmp_path / "parts" / "merged"), check_name=False).ok


def test_merge_takes_a_dataset_named_twice_once(tmp_path, capsys):
    prefixes = _datasets(tmp_path / "parts")
    out = str(tmp_path / "m")
    assert merge.run(["--input", prefixes[0], "--input", str(tmp_path / "parts") + "/./en_web_a",
                      "--output", out, "--no-counts"]) == 0
    assert "merged 1 datasets" in capsys.readouterr().out
    assert _digest(out + ".bin") == _digest(prefixes[0] + ".bin")


def test_count_rename_of_one_dataset_spelled_twice(tmp_path, capsys):
    # Today's main planned two renames of the same files; the second failed with a traceback.
    prefix = _datasets(tmp_path / "d")[0]
    assert count.run(["--rename", "--input", prefix,
                      "--input", str(tmp_path / "d") + "/./en_web_a"]) == 0
    assert "renamed 1 datasets" in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path / "d")) == [
        "en_web_a_dc=2_sc=3_tc=4.bin", "en_web_a_dc=2_sc=3_tc=4.idx", "en_web_b.bin",
        "en_web_b.idx"]


def test_signature_refuses_to_write_over_a_dataset(tmp_path, capsys):
    prefixes = _datasets(tmp_path / "d")
    before = _digest(prefixes[0] + ".idx")
    output = str(tmp_path / "d") + "//en_web_a.idx"
    assert signature.run(["--input", str(tmp_path / "d"), "--output", output]) == 2
    err = capsys.readouterr().err
    assert f"would write over the input {prefixes[0]}.idx" in err and output in err
    assert _digest(prefixes[0] + ".idx") == before


def _config(tmp_path):
    ratio, lang = tmp_path / "ratio.json", tmp_path / "lang.json"
    ratio.write_text('{"web": 1}')
    lang.write_text('{"en": 1}')
    return str(ratio), str(lang)


def test_blend_refuses_to_write_over_a_config_file(tmp_path, capsys):
    folder = tmp_path / "d"
    folder.mkdir()
    indexed.write_documents(str(folder / "en_web_a_dc=1_sc=1_tc=2"), [[[1, 2]]], dtype=np.uint16)
    ratio, lang = _config(tmp_path)
    os.symlink(tmp_path, tmp_path / "here")
    script = str(tmp_path / "here" / "lang.json")
    code = blend.run(["--input", str(folder), "--data-ratio", ratio, "--lang-prob", lang,
                      "--total-tokens", "10", "--output-script", script])
    err = capsys.readouterr().err
    assert code == 2 and f"--output-script would write over the input {lang}" in err
    assert json.loads(open(lang).read()) == {"en": 1}


def test_blend_refuses_a_report_over_a_dataset(tmp_path, capsys):
    folder = tmp_path / "d"
    folder.mkdir()
    prefix = str(folder / "en_web_a_dc=1_sc=1_tc=2")
    indexed.write_documents(prefix, [[[1, 2]]], dtype=np.uint16)
    before = _digest(*_files(prefix))
    ratio, lang = _config(tmp_path)
    code = blend.run(["--input", str(folder), "--data-ratio", ratio, "--lang-prob", lang,
                      "--total-tokens", "10", "--output-script", str(tmp_path / "s.sh"),
                      "--report", str(folder) + "/../d/en_web_a_dc=1_sc=1_tc=2.bin"])
    assert code == 2 and "--report would write over the input" in capsys.readouterr().err
    assert _digest(*_files(prefix)) == before
    assert not (tmp_path / "s.sh").exists()  # refused before anything was written


def test_inspect_refuses_a_plot_over_a_dataset(tmp_path, capsys):
    prefixes = _datasets(tmp_path / "d")
    before = _digest(*_files(prefixes[0]))
    code = inspect.run([str(tmp_path / "d"), "--plot", str(tmp_path / "d") + "/./en_web_a.bin"])
    assert code == 2 and "--plot would write over the input" in capsys.readouterr().err
    assert _digest(*_files(prefixes[0])) == before


def test_reshard_refuses_an_output_folder_that_links_to_the_input(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    # An input named as this reshard's first output shard, read through a symlinked folder.
    source = tmp_path / "in" / "en_books_x_split_00000.jsonl"
    source.write_text('{"text": "one", "extra": 1}\n{"text": "two", "extra": 2}\n')
    before = _digest(source)
    os.symlink(tmp_path / "in", tmp_path / "out")
    code = reshard.run(["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
                        "--language", "en", "--domain", "books", "--subdomain", "x",
                        "--overwrite"])
    assert code == 2 and "has a name the output would use" in capsys.readouterr().err
    assert _digest(source) == before


# -- the comparison itself ---------------------------------------------------------------------


def test_local_spellings_resolve_to_one_place(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x")
    os.symlink(tmp_path / "a", tmp_path / "link")
    os.link(tmp_path / "a" / "f", tmp_path / "hard")
    real = str(tmp_path / "a" / "f")
    for other in [str(tmp_path) + "/a/./f", str(tmp_path) + "//a//f", str(tmp_path / "link" / "f"),
                  str(tmp_path) + "/a/../a/f", "file://" + real]:
        assert locations.resolve_location(other) == locations.resolve_location(real), other
        assert locations.same_location(other, real)
    assert locations.same_location(str(tmp_path / "hard"), real)  # a hard link: same inode
    assert not locations.same_location(str(tmp_path / "a" / "g"), real)
    # A path that does not exist yet still resolves through the symlinked folder above it.
    assert locations.same_location(str(tmp_path / "link" / "new"), str(tmp_path / "a" / "new"))


def test_azure_urls_normalised(monkeypatch):
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    same = [
        "https://acct.blob.core.windows.net/data/out/x.bin",
        "https://ACCT.blob.core.windows.net/data/out/./x.bin?sv=2024&sig=SECRET",
        "https://acct.dfs.core.windows.net/data/out//x.bin",
        "abfss://data@acct.dfs.core.windows.net/out/sub/../x.bin",
        "az://data/out/x.bin",  # account from AZURE_STORAGE_ACCOUNT_NAME
        "abfs://data/./out/x.bin",
    ]
    places = {locations.resolve_location(u) for u in same}
    assert places == {"azure://acct/data/out/x.bin"}
    assert all("SECRET" not in p for p in places)
    assert locations.same_location(same[1], same[3])
    for other in ["https://other.blob.core.windows.net/data/out/x.bin",   # another account
                  "https://acct.blob.core.windows.net/data2/out/x.bin",   # another container
                  "https://acct.blob.core.windows.net/data/out/X.bin",    # blob names are cased
                  "https://acct.blob.core.windows.net/data/out/x.idx"]:
        assert not locations.same_location(other, same[0]), other
    assert (locations.resolve_location("http://127.0.0.1:10000/devstoreaccount1/c/a/./b?sig=s")
            == "azure://devstoreaccount1/c/a/b")


def test_other_urls_normalised():
    assert locations.resolve_location("s3://bucket/a//b/./c/../d?versionId=1#frag") == \
        "s3://bucket/a/b/d"
    assert locations.same_location("memory://x/./y", "memory://x/y")
    assert not locations.same_location("memory://x/y", "memory://x/z")
    assert not locations.same_location("memory://x/y", "/x/y")


def test_refusal_names_both_paths_and_the_fix(tmp_path):
    (tmp_path / "f").write_bytes(b"x")
    with pytest.raises(locations.SameLocationError) as info:
        locations.refuse_same_location([str(tmp_path) + "/./f"], [str(tmp_path / "g"),
                                                               str(tmp_path / "f")], flag="--out")
    message = str(info.value)
    assert str(tmp_path / "f") in message and str(tmp_path) + "/./f" in message
    assert "choose another --out" in message and "\n" not in message
    assert info.value.exit_status == 2
    locations.refuse_same_location([str(tmp_path / "new")], [str(tmp_path / "f")], flag="--out")
