"""Each credential kind against a real Azurite, the order they are tried in, the fast and clear
failure, and how a worker process gets the credential without it being pickled or printed."""

import json
import os
import pickle
import socket
import subprocess
import sys

import pytest

from dataio import azure
from runtime import redact
from dataio import fs as fsutil

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _roundtrip(url: str) -> None:
    fsutil.write_bytes_atomic(url, b"payload")
    assert fsutil.read_bytes(url) == b"payload"
    assert fsutil.glob(url) == [url.split("?", 1)[0]]


def _no_default_credential_network(monkeypatch):
    """DefaultAzureCredential's managed-identity probe goes to a closed loopback port instead of
    the cloud metadata address, so the whole chain runs for real and stays on this machine."""
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin")


def test_sas_token_flag(azurite, container):
    sas = azurite.container_sas(container)
    url = azurite.url(container, "sas/flag.txt")
    plan = azure.configure_from_options({"azure_sas_token": sas}, paths=[url])
    assert dict(plan.chosen) == {f"devstoreaccount1/{container}": "sas"}
    _roundtrip(url)


def test_sas_token_in_the_url_query(azurite, container):
    sas = azurite.container_sas(container)
    url = azurite.url(container, "sas/query.txt")
    plan = azure.configure_from_options({}, paths=[f"{url}?{sas}"])
    assert dict(plan.chosen) == {f"devstoreaccount1/{container}": "sas"}
    _roundtrip(f"{url}?{sas}")
    assert fsutil.read_bytes(url) == b"payload", "the container's SAS is remembered for its scope"


def test_sas_token_from_environment(azurite, container, monkeypatch):
    monkeypatch.setenv("AZURE_STORAGE_SAS_TOKEN", "?" + azurite.container_sas(container))
    url = azurite.url(container, "sas/env.txt")
    azure.configure_from_options({}, paths=[url])
    assert azure.method_for(url) == "sas"
    _roundtrip(url)


def test_read_only_sas_is_accepted_up_front_and_refused_on_write(azurite, container):
    sas = azurite.container_sas(container, read=True)
    url = azurite.url(container, "ro.txt")
    azure.configure_from_options({"azure_sas_token": sas}, paths=[url])
    with pytest.raises(Exception, match="not authorized|AuthorizationPermissionMismatch"):
        fsutil.write_bytes_atomic(url, b"x")


def test_account_key(azurite, container, monkeypatch):
    key = azurite.connection_string.split("AccountKey=")[1].split(";")[0]
    url = azurite.url(container, "key/flag.txt")
    azure.configure_from_options({"azure_account_key": key}, paths=[url])
    assert azure.method_for(url) == "account-key"
    _roundtrip(url)
    azure.reset()
    monkeypatch.setenv("AZURE_STORAGE_KEY", key)
    url = azurite.url(container, "key/env.txt")
    azure.configure_from_options({}, paths=[url])
    assert azure.method_for(url) == "account-key"
    _roundtrip(url)


def test_connection_string_flag_and_environment(azurite, container, monkeypatch):
    url = azurite.url(container, "conn/flag.txt")
    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[url])
    assert azure.method_for(url) == "connection-string"
    _roundtrip(url)
    azure.reset()
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    url = f"abfs://{container}/conn/env.txt"   # the account comes from the connection string
    azure.configure_from_options({}, paths=[url])
    assert azure.method_for(url) == "connection-string"
    _roundtrip(url)


def test_rejected_method_is_reported_and_the_next_one_used(azurite, container):
    bad_sas = azurite.container_sas(container).replace("sig=", "sig=AAAA")
    url = azurite.url(container, "order.txt")
    before = len(azurite.settled_responses())
    plan = azure.configure_from_options({"azure_sas_token": bad_sas,
                                         "azure_connection_string": azurite.connection_string},
                                        paths=[url])
    assert dict(plan.chosen)[f"devstoreaccount1/{container}"] == "connection-string"
    # one request per method tried: the rejected SAS was not retried
    assert azurite.settled_responses(before + 2)[before:] == [403, 200]


