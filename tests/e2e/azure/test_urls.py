"""Every Azure URL form resolves to the same (filesystem, container/blob), and URLs coming back
from glob/list keep the form they were given in."""

import pytest

from dataio import azure
from dataio import fs as fsutil

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

ACCOUNT = "devstoreaccount1"  # Azurite's development account


@pytest.mark.parametrize("url, account, container, blob", [
    ("abfs://corpus/raw/a.jsonl", None, "corpus", "raw/a.jsonl"),
    ("az://corpus/raw/a.jsonl", None, "corpus", "raw/a.jsonl"),
    ("abfss://corpus@acct01.dfs.core.windows.net/raw/a.jsonl", "acct01", "corpus", "raw/a.jsonl"),
    ("abfs://corpus@acct01.blob.core.windows.net/raw/a.jsonl", "acct01", "corpus", "raw/a.jsonl"),
    ("https://acct01.blob.core.windows.net/corpus/raw/a.jsonl", "acct01", "corpus", "raw/a.jsonl"),
    ("https://acct01.dfs.core.windows.net/corpus/raw/a.jsonl", "acct01", "corpus", "raw/a.jsonl"),
    ("http://127.0.0.1:10000/devstoreaccount1/corpus/raw/a.jsonl", ACCOUNT, "corpus",
     "raw/a.jsonl"),
    ("abfs://corpus", None, "corpus", ""),
])
def test_parse_forms(url, account, container, blob):
    loc = azure.parse(url)
    assert (loc.account, loc.container, loc.blob) == (account, container, blob)
    assert loc.url() == url, "printing a location gives back the URL it came from"


def test_https_query_is_taken_as_a_sas_and_never_printed():
    loc = azure.parse("https://acct01.blob.core.windows.net/corpus/a.jsonl?sv=2026&sp=r&sig=QUJD")
    assert loc.sas == "sv=2026&sp=r&sig=QUJD"
    assert "sig" not in loc.url() and "sig" not in repr(loc)
    with pytest.raises(azure.AzurePathError, match="only a SAS token"):
        azure.parse("https://acct01.blob.core.windows.net/corpus/a.jsonl?foo=1")


def test_non_azure_urls_are_left_to_fsspec():
    for url in ["https://example.org/data.jsonl", "s3://bucket/x", "/local/path", "memory://x"]:
        assert azure.parse(url) is None
        assert not azure.is_azure_url(url)


def test_bad_host_and_missing_account_are_clear_errors(monkeypatch):
    with pytest.raises(azure.AzurePathError, match="not an Azure storage host"):
        azure.parse("abfss://corpus@example.org/x")
    with pytest.raises(azure.AzurePathError, match="no storage account named.*"
                                                   "AZURE_STORAGE_ACCOUNT_NAME"):
        fsutil.filesystem_and_path("abfs://corpus/x")


def test_all_forms_reach_the_same_blob(azurite, container, monkeypatch):
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    forms = [
        azurite.url(container, "d/x.txt"),
        f"abfs://{container}/d/x.txt",
        f"az://{container}/d/x.txt",
        f"abfss://{container}/d/x.txt",
    ]
    fsutil.write_bytes_atomic(forms[0], b"same bytes")
    for url in forms:
        fs, inner = fsutil.filesystem_and_path(url)
        assert inner == f"{container}/d/x.txt"
        assert fs.cat_file(inner) == b"same bytes"
        assert fsutil.read_bytes(url) == b"same bytes"
    # One resolution per account/container scope, whatever the form.
    assert azure.method_for(forms[1]) == "connection-string"


def test_glob_list_and_join_keep_the_given_form(azurite, container, monkeypatch):
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    base = azurite.url(container, "raw")
    for name in ("b.jsonl", "a.jsonl", "c.txt"):
        fsutil.write_bytes_atomic(fsutil.join(base, name), b"{}\n")
    assert fsutil.glob(fsutil.join(base, "*.jsonl")) == [fsutil.join(base, "a.jsonl"),
                                                         fsutil.join(base, "b.jsonl")]
    assert fsutil.glob(f"az://{container}/raw/*.jsonl") == [
        f"az://{container}/raw/a.jsonl", f"az://{container}/raw/b.jsonl"]
    assert fsutil.list_files(base) == [fsutil.join(base, n) for n in ("a.jsonl", "b.jsonl",
                                                                       "c.txt")]
    assert fsutil.list_files(fsutil.join(base, "absent")) == []
    sas = azurite.container_sas(container)
    assert fsutil.join(f"{base}?{sas}", "a.jsonl") == fsutil.join(base, "a.jsonl"), \
        "joined URLs never carry the SAS"
    azure.reset()
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    assert fsutil.read_bytes(fsutil.join(f"{base}?{sas}", "a.jsonl")) == b"{}\n", \
        "the SAS was remembered for its container"
    assert azure.method_for(base) == "sas"
