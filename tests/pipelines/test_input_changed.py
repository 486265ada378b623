"""An input that changes while the job reads it fails its shards instead of committing part of it.

Each work item carries the file as planned (size, mtime or etag, and with --verify-inputs the
identity its content hash was taken under); the reader confirms it once the item's bytes are
read (dataio/readers.py ``confirm_unchanged``) and a changed file fails its shards with one line
"FILE changed while reading (planned N bytes, found M); rerun", while the other shards commit.
The whole-job test changes the file with the fault hook ``TOKENBEAM_FAULT_TRUNCATE`` at the
checkpoint ``readers.item_started`` (runtime/faults.py): after planning, before the bytes are read.
"""

import gzip
import json
import os

import pytest

from dataio import input_hashes, readers
from dataio import discovery
from dataio.elements import WorkItem
from transforms import documents


def _write(path, n=200):
    path.write_text("".join(json.dumps({"text": f"document number {i}"}) + "\n"
                            for i in range(n)))
    return path


def _planned(folder, *, split_bytes=256 << 20, verify=False):
    files = discovery.find_inputs([str(folder)])
    stamps = {}
    if verify:
        input_hashes.content_hashes([f.path for f in files], stamps=stamps)
    return readers.plan_items(files, split_bytes=split_bytes, stamps=stamps)


def _read_all(items):
    for item in items:
        for out in documents.read_documents(item, ["text"]):
            pass


def _line_boundary_near(path, fraction):
    data = path.read_bytes()
    return data.index(b"\n", int(len(data) * fraction)) + 1


def test_truncated_after_planning_fails_each_range(tmp_path):
    (tmp_path / "in").mkdir()
    src = _write(tmp_path / "in" / "a.jsonl")
    items = _planned(tmp_path / "in", split_bytes=1000)
    assert len(items) > 2
    _read_all(items)  # unchanged: reads
    planned = src.stat().st_size
    os.truncate(src, _line_boundary_near(src, 0.5))
    with pytest.raises(readers.InputChangedError) as caught:
        _read_all(items)
    assert str(caught.value) == (f"{src} changed while reading (planned {planned} bytes, found "
                                 f"{src.stat().st_size}); rerun")
    # a range wholly past the new end, and the first range (which still finds its lines), fail too
    for item in (items[0], items[-1]):
        with pytest.raises(readers.InputChangedError):
            _read_all([item])


def test_appended_to_after_planning_fails(tmp_path):
    (tmp_path / "in").mkdir()
    src = _write(tmp_path / "in" / "a.jsonl")
    items = _planned(tmp_path / "in")
    with open(src, "a") as f:
        f.write(json.dumps({"text": "late"}) + "\n")
    with pytest.raises(readers.InputChangedError, match="changed while reading"):
        _read_all(items)


def test_same_size_rewrite_with_mtime_restored_fails_when_verified(tmp_path):
    """The content key: the bytes hashed at planning are the bytes read (the file's ctime, which
    no call sets back, stands for the hash, so nothing is hashed twice)."""
    (tmp_path / "in").mkdir()
    src = _write(tmp_path / "in" / "a.jsonl")
    verified, plain = _planned(tmp_path / "in", verify=True), _planned(tmp_path / "in")
    assert verified[0].stamp and not plain[0].stamp
    st = src.stat()
    src.write_bytes(src.read_bytes().replace(b"number 7", b"number X"))
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (src.stat().st_size, src.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    with pytest.raises(readers.InputChangedError, match=r"found \d+, rewritten in place\); rerun"):
        _read_all(verified)
    _read_all(plain)  # size and mtime are all --no-verify-inputs plans with


def test_replaced_by_rename_with_the_same_size_fails(tmp_path):
    """A rewrite done the safe way (write a copy, rename it over the file) with the same size."""
    (tmp_path / "in").mkdir()
    src = _write(tmp_path / "in" / "a.jsonl")
    items = _planned(tmp_path / "in")
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(src.read_bytes().replace(b"number 7", b"number X"))
    os.utime(copy, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 1_000_000))
    copy.replace(src)
    with pytest.raises(readers.InputChangedError, match=r"rewritten in place\); rerun"):
        _read_all(items)


def test_truncated_gzip_and_parquet_fail_as_changed_not_corrupt(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "in"
    folder.mkdir()
    lines = "".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(2000)).encode()
    (folder / "g.jsonl.gz").write_bytes(gzip.compress(lines))
    pq.write_table(pa.table({"text": [f"doc {i}" for i in range(2000)]}), folder / "p.parquet",
                   row_group_size=500)
    items = _planned(folder)
    for item in items:
        os.truncate(item.path, item.size // 2)
        with pytest.raises(readers.InputChangedError, match="changed while reading"):
            _read_all([item])


def test_samples_and_unplanned_items_are_not_checked(tmp_path):
    (tmp_path / "in").mkdir()
    src = _write(tmp_path / "in" / "a.jsonl")
    item = WorkItem(path=str(src), stem="a", format="jsonl", index=0)
    os.truncate(src, 100)
    assert len(list(readers.read_jsonl(item))) >= 1
