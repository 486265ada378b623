"""A throw-away SLURM cluster on this host, for tests, benchmarks and trying the launcher
(not shipped).

``LocalSlurm(workdir, nodes=2).start()`` runs munged, slurmctld and one slurmd per virtual node
(``node1..nodeN``) as child processes in the foreground, every file under ``workdir``, every
daemon on 127.0.0.1 with free ports; ``stop()`` terminates them by PID in reverse order. Clients
(sbatch, squeue, scontrol, ...) only need ``env()`` (it sets ``SLURM_CONF``). Needs Debian's
``slurm-wlm`` and ``munge`` packages (slurmd built with MULTIPLE_SLURMD, as Debian's is) and
root; no systemd, no cgroups (proctrack/linuxproc, task/none). /etc/slurm and /etc/munge are not
touched.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from contextlib import closing

from runners.flink_cluster import free_port
from tests.clusters.local_flink import stop_processes

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scontrol", "scancel")


def missing_binaries() -> list[str]:
    """Names of the SLURM/munge programs not on PATH (empty when the cluster can start)."""
    return [name for name in DAEMONS if shutil.which(name) is None]


def free_port_range(count: int, host: str = "127.0.0.1", attempts: int = 50) -> int:
    """First port of ``count`` consecutive ports that are free right now."""
    for _ in range(attempts):
        base = free_port(host)
        if base + count > 65535:
            continue
        ok = True
        for port in range(base, base + count):
            with closing(socket.socket()) as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError(f"no {count} consecutive free ports found on {host}")


def slurm_conf(*, workdir: str, nodes: int, ctld_port: int, slurmd_base_port: int,
               cpus: int, memory_mb: int, hostname: str) -> str:
    """The slurm.conf text for ``nodes`` virtual nodes on this host."""
    names = "node1" if nodes == 1 else f"node[1-{nodes}]"
    ports = (str(slurmd_base_port) if nodes == 1
             else f"{slurmd_base_port}-{slurmd_base_port + nodes - 1}")
    return "\n".join([
        "ClusterName=tokenbeam-test",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={workdir}/munge/munge.socket",
        f"StateSaveLocation={workdir}/state",
        f"SlurmdSpoolDir={workdir}/spool/%n",
        f"SlurmctldPidFile={workdir}/run/slurmctld.pid",
        f"SlurmdPidFile={workdir}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={workdir}/log/slurmctld.log",
        f"SlurmdLogFile={workdir}/log/slurmd-%n.log",
        # No cgroups here: track processes by parent PID and do not bind tasks.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "ReturnToService=2",
        # Short grace periods keep cancelled test jobs from lingering.
        "KillWait=10",
        "MinJobAge=600",
        f"NodeName={names} NodeHostname={hostname} NodeAddr=127.0.0.1 Port={ports} "
        f"CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        f"PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


class LocalSlurm:
    """munged + slurmctld + ``nodes`` slurmd processes; use as a context manager or start/stop."""

    def __init__(self, workdir: str, *, nodes: int = 2, cpus: int | None = None,
                 memory_mb: int | None = None):
        self.workdir = os.path.abspath(workdir)
        self.nodes = nodes
        self.cpus = cpus or os.cpu_count() or 1
        total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        self.memory_mb = memory_mb or max(1024, total_mb // nodes - 512)
        self.conf_path = os.path.join(self.workdir, "slurm.conf")
        self._procs: list[tuple[str, subprocess.Popen]] = []

    def env(self, base: dict | None = None) -> dict:
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = self.conf_path
        return env

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(os.path.join(self.workdir, "log", f"{name}.out"), "ab")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=self.env())
        log.close()
        self._procs.append((name, proc))

    def start(self, timeout: float = 60.0) -> "LocalSlurm":
        missing = missing_binaries()
        if missing:
            raise RuntimeError(f"SLURM/munge programs not found: {', '.join(missing)} "
                               "(install with scripts/setup.sh --test)")
        w = self.workdir
        for sub in ("munge", "state", "log", "run", *(f"spool/node{i}"
                                                      for i in range(1, self.nodes + 1))):
            os.makedirs(os.path.join(w, sub), exist_ok=True)
        os.chmod(os.path.join(w, "munge"), 0o700)
        key = os.path.join(w, "munge", "munge.key")
        if not os.path.exists(key):
            with open(key, "wb") as f:
                f.write(os.urandom(1024))
            os.chmod(key, 0o400)
        with open(self.conf_path, "w") as f:
            f.write(slurm_conf(workdir=w, nodes=self.nodes, ctld_port=free_port(),
                               slurmd_base_port=free_port_range(self.nodes),
                               cpus=self.cpus, memory_mb=self.memory_mb,
                               hostname=socket.gethostname()))
        # --force: munged otherwise refuses a socket directory that is not world-executable.
        self._spawn("munged", ["munged", "-F", "--force", f"--key-file={key}",
                               f"--socket={w}/munge/munge.socket",
                               f"--pid-file={w}/munge/munged.pid",
                               f"--log-file={w}/munge/munged.log",
                               f"--seed-file={w}/munge/munged.seed"])
        self._wait(lambda: os.path.exists(f"{w}/munge/munge.socket"), timeout, "munged")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf_path])
        for i in range(1, self.nodes + 1):
            self._spawn(f"slurmd-node{i}", ["slurmd", "-D", "-f", self.conf_path, "-N", f"node{i}"])
        self._wait(self._all_idle, timeout, "all nodes idle")
        return self

    def _all_idle(self) -> bool:
        for name, proc in self._procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with status {proc.returncode}; "
                                   f"see {self.workdir}/log/")
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True,
                             env=self.env())
        states = out.stdout.split()
        return out.returncode == 0 and len(states) == self.nodes and set(states) == {"idle"}

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"local SLURM: timed out waiting for {what}; "
                           f"logs in {self.workdir}/log/")

    def stop(self, timeout: float = 20.0) -> None:
        stop_processes([proc for _name, proc in self._procs], timeout=timeout)
        self._procs.clear()

    def __enter__(self) -> "LocalSlurm":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
