"""A throw-away Flink cluster on this host, for the tests and benchmarks (not shipped).

``LocalFlink(home, workdir, taskmanagers=1, slots=2).start()`` runs a JobManager and
TaskManagers from a Flink distribution as child processes on 127.0.0.1 with free ports, its
configuration, logs and temporary files under ``workdir``; ``stop()`` (or leaving a ``with``
block) terminates them by PID. :func:`stop_processes` is the one way these helpers stop what
they started.
"""

from __future__ import annotations

import os
import subprocess

from runners.flink_cluster import flink_conf, free_port, wait_ready, write_conf_dir


def stop_processes(procs, *, timeout: float) -> None:
    """Stop the processes we started, newest first: SIGTERM all, wait up to ``timeout`` each,
    then SIGKILL what is left (never touches a process by name)."""
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.terminate()
    for proc in reversed(procs):
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class LocalFlink:
    """JobManager + ``taskmanagers`` TaskManagers on 127.0.0.1 as child processes (by PID)."""

    def __init__(self, home: str, workdir: str, *, taskmanagers: int = 1, slots: int = 2,
                 jobmanager_memory: str = "1024m", taskmanager_memory: str = "1280m"):
        self.home = os.path.abspath(home)
        self.workdir = os.path.abspath(workdir)
        self.taskmanagers = taskmanagers
        self.slots = slots
        self.rest_port = free_port()
        self.rest = f"127.0.0.1:{self.rest_port}"
        self.conf_dir = os.path.join(self.workdir, "conf")
        self._conf = flink_conf(home=self.home, address="127.0.0.1", rpc_port=free_port(),
                                rest_port=self.rest_port, blob_port=free_port(), slots=slots,
                                jobmanager_memory=jobmanager_memory,
                                taskmanager_memory=taskmanager_memory,
                                tmp_dir=os.path.join(self.workdir, "tmp"))
        self._procs: list[tuple[str, subprocess.Popen]] = []

    def _env(self) -> dict:
        env = dict(os.environ)
        env.update(FLINK_CONF_DIR=self.conf_dir, FLINK_LOG_DIR=os.path.join(self.workdir, "log"),
                   FLINK_PID_DIR=os.path.join(self.workdir, "pid"))
        return env

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(os.path.join(self.workdir, "log", f"{name}.out"), "ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self._env())
        self._procs.append((name, proc))

    def start(self, timeout: float = 120.0) -> "LocalFlink":
        for sub in ("log", "pid", "tmp"):
            os.makedirs(os.path.join(self.workdir, sub), exist_ok=True)
        write_conf_dir(self._conf, home=self.home, out=self.conf_dir)
        # start-foreground execs the JVM, so these PIDs are the JVMs themselves.
        self._spawn("jobmanager", [os.path.join(self.home, "bin", "jobmanager.sh"),
                                   "start-foreground"])
        for i in range(self.taskmanagers):
            self._spawn(f"taskmanager-{i}", [
                os.path.join(self.home, "bin", "taskmanager.sh"), "start-foreground",
                "-Dtaskmanager.host=127.0.0.1", "-Dtaskmanager.bind-host=127.0.0.1"])
        try:
            wait_ready(self.rest, taskmanagers=self.taskmanagers,
                       slots=self.taskmanagers * self.slots, timeout=timeout, procs=self._procs)
        except Exception:
            self.stop()
            raise
        return self

    def pids(self) -> list[int]:
        return [proc.pid for _name, proc in self._procs]

    def stop(self, timeout: float = 30.0) -> None:
        stop_processes([proc for _name, proc in self._procs], timeout=timeout)
        self._procs.clear()

    def __enter__(self) -> "LocalFlink":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
