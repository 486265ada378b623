"""One bad input file fails only its own shards, through the real commands (issue 12, items 1, 2
and 10): the other files commit, the exit status is 1, ``_failures/`` names the file and the
reason, and no traceback reaches the user. Also: literal paths with glob characters, and
tokenbeam's own files in an input folder."""

import gzip
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from pipelines import reshard, tokenize

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

ROWS = [{"text": f"document number {i} " + "word " * (i % 40)} for i in range(400)]
RAW = b"".join(json.dumps(r).encode() + b"\n" for r in ROWS)


def _run(inputs, output, tokenizer, *extra):
    argv = [f"--input={p}" for p in inputs]
    argv += ["--output", str(output), "--tokenizer-type", "HuggingFaceTokenizer",
             "--tokenizer-model", str(tokenizer), "--log-interval", "0", "--append-eod", *extra]
    return tokenize.run([str(a) for a in argv])


def _truncated_zst(path):
    data = zstandard.ZstdCompressor().compress(RAW)
    path.write_bytes(data[: len(data) * 2 // 3])


def _truncated_gz(path):
    path.write_bytes(gzip.compress(RAW)[:-6])  # the trailer (CRC, size) is cut


def _corrupt_zst(path):
    data = bytearray(zstandard.ZstdCompressor().compress(RAW))
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncated_parquet(path):
    pq.write_table(pa.Table.from_pylist(ROWS), path, row_group_size=50)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # no footer: planning cannot list row groups


def _symlink_loop(path):
    os.symlink(path, path)


BAD_FILES = {
    "truncated_zst": ("bad.jsonl.zst", _truncated_zst, "ends inside a zstd frame"),
    "truncated_gz": ("bad.jsonl.gz", _truncated_gz, "cannot decompress"),
    "corrupt_zst": ("bad.jsonl.zst", _corrupt_zst, "cannot decompress"),
    "truncated_parquet": ("bad.parquet", _truncated_parquet, "not a readable Parquet file"),
    "symlink_loop": ("bad.jsonl", _symlink_loop, "Too many levels of symbolic links"),
}


def _shards(folder, stem):
    return sorted(n for n in os.listdir(folder) if n.startswith(f"{stem}_text_document_dc="))


def _good_beside_bad(name, make, hf_tokenizer, tmp_path, capfd):
    """A folder of a good input and a bad one (``make(path)``), tokenized: the run must fail
    (exit 1) without a traceback. Returns (input folder, output folder, stderr)."""
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "good.jsonl").write_bytes(RAW)
    make(inp / name)
    out = tmp_path / "out"
    assert _run([inp], out, hf_tokenizer) == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    return inp, out, err


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_one_bad_file_fails_only_its_shards(case, hf_tokenizer, tmp_path, capfd):
    name, make, reason = BAD_FILES[case]
    inp, out, err = _good_beside_bad(name, make, hf_tokenizer, tmp_path, capfd)
    assert "FAILED bad_text_document" in err and reason in err
    good = _shards(out, "good")
    assert len(good) == 2 and f"_dc={len(ROWS)}_" in good[0]  # .bin and .idx, every document
    assert _shards(out, "bad") == []
    failure = json.loads((out / "_failures" / "bad_text_document.json").read_text())
    assert str(inp / name) in failure["reason"] and reason in failure["reason"]
    meta = json.loads((out / "metadata.json").read_text())
    assert {s["shard"]: s["status"] for s in meta["shards"]} == {
        "bad_text_document": "failed", "good_text_document": "written"}


# Inputs whose records are all bad (issue 23, item 7): each used to commit an empty shard and
# exit 0 with nothing on stderr.
def _wrong_key(path):
    path.write_bytes(b"".join(json.dumps({"txt": r["text"]}).encode() + b"\n" for r in ROWS[:50]))


def _utf16(path):
    path.write_bytes(RAW[:4000].decode().encode("utf-16"))


def _json_array(path):  # one pretty-printed JSON document, saved as .json
    path.write_text(json.dumps(ROWS[:20], indent=2))


def _binary_column(path):
    pq.write_table(pa.table({"text": pa.array([r["text"].encode() for r in ROWS[:30]],
                                              pa.binary())}), path)


def _struct_column(path):
    pq.write_table(pa.table({"text": pa.array([{"body": r["text"]} for r in ROWS[:30]])}), path)


ALL_BAD = {
    "wrong_key": ("bad.jsonl", _wrong_key, "line 1: missing key 'text' (keys present: txt); "
                                           "set --json-keys"),
    "utf16": ("bad.jsonl", _utf16, "line 1: invalid UTF-8 at byte 0 of the line; the file looks "
                                   "like UTF-16"),
    "json_array": ("bad.json", _json_array, "line 1: not valid JSON"),
    "binary_column": ("bad.parquet", _binary_column, "row 1: value of key 'text' is not a string "
                                                     "or list of strings (got bytes: a binary column"),
    "struct_column": ("bad.parquet", _struct_column, "row 1: value of key 'text' is not a string "
                                                     "or list of strings (got dict"),
}


@pytest.mark.parametrize("case", sorted(ALL_BAD))
def test_an_input_of_bad_records_only_fails_its_shards(case, hf_tokenizer, tmp_path, capfd):
    """Every record bad: the input's shard fails (exit 1) with its first reason on stderr, in
    one line naming the file and the line; the other input's shard commits. --max-bad-fraction
    1 commits it, empty, as before."""
    name, make, reason = ALL_BAD[case]
    inp, out, err = _good_beside_bad(name, make, hf_tokenizer, tmp_path, capfd)
    failed = [line for line in err.splitlines() if line.startswith("error: FAILED ")]
    assert len(failed) == 1, err
    assert failed[0].startswith(f"error: FAILED bad_text_document: {inp / name}: every record is "
                                "bad (") and reason in failed[0], failed[0]
    assert str(out / "_errors" / "bad.jsonl") in failed[0]
    if case == "json_array":
        assert "not JSON Lines" in failed[0] and "jq -c" in failed[0]
    assert len(_shards(out, "good")) == 2 and _shards(out, "bad") == []
    assert reason in json.loads((out / "_failures" / "bad_text_document.json").read_text())["reason"]
    meta = json.loads((out / "metadata.json").read_text())
    assert {s["shard"]: s["status"] for s in meta["shards"]} == {
        "bad_text_document": "failed", "good_text_document": "written"}
    # the user says otherwise: committed, empty; the good shard is not redone
    assert _run([inp], out, hf_tokenizer, "--max-bad-fraction", "1") == 0
    assert "skip good_text_document" in capfd.readouterr().out
    assert [n for n in _shards(out, "bad") if n.endswith(".idx")] == \
        ["bad_text_document_dc=0_sc=0_tc=0.idx"]


def test_dry_run_names_a_json_key_the_sampled_records_lack(hf_tokenizer, tmp_path, capfd):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "good.jsonl").write_bytes(RAW)
    _wrong_key(inp / "bad.jsonl")
    (inp / "badz.jsonl.gz").write_bytes(gzip.compress((inp / "bad.jsonl").read_bytes()))
    assert _run([inp], tmp_path / "out", hf_tokenizer, "--dry-run") == 0
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err
    notes = [line.strip() for line in captured.out.splitlines() if "bad records:" in line]
    assert notes == ["bad records: all 50 sampled records are bad; the first (line 1): missing "
                     "key 'text' (keys present: txt); set --json-keys"] * 2, captured.out
    assert f"warning: {inp / 'bad.jsonl'}: all 50 sampled records are bad" in captured.err
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


