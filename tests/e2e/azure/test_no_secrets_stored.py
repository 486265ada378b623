"""No secret is ever stored in the storage account (issue 12, item 6).

A server-side copy records its source URL in the destination's ``x-ms-copy-source`` property
for as long as the blob lives: a copy source carrying a SAS would keep ``sig=`` on every
committed shard, readable by anyone who may read blob properties. After a real tokenize run on
Azurite, with SAS auth and with account-key auth, every blob in the container (committed,
uncommitted, snapshots) and the container itself are read back, properties, metadata and tags,
and none may hold the SAS, its signature or the account key.
"""

import datetime as dt
import enum
import os
from urllib.parse import unquote

import numpy as np
import pytest

from dataio import azure, indexed
from dataio import fs as fsutil
from pipelines import tokenize

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py


def _argv(inputs, output, tokenizer, *extra):
    return [f"--input={inputs}", f"--output={output}", "--tokenizer-type", "HuggingFaceTokenizer",
            f"--tokenizer-model={tokenizer}", "--append-eod", "--log-interval", "0",
            *[str(e) for e in extra]]


def _strings(value, seen=None):
    """Every string reachable from an SDK model object (properties, nested copy/lease/content
    settings, metadata and tag dicts), so that no field escapes the check."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, (bytes, bytearray)):
        yield bytes(value).decode("latin-1")
    elif isinstance(value, enum.Enum):
        yield str(value.value)
    elif isinstance(value, str):
        yield value
    elif isinstance(value, (int, float, bool, dt.datetime, type(None))):
        return
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k, seen)
            yield from _strings(v, seen)
    elif isinstance(value, (list, tuple, set)):
        for v in value:
            yield from _strings(v, seen)
    elif hasattr(value, "__dict__"):
        yield from _strings(vars(value), seen)
    else:
        yield str(value)


def _stored_texts(azurite, container):
    """{where: [strings]} for the container and every blob in it, as the service reports them."""
    client = azurite.service().get_container_client(container)
    out = {"container": list(_strings(client.get_container_properties()))}
    listed = list(client.list_blobs(include=["metadata", "copy", "snapshots",
                                             "uncommittedblobs", "tags"]))
    assert listed, "the run wrote nothing"
    for item in listed:
        blob = client.get_blob_client(item.name, snapshot=item.snapshot)
        texts = list(_strings(item))
        try:
            texts += list(_strings(blob.get_blob_properties()))
        except Exception as error:   # an uncommitted-only blob has no properties to read
            texts.append(str(error))
        out[item.name + (f"@{item.snapshot}" if item.snapshot else "")] = texts
    return out


def _assert_nothing_secret(azurite, container, secrets):
    stored = _stored_texts(azurite, container)
    copy_sources = [t for texts in stored.values() for t in texts if "://" in t]
    for where, texts in stored.items():
        for text in texts:
            assert "sig=" not in text, f"a SAS is stored on {where}: {text[:120]}"
            for secret in secrets:
                assert secret not in text, f"a secret is stored on {where}"
    return stored, copy_sources


@pytest.fixture
def corpus_on_azure(azurite, container, corpus_dir):
    client = azurite.service().get_container_client(container)
    for path in sorted(corpus_dir.glob("*.jsonl")):
        client.upload_blob(f"corpus/{path.name}", path.read_bytes(), overwrite=True)
    return azurite.url(container, "corpus")


def _committed_shards(azurite, container):
    client = azurite.service().get_container_client(container)
    return [b.name for b in client.list_blobs(name_starts_with="out/")
            if b.name.endswith(".bin") and not indexed.is_temporary_name(b.name)
            and "/_" not in b.name]


def test_tokenize_with_sas_stores_no_sas(azurite, container, corpus_on_azure, hf_tokenizer):
    sas = azurite.container_sas(container)
    sig = dict(p.split("=", 1) for p in sas.split("&"))["sig"]
    argv = _argv(f"{corpus_on_azure}?{sas}", f"{azurite.url(container, 'out')}?{sas}",
                 hf_tokenizer, "--azure-auth", "sas")
    assert tokenize.run(argv) == 0
    assert azure.method_for(azurite.url(container, "out")) == "sas"
    assert len(_committed_shards(azurite, container)) == 3
    _assert_nothing_secret(azurite, container, {sas, sig, unquote(sig)})


def test_tokenize_with_account_key_stores_no_key(azurite, container, corpus_on_azure,
                                                 hf_tokenizer):
    key = azure.parse_connection_string(azurite.connection_string)["accountkey"]
    argv = _argv(corpus_on_azure, azurite.url(container, "out"), hf_tokenizer,
                 "--azure-account-key", key, "--azure-account-name", "devstoreaccount1",
                 "--azure-auth", "account-key")
    assert tokenize.run(argv) == 0
    assert azure.method_for(azurite.url(container, "out")) == "account-key"
    assert len(_committed_shards(azurite, container)) == 3
    _assert_nothing_secret(azurite, container, {key})


@pytest.fixture
def sas_configured(azurite, container):
    sas = azurite.container_sas(container)
    azure.configure_from_options({"azure_sas_token": sas, "azure_auth": "sas",
                                  "azure_block_size_mb": 0.0625},
                                 paths=[azurite.url(container)])
    return azurite.url(container), sas


@pytest.mark.parametrize("size", [0, 1, 200_000])
def test_replace_with_sas_commits_the_exact_bytes_and_stores_no_sas(azurite, container,
                                                                     sas_configured, size):
    """The commit itself, over sizes that take no block, one block and several blocks (the
    streamed copy moves 64 KiB blocks here), onto a name that already exists."""
    url, sas = sas_configured
    fs, inner = fsutil.filesystem_and_path(url)
    data = os.urandom(size)
    with fsutil.open_file(fsutil.join(url, "tmp.bin"), "wb") as f:
        f.write(data)
    fsutil.write_bytes_atomic(fsutil.join(url, "final.bin"), b"old content")
    fsutil.replace(fs, f"{inner}/tmp.bin", f"{inner}/final.bin")
    assert fsutil.read_bytes(fsutil.join(url, "final.bin")) == data
    client = azurite.service().get_container_client(container)
    assert [b.name for b in client.list_blobs()] == ["final.bin"]
    _assert_nothing_secret(azurite, container, {sas})


def test_replace_with_sas_keeps_the_previous_blob_when_the_source_is_gone(
        azurite, container, sas_configured):
    url, _ = sas_configured
    fs, inner = fsutil.filesystem_and_path(url)
    fsutil.write_bytes_atomic(fsutil.join(url, "final.bin"), b"old content")
    with pytest.raises(FileNotFoundError):
        fsutil.replace(fs, f"{inner}/absent.bin", f"{inner}/final.bin")
    assert fsutil.read_bytes(fsutil.join(url, "final.bin")) == b"old content"


def test_writer_on_azure_with_sas_stores_no_sas(azurite, container, sas_configured):
    """The indexed writer's own commit (temporary name, then replace) goes the same way."""
    url, sas = sas_configured
    prefix = fsutil.join(url, "ds", "en_text_document")
    rng = np.random.default_rng(5)
    docs = [rng.integers(0, 60000, size=int(n)).tolist() for n in rng.integers(0, 300, 500)]
    indexed.write_documents(prefix, docs, dtype=np.uint16)
    assert indexed.validate(prefix, check_name=False).ok
    _assert_nothing_secret(azurite, container, {sas})


