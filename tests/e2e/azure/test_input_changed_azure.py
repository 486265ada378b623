"""Object stores: a blob rewritten after planning fails its shards (its etag, which the listing
gave at planning, is checked once a work item's bytes are read; see tests/pipelines/test_input_changed.py
for local files)."""

import pytest

from dataio import azure, readers
from dataio import discovery
from transforms import documents


def test_blob_rewritten_after_planning_fails(azurite, container):
    client = azurite.service().get_container_client(container)
    client.upload_blob("corpus/a.jsonl", b'{"text": "x"}\n' * 100)
    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[azurite.url(container)])
    items = readers.plan_items(discovery.find_inputs([azurite.url(container, "corpus")]))
    assert items[0].version.startswith("etag:")

    def read_all():
        for item in items:
            list(documents.read_documents(item, ["text"]))

    read_all()  # unchanged: reads
    client.upload_blob("corpus/a.jsonl", b'{"text": "y"}\n' * 100, overwrite=True)  # same size
    with pytest.raises(readers.InputChangedError, match=r"rewritten in place\); rerun"):
        read_all()
    client.upload_blob("corpus/a.jsonl", b'{"text": "y"}\n' * 50, overwrite=True)
    with pytest.raises(readers.InputChangedError, match=r"planned 1400 bytes, found 700\); rerun"):
        read_all()