def test_wrong_key_fails_with_one_request_and_a_clear_message(azurite, container):
    url = azurite.url(container, "wrong.txt")
    wrong = "A" * 86 + "=="
    before = len(azurite.settled_responses())
    with pytest.raises(azure.AzureCredentialError) as info:
        azure.configure_from_options({"azure_account_key": wrong, "azure_auth": "account-key"},
                                     paths=[url])
    message = str(info.value)
    assert "account key" in message and "rejected by the service" in message
    assert "--azure-auth" in message and "AZURE_STORAGE_SAS_TOKEN" in message
    assert wrong not in message
    # The storage client's retry loop (exponential back-off, over a minute) was not entered:
    # Azurite answered exactly one request, with 403.
    assert azurite.settled_responses(before + 1)[before:] == [403]


def test_no_credential_tries_the_whole_chain_without_touching_storage(azurite, container,
                                                                      monkeypatch):
    _no_default_credential_network(monkeypatch)
    url = azurite.url(container, "none.txt")
    before = len(azurite.settled_responses())
    with pytest.raises(azure.AzureCredentialError) as info:
        azure.configure_from_options({}, paths=[url])
    message = str(info.value)
    for title in ("SAS token", "account key", "connection string", "DefaultAzureCredential"):
        assert title in message
    assert message.count("not provided") == 3
    # azure-identity's own report of the chain it tried
    assert "EnvironmentCredential" in message and "ManagedIdentityCredential" in message
    assert "AzureCliCredential" in message
    assert "az login" in message and "--azure_managed_identity_client_id" in message
    # The token was checked first, with the credential itself: no storage request was made, so
    # the storage SDK's retries on ClientAuthenticationError never started.
    assert azurite.settled_responses()[before:] == []


def test_plain_library_calls_fail_fast_too(azurite, container, monkeypatch):
    _no_default_credential_network(monkeypatch)
    with pytest.raises(azure.AzureCredentialError, match="No working Azure credential"):
        fsutil.exists(azurite.url(container, "x"))


def test_unreachable_endpoint_is_not_blamed_on_credentials(monkeypatch):
    port = _closed_port()
    url = f"http://127.0.0.1:{port}/devstoreaccount1/corpus/x"
    with pytest.raises(azure.AzureCredentialError, match=f"cannot reach .*127.0.0.1:{port}"):
        azure.configure_from_options({"azure_account_key": "A" * 86 + "=="}, paths=[url])


def test_forced_method_tries_only_that_one(azurite, container):
    url = azurite.url(container, "forced.txt")
    with pytest.raises(azure.AzureCredentialError) as info:
        azure.configure_from_options({"azure_connection_string": azurite.connection_string,
                                      "azure_auth": "sas"}, paths=[url])
    assert "SAS token" in str(info.value) and "connection string (" not in str(info.value)
    with pytest.raises(azure.AzurePathError, match="--azure-auth"):
        azure.configure_from_options({"azure_auth": "magic"}, paths=[url])


def test_secret_flags_are_taken_out_of_argv():
    argv = ["--input", "abfs://c/x", "--azure-sas-token", "sv=1&sig=S1",
            "--azure_connection_string=AccountName=a;AccountKey=K1", "--runner=FnApiRunner"]
    clean, secrets = redact.split_secret_flags(argv)
    assert clean == ["--input", "abfs://c/x", "--runner=FnApiRunner"]
    assert secrets == {"azure_sas_token": "sv=1&sig=S1",
                       "azure_connection_string": "AccountName=a;AccountKey=K1"}


def test_plan_is_picklable_and_secret_free_and_secrets_refuse_pickling(azurite, container):
    sas = azurite.container_sas(container)
    url = azurite.url(container, "plan.txt")
    plan = azure.configure_from_options({"azure_sas_token": sas,
                                         "azure_managed_identity_client_id": "client-1"},
                                        paths=[url])
    blob = pickle.dumps(plan)
    sig = sas.split("sig=")[1]
    assert sig.encode() not in blob and sig not in repr(plan) and sig not in plan.to_json()
    assert pickle.loads(blob) == plan == azure.AzurePlan.from_json(plan.to_json())
    with pytest.raises(TypeError, match="must not be pickled"):
        pickle.dumps(azure.STATE.secrets)


