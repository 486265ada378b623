"""The launchers' command lines end through runtime.errors.main: an anticipated failure is one
``error: ...`` line on stderr and its status, never a traceback."""

import os

import pytest
from runner_support import ROOT

from runners import flink, local, loopback, slurm
from runners.flink_cluster import free_port

FLINK_YAML = os.path.join(ROOT, "runners", "flink.yaml")


@pytest.mark.parametrize("command, argv, status, message", [
    (local.main, ["--config", FLINK_YAML, "--", "--input", "x"], 2, "needs a 'direct' config"),
    (slurm.main, ["submit", "--config", FLINK_YAML, "--", "--input", "x"], 2,
     "needs a 'flink_slurm' config"),
    (slurm.main, ["submit", "--time", "soon", "--", "--input", "x"], 2,
     "time = 'soon' is invalid"),
    (flink.main, ["submit", "--config", FLINK_YAML], 2, "no pipeline arguments"),
    (flink.main, ["submit", "--config", FLINK_YAML, "--", "--runner=DirectRunner"], 2,
     "--runner: set by the launcher"),
    (loopback.main, [], 2, "usage: python -m runners.loopback MODULE"),
], ids=["local", "slurm-kind", "slurm-value", "flink-no-args", "flink-reserved", "loopback"])
def test_a_bad_command_line_is_one_error_line_and_status_2(command, argv, status, message,
                                                           capsys):
    assert command(argv) == status
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_unreachable_flink_is_a_run_error(capsys):
    bound = free_port()   # nothing listens there
    argv = ["submit", "--config", FLINK_YAML, "--flink-master", f"127.0.0.1:{bound}", "--",
            "--input", "x"]
    assert flink.main(argv) == 1
    err = capsys.readouterr().err
    assert f"error: Flink at 127.0.0.1:{bound} is not reachable" in err and "Traceback" not in err


def test_a_free_port_is_drawn_below_the_kernels_ephemeral_range():
    """Ports for the servers a job starts (Flink's RPC, REST and BLOB servers) are drawn where
    the kernel never hands one to an outgoing connection meanwhile, and are free."""
    import socket

    from runners import flink_cluster

    low = flink_cluster._ephemeral_low()
    for _ in range(20):
        port = flink_cluster.free_port()
        assert 10000 <= port < low or low <= 11000
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free
