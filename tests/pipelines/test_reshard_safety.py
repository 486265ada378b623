"""reshard's commit cannot be turned against its user (dataio/jsonl_sink.py, step 3; issue 23):

- a manifest planted or edited in the output deletes nothing outside the output's own shards and
  temporaries: it is refused with one line (exit 2) naming it and the fix;
- an input truncated while the job reads it commits nothing ("changed while reading; rerun");
- the manifest records temporaries relative to the output, so a rerun from another working
  folder settles a dead run's commit in the output, not under the new working folder;
- one run at a time per output (dataio/lock.py, as tokenize): a second run is refused while the
  first lives, a dead run's lock is taken over.
"""

import json
import os

import pytest

from runtime import errors
from dataio import jsonl_sink

PLANTED_TEMPORARY = "/nonexistent/.reshard-x.tmp/a.part"


def _tree(folder):
    return {os.path.relpath(os.path.join(d, n), folder): open(os.path.join(d, n), "rb").read()
            for d, _, names in os.walk(folder) for n in names}


def _plant(out, **manifest):
    out.mkdir(parents=True, exist_ok=True)
    (out / jsonl_sink.MANIFEST_NAME).write_text(json.dumps(
        {"version": 1, "complete": False, "files": {}, "previous": {}, "adding": [],
         "removing": [], **manifest}))


# -- item 1: a planted manifest ------------------------------------------------------------------


@pytest.mark.parametrize("manifest", [
    {"adding": [[PLANTED_TEMPORARY, "../v/victim.txt"]]},
    {"adding": [[PLANTED_TEMPORARY, "/abs/victim.txt"]]},
    {"adding": [[".reshard-x.tmp/a.part", "en\n_00.jsonl"]]},
    {"adding": [[".reshard-x.tmp/a.part", "en_00.jsonl"]], "removing": ["../v/victim.txt"]},
    {"adding": [[".reshard-x.tmp/a.part", "en_00.jsonl"]], "removing": ["_lock"]},
    {"adding": [[".reshard-x.tmp/a.part", "en_00.jsonl"]], "previous": {"../v/victim.txt": 7}},
    {"adding": [[".reshard-x.tmp/a.part", "en_00.jsonl"]], "files": {"..": 7}},
    {"adding": [["../v/.reshard-x.tmp/a.part", "en_00.jsonl"]]},  # another folder's temporaries
    {"adding": [[".reshard-x.tmp/../../v/victim.txt", "en_00.jsonl"]]},
    {"adding": [["v/a.part", "en_00.jsonl"]]},  # a folder of the output that is no temporary
    {"adding": [[str(PLANTED_TEMPORARY), "en_00.jsonl"]]},  # absolute, cwd-relative: not ours
    {"adding": [[".reshard-x.tmp/a.part", "en_00.jsonl", "more"]]},
    {"complete": False, "lost": ["../v/victim.txt"], "adding": []},
], ids=lambda m: json.dumps(m)[:60])
def test_recover_and_readers_refuse_a_manifest_naming_anything_outside_the_output(
        tmp_path, manifest):
    victim = tmp_path / "v" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("victim\n")
    out = tmp_path / "out"
    _plant(out, **manifest)
    (out / "v").mkdir()
    (out / "v" / "a.part").write_text("x\n")
    (out / "en_00.jsonl").write_text("{}\n")
    (out / "_lock").write_text("")
    before = _tree(tmp_path)
    for settle in (jsonl_sink.recover, jsonl_sink.unfinished_shards,
                   lambda o: jsonl_sink.commit([], output=o)):
        with pytest.raises(jsonl_sink.ManifestError, match="not a manifest reshard wrote") as e:
            settle(str(out))
        assert errors.describe(e.value)[1] == errors.EXIT_USAGE
    assert "not a manifest reshard wrote" in jsonl_sink.refusal(str(out), {}, whole=True)
    assert _tree(tmp_path) == before  # nothing deleted, nothing written


# -- item 2: an input truncated while reshard reads it --------------------------------------------


# -- item 3: temporaries recorded relative to the output --------------------------------------------


# -- item 4: one run at a time -------------------------------------------------------------------


def test_an_unfinished_commit_recorded_by_an_earlier_version_is_still_rolled_back(tmp_path):
    """Before temporaries were recorded relative to the output, the manifest held their paths as
    the run spelled them: one in this output's own run folder is still settled."""
    out = tmp_path / "out"
    temp = out / ".reshard-0123456789ab.tmp"
    temp.mkdir(parents=True)
    (temp / "b.part").write_text("{}\n")
    (out / "en_00.jsonl").write_text("{}\n")  # renamed before the kill
    _plant(out, adding=[[str(temp / "a.part"), "en_00.jsonl"],
                        [str(temp / "b.part"), "en_01.jsonl"]])
    assert "1 of 2 shard(s) had been renamed" in jsonl_sink.recover(str(out))
    assert sorted(os.listdir(out)) == [jsonl_sink.MANIFEST_NAME]
    assert json.loads((out / jsonl_sink.MANIFEST_NAME).read_text())["complete"]


# -- a dying worker names what it was doing ------------------------------------------------------