def test_dry_run_lists_a_truncated_parquet_file(hf_tokenizer, tmp_path, capfd):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "good.jsonl").write_bytes(RAW)
    _truncated_parquet(inp / "bad.parquet")
    assert _run([inp], tmp_path / "out", hf_tokenizer, "--dry-run") == 0
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err
    assert "unreadable:" in captured.out
    # the run fails its shard (exit 1): the plan says so, not "write"
    assert "    fail  bad_" in captured.out and "1 shards to write, 1 to fail" in captured.out


def test_literal_path_with_brackets(hf_tokenizer, tmp_path, capfd):
    (tmp_path / "web[1].jsonl").write_bytes(RAW)
    # what the glob [1] would match instead (whole records: a cut one would fail its shard)
    (tmp_path / "web1.jsonl").write_bytes(RAW[:RAW.index(b"\n", 100) + 1])
    folder = tmp_path / "part[2]"  # a folder with glob characters, too
    folder.mkdir()
    (folder / "more.jsonl").write_bytes(RAW)
    out = tmp_path / "out"
    assert _run([tmp_path / "web[1].jsonl", folder], out, hf_tokenizer) == 0
    assert "Traceback" not in capfd.readouterr().err
    assert len(_shards(out, "web[1]")) == 2 and len(_shards(out, "more")) == 2
    assert not _shards(out, "web1")
    # a pattern that does not exist as a path is still a glob
    assert _run([tmp_path / "web[1].jsonl", tmp_path / "w?b1.jsonl"], tmp_path / "out2",
                hf_tokenizer) == 0
    assert len(_shards(tmp_path / "out2", "web1")) == 2


