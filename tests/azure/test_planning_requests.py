"""Discovery on Azure takes sizes and etags from the listing: a few requests for many blobs, and
exactly the InputFiles (so the resume keys) that asking each blob gives."""

from dataio import azure, readers
from dataio import fs as fsutil


def test_discover_lists_blobs_without_a_request_each(azurite, container):
    client = azurite.service().get_container_client(container)
    for i in range(40):
        client.upload_blob(f"corpus/part_{i:03d}.jsonl", b'{"text": "x"}\n' * (i + 1))
    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[azurite.url(container)])
    corpus = azurite.url(container, "corpus")
    expected = {p: readers._input_file(p) for p in fsutil.glob(corpus + "/*.jsonl")}
    assert len(expected) == 40 and all(f.version.startswith("etag:") for f in expected.values())
    for pattern in (corpus, corpus + "/part_*.jsonl"):
        before = len(azurite.settled_responses())
        files = readers.discover([pattern])
        asked = len(azurite.settled_responses(before)) - before
        assert {f.path: f for f in files} == expected
        assert asked < 10, f"{asked} requests for 40 blobs"
