"""Azure storage faults in the middle of a run (issue 23, items 19, 21, 22), on a real Azurite.

A run paused past its lease while another takes the output over commits nothing more and stops
with one line; taking over an expired lease says whose temporaries it removes and how old they
are; storage cut off, a SAS revoked, or a lock release failing after a first error each end in
one line naming the cause, with no traceback, retries announced while they happen."""

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dataio import azure
from runtime import errors, log
from dataio import lock as output_lock
from pipelines import tokenize
from pipelines.tokenize import driver
from pipelines import validate
from tests.clusters.local_azurite import ACCOUNT, DEV_KEY

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FAST_RETRIES = {"TOKENBEAM_AZURE_RETRIES": "2", "TOKENBEAM_AZURE_RETRY_BACKOFF": "0.05"}
HANG = 300  # a hang detector, not a timing


def _argv(inputs, output, tokenizer):
    return [f"--input={inputs}", f"--output={output}", "--tokenizer-type", "HuggingFaceTokenizer",
            f"--tokenizer-model={tokenizer}", "--append-eod", "--log-interval", "0"]


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "TOKENBEAM_"))}
    env.update(FAST_RETRIES)
    env.update(extra)
    return env


def _start_paused(cmd, env, stderr_path):
    """Start the job in its own session; return it once the fault hook has paused it."""
    err = open(stderr_path, "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err,
                            start_new_session=True)
    err.close()
    deadline = time.monotonic() + HANG
    while _state(proc.pid) != "T":
        if proc.poll() is not None:
            pytest.fail(f"the job ended (exit {proc.returncode}) before the fault hook paused "
                        f"it:\n{open(stderr_path).read()[-3000:]}")
        assert time.monotonic() < deadline, "the job never reached the pause"
        time.sleep(0.1)
    return proc


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return "?"
    return stat[stat.rindex(")") + 2]


def _resume(proc) -> tuple[int, str]:
    os.killpg(proc.pid, signal.SIGCONT)
    try:
        proc.wait(HANG)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return proc.returncode


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr and "(a bug" not in stderr, stderr[-4000:]
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr[-4000:]
    return lines[0]


def _records(azurite, container, prefix):
    client = azurite.service().get_container_client(container)
    return {b.name: (b.etag, client.download_blob(b.name).readall())
            for b in client.list_blobs(name_starts_with=f"{prefix}/_commits/")}


# --- item 19: a run that lost its output lease ------------------------------------------------


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["in-process", "2-workers"])
def test_paused_run_that_lost_its_lease_commits_nothing_more(azurite, container, corpus_dir,
                                                             hf_tokenizer, tmp_path, workers,
                                                             monkeypatch, capsys):
    """Run A pauses right before its first commit record (a frozen VM); its lease is taken from
    it (broken here, as expiry would), run B takes the output over and completes it; A resumes:
    it commits nothing, exits 1 with one line saying so, and B's output validates. With
    ``--workers 2`` the check is made in the worker processes."""
    output = azurite.url(container, "out")
    env = _env(AZURE_STORAGE_CONNECTION_STRING=azurite.connection_string,
               TOKENBEAM_FAULT="sink.before_commit_record:1", TOKENBEAM_FAULT_SIGNAL="STOP",
               TOKENBEAM_FAULT_COUNTER=str(tmp_path / "hits"))
    # With two workers the hook freezes both; the other one must not be frozen inside the
    # window a lease cannot close (between its renewal and the record's write, docs/azure.md "Storage
    # faults mid-run"), which a second shard's commit could be: one input, one shard.
    inputs = corpus_dir / "c0_web.jsonl" if workers else corpus_dir
    a = _start_paused([sys.executable, "-m", "pipelines.tokenize",
                       *_argv(inputs, output, hf_tokenizer), *workers], env,
                      tmp_path / "a.err")
    try:
        lock_blob = azurite.service().get_blob_client(container, "out/_lock")
        a_run = json.loads(lock_blob.download_blob().readall())["run_id"]
        from azure.storage.blob import BlobLeaseClient
        BlobLeaseClient(lock_blob).break_lease(lease_break_period=0)   # as if it had expired

        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
        assert tokenize.run(_argv(inputs, output, hf_tokenizer)) == 0
        taken = capsys.readouterr().err
        # item 21: whose lock and temporaries, and how old
        assert f"from run {a_run}" in taken and "whose lease ran out" in taken, taken
        committed = _records(azurite, container, "out")
        assert committed
        # (A paused inside the commit of an input of one item, which keeps no item record
        # before its commit: B tokenizes that item again, the one A had in flight)
        b_run = json.loads(azurite.service().get_blob_client(
            container, "out/metadata.json").download_blob().readall())["run_id"]
    finally:
        status = _resume(a)
    stderr = (tmp_path / "a.err").read_text()
    line = _one_error_line(stderr)
    assert status == 1, stderr[-3000:]
    assert f"lost the output's lease to run {b_run} " in line, line
    assert "nothing more is committed" in line and a_run in line, line
    assert _records(azurite, container, "out") == committed, "the paused run committed"
    assert validate.run([output]) == 0