class _FakeBlob:
    """Just enough of an aio BlobClient to watch the server-side path, which Azurite lacks
    (it answers Put Block From URL with 501)."""

    account_name = "acct"

    def __init__(self, url, size=0, put_block_from_url=True):
        self.url, self.size, self.calls = url, size, []
        self.put_block_from_url = put_block_from_url

    async def get_blob_properties(self):
        from types import SimpleNamespace
        return SimpleNamespace(size=self.size, etag="e", content_settings=None, metadata={})

    async def stage_block_from_url(self, block_id, source_url, source_offset, source_length):
        if not self.put_block_from_url:
            from azure.core.exceptions import HttpResponseError
            error = HttpResponseError(message="APINotImplemented")
            error.status_code = 501
            raise error
        self.calls.append(("from_url", block_id, source_url, source_offset, source_length))

    async def stage_block(self, block_id, data):
        self.calls.append(("stage", block_id, len(data)))

    async def download_blob(self, offset, length, **kwargs):
        class _Download:
            async def readall(self):
                return b"x" * length
        return _Download()

    async def commit_block_list(self, ids, content_settings=None, metadata=None):
        self.calls.append(("commit", list(ids)))


@pytest.mark.parametrize("service_has_it", [True, False])
def test_commit_by_blocks_stages_ranges_then_commits_once(monkeypatch, service_has_it):
    import asyncio

    from dataio.azure import commit

    monkeypatch.setattr(commit, "BLOCK_FROM_URL_BYTES", 1000)
    monkeypatch.setattr(azure.STATE, "plan", azure.AzurePlan(block_size=1000))
    source = _FakeBlob("https://acct.blob.core.windows.net/c/.x.tmp?sv=1&sig=S", size=2500)
    target = _FakeBlob("https://acct.blob.core.windows.net/c/x?sv=1&sig=S",
                       put_block_from_url=service_has_it)
    asyncio.run(commit._commit_by_blocks(source, target, "c/.x.tmp", "c/x"))
    *staged, commit = target.calls
    kind = "from_url" if service_has_it else "stage"
    assert [c[0] for c in staged] == [kind] * 3 and commit[0] == "commit"
    ids = [c[1] for c in staged]
    assert commit[1] == ids and len(set(ids)) == 3 and len({len(i) for i in ids}) == 1
    if service_has_it:   # the SAS goes in the request's copy source only, ranges cover the blob
        assert [(c[2], c[3], c[4]) for c in staged] == [
            (source.url, 0, 1000), (source.url, 1000, 1000), (source.url, 2000, 500)]
    else:
        assert [c[2] for c in staged] == [1000, 1000, 500]
    assert azure.STATE.block_from_url.get("acct", True) is service_has_it
