"""dataio/lock.py's test of whether a lock's holder is provably dead (what lets a rerun on the
machine where a run was killed take over its Azure lease at once instead of waiting for it)."""

import json
import os
import socket
import subprocess
import sys

from dataio import lock


def _text(**changes) -> str:
    holder = json.loads(lock.holder_text("r1"))
    holder.update(changes)
    return json.dumps(holder)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_this_process_is_alive():
    assert json.loads(lock.holder_text("r1"))["pid"] == os.getpid()
    assert not lock.holder_is_dead(lock.holder_text("r1"))


def test_a_finished_process_of_this_machine_is_dead():
    assert lock.holder_is_dead(_text(pid=_dead_pid()))


def test_a_pid_now_used_by_another_process_is_dead():
    # our own PID, but recorded with another start time: the PID was reused
    assert lock.holder_is_dead(_text(pid_start=json.loads(lock.holder_text("r"))["pid_start"] + 1))


def test_another_host_or_boot_or_foreign_text_is_presumed_alive():
    dead = _dead_pid()
    assert not lock.holder_is_dead(_text(pid=dead, host=socket.gethostname() + "-other"))
    assert not lock.holder_is_dead(_text(pid=dead, boot_id="another-boot"))
    assert not lock.holder_is_dead(_text(pid=dead, boot_id=None))
    assert not lock.holder_is_dead("held by hand")
    assert not lock.holder_is_dead(json.dumps({"host": socket.gethostname()}))


class _CountingGuard:
    """Stands in for an OutputGuard (whose verify renews an Azure lease: tests/e2e/azure)."""

    def __init__(self):
        self.renewals = 0

    def verify(self):
        self.renewals += 1


def test_a_batch_renews_the_lease_first_and_then_once_per_period():
    guard = _CountingGuard()
    check = lock.renewing(guard, every=3600)
    for _ in range(5):
        check()
    assert guard.renewals == 1   # before the first request, then not again within the period
    always = lock.renewing(guard, every=0)
    always()
    always()
    assert guard.renewals == 3
    lock.renewing(None)()        # no guard (a local flock): nothing to renew
