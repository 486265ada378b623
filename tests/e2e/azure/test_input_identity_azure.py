"""Issue 23 items 11 and 17 on Azure Blob Storage (Azurite): a blob named three times (its
folder, its URL, a glob) is one input; a Spark-style ``t.parquet/`` folder of blobs is read as
its part files (the listing says which entries are folders: no request per blob)."""

import io

import pyarrow as pa
import pyarrow.parquet as pq

from dataio import azure, readers
from dataio import discovery


def _parquet(rows) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def test_blobs_named_twice_and_spark_folders(azurite, container, capsys):
    client = azurite.service().get_container_client(container)
    client.upload_blob("data/a.jsonl", b'{"text": "x"}\n')
    for k in range(2):
        client.upload_blob(f"data/t.parquet/part-{k:05d}-0a1b.snappy.parquet",
                           _parquet([{"text": f"doc {k}"}]))
        client.upload_blob(f"data/t.parquet/.part-{k:05d}-0a1b.snappy.parquet.crc", b"crc")
    client.upload_blob("data/t.parquet/_SUCCESS", b"")
    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[azurite.url(container)])
    data = azurite.url(container, "data")
    files = discovery.discover([data, data + "/a.jsonl", data + "/*.jsonl"])
    stems = [f.stem for f in files]
    assert stems == ["a", "t_part-00000-0a1b", "t_part-00001-0a1b"], files
    err = capsys.readouterr().err
    assert "dataset folder: read as its 2 part file(s)" in err and "read once" in err
    items = readers.plan_items(files)
    assert all(not i.error for i in items), items
