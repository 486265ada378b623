"""Storage faults as one line (issue 23 item 22), without a service: what the Azure SDK raises,
as an object in this process or as a worker's traceback text, becomes one line naming the cause
and the resume; retry settings come from the environment; outages are announced."""

import datetime as dt

import pytest

from runtime import errors, log
from dataio.azure import storage_errors


def _worker_text(cls: str, message: str, code: str) -> RuntimeError:
    """What the multi-process runner hands the driver: the worker's traceback as text."""
    return RuntimeError(
        "Traceback (most recent call last):\n  File \"x.py\", line 1, in process\n"
        f"{cls}: {message}\nRequestId:1\nTime:2026-01-01T00:00:00Z\nErrorCode:{code}\n"
        "Content: <?xml ...>")


def test_unreachable_from_a_worker_is_one_line():
    found = errors.describe(_worker_text(
        "azure.core.exceptions.ServiceRequestError",
        "Cannot connect to host 127.0.0.1:1 ssl:default [Connect call failed]", "x"))
    assert found is not None, "reported as a bug"
    message, status = found
    assert status == 1 and message.startswith("storage unreachable")
    assert message.endswith(errors.RESUME_HINT)


def test_expired_sas_from_a_worker_says_so(monkeypatch):
    past = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    monkeypatch.setenv("AZURE_STORAGE_SAS_TOKEN", f"sv=2024-01-01&se={past}&sp=rw&sig=SECRET")
    from dataio.azure.state import STATE
    STATE.resolved["acct/c"] = ("sas", {})
    message, status = errors.describe(_worker_text(
        "azure.core.exceptions.ClientAuthenticationError",
        "Server failed to authenticate the request. Make sure the value of ...",
        "AuthenticationFailed"))
    assert status == 1
    assert message.startswith(f"SAS rejected: it expired at {past}"), message
    assert "SECRET" not in message and errors.RESUME_HINT in message


def test_sdk_exceptions_in_this_process_are_one_line():
    from azure.core.exceptions import ClientAuthenticationError, HttpResponseError

    message, _ = errors.describe(ClientAuthenticationError("Server failed to authenticate"))
    assert message.startswith("credential rejected: key rotated or token expired?"), message
    refused = HttpResponseError(message="This request is not authorized to perform this "
                                        "operation using this permission.")
    refused.status_code, refused.error_code = 403, "AuthorizationPermissionMismatch"
    message, _ = errors.describe(refused)
    assert message.startswith("access refused") and "403 AuthorizationPermissionMismatch" in message
    gone = HttpResponseError(message="The specified container does not exist.")
    gone.status_code, gone.error_code = 404, "ContainerNotFound"
    message, _ = errors.describe(gone)
    assert message.startswith("container gone mid-run") and errors.RESUME_HINT in message


def test_a_chained_storage_error_is_found_behind_a_library_wrapper():
    from azure.core.exceptions import ServiceResponseError

    try:
        try:
            raise ServiceResponseError("Connection reset by peer")
        except ServiceResponseError as error:   # adlfs wraps some failures like this
            raise RuntimeError("Failed to upload block") from error
    except RuntimeError as wrapped:
        message, status = errors.describe(wrapped)
    assert status == 1 and message.startswith("storage unreachable")


def test_retry_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(storage_errors.RETRIES_ENV, "7")
    monkeypatch.setenv(storage_errors.BACKOFF_ENV, "0.5")
    assert storage_errors.settings() == (7, 0.5)
    assert storage_errors.settings(at_most=2) == (2, 0.5)
    policy = storage_errors.retry_policy(asynchronous=True)
    assert policy.total_retries == 7
    monkeypatch.setenv(storage_errors.RETRIES_ENV, "many")
    with pytest.raises(errors.ConfigError, match=storage_errors.RETRIES_ENV):
        storage_errors.settings()