def test_own_outputs_and_tokenizer_files_are_not_inputs(hf_tokenizer, tmp_path, capfd):
    folder = tmp_path / "work"  # inputs, tokenizer and output in one folder
    folder.mkdir()
    (folder / "good.jsonl").write_bytes(RAW)
    for name in os.listdir(hf_tokenizer):
        with open(os.path.join(hf_tokenizer, name), "rb") as f:
            (folder / name).write_bytes(f.read())
    for attempt in range(2):  # the second run sees the first one's metadata.json
        assert _run([folder], folder, folder / "tokenizer.json") == 0
        err = capfd.readouterr().err
        assert "Traceback" not in err
        left_out = [line for line in err.splitlines() if line.startswith("inputs: left out")]
        assert len(left_out) == 1 and "tokenizer.json (a tokenizer file)" in left_out[0]
        assert ("metadata.json (tokenbeam's metadata.json)" in left_out[0]) == (attempt == 1)
    stems = {n.split("_text_document")[0] for n in os.listdir(folder) if n.endswith(".idx")}
    assert stems == {"good"}
    meta = json.loads((folder / "metadata.json").read_text())
    assert [i["path"] for i in meta["inputs"]] == [str(folder / "good.jsonl")]
    # globs leave them out as well, and say so when nothing else matched
    assert _run([folder / "*.json*"], tmp_path / "out", folder / "tokenizer.json") == 0
    assert "left out 3 file(s)" in capfd.readouterr().err
    (folder / "_errors").mkdir(exist_ok=True)
    (folder / "_errors" / "good.jsonl").write_text('{"file": "x", "reason": "y"}\n')
    assert _run([folder / "*" / "*.jsonl"], tmp_path / "out", folder / "tokenizer.json") == 2
    err = capfd.readouterr().err
    assert "matches no supported file" in err and "Traceback" not in err
    assert "_errors/good.jsonl (written by tokenbeam under _errors/)" in err


# --- reshard --------------------------------------------------------------------------------

def _reshard(inp, out):
    return reshard.run([f"--input={inp}", f"--output={out}", "--language", "en", "--domain",
                        "web", "--subdomain", "x", "--target-size", "20KB"])


@pytest.mark.parametrize("case", ["truncated_zst", "corrupt_zst", "truncated_parquet",
                                  "symlink_loop"])
def test_reshard_lists_a_bad_file_and_writes_nothing(case, tmp_path, capfd):
    name, make, reason = BAD_FILES[case]
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "good.jsonl").write_bytes(RAW)
    make(inp / name)
    out = tmp_path / "out"
    assert _reshard(inp, out) == 1
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err, captured.err
    assert f"FAILED {inp / name}: " in captured.err and reason in captured.err
    assert "reshard wrote nothing" in captured.err and "shards," not in captured.out
    assert not out.exists() or os.listdir(out) == []
    os.remove(inp / name)  # without the bad file the same command writes every document
    assert _reshard(inp, out) == 0
    assert sum(p.read_bytes().count(b"\n") for p in out.glob("*.jsonl")) == len(ROWS)


def test_reshard_literal_path_with_brackets(tmp_path, capfd):
    (tmp_path / "web[1].jsonl").write_bytes(RAW)
    (tmp_path / "web1.jsonl").write_bytes(RAW[:100])  # what the glob [1] would match instead
    out = tmp_path / "out"
    assert _reshard(tmp_path / "web[1].jsonl", out) == 0
    assert "Traceback" not in capfd.readouterr().err
    assert sum(p.read_bytes().count(b"\n") for p in out.glob("*.jsonl")) == len(ROWS)