def _blobs(azurite, container, prefix):
    client = azurite.service().get_container_client(container)
    return {b.name: b.etag for b in client.list_blobs(name_starts_with=prefix)}


def _paused_right_after_locking(azurite, container, corpus_dir, hf_tokenizer, tmp_path, *extra):
    """Run A, paused just after it took the output's lock (before any clean-up), whose lease is
    then broken (as expiry would): returns (A, its run id)."""
    output = azurite.url(container, "out")
    env = _env(AZURE_STORAGE_CONNECTION_STRING=azurite.connection_string,
               TOKENBEAM_FAULT="tokenize.locked:1", TOKENBEAM_FAULT_SIGNAL="STOP")
    a = _start_paused([sys.executable, "-m", "pipelines.tokenize",
                       *_argv(corpus_dir, output, hf_tokenizer), *extra], env, tmp_path / "a.err")
    lock_blob = azurite.service().get_blob_client(container, "out/_lock")
    a_run = json.loads(lock_blob.download_blob().readall())["run_id"]
    from azure.storage.blob import BlobLeaseClient
    BlobLeaseClient(lock_blob).break_lease(lease_break_period=0)
    return a, a_run


def _lost_and_touched_nothing(tmp_path, status, a_run):
    stderr = (tmp_path / "a.err").read_text()
    line = _one_error_line(stderr)
    assert status == 1, stderr[-3000:]
    assert "lost the output's lease to run " in line and a_run in line, line
    assert "removing the temporaries" not in stderr, stderr[-3000:]


def test_run_that_lost_its_lease_leaves_the_taking_runs_temporaries(azurite, container,
                                                                   corpus_dir, hf_tokenizer,
                                                                   tmp_path, monkeypatch):
    """Run A pauses right after taking the lock; its lease is broken; run B takes over and
    pauses before its first commit record; A resumes: it stops with one line and removes or
    changes none of B's files (it used to remove B's temporaries, and B failed on a missing
    part); B finishes."""
    output = azurite.url(container, "out")
    a, a_run = _paused_right_after_locking(azurite, container, corpus_dir, hf_tokenizer,
                                           tmp_path)
    try:
        env = _env(AZURE_STORAGE_CONNECTION_STRING=azurite.connection_string,
                   TOKENBEAM_FAULT="sink.before_commit_record:1", TOKENBEAM_FAULT_SIGNAL="STOP",
                   TOKENBEAM_FAULT_COUNTER=str(tmp_path / "b.hits"))
        b = _start_paused([sys.executable, "-m", "pipelines.tokenize",
                           *_argv(corpus_dir, output, hf_tokenizer)], env, tmp_path / "b.err")
        try:
            # B's work so far, which A must not touch: the final files of its first shard (an
            # input of one item is written straight to its final names, no part), B's temporaries
            # and parts where it has any; the lock, whose lease B holds, aside
            written = {name: etag for name, etag in _blobs(azurite, container, "out/").items()
                       if name != "out/_lock"}
            assert any(name.endswith(".bin") for name in written), written
            status = _resume(a)
            assert {name: etag for name, etag in _blobs(azurite, container, "out/").items()
                    if name != "out/_lock"} == written
        finally:
            b_status = _resume(b)
    finally:
        if a.poll() is None:
            _resume(a)
    _lost_and_touched_nothing(tmp_path, status, a_run)
    b_err = (tmp_path / "b.err").read_text()
    assert b_status == 0 and "Traceback" not in b_err, b_err[-3000:]
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    assert validate.run([output]) == 0


