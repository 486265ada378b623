"""`--verify-inputs`: resume notices an input edited in place with its size and mtime kept.

The resume key of a shard is (input path, size, mtime or etag, tokenizer, options). An edit that
keeps the size and restores the mtime (a tool that preserves timestamps, `touch -r`, a copy with
`cp -p` of a fixed file) is invisible to it; with `--verify-inputs` the key also holds a hash of
the input's bytes, so that shard is redone with the new content.
"""

import os
import re
import shutil

import pytest

from megatron_reference import read_pair
from dataio import fs as fsutil
from dataio import file_hashes
from dataio import readers
from pipelines.tokenize import planner
from test_tokenize import committed, run_job

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py



def _copy_corpus(corpus_dir, folder):
    folder.mkdir()
    for name in ("c0_web.jsonl", "c1_web.jsonl"):
        shutil.copy2(corpus_dir / name, folder / name)
    return folder


def _edit_keeping_size_and_mtime(path):
    """Change one letter inside the first document's text; size and mtime stay as they were."""
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    start = data.index(b'"text": "') + len(b'"text": "')
    at = next(i for i in range(start, len(data)) if chr(data[i]).isalpha())
    data[at] = ord("q") if data[at] != ord("q") else ord("z")
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_same_size_edit_with_mtime_restored_is_redone(corpus_dir, hf_tokenizer, tmp_path,
                                                      capsys):
    inputs = _copy_corpus(corpus_dir, tmp_path / "in")
    out = tmp_path / "out"
    assert run_job(inputs, out, hf_tokenizer, "--verify-inputs") == 0
    old = read_pair(committed(out, "c0_web"))
    untouched = read_pair(committed(out, "c1_web"))
    _edit_keeping_size_and_mtime(inputs / "c0_web.jsonl")
    capsys.readouterr()

    assert run_job(inputs, out, hf_tokenizer) == 0  # verification is the default
    text = capsys.readouterr().out
    assert re.search(r"shards written +1\n", text)  # c0 redone, c1 skipped
    # The redone shard holds the new content: it equals a fresh run on the edited file.
    fresh = tmp_path / "fresh"
    assert run_job(inputs / "c0_web.jsonl", fresh, hf_tokenizer, "--no-verify-inputs") == 0
    assert read_pair(committed(out, "c0_web")) == read_pair(committed(fresh, "c0_web"))
    assert read_pair(committed(out, "c0_web")) != old
    assert read_pair(committed(out, "c1_web")) == untouched


def test_without_verification_the_edit_goes_unnoticed(corpus_dir, hf_tokenizer, tmp_path,
                                                      capsys):
    # The documented limit of --no-verify-inputs: path, size and mtime only.
    inputs = _copy_corpus(corpus_dir, tmp_path / "in")
    out = tmp_path / "out"
    assert run_job(inputs, out, hf_tokenizer, "--no-verify-inputs") == 0
    stale = read_pair(committed(out, "c0_web"))
    _edit_keeping_size_and_mtime(inputs / "c0_web.jsonl")
    capsys.readouterr()
    assert run_job(inputs, out, hf_tokenizer, "--no-verify-inputs") == 0
    assert "nothing to do: 2 shards already committed" in capsys.readouterr().out
    assert read_pair(committed(out, "c0_web")) == stale
    # Turning verification on is a different resume key: every shard is redone once.
    assert run_job(inputs, out, hf_tokenizer, "--verify-inputs") == 0
    assert re.search(r"shards written +2\n", capsys.readouterr().out)
    assert read_pair(committed(out, "c0_web")) != stale


def test_fingerprint_without_a_hash_is_unchanged():
    # --no-verify-inputs keeps the key of earlier versions: outputs committed then still skip.
    f = readers.InputFile("/data/x.jsonl", 10, "mtime:1.5")
    tok = {"files": [{"sha256": "ab"}], "kind": "HF", "eod_id": 0, "add_special_tokens": False}
    plain = planner._fingerprint(f, tok, {"keys": ["text"]})
    assert plain == planner._fingerprint(f, tok, {"keys": ["text"]}, content=None)
    assert plain != planner._fingerprint(f, tok, {"keys": ["text"]}, content="sha256:00")


def test_content_hash_streams_any_size(tmp_path):
    import hashlib

    data = os.urandom(3 * (8 << 20) + 17)  # crosses the 8 MiB read size
    (tmp_path / "big").write_bytes(data)
    (tmp_path / "empty").write_bytes(b"")
    assert file_hashes.content_hash(str(tmp_path / "big")) == \
        "sha256:" + hashlib.sha256(data).hexdigest()
    assert file_hashes.content_hash("file://" + str(tmp_path / "empty")) == \
        "sha256:" + hashlib.sha256(b"").hexdigest()
    hashes = file_hashes.content_hashes([str(tmp_path / "big"), str(tmp_path / "missing")])
    assert hashes[str(tmp_path / "missing")] is None  # its reader fails its shards instead
    fsutil.write_bytes_atomic("memory://h6/x", b"abc")  # a URL: read through open_file
    assert file_hashes.content_hash("memory://h6/x") == "sha256:" + hashlib.sha256(b"abc").hexdigest()
