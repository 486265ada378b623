"""The output lease (issue 12, item 4, Azure side): :func:`dataio.azure.acquire_lease` on a real
Azurite. One holder at a time, the refusal names the holder, release frees it, and a holder that
dies stops renewing, so the service frees the lock by itself once the lease expires."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dataio import azure

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _holder(name: str) -> bytes:
    return json.dumps({"host": "test-host", "pid": name, "started": "2026-01-01T00:00:00Z"}
                      ).encode()


@pytest.fixture(params=["connection-string", "sas"])
def lock_url(request, azurite, container):
    if request.param == "sas":
        sas = azurite.container_sas(container)
        azure.configure_from_options({"azure_sas_token": sas, "azure_auth": "sas"},
                                     paths=[azurite.url(container)])
    else:
        azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                     paths=[azurite.url(container)])
    return azurite.url(container, "out/_lock")


def _blob(azurite, container):
    return azurite.service().get_blob_client(container, "out/_lock")


def test_second_acquire_is_refused_naming_the_holder(lock_url, azurite, container):
    lease = azure.acquire_lease(lock_url, holder=_holder("first"), duration_s=15)
    try:
        props = _blob(azurite, container).get_blob_properties()
        assert props.lease.state == "leased" and props.lease.duration == "fixed"
        assert _blob(azurite, container).download_blob().readall() == _holder("first")
        with pytest.raises(azure.LeaseHeldError) as refused:
            azure.acquire_lease(lock_url, holder=_holder("second"), duration_s=15)
        message = str(refused.value)
        assert '"pid": "first"' in message and "test-host" in message
        assert lock_url in message and "rerun" in message
        assert refused.value.holder == _holder("first").decode()
        assert _blob(azurite, container).download_blob().readall() == _holder("first"), \
            "the refused run did not overwrite the holder"
        assert lease.lost is None
        lease.check()
    finally:
        lease.release()


def test_release_frees_the_lock_and_is_idempotent(lock_url, azurite, container):
    with azure.acquire_lease(lock_url, holder=_holder("first"), duration_s=15) as lease:
        pass
    lease.release()   # twice is fine
    assert not _blob(azurite, container).exists(), "release deletes the lock blob"
    second = azure.acquire_lease(lock_url, holder=_holder("second"), duration_s=15)
    assert _blob(azurite, container).download_blob().readall() == _holder("second")
    second.release()


def test_a_stale_lock_blob_without_a_lease_is_taken_over(lock_url, azurite, container):
    """A lock blob left by a holder whose lease expired long ago (or written by hand)."""
    _blob(azurite, container).upload_blob(_holder("long gone"))
    with azure.acquire_lease(lock_url, holder=_holder("new"), duration_s=15):
        assert _blob(azurite, container).download_blob().readall() == _holder("new")


def test_out_of_range_durations_are_refused(lock_url):
    for duration in (-1, 0, 14, 61):
        with pytest.raises(ValueError, match="15 to 60"):
            azure.acquire_lease(lock_url, holder=b"x", duration_s=duration)


_HOLDING = """
import sys, time
from dataio import azure
lease = azure.acquire_lease(sys.argv[1], holder=sys.argv[2].encode(), duration_s=15)
print("held", flush=True)
time.sleep(600)   # renewing from the daemon thread until killed
"""


def test_lease_of_a_killed_holder_expires_and_can_be_taken(azurite, container):
    """The holder renews (still held well past its 15 s duration), is SIGKILLed mid-hold, and
    its lock becomes free once the lease runs out, with no one breaking it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "TOKENBEAM_"))}
    env["AZURE_STORAGE_CONNECTION_STRING"] = azurite.connection_string
    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[azurite.url(container)])
    url = azurite.url(container, "out/_lock")
    proc = subprocess.Popen([sys.executable, "-c", _HOLDING, url, _holder("victim").decode()],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "held", proc.stderr.read() if proc.poll() is not None else line
        acquired_at = time.monotonic()
        while time.monotonic() - acquired_at < 22:   # past its 15 s lease: only renewal keeps it
            time.sleep(1)
        with pytest.raises(azure.LeaseHeldError, match="victim"):
            azure.acquire_lease(url, holder=_holder("next"), duration_s=15)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    with pytest.raises(azure.LeaseHeldError, match="victim"):   # not freed by the kill itself
        azure.acquire_lease(url, holder=_holder("next"), duration_s=15)
    deadline = time.monotonic() + 90
    lease = None
    while lease is None:
        try:
            lease = azure.acquire_lease(url, holder=_holder("next"), duration_s=15)
        except azure.LeaseHeldError:
            assert time.monotonic() < deadline, "the dead holder's lease never expired"
            time.sleep(1)
    try:
        assert _blob(azurite, container).download_blob().readall() == _holder("next")
    finally:
        lease.release()


_HOLDING_OUTPUT_LOCK = """
import sys, time
from dataio import azure, lock
azure.configure_from_options({}, paths=[sys.argv[1]])
held = lock.acquire(sys.argv[1], run_id="victim-run")
print("held", flush=True)
time.sleep(600)
"""


def test_output_lock_of_a_run_killed_on_this_machine_is_taken_over_at_once(azurite, container,
                                                                           tmp_path):
    """A rerun after kill -9 on the same machine need not wait out the lease: the holder's PID
    is gone, so dataio.lock breaks the lease and takes over, naming the dead run."""
    from dataio import lock

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "TOKENBEAM_"))}
    env["AZURE_STORAGE_CONNECTION_STRING"] = azurite.connection_string
    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[azurite.url(container)])
    output = azurite.url(container, "out")
    proc = subprocess.Popen([sys.executable, "-c", _HOLDING_OUTPUT_LOCK, output], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "held", proc.stderr.read() if proc.poll() is not None else line
        with pytest.raises(lock.OutputLockedError, match="victim-run"):   # alive: refused
            lock.acquire(output, run_id="second")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    held = lock.acquire(output, run_id="rerun")   # at once, well inside the 60 s lease
    try:
        assert held.exclusive and "victim-run" in held.stale
        assert json.loads(_blob(azurite, container).download_blob().readall())["run_id"] == "rerun"
    finally:
        held.release()


def test_lease_held_by_another_host_is_not_broken(lock_url, azurite, container):
    """A holder on another machine cannot be checked from here: refused, never broken."""
    from dataio import lock

    other = json.loads(lock.holder_text("elsewhere"))
    other["host"] += "-other"
    lease = azure.acquire_lease(lock_url, holder=json.dumps(other).encode(), duration_s=15)
    try:
        with pytest.raises(azure.LeaseHeldError, match="elsewhere"):
            azure.acquire_lease(lock_url, holder=_holder("next"), duration_s=15,
                                is_stale=lock.holder_is_dead)
        lease.check()
    finally:
        lease.release()
