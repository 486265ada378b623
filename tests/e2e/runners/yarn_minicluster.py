"""A real YARN cluster on this machine for the Spark-on-YARN test (test_spark_yarn.py): Hadoop's
MiniYARNCluster (a ResourceManager and one NodeManager in one JVM, ``YarnMiniCluster.java``
beside this file), from what ``scripts/setup.d/45-yarn.sh`` provisioned under
``$CACHE/yarn`` (hadoop-minicluster's jars from Maven Central, the launcher class compiled).

It runs inside a private network namespace that has only loopback (the ResourceManager, the
NodeManager and the Spark/Beam servers in its containers bind every interface), binds free
ports, uses the local file system as the default one (no HDFS: the tests' files are the
cluster's), and writes ``yarn-site.xml`` and ``core-site.xml`` into :attr:`conf_dir`, the
HADOOP_CONF_DIR a client (spark-submit) needs; clients run in the namespace through
:meth:`run`. The JVM is stopped by PID (SIGTERM: its shutdown hook stops the NodeManager, which
kills its containers); whatever else still runs in the namespace is killed with it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from tests.clusters.local_spark import JAVA17_OPENS, Netns

LAUNCHER = "YarnMiniCluster"


def yarn_home(cache_dir: str) -> str:
    return os.path.join(cache_dir, "yarn")


def missing(cache_dir: str) -> list[str]:
    """What of the cluster is not provisioned (empty when it can start)."""
    home = yarn_home(cache_dir)
    out = []
    if not os.path.isfile(os.path.join(home, ".installed")):
        out.append(f"hadoop-minicluster's jars ({home}/lib)")
    if not os.path.isfile(os.path.join(home, "classes", f"{LAUNCHER}.class")):
        out.append(f"the {LAUNCHER} class ({home}/classes)")
    return out


def java_home() -> str | None:
    """The JDK the NodeManager's containers start (YARN passes JAVA_HOME to them)."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return os.path.dirname(os.path.dirname(os.path.realpath(java))) if java else None


class ClusterError(RuntimeError):
    pass


class LocalYarn:
    def __init__(self, workdir: str, *, cache_dir: str, netns: str, memory_mb: int = 4096,
                 vcores: int = 4):
        self.workdir = os.path.abspath(workdir)
        self.home = yarn_home(os.path.abspath(cache_dir))
        self.netns_name = netns
        self.memory_mb, self.vcores = memory_mb, vcores
        self.conf_dir = os.path.join(self.workdir, "hadoop-conf")
        self.log_path = os.path.join(self.workdir, "yarn.log")
        self.rm_address: str | None = None
        self._netns: Netns | None = None
        self._proc: subprocess.Popen | None = None
        self.seconds_to_start: float | None = None

    def env(self) -> dict:
        """What a YARN client (spark-submit) needs to reach this cluster."""
        return {**os.environ, "HADOOP_CONF_DIR": self.conf_dir, "JAVA_HOME": java_home()}

    def run(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        """``argv`` inside the cluster's network namespace."""
        kwargs.setdefault("env", self.env())
        return subprocess.run(self._netns.prefix() + list(argv), **kwargs)

    def yarn_cli(self, bin_dir: str) -> str:
        """Write ``bin_dir/yarn``: Hadoop's ``yarn`` command for this cluster (the real client
        classes of the minicluster's jars, launched as Hadoop's bin/yarn launches them, with
        the cluster's configuration first on the class path). Returns its path."""
        os.makedirs(bin_dir, exist_ok=True)
        path = os.path.join(bin_dir, "yarn")
        with open(path, "w", encoding="utf-8") as f:
            f.write("#!/bin/sh\n"
                    'case "$1" in\n'
                    "  logs) shift; class=org.apache.hadoop.yarn.client.cli.LogsCLI ;;\n"
                    "  *) class=org.apache.hadoop.yarn.client.cli.ApplicationCLI ;;\n"
                    "esac\n"
                    f'exec "{java_home()}/bin/java" -Xmx256m {JAVA17_OPENS} '
                    f'-cp "{self.conf_dir}:{self.home}/lib/*" '
                    '"$class" "$@"\n')
        os.chmod(path, 0o755)
        return path

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """``argv`` started inside the cluster's network namespace."""
        kwargs.setdefault("env", self.env())
        return subprocess.Popen(self._netns.prefix() + list(argv), **kwargs)

    def start(self, timeout: float = 180.0) -> "LocalYarn":
        t0 = time.monotonic()
        os.makedirs(self.workdir, exist_ok=True)
        self._netns = Netns(self.netns_name)
        argv = ["java", "-Xmx768m", *JAVA17_OPENS.split(),
                # Hadoop's test utilities put their scratch data under test.build.data.
                f"-Dtest.build.data={self.workdir}/data",
                "-cp", f"{self.home}/classes:{self.home}/lib/*", LAUNCHER,
                self.conf_dir, str(self.memory_mb), str(self.vcores)]
        try:
            with open(self.log_path, "ab") as log:
                # MiniYARNCluster keeps its local and log dirs under ./target.
                self._proc = subprocess.Popen(self._netns.prefix() + argv, stdout=log,
                                              stderr=subprocess.STDOUT, env=self.env(),
                                              cwd=self.workdir, start_new_session=True)
            self._wait_ready(deadline=t0 + timeout)
        except BaseException:
            self.stop()
            raise
        self.seconds_to_start = time.monotonic() - t0
        return self

    def _wait_ready(self, *, deadline: float) -> None:
        while time.monotonic() < deadline:
            with open(self.log_path, "rb") as f:
                for line in f.read().decode("utf-8", "replace").splitlines():
                    if line.startswith("READY "):
                        self.rm_address = line.split()[1]
                        return
            if self._proc.poll() is not None:
                raise ClusterError(f"the YARN minicluster exited with {self._proc.returncode}; "
                                   f"see {self.log_path}")
            time.sleep(0.5)
        raise ClusterError(f"the YARN minicluster did not start in time; see {self.log_path}")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` (a clean stop waits ~7 s for finished
        applications and ~10 s for an IPC server: nothing of this cluster outlives the test)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                pass
        if self._netns is not None:
            # Containers (the Spark driver and executors, the SDK workers) the NodeManager did
            # not take down live in other process groups, but in this namespace.
            self._netns.delete()
            self._netns = None

    def __enter__(self) -> "LocalYarn":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