def test_worker_process_resolves_from_the_environment(azurite, container):
    """A worker started by the driver process (DirectRunner multi-processing, a local worker
    pool, sbatch --export=ALL) inherits the secret through the environment only."""
    sas = azurite.container_sas(container)
    url = azurite.url(container, "worker.txt")
    plan = azure.configure_from_options({"azure_sas_token": sas}, paths=[url])
    fsutil.write_bytes_atomic(url, b"from the driver")
    assert sas not in os.environ[azure.PLAN_ENV]
    code = ("import sys, pickle; from dataio import azure, fs; "
            "plan = pickle.loads(bytes.fromhex(sys.argv[1])); plan.apply(); "
            "print(fs.read_bytes(sys.argv[2]).decode()); "
            "print(azure.method_for(sys.argv[2]))")
    done = subprocess.run([sys.executable, "-c", code, pickle.dumps(plan).hex(), url],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["from", "the", "driver", "sas"]
    # Without the inherited variable the worker has nothing to use.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBEAM_AZURE")}
    env["AZURE_POD_IDENTITY_AUTHORITY_HOST"] = f"http://127.0.0.1:{_closed_port()}"
    done = subprocess.run([sys.executable, "-c", code, pickle.dumps(plan).hex(), url],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode != 0
    assert sas.split("sig=")[1] not in done.stderr + done.stdout


def test_worker_on_another_machine_uses_its_own_credential(azurite, container, monkeypatch):
    """A cluster node (a Spark executor, a TaskManager's worker) has its own credential in its
    environment, not the submitter's: the driver used a connection string for
    abfs://container/..., the node has only a SAS. The node reads the same blob (the account
    and its endpoint come in the plan), with its SAS; with nothing usable it fails at once,
    naming the driver's method and each one it tried."""
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    url = f"abfs://{container}/node.txt"
    plan = azure.configure_from_options({}, paths=[url])
    assert dict(plan.chosen) == {f"devstoreaccount1/{container}": "connection-string"}
    assert plan.default_account == "devstoreaccount1"
    assert dict(plan.endpoints) == {"devstoreaccount1": azurite.endpoint}
    assert "AccountKey" not in plan.to_json()
    fsutil.write_bytes_atomic(url, b"from the driver")
    code = ("import sys, pickle; from dataio import azure, fs; "
            "plan = pickle.loads(bytes.fromhex(sys.argv[1])); plan.apply(); "
            "print(fs.read_bytes(sys.argv[2]).decode()); "
            "print(azure.method_for(sys.argv[2]))")
    node = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "TOKENBEAM_AZURE"))}
    node["AZURE_POD_IDENTITY_AUTHORITY_HOST"] = f"http://127.0.0.1:{_closed_port()}"
    node["PATH"] = os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"
    done = subprocess.run([sys.executable, "-c", code, pickle.dumps(plan).hex(), url],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**node, "AZURE_STORAGE_SAS_TOKEN": azurite.container_sas(container)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["from", "the", "driver", "sas"]
    done = subprocess.run([sys.executable, "-c", code, pickle.dumps(plan).hex(), url],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, env=node)
    assert done.returncode != 0
    assert "connection string (AZURE_STORAGE_CONNECTION_STRING in the worker's environment): " \
        "not provided on this machine" in done.stderr, done.stderr[-2000:]
    assert "DefaultAzureCredential" in done.stderr
    # what helps on a node: its own identity or environment, not the submitter's flags
    assert "This is a worker: flags and `az login` on the submitting machine do not reach " \
        "it" in done.stderr
    assert "managed identity assigned to the cluster's nodes" in done.stderr
    assert "spark.executorEnv.NAME" in done.stderr
    assert "--azure-sas-token-file" not in done.stderr and "Provide one:" not in done.stderr


def test_secret_environment_is_json_of_what_flags_and_urls_gave(azurite, container):
    sas = azurite.container_sas(container)
    azure.configure_from_options({"azure_sas_token": sas}, paths=[azurite.url(container, "e")])
    assert json.loads(os.environ[azure.SECRETS_ENV])["sas"] == {"": sas}


def test_prepare_argv_leaves_no_secret_in_argv(azurite, container):
    sas = azurite.container_sas(container)
    url = azurite.url(container, "in")
    argv = [f"--input={url}?{sas}", "--output", f"{url}/o?{sas}", "--tokenizer-type", "HF",
            "--azure-sas-token", sas, "--append-eod"]
    clean, secrets = azure.prepare_argv(argv)
    assert clean == [f"--input={url}", "--output", f"{url}/o", "--tokenizer-type", "HF",
                     "--append-eod"]
    assert secrets == {"azure_sas_token": sas}
    assert azure.STATE.secrets.sas_by_scope[f"devstoreaccount1/{container}"] == sas
