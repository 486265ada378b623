"""Issue 23, item 3: a secret never has to sit on a command line.

A run against Azurite that gets its SAS from AZURE_STORAGE_SAS_TOKEN or from
--azure-sas-token-file works with two local worker processes, and no process of the job (the
driver, its shells, its workers) holds the SAS in /proc/PID/cmdline while it runs; a secret given
as a flag still works, with exactly one ``warning:`` line saying it is visible to every user.
"""

import os
import subprocess
import sys

import pytest

from dataio import indexed
from pipelines import tokenize
from tests.process_watch import run_watching_cmdlines

pytestmark = pytest.mark.slow  # whole-job runs against Azurite

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WARNING = "a secret on the command line"


def _argv(inputs, output, tokenizer, *extra):
    return [f"--input={inputs}", f"--output={output}", "--tokenizer-type", "HuggingFaceTokenizer",
            f"--tokenizer-model={tokenizer}", "--append-eod", "--log-interval", "0",
            *[str(e) for e in extra]]


def _shards(azurite, container, prefix) -> dict:
    client = azurite.service().get_container_client(container)
    return {b.name[len(prefix) + 1:]: client.download_blob(b.name).readall()
            for b in client.list_blobs(name_starts_with=prefix + "/")
            if b.name.endswith((".bin", ".idx")) and "/_" not in b.name
            and not indexed.is_temporary_name(b.name.rsplit("/", 1)[-1])}


@pytest.fixture
def on_azure(azurite, container, corpus_dir, hf_tokenizer):
    client = azurite.service().get_container_client(container)
    for local, prefix in ((corpus_dir, "corpus"), (hf_tokenizer, "tokenizer")):
        for name in sorted(os.listdir(local)):
            with open(os.path.join(local, name), "rb") as f:
                client.upload_blob(f"{prefix}/{name}", f, overwrite=True)
    return {"corpus": azurite.url(container, "corpus"),
            "tokenizer": azurite.url(container, "tokenizer"),
            "output": azurite.url(container, "out")}


@pytest.fixture(scope="module")
def local_shards(corpus_dir, hf_tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("local_run") / "out"
    assert tokenize.run(_argv(corpus_dir, out, hf_tokenizer)) == 0
    return {n: (out / n).read_bytes() for n in os.listdir(out) if n.endswith((".bin", ".idx"))}


def _clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "TOKENBEAM_"))}


@pytest.mark.parametrize("entry", ["env", "file"])
def test_secret_by_env_or_file_never_on_a_command_line(azurite, container, on_azure,
                                                        local_shards, tmp_path, entry):
    from urllib.parse import quote, unquote

    sas = azurite.container_sas(container)
    sig = sas.split("sig=")[1]
    secrets = {sas, sig, unquote(sig), quote(unquote(sig), safe="")}
    env = _clean_env()
    args = _argv(on_azure["corpus"], on_azure["output"], f"{on_azure['tokenizer']}/tokenizer.json",
                 "--workers", "2")
    if entry == "env":
        env["AZURE_STORAGE_SAS_TOKEN"] = sas
    else:
        secret_file = tmp_path / "sas"
        secret_file.write_text(sas + "\n")   # as `echo` writes it
        secret_file.chmod(0o600)
        args += ["--azure-sas-token-file", str(secret_file)]
    cmd = [sys.executable, "-m", "pipelines.tokenize", *args]
    status, stderr, seen, leaks = run_watching_cmdlines(cmd, secrets=secrets, cwd=ROOT, env=env)
    assert status == 0, stderr[-3000:]
    assert not leaks, f"a secret on a command line: {leaks}"
    workers = [line for line in seen.values() if b"worker_main" in line]
    assert workers, f"no worker process was seen: {sorted(seen.values())}"
    assert WARNING not in stderr
    assert _shards(azurite, container, "out") == local_shards


def test_secret_flag_works_and_warns_once(azurite, container, on_azure, local_shards):
    sas = azurite.container_sas(container)
    args = _argv(on_azure["corpus"], on_azure["output"], f"{on_azure['tokenizer']}/tokenizer.json",
                 "--azure-sas-token", sas)
    cmd = [sys.executable, "-m", "pipelines.tokenize", *args]
    done = subprocess.run(cmd, cwd=ROOT, env=_clean_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if WARNING in line]
    assert len(warnings) == 1, done.stderr
    assert warnings[0].startswith("warning: ") and "--azure-sas-token" in warnings[0]
    assert "AZURE_STORAGE_SAS_TOKEN" in warnings[0] and "--azure-sas-token-file" in warnings[0]
    assert sas.split("sig=")[1] not in done.stderr
    assert _shards(azurite, container, "out") == local_shards


@pytest.mark.parametrize("problem", ["missing", "empty", "both"])
def test_unusable_secret_file_is_one_line(azurite, container, on_azure, tmp_path, problem,
                                          capsys):
    path = tmp_path / "sas"
    if problem != "missing":
        path.write_text("\n" if problem == "empty" else azurite.container_sas(container))
    extra = ["--azure-sas-token-file", str(path)]
    if problem == "both":
        extra += ["--azure-sas-token", "sv=2024&sig=xxxxxxxxxxxx"]
    status = tokenize.run(_argv(on_azure["corpus"], on_azure["output"],
                                f"{on_azure['tokenizer']}/tokenizer.json", *extra))
    err = [line for line in capsys.readouterr().err.splitlines()
           if line.startswith("error:")]
    assert status == 2 and len(err) == 1, err
    assert "--azure-sas-token-file" in err[0] and str(path) in err[0]