def test_overwrite_run_that_lost_its_lease_removes_no_records(azurite, container, corpus_dir,
                                                             hf_tokenizer, tmp_path, monkeypatch):
    """Run A (``--overwrite``) pauses right after taking the lock; its lease is broken; run B
    takes over and completes the output; A resumes: it stops with one line and removes none of
    B's commit records (it used to remove them all before noticing)."""
    output = azurite.url(container, "out")
    a, a_run = _paused_right_after_locking(azurite, container, corpus_dir, hf_tokenizer,
                                           tmp_path, "--overwrite")
    try:
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
        assert tokenize.run(_argv(corpus_dir, output, hf_tokenizer)) == 0
        before = _blobs(azurite, container, "out/")
        assert any("/_commits/" in name for name in before)
    finally:
        status = _resume(a)
    _lost_and_touched_nothing(tmp_path, status, a_run)
    assert _blobs(azurite, container, "out/") == before
    assert validate.run([output]) == 0


def test_lost_lease_names_the_run_that_took_the_output(azurite, container):
    """The check every commit makes (from any process): renewing by lease id fails once another
    run holds the lock, and the line names that run and when it took over."""
    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[azurite.url(container)])
    output = azurite.url(container, "out")
    first = output_lock.acquire(output, run_id="first-run")
    guard = first.guard()
    guard.verify()   # held: renews
    from azure.storage.blob import BlobLeaseClient
    lock_blob = azurite.service().get_blob_client(container, "out/_lock")
    BlobLeaseClient(lock_blob).break_lease(lease_break_period=0)
    second = output_lock.acquire(output, run_id="second-run")
    try:
        assert "first-run" in second.expired
        with pytest.raises(output_lock.OutputLostError) as lost:
            guard.verify()
        message = str(lost.value)
        assert "lost the output's lease to run second-run" in message, message
        assert " at 20" in message and "nothing more is committed" in message
        second.verify()
    finally:
        second.release()
        first.release()   # no longer ours: leaves nothing to delete, raises nothing


# --- item 21: taking over an expired lease says whose temporaries go --------------------------


def test_taking_over_an_expired_lease_names_the_runs_whose_temporaries_go(azurite, container,
                                                                         capsys):
    azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                 paths=[azurite.url(container)])
    log.setup("info")
    output = azurite.url(container, "out")
    old_run = "20260101T000000Z-0123abcd"
    old = output_lock.acquire(output, run_id=old_run)
    client = azurite.service().get_container_client(container)
    for run in (old_run, "20251231T000000Z-deadbeef"):
        client.upload_blob(f"out/_temporary/{run}/shard/000000-000000.bin", b"x")
    from azure.storage.blob import BlobLeaseClient
    BlobLeaseClient(client.get_blob_client("out/_lock")).break_lease(lease_break_period=0)
    held = output_lock.acquire(output, run_id="new-run")
    try:
        driver.take_over(output, held)
    finally:
        held.release()
        old.release()
    err = capsys.readouterr().err
    assert f"from run {old_run}, host " in err and "pid " in err, err
    assert "whose lease ran out" in err and " ago)" in err, err
    assert f"{old_run} (started " in err and "20251231T000000Z-deadbeef (started " in err, err
    assert not list(client.list_blobs(name_starts_with="out/_temporary/"))


# --- item 22: storage faults mid-run ------------------------------------------------------------


def test_storage_cut_off_mid_run_is_one_line(own_azurite, corpus_dir, hf_tokenizer, tmp_path):
    """Azurite stops while parts are being written: retries are announced, then one line naming
    the cause and the resume, exit 1, no traceback (the lock's release fails too, quietly)."""
    own_azurite.service().create_container("outage")
    output = own_azurite.url("outage", "out")
    env = _env(AZURE_STORAGE_CONNECTION_STRING=own_azurite.connection_string,
               TOKENBEAM_FAULT="sink.part_written:1", TOKENBEAM_FAULT_SIGNAL="STOP")
    run = _start_paused([sys.executable, "-m", "pipelines.tokenize",
                         *_argv(corpus_dir, output, hf_tokenizer)], env, tmp_path / "err")
    own_azurite.stop()
    status = _resume(run)
    stderr = (tmp_path / "err").read_text()
    line = _one_error_line(stderr)
    assert status == 1, stderr[-3000:]
    assert "storage unreachable for " in line and errors.RESUME_HINT in line, line
    assert any(l.startswith("warning: storage at ") and "retrying" in l
               for l in stderr.splitlines()), stderr[-3000:]


