"""End to end on Azurite: `python -m pipelines.tokenize` with its input, tokenizer and output in
blob storage gives the same shards as the local run, leaks no secret into anything it writes or
prints, and a run killed mid-upload then rerun ends identical to a clean run."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dataio import fs as fsutil
from dataio import indexed
from pipelines import tokenize

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _argv(inputs, output, tokenizer, *extra):
    return [f"--input={inputs}", f"--output={output}", "--tokenizer-type", "HuggingFaceTokenizer",
            f"--tokenizer-model={tokenizer}", "--append-eod", "--log-interval", "0",
            *[str(e) for e in extra]]


def _upload(azurite, container, local_dir, prefix):
    client = azurite.service().get_container_client(container)
    for name in sorted(os.listdir(local_dir)):
        with open(os.path.join(local_dir, name), "rb") as f:
            client.upload_blob(f"{prefix}/{name}", f, overwrite=True)


def _azure_files(azurite, container, prefix):
    """{relative name: bytes} of every blob under ``prefix``."""
    client = azurite.service().get_container_client(container)
    return {b.name[len(prefix) + 1:]: client.download_blob(b.name).readall()
            for b in client.list_blobs(name_starts_with=prefix + "/")}


def _shards(files: dict) -> dict:
    return {name: data for name, data in files.items()
            if name.endswith((".bin", ".idx")) and not name.startswith("_")
            and not indexed.is_temporary_name(name)}


def _local_files(folder) -> dict:
    out = {}
    for root, _, names in os.walk(folder):
        for n in names:
            path = os.path.join(root, n)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = f.read()
    return out


@pytest.fixture(scope="module")
def local_run(corpus_dir, hf_tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("local_run") / "out"
    assert tokenize.run(_argv(corpus_dir, out, hf_tokenizer)) == 0
    return _local_files(out)


@pytest.fixture
def on_azure(azurite, container, corpus_dir, hf_tokenizer):
    _upload(azurite, container, corpus_dir, "corpus")
    _upload(azurite, container, hf_tokenizer, "tokenizer")
    return {"corpus": azurite.url(container, "corpus"),
            "tokenizer": azurite.url(container, "tokenizer"),
            "output": azurite.url(container, "out")}


def test_azure_in_and_out_equals_local(azurite, container, on_azure, local_run, monkeypatch):
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    assert tokenize.run(_argv(on_azure["corpus"], on_azure["output"],
                              on_azure["tokenizer"])) == 0
    remote = _azure_files(azurite, container, "out")
    assert _shards(remote) and _shards(remote) == _shards(local_run)
    assert not [n for n in remote if n.startswith("_temporary/")]
    meta_remote = json.loads(remote["metadata.json"])
    meta_local = json.loads(local_run["metadata.json"])
    assert meta_remote["totals"] == meta_local["totals"]
    assert meta_remote["dtype"] == meta_local["dtype"]
    # Inputs on blob storage are identified by etag, not mtime.
    assert all(i["size"] > 0 for i in meta_remote["inputs"])
    # A rerun skips every committed shard and changes nothing.
    assert tokenize.run(_argv(on_azure["corpus"], on_azure["output"],
                              on_azure["tokenizer"])) == 0
    assert _shards(_azure_files(azurite, container, "out")) == _shards(remote)


@pytest.mark.parametrize("entry", ["url", "flag"])
def test_no_secret_in_any_output_or_log(azurite, container, on_azure, local_run, hf_tokenizer,
                                        entry):
    """The SAS rides in the URLs themselves (the way azcopy users paste it) and, with "flag",
    in --azure-sas-token too: it must not reach stdout, stderr, the dry run, metadata.json,
    commit records or any other object written."""
    from urllib.parse import unquote

    sas = azurite.container_sas(container)
    sig = sas.split("sig=")[1]
    secrets = {sig, unquote(sig), sas}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "TOKENBEAM_"))}
    tokenizer = f"{on_azure['tokenizer']}/tokenizer.json?{sas}" if entry == "flag" \
        else hf_tokenizer
    args = _argv(f"{on_azure['corpus']}?{sas}", f"{on_azure['output']}?{sas}", tokenizer)
    args[args.index("--log-interval") + 1] = "50"   # progress lines too
    if entry == "flag":
        # two worker processes: the SAS reaches them through the inherited environment only
        args += ["--azure-sas-token", sas, "--workers", "2"]
    cmd = [sys.executable, "-m", "pipelines.tokenize", *args]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    written = _azure_files(azurite, container, "out")
    assert _shards(written) == _shards(local_run)
    dry = subprocess.run(cmd + ["--dry-run"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert dry.returncode == 0, dry.stderr[-3000:]
    texts = {"stdout": done.stdout, "stderr": done.stderr, "dry-run": dry.stdout + dry.stderr}
    texts.update({name: data.decode("utf-8", "replace") for name, data in written.items()
                  if not name.endswith((".bin", ".idx"))})
    assert "metadata.json" in texts and any(n.startswith("_commits/") for n in texts)
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, f"the SAS leaked into {where}"


_COUNT = 4   # copies of each corpus file: more shards than finalize commits in an instant


def test_killed_mid_upload_then_rerun_equals_clean_run(azurite, container, corpus_dir,
                                                       hf_tokenizer, tmp_path, monkeypatch):
    many = tmp_path / "many"
    many.mkdir()
    for k in range(_COUNT):
        for src in sorted(corpus_dir.glob("*.jsonl")):
            (many / f"{src.stem}_{k}.jsonl").write_bytes(src.read_bytes())
    clean = tmp_path / "clean"
    assert tokenize.run(_argv(many, clean, hf_tokenizer)) == 0

    _upload(azurite, container, many, "corpus")
    inputs, output = azurite.url(container, "corpus"), azurite.url(container, "killed")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "TOKENBEAM_"))}
    env["AZURE_STORAGE_CONNECTION_STRING"] = azurite.connection_string
    cmd = [sys.executable, "-m", "pipelines.tokenize",
           *_argv(inputs, output, hf_tokenizer, "--batch-documents", "40")]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    client = azurite.service().get_container_client(container)
    deadline = time.monotonic() + 300
    try:
        # Kill as soon as parts are being uploaded (or the first shard commits).
        while time.monotonic() < deadline and proc.poll() is None:
            if next(iter(client.list_blobs(name_starts_with="killed/")), None) is not None:
                break
            time.sleep(0.01)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    interrupted = _azure_files(azurite, container, "killed")
    assert "metadata.json" not in interrupted, "killed before the end"
    for name in _shards(interrupted):   # whatever is final-named is complete
        if name.endswith(".idx"):
            prefix = fsutil.join(output, name[:-4])
            monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
            assert indexed.validate(prefix).ok, name

    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    assert tokenize.run(_argv(inputs, output, hf_tokenizer)) == 0
    final = _azure_files(azurite, container, "killed")
    assert _shards(final) == _shards(_local_files(clean))
    assert not [n for n in final if n.startswith("_temporary/") or indexed.is_temporary_name(n)]
