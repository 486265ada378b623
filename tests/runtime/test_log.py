"""runtime/log.py: one format for tokenbeam's messages; Beam's and other libraries' records only
at --log-level debug; the level passed on to worker processes."""

import logging
import os

import pytest

from runtime import log


@pytest.fixture(autouse=True)
def _restore(monkeypatch):
    monkeypatch.delenv(log.LEVEL_ENV, raising=False)
    root = logging.getLogger()
    own = logging.getLogger(log.ROOT_NAME)
    saved = (list(root.handlers), root.level, list(own.handlers), own.level, own.propagate)
    yield
    root.handlers[:], own.handlers[:] = saved[0], saved[2]
    root.setLevel(saved[1])
    own.setLevel(saved[3])
    own.propagate = saved[4]


def test_own_messages_one_format_on_the_current_stderr(capsys):
    log.setup("info")
    log.get("tokenize").info("workers: %d (%s)", 2, "--workers")
    log.get("tokenize").warning("careful")
    log.get("tokenize").debug("hidden")
    assert capsys.readouterr().err == "workers: 2 (--workers)\nwarning: careful\n"


def test_other_libraries_only_at_debug(capsys):
    log.setup("info")
    logging.getLogger("apache_beam.runners.worker").info("SDK harness chatter")
    logging.warning("apitools not found")  # what Beam's bigquery clients do at import
    assert capsys.readouterr().err == ""
    log.setup("debug")
    logging.getLogger("apache_beam.runners.worker").info("SDK harness chatter")
    logging.getLogger("apache_beam.runners.worker").debug("gRPC detail")
    log.get("progress").debug("ours")
    err = capsys.readouterr().err.splitlines()
    assert err == ["INFO apache_beam.runners.worker: SDK harness chatter", "debug: ours"]


def test_warning_level_hides_info(capsys):
    log.setup("warning")
    log.get("x").info("progress")
    log.get("x").error("FAILED a: b")
    assert capsys.readouterr().err == "error: FAILED a: b\n"


def test_level_travels_in_the_environment():
    log.setup("warning")
    assert os.environ[log.LEVEL_ENV] == "warning"
    assert log.setup() == "warning"  # a worker started from here
    os.environ[log.LEVEL_ENV] = "loud"
    assert log.setup() == log.DEFAULT_LEVEL


def test_worker_setup_leaves_the_root_logger_alone():
    root = logging.getLogger()
    before = list(root.handlers)
    log.setup("debug", others=False)
    assert root.handlers == before
    assert logging.getLogger(log.ROOT_NAME).level == logging.DEBUG


def test_a_cluster_worker_relays_no_line_per_azure_request():
    """A Flink or Spark SDK worker's root logger is Beam's, at INFO, relaying every record to
    the runner's log: the Azure SDK's record per request (URL, headers) is not among them
    unless --log-level debug."""
    logging.getLogger().setLevel(logging.INFO)
    per_request = logging.getLogger("azure.core.pipeline.policies.http_logging_policy")
    saved = per_request.level
    try:
        log.setup("info", others=False)
        assert not per_request.isEnabledFor(logging.INFO)
        assert per_request.isEnabledFor(logging.WARNING)
        log.setup("debug", others=False)
        assert per_request.isEnabledFor(logging.INFO)
    finally:
        per_request.setLevel(saved)


def test_setup_twice_keeps_one_handler():
    log.setup("info")
    log.setup("debug")
    # its own: pytest's caplog may have left its capture handlers on the logger (other tests)
    own = [h for h in logging.getLogger(log.ROOT_NAME).handlers if hasattr(h, "_tokenbeam")]
    assert len(own) == 1


def test_secrets_are_redacted(capsys):
    log.setup("info")
    log.get("x").info("reading %s", "https://a.blob.core.windows.net/c/x.jsonl?sv=1&sig=SECRETSIG")
    assert "SECRETSIG" not in capsys.readouterr().err


@pytest.mark.parametrize("argv, level", [
    ([], "info"), (["--log-level", "debug"], "debug"), (["--log-level=error"], "error"),
    (["--log-level", "loud"], "info"), (["--log-level"], "info"),
])
def test_level_from_argv(argv, level):
    assert log.level_from_argv(["--input", "x", *argv]) == level


def test_harness_level():
    assert log.harness_level("debug") == "INFO"
    assert log.harness_level("info") == "WARNING"
    with pytest.raises(ValueError):
        log.level_number("loud")
