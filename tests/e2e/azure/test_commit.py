"""Writing Megatron datasets straight to Azurite: same bytes as on local disk, nothing final-named
after an abort or a kill, the storage primitives the tokenize job's commit protocol relies on,
and the validate/count commands on Azure paths."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from dataio import azure, indexed
from dataio import fs as fsutil
from pipelines import count as count_cli
from pipelines import validate as validate_cli

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BLOCK_MB = 0.0625   # 64 KiB blocks, so a few hundred KiB already upload in several blocks


def _documents(seed: int, count: int):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 60000, size=int(n)).tolist()
            for n in rng.integers(0, 400, size=count)]


@pytest.fixture
def configured(azurite, container):
    azure.configure_from_options({"azure_connection_string": azurite.connection_string,
                                  "azure_block_size_mb": BLOCK_MB},
                                 paths=[azurite.url(container)])
    return azurite.url(container)


def _names(azurite, container):
    return sorted(b.name for b in azurite.service().get_container_client(container).list_blobs())


def test_writer_on_azure_is_byte_identical_to_local(configured, azurite, container, tmp_path):
    docs = _documents(1, 2000)
    local = str(tmp_path / "shard")
    remote = fsutil.join(configured, "out", "shard")
    indexed.write_documents(local, docs, dtype=np.uint16)
    indexed.write_documents(remote, docs, dtype=np.uint16)
    for ext in (".bin", ".idx"):
        with open(local + ext, "rb") as f:
            assert fsutil.read_bytes(remote + ext) == f.read()
    assert _names(azurite, container) == ["out/shard.bin", "out/shard.idx"], \
        "no temporary object is left behind"
    assert indexed.validate(remote, check_name=False).ok
    ds = indexed.IndexedDataset(remote)
    assert ds.document_count == len(docs) and ds.document(7).tolist() == docs[7]


def test_uploads_go_in_blocks_of_the_configured_size(configured, azurite, container):
    data = os.urandom(300 * 1024)
    url = fsutil.join(configured, "blocks.bin")
    with fsutil.open_file(url, "wb") as f:
        assert f.blocksize == int(BLOCK_MB * 2**20)
        for start in range(0, len(data), 10_000):
            f.write(data[start:start + 10_000])
    blocks = azurite.service().get_blob_client(container, "blocks.bin").get_block_list()[0]
    assert len(blocks) >= 4 and max(b.size for b in blocks) <= 2 * int(BLOCK_MB * 2**20)
    assert fsutil.read_bytes(url) == data


def test_aborted_writer_leaves_nothing(configured, azurite, container):
    prefix = fsutil.join(configured, "out", "aborted")
    with pytest.raises(RuntimeError, match="stop here"):
        with indexed.IndexedDatasetWriter(prefix, dtype=np.uint16) as writer:
            for doc in _documents(2, 3000):
                writer.add_document(doc)
            raise RuntimeError("stop here")
    assert _names(azurite, container) == []


_KILLED_WRITER = """
import sys, time, numpy as np
from dataio import azure, indexed
azure.configure_worker()          # the plan and the secret come from the environment
w = indexed.IndexedDatasetWriter(sys.argv[1], dtype=np.uint16)
rng = np.random.default_rng(3)
for _ in range(400):
    w.add_document(rng.integers(0, 60000, size=500))   # about 400 KB: several staged blocks
w._bin.flush()
print("staged", flush=True)
time.sleep(600)                    # killed here, before close() commits anything
"""


def test_writer_killed_mid_upload_leaves_no_final_named_object(configured, azurite, container):
    prefix = fsutil.join(configured, "out", "killed")
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, prefix], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "staged", proc.stderr.read() if proc.poll() is not None else line
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    names = _names(azurite, container)
    assert not any(n.endswith((".bin", ".idx")) and not indexed.is_temporary_name(n)
                   for n in names), names
    assert fsutil.remove_temporaries(configured, is_temporary=indexed.is_temporary_name) == \
        [fsutil.url_of(configured, f"{container}/{n}") for n in names]
    assert _names(azurite, container) == []
    # and a rerun ends exactly like a clean run
    indexed.write_documents(prefix, [[1, 2, 3]], dtype=np.uint16)
    assert _names(azurite, container) == ["out/killed.bin", "out/killed.idx"]


def test_replace_copies_server_side_then_deletes(configured, azurite, container):
    fs, inner = fsutil.filesystem_and_path(configured)
    big = os.urandom(200_000)
    fsutil.write_bytes_atomic(fsutil.join(configured, "tmp.bin"), big)
    fsutil.write_bytes_atomic(fsutil.join(configured, "final.bin"), b"old content")
    fsutil.replace(fs, f"{inner}/tmp.bin", f"{inner}/final.bin")
    assert fsutil.read_bytes(fsutil.join(configured, "final.bin")) == big
    assert _names(azurite, container) == ["final.bin"]
    with pytest.raises(FileNotFoundError):
        fsutil.replace(fs, f"{inner}/absent.bin", f"{inner}/final.bin")
    assert fsutil.read_bytes(fsutil.join(configured, "final.bin")) == big


def test_small_object_primitives(configured, azurite, container):
    record = fsutil.join(configured, "_commits", "shard.json")
    fsutil.write_bytes_atomic(record, b'{"n": 1}')
    first = fsutil.info(record)
    assert first["size"] == 8 and first["etag"] and first["mtime"]
    fsutil.write_bytes_atomic(record, b'{"n": 22}')
    second = fsutil.info(record)
    assert second["size"] == 9 and second["etag"] != first["etag"]
    assert fsutil.read_bytes(record) == b'{"n": 22}'
    assert fsutil.exists(record) and fsutil.size(record) == 9
    assert _names(azurite, container) == ["_commits/shard.json"], "no temporary left"
    assert fsutil.list_names(fsutil.join(configured, "_commits")) == ["shard.json"]
    fsutil.remove(record)
    fsutil.remove(record)   # removing twice is fine
    assert not fsutil.exists(record)


def test_validate_and_count_commands_on_azure(configured, capsys):
    docs = _documents(4, 50)
    prefix = fsutil.join(configured, "ds", "en_text_document")
    indexed.write_documents(prefix, docs, dtype=np.uint16)
    assert validate_cli.run([fsutil.join(configured, "ds")]) == 0
    assert "OK" in capsys.readouterr().out
    assert count_cli.run(["--input", fsutil.join(configured, "ds")]) == 0
    out = capsys.readouterr().out
    assert "en_text_document" in out and str(len(docs)) in out