def test_an_outage_is_announced_when_retrying_starts_and_while_it_lasts(capsys, monkeypatch):
    log.setup("info")
    outage = storage_errors._Outage()
    outage.retrying("acct.blob.core.windows.net", "503 Server Busy", 5, 3.0)
    outage.retrying("acct.blob.core.windows.net", "503 Server Busy", 5, 3.0)   # too soon: quiet
    outage.last_said -= storage_errors.ANNOUNCE_EVERY_SECONDS   # as if 30 s had passed
    outage.retrying("acct.blob.core.windows.net", "503 Server Busy", 5, 3.0)
    outage.answered("acct.blob.core.windows.net")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("warning: storage at acct.blob.core.windows.net did not answer "
                               "(503 Server Busy); retrying, up to 5 times"), lines
    assert lines[1].startswith("warning: storage at acct.blob.core.windows.net still not "
                               "answering after "), lines
    assert lines[2].startswith("note: storage at acct.blob.core.windows.net answering again")
    assert len(lines) == 3


def test_a_container_never_seen_is_missing_not_gone_mid_run():
    """A 404 ContainerNotFound says "gone mid-run" only for a container this run checked at its
    start; one it never saw is a configuration error (exit 2), which a rerun cannot fix."""
    from types import SimpleNamespace

    from azure.core.exceptions import HttpResponseError

    from dataio.azure.state import STATE

    def gone(url):
        error = HttpResponseError(message="The specified container does not exist.")
        error.status_code, error.error_code = 404, "ContainerNotFound"
        error.response = SimpleNamespace(request=SimpleNamespace(url=url))
        return error

    url = "https://acct.blob.core.windows.net/nocontainer/out/.probe-1?sig=SECRET"
    message, status = errors.describe(gone(url))
    assert status == 2, message
    assert message.startswith("container 'nocontainer' does not exist in account acct"), message
    assert "az storage container create" in message and errors.RESUME_HINT not in message
    assert "SECRET" not in message
    STATE.resolved["acct/other"] = ("connection-string", {})   # another container: still missing
    assert errors.describe(gone(url))[1] == 2
    STATE.resolved["acct/nocontainer"] = ("connection-string", {})   # checked at the start
    message, status = errors.describe(gone(url))
    assert status == 1 and message.startswith("container gone mid-run"), message


def test_on_a_worker_a_rejected_sas_names_the_workers_environment_not_a_flag(monkeypatch):
    """A Spark executor or a TaskManager's SDK worker: the submitting command's flags never
    reach it, so its message names what does (issue 26 item 6)."""
    from dataio.azure.state import STATE
    monkeypatch.setattr(STATE, "on_worker", True)
    monkeypatch.setenv("AZURE_STORAGE_SAS_TOKEN", "sv=2024-01-01&sp=r&sig=SECRET")
    STATE.resolved["acct/c"] = ("sas", {})
    message, _ = errors.describe(_worker_text(
        "azure.core.exceptions.ClientAuthenticationError", "Server failed to authenticate.",
        "AuthenticationFailed"))
    assert "give the workers a valid SAS (AZURE_STORAGE_SAS_TOKEN in their environment)" in message
    assert "--azure" not in message
    STATE.resolved["acct/c"] = ("default", {})
    monkeypatch.delenv("AZURE_STORAGE_SAS_TOKEN")
    message, _ = errors.describe(_worker_text(
        "azure.core.exceptions.HttpResponseError", "This request is not authorized.",
        "AuthorizationPermissionMismatch"))
    assert "to the workers (their managed identity's role, or their environment)" in message


def test_only_a_process_away_from_the_command_is_a_worker_for_messages(monkeypatch):
    """The worker wording ("flags and `az login` on the submitting machine do not reach it")
    is for Spark executors and TaskManagers' SDK workers. The DirectRunner runs the DoFns in the
    command's own process, and --workers N's local workers inherit its environment: there the
    flags did reach, and the flags are the fix. The command's process used to turn into a
    "worker" as soon as a DoFn set up in it, so that its own later failures (metadata.json)
    named the nodes' managed identity instead of its flags."""
    from dataio import azure
    from dataio.azure.state import STATE, configure_worker
    from runtime import workers

    monkeypatch.delenv(workers.NOTES_ENV, raising=False)
    configure_worker()
    assert STATE.on_worker                      # an executor on a cluster node
    azure.reset()
    monkeypatch.setenv(workers.NOTES_ENV, "/tmp/notes")
    configure_worker()
    assert not STATE.on_worker                  # a local worker (runners/local_runner.py)
    azure.reset()
    monkeypatch.delenv(workers.NOTES_ENV)
    azure.configure_from_options({"azure_account_name": "acct"}, paths=[], check=False)
    configure_worker()
    assert not STATE.on_worker                  # the command's own process
