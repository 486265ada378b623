"""reshard's all-or-nothing commit on flat blob storage (no folder rename there): the manifest
written last is what readers require (see tests/pipelines/test_reshard_commit.py for the killed job)."""

import json

import pytest

from dataio import azure, jsonl_sink, readers
from dataio import discovery
from dataio import fs as fsutil


def test_manifest_commit_refusal_and_rollback_on_blob_storage(azurite, container):
    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[azurite.url(container)])
    out = azurite.url(container, "out")
    temp = jsonl_sink.new_temporary_dir(out)
    renames = []
    for k in range(3):
        temporary = jsonl_sink.attempt_path(temp, f"{k:05d}")
        jsonl_sink.write_lines(temporary, [json.dumps({"text": "x" * k}).encode()],
                               compression="none")
        renames.append((temporary, fsutil.join(out, f"en_{k:02d}.jsonl")))
    jsonl_sink.commit(renames, output=out)
    manifest = jsonl_sink.read_manifest(out)
    assert manifest["complete"] and sorted(manifest["files"]) == [f"en_{k:02d}.jsonl"
                                                                 for k in range(3)]
    assert len(discovery.find_inputs([out])) == 3

    # a second run killed after its first rename: its unfinished manifest, one shard in place
    temp2 = jsonl_sink.new_temporary_dir(out)
    adding = []
    for k in (3, 4):
        temporary = jsonl_sink.attempt_path(temp2, f"{k:05d}")
        jsonl_sink.write_lines(temporary, [b'{"text": "y"}'], compression="none")
        adding.append([temporary, f"en_{k:02d}.jsonl"])
    recorded = [["/".join(t.rsplit("/", 2)[-2:]), n] for t, n in adding]  # relative to out
    fsutil.write_bytes_atomic(jsonl_sink.manifest_path(out), json.dumps(
        {"version": 1, "complete": False, "previous": manifest["files"],
         "files": {**manifest["files"], "en_03.jsonl": 13, "en_04.jsonl": 13},
         "adding": recorded, "removing": []}).encode())
    fs, source = fsutil.filesystem_and_path(adding[0][0])
    fsutil.replace(fs, source, fsutil.filesystem_and_path(fsutil.join(out, "en_03.jsonl"))[1])
    fs.invalidate_cache()
    with pytest.raises(readers.InputError, match="unfinished reshard commit"):
        discovery.find_inputs([out])
    assert "1 of 2 shard(s) had been renamed" in jsonl_sink.recover(out)
    fs.invalidate_cache()
    assert sorted(f.path.rsplit("/", 1)[-1] for f in discovery.find_inputs([out])) == \
        [f"en_{k:02d}.jsonl" for k in range(3)]
    assert jsonl_sink.read_manifest(out) == manifest
    assert not fsutil.exists(adding[1][0])  # the dead run's temporaries are gone


def test_planted_manifest_and_the_lock_on_blob_storage(azurite, container):
    """A manifest naming a blob outside the output is refused and deletes nothing; reshard's
    output lock (a lease on ``_lock``) refuses a second run while the first holds it."""
    from dataio import lock as output_lock
    from pipelines import reshard

    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[azurite.url(container)])
    out, victim = azurite.url(container, "out"), azurite.url(container, "victim.txt")
    fsutil.write_bytes_atomic(victim, b"victim\n")
    fsutil.write_bytes_atomic(jsonl_sink.manifest_path(out), json.dumps(
        {"version": 1, "complete": False, "files": {}, "previous": {}, "removing": [],
         "adding": [[f"{out}/.reshard-x.tmp/a.part", "../victim.txt"]]}).encode())
    with pytest.raises(jsonl_sink.ManifestError, match="not a manifest reshard wrote"):
        jsonl_sink.recover(out)
    assert fsutil.read_bytes(victim) == b"victim\n"
    fsutil.remove(jsonl_sink.manifest_path(out))

    with reshard.lock_output(out, ["--output", out]) as held:
        assert held.exclusive
        with pytest.raises(output_lock.OutputLockedError, match="in use by another run|lease"):
            reshard.lock_output(out, ["--output", out])
    reshard.lock_output(out, ["--output", out]).release()  # free again once released