def test_sas_revoked_mid_run_is_one_line(azurite, container, corpus_dir, hf_tokenizer, tmp_path):
    """A SAS that stops being valid mid-run (its stored access policy moved into the past: what
    expiry looks like to the service) ends the run with one line saying so."""
    from azure.storage.blob import AccessPolicy, ContainerSasPermissions, generate_container_sas

    from tests.clusters.local_azurite import ACCOUNT, DEV_KEY

    perms = ContainerSasPermissions(read=True, write=True, list=True, delete=True, create=True,
                                    add=True)
    now = dt.datetime.now(dt.timezone.utc)
    policy = azurite.service().get_container_client(container)
    policy.set_container_access_policy({"run": AccessPolicy(
        permission=perms, start=now - dt.timedelta(minutes=5), expiry=now + dt.timedelta(hours=1))})
    sas = generate_container_sas(ACCOUNT, container, account_key=DEV_KEY, policy_id="run")
    env = _env(AZURE_STORAGE_SAS_TOKEN=sas, TOKENBEAM_FAULT="sink.part_written:1",
               TOKENBEAM_FAULT_SIGNAL="STOP")
    run = _start_paused([sys.executable, "-m", "pipelines.tokenize",
                         *_argv(corpus_dir, azurite.url(container, "out"), hf_tokenizer),
                         "--azure-auth", "sas"], env, tmp_path / "err")
    policy.set_container_access_policy({"run": AccessPolicy(   # the SAS is no longer valid
        permission=perms, start=now - dt.timedelta(minutes=5),
        expiry=now - dt.timedelta(minutes=1))})
    status = _resume(run)
    stderr = (tmp_path / "err").read_text()
    line = _one_error_line(stderr)
    assert status == 1, stderr[-3000:]
    assert "SAS rejected: expired?" in line and errors.RESUME_HINT in line, line
    assert "sig=" not in stderr


def test_a_failing_lock_release_never_hides_the_first_error(own_azurite, monkeypatch, capsys):
    for name, value in FAST_RETRIES.items():
        monkeypatch.setenv(name, value)
    own_azurite.service().create_container("release")
    azure.configure_from_options({"azure_connection_string": own_azurite.connection_string},
                                 paths=[own_azurite.url("release")])
    output = own_azurite.url("release", "out")

    def command(argv):
        with output_lock.acquire(output, run_id="first-error"):
            own_azurite.stop()   # the release will fail: storage is gone
            raise errors.RunError("the first error")

    log.setup("info")
    assert errors.main(command, []) == 1
    text = capsys.readouterr().err
    assert _one_error_line(text) == "error: the first error", text
    assert "could not release the lock" in text and "storage unreachable" in text, text


def test_lease_messages_reach_tokenbeams_log():
    from dataio.azure import lease

    assert lease._LOG.name.startswith(log.ROOT_NAME + ".")


# --- the start of a run: a wrong container, a SAS already expired ------------------------------


def _start(argv, env) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "pipelines.tokenize", *argv], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=HANG)
    return done.returncode, done.stderr


@pytest.mark.parametrize("which", ["output", "input"])
def test_a_container_that_does_not_exist_is_a_configuration_error(azurite, container, corpus_dir,
                                                                    hf_tokenizer, which):
    """A wrong container name fails at the start, exit 2, saying it does not exist (not "gone
    mid-run, rerun": a rerun cannot help)."""
    output = azurite.url("nocontainer" if which == "output" else container, "out")
    inputs = azurite.url("nocontainer", "in/*.jsonl") if which == "input" else corpus_dir
    status, stderr = _start(_argv(inputs, output, hf_tokenizer),
                            _env(AZURE_STORAGE_CONNECTION_STRING=azurite.connection_string))
    line = _one_error_line(stderr)
    assert status == 2, stderr[-3000:]
    assert line.startswith(f"error: container 'nocontainer' does not exist in account {ACCOUNT} "
                           f"({azurite.url('nocontainer')}/"), line
    assert "az storage container create --name nocontainer" in line, line
    assert "mid-run" not in line and errors.RESUME_HINT not in line, line
    assert not azurite.service().get_container_client("nocontainer").exists()


def test_a_sas_expired_before_the_start_says_when(azurite, container, corpus_dir, hf_tokenizer):
    """A SAS whose expiry (se=) has passed is named as the cause, with its expiry, up front."""
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    expiry = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) - dt.timedelta(hours=1)
    sas = generate_container_sas(ACCOUNT, container, account_key=DEV_KEY, expiry=expiry,
                                 permission=ContainerSasPermissions(read=True, write=True,
                                                                    list=True, create=True))
    status, stderr = _start(_argv(corpus_dir, f"{azurite.url(container, 'out')}?{sas}",
                                  hf_tokenizer), _env())
    line = _one_error_line(stderr)
    assert status == 2, stderr[-3000:]
    assert line.startswith(f"error: SAS rejected: it expired at "
                           f"{expiry.strftime('%Y-%m-%dT%H:%M:%SZ')}: give a valid SAS"), line
    assert "sig=" not in stderr
