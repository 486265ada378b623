"""reshard's commit is all or nothing as every reader sees it (dataio/jsonl_sink.py, step 3).

The job is SIGKILLed inside its rename loop (the fault checkpoint ``reshard.between_renames``,
runtime/faults.py), leaving some shards under their final names: every reader (the input finder
that tokenize and reshard use) refuses the folder with one line, and the rerun of the same
command settles the commit by itself and ends byte-identical to a clean run.
"""

import json
import os

import pytest

from dataio import jsonl_sink, readers
from dataio import discovery


def _files(folder):
    return {n: (folder / n).read_bytes() for n in os.listdir(folder) if not n.startswith(".")}


def _pending_commit(tmp_path):
    """A folder as a commit leaves it mid-way: the earlier run's old_00 still to delete."""
    out = tmp_path / "out"
    temp = out / ".reshard-x.tmp"
    temp.mkdir(parents=True)
    (out / "old_00.jsonl").write_bytes(b"old\n")
    jsonl_sink.commit([], output=str(out))  # an earlier run: nothing of its own committed
    for name in ("a.part", "b.part"):
        (temp / name).write_bytes(name.encode() + b"\n")
    renames = [(str(temp / "a.part"), str(out / "en_00.jsonl")),
               (str(temp / "b.part"), str(out / "en_01.jsonl"))]
    return out, renames


def test_a_commit_whose_deletions_began_is_finished_not_rolled_back(tmp_path):
    out, renames = _pending_commit(tmp_path)
    jsonl_sink.commit(renames, output=str(out), stale=[str(out / "old_00.jsonl")])
    done = _files(out)
    manifest = json.loads(done[jsonl_sink.MANIFEST_NAME])
    # as if killed after the renames and the first deletion, before the manifest was complete
    pending = {**manifest, "complete": False, "previous": {},
               "adding": [[f".reshard-x.tmp/{os.path.basename(t)}", os.path.basename(f)]
                          for t, f in renames],
               "removing": ["old_00.jsonl", "old_01.jsonl"]}
    (out / "old_01.jsonl").write_bytes(b"old\n")
    (out / jsonl_sink.MANIFEST_NAME).write_text(json.dumps(pending))
    assert "unfinished reshard commit" in jsonl_sink.refusal(str(out), {}, whole=False)
    assert "finished the commit" in jsonl_sink.recover(str(out))
    assert _files(out) == done
    assert jsonl_sink.recover(str(out)) == ""  # settled: nothing more to do


def test_readers_check_the_sizes_and_the_shards_listed(tmp_path):
    out, renames = _pending_commit(tmp_path)
    jsonl_sink.commit(renames, output=str(out))
    assert len(discovery.find_inputs([str(out)])) == 3  # old_00 is not reshard's: not checked
    (out / "en_01.jsonl").write_bytes(b"changed since\n")
    with pytest.raises(readers.InputError, match="but reshard committed it with 7"):
        discovery.find_inputs([str(out / "en_*.jsonl")])
    (out / "en_01.jsonl").unlink()
    with pytest.raises(readers.InputError, match="missing"):
        discovery.find_inputs([str(out)])
    assert len(discovery.find_inputs([str(out / "en_00.jsonl")])) == 1  # a file named on purpose
