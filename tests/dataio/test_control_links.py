"""Control files are never written through a symbolic link planted in the output (issue 23
item 5): a link at ``_lock``, ``metadata.json`` or a control folder refuses the output in one
line (exit status 2); a link at a record's name (commit, failure, errors file) is replaced,
never followed; temporaries are created exclusively. Each test plants links to a victim outside
the output and checks the victim is untouched."""

import json
import os

import numpy as np
import pytest

from dataio import fs as fsutil
from dataio import indexed, jsonl_sink, lock, manifest
from dataio import dataset_find

VICTIM_TEXT = b"victim: must stay as it is\n"
CONTROLS = ["_lock", "_temporary", "_commits", "_failures", "_errors", "_parts", "metadata.json",
            "holdout", "_commits/holdout", "_failures/holdout"]


def _victim_file(tmp_path, name="victim.txt"):
    victim = tmp_path / name
    victim.write_bytes(VICTIM_TEXT)
    return victim


def _victim_dir(tmp_path):
    victim = tmp_path / "victim_dir"
    victim.mkdir()
    (victim / "keep.json").write_bytes(VICTIM_TEXT)
    return victim


def _state(path):
    if path.is_dir():
        return sorted((p.name, p.read_bytes()) for p in path.iterdir())
    return path.read_bytes()


def test_control_names_cover_the_records():
    assert {manifest.COMMITS_DIR, manifest.FAILURES_DIR, manifest.ERRORS_DIR,
            manifest.METADATA_FILE, lock.TEMPORARY_DIR, lock.LOCK_NAME} <= set(lock.CONTROL_NAMES)
    # and the one folder of the output that shards are written to and deleted from
    assert dataset_find.HOLDOUT_DIR in lock.CONTROL_NAMES
    assert sorted(lock.CONTROL_NAMES) == sorted(CONTROLS)


@pytest.mark.parametrize("name", CONTROLS)
def test_lock_refuses_an_output_with_a_linked_control_name(tmp_path, name):
    out = tmp_path / "out"
    out.mkdir()
    victim = _victim_file(tmp_path) if name in ("_lock", "metadata.json") \
        else _victim_dir(tmp_path)
    before = _state(victim)
    (out / name).parent.mkdir(exist_ok=True)
    os.symlink(victim, out / name)
    with pytest.raises(getattr(fsutil, "LinkedControlFileError", ValueError)) as info:
        lock.acquire(str(out), run_id="r1")
    assert info.value.exit_status == 2
    message = str(info.value)
    assert len(message.splitlines()) == 1 and str(out / name) in message and "remove" in message
    assert _state(victim) == before


def test_lock_is_not_opened_through_a_link_planted_after_the_check(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    victim = _victim_file(tmp_path)
    os.symlink(victim, out / "_lock")
    monkeypatch.setattr(fsutil, "refuse_links", lambda folder, names: None,
                        raising=False)  # the race: a link planted after the check
    with pytest.raises(getattr(fsutil, "LinkedControlFileError", ValueError)):
        lock.acquire(str(out), run_id="r1")
    assert victim.read_bytes() == VICTIM_TEXT


def test_lock_refuses_a_hard_link(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = _victim_file(tmp_path)
    os.link(victim, out / "_lock")
    with pytest.raises(getattr(fsutil, "LinkedControlFileError", ValueError), match="hard link"):
        lock.acquire(str(out), run_id="r1")
    assert victim.read_bytes() == VICTIM_TEXT


def test_a_clean_output_still_locks_and_releases(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with lock.acquire(str(out), run_id="r1") as held:
        assert held.exclusive and json.loads((out / lock.LOCK_NAME).read_text())["run_id"] == "r1"
    assert not (out / lock.LOCK_NAME).exists()


def test_atomic_write_replaces_a_link_and_leaves_its_target(tmp_path):
    victim = _victim_file(tmp_path)
    record = tmp_path / "out" / "_commits" / "a_text_document.json"
    record.parent.mkdir(parents=True)
    os.symlink(victim, record)
    fsutil.write_bytes_atomic(str(record), b'{"shard": "a"}')
    assert victim.read_bytes() == VICTIM_TEXT
    assert not record.is_symlink() and record.read_bytes() == b'{"shard": "a"}'


@pytest.mark.parametrize("suffix", [".bin", ".idx"])
def test_shard_temporaries_are_created_exclusively(tmp_path, monkeypatch, suffix):
    monkeypatch.setattr(fsutil, "unique_token", lambda: "0123abcd0")  # a predictable name
    victim = _victim_file(tmp_path)
    prefix = tmp_path / "out" / "_temporary" / "run" / "a_text_document" / "000000-000000"
    prefix.parent.mkdir(parents=True)
    planted = indexed._temporary_name(str(prefix) + suffix, "0123abcd0")
    os.symlink(victim, planted)
    with pytest.raises(FileExistsError):
        indexed.write_documents(str(prefix), [[1, 2, 3]], dtype=np.uint16)
    assert victim.read_bytes() == VICTIM_TEXT
    assert not os.path.exists(str(prefix) + ".bin") and not os.path.exists(str(prefix) + ".idx")


def test_reshard_attempt_files_are_created_exclusively(tmp_path):
    victim = _victim_file(tmp_path)
    path = tmp_path / "out" / ".reshard-x.tmp" / "en_web_00000.jsonl.0123.part"
    path.parent.mkdir(parents=True)
    os.symlink(victim, path)
    with pytest.raises(FileExistsError):
        jsonl_sink.write_lines(str(path), [b'{"text": "a"}'], compression="none")
    assert victim.read_bytes() == VICTIM_TEXT


# --- whole runs ----------------------------------------------------------------------------------


def test_removing_temporaries_does_not_enter_a_linked_folder(tmp_path):
    victim = _victim_dir(tmp_path)
    (victim / ".a_text_document_dc=1.bin.inprogress-abc").write_bytes(VICTIM_TEXT)
    before = _state(victim)
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / ".a_text_document_dc=1.bin.inprogress-def").write_bytes(b"x")
    os.symlink(victim, out / "linked")
    removed = fsutil.remove_temporaries(str(out), is_temporary=indexed.is_temporary_name)
    assert removed == [str(out / "sub" / ".a_text_document_dc=1.bin.inprogress-def")]
    assert _state(victim) == before
