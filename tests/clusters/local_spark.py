"""A Spark standalone cluster (master + one worker) and an Apache Livy server on this machine,
for the tests and the benchmark of runners/spark.py (like tests/clusters/local_slurm.py for SLURM;
not shipped).

Everything comes from what ``scripts/setup.sh --test`` provisioned (Spark 3.5 from the
``pyspark`` wheel, Livy 0.7.1-incubating's jars from Maven Central) and binds 127.0.0.1 on
free ports. Spark's and Beam's Java servers (the drivers, executors and SDK harness services
a job starts) bind every interface whatever they are told, so with ``netns`` the whole cluster
runs inside a private network namespace that has only loopback (``ip netns``, needs root);
clients that must reach it (the launcher, spark-submit) run there too through :meth:`run` /
:meth:`popen`. Every process is a child started in its own process group and stopped by PID.

    python -m tests.clusters.local_spark --workdir /tmp/spark [--netns tbspark] [--no-livy]

starts one and keeps it up until Ctrl-C, printing its addresses.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

from runners.flink_cluster import free_port

# What Spark 3.5 itself passes to its JVMs on Java 17 (Livy's JVM needs the same).
JAVA17_OPENS = " ".join(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
    "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio",
    "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "sun.nio.ch",
    "sun.nio.cs", "sun.security.action", "sun.util.calendar"))


class ClusterError(RuntimeError):
    pass


def spark_home(cache_dir: str) -> str:
    return os.path.realpath(os.path.join(cache_dir, "spark", "home"))


def livy_lib(cache_dir: str) -> str:
    return os.path.join(cache_dir, "livy", "lib")


def missing(cache_dir: str) -> list[str]:
    """What of the cluster is not provisioned (empty when it can start)."""
    out = []
    if not os.path.isfile(os.path.join(spark_home(cache_dir), "bin", "spark-class")):
        out.append(f"Spark ({os.path.join(cache_dir, 'spark', 'home')})")
    if not os.path.isfile(os.path.join(livy_lib(cache_dir),
                                       "livy-server-0.7.1-incubating.jar")):
        out.append(f"Livy ({livy_lib(cache_dir)})")
    return out


class Netns:
    """A private network namespace with only loopback, up."""

    def __init__(self, name: str):
        self.name = name
        subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"],
                       check=True, capture_output=True)

    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def delete(self) -> None:
        """Kill whatever still runs inside (processes of other groups: executors, drivers,
        SDK workers), then remove the namespace."""
        pids = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True,
                              text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "delete", self.name], capture_output=True)


class LocalSpark:
    def __init__(self, workdir: str, *, cache_dir: str, netns: str | None = None,
                 worker_cores: int = 2, worker_memory: str = "6g", livy: bool = True,
                 livy_whitelist: tuple[str, ...] = (), node_env: dict | None = None):
        self.workdir = os.path.abspath(workdir)
        self.cache_dir = os.path.abspath(cache_dir)
        self.spark_home = spark_home(self.cache_dir)
        self.netns_name = netns
        self._netns: Netns | None = None
        self.worker_cores, self.worker_memory = worker_cores, worker_memory
        self.with_livy = livy
        self.livy_whitelist = tuple(os.path.abspath(p) for p in livy_whitelist)
        # The environment of the "nodes" (the master, the worker with the executors it starts,
        # Livy with the drivers it starts), not of clients: e.g. a storage credential.
        self.node_env = dict(node_env or {})
        self.master_port, self.webui_port = free_port(), free_port()
        self.worker_webui_port, self.livy_port = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{self.master_port}"
        self.webui_url = f"http://127.0.0.1:{self.webui_port}"
        self.livy_url = f"http://127.0.0.1:{self.livy_port}" if livy else None
        self.log_dir = os.path.join(self.workdir, "logs")
        self._procs: dict[str, subprocess.Popen] = {}
        self.timings: dict[str, float] = {}

    # --- environment ---------------------------------------------------------------------------
    def env(self) -> dict:
        """What a Spark client (spark-submit, Livy) needs to reach this cluster."""
        conf = os.path.join(self.workdir, "conf")
        return {**os.environ, "SPARK_HOME": self.spark_home, "SPARK_CONF_DIR": conf,
                "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": self.log_dir,
                "SPARK_PID_DIR": os.path.join(self.workdir, "pids"),
                "SPARK_WORKER_DIR": os.path.join(self.workdir, "work"),
                "PATH": os.path.join(self.spark_home, "bin") + os.pathsep + os.environ["PATH"]}

    def _prefix(self) -> list[str]:
        return self._netns.prefix() if self._netns else []

    def prefix(self) -> list[str]:
        """The command prefix that runs a program inside the cluster's network namespace
        (empty without one)."""
        return self._prefix()

    def run(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("env", self.env())
        return subprocess.run(self._prefix() + list(argv), **kwargs)

    def launcher(self, python: str, command: str, *argv: str, cwd: str, env: dict,
                 timeout: float) -> subprocess.CompletedProcess:
        """``python -m runners.spark COMMAND`` against this cluster's Livy (HDInsight's config,
        polling every second), in its namespace; output captured as text."""
        cmd = [python, "-m", "runners.spark", command, "--config",
               "runners/spark_hdinsight.yaml", "--set", f"livy_url={self.livy_url}",
               "--set", "poll_interval=1", *argv]
        return self.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        kwargs.setdefault("env", self.env())
        return subprocess.Popen(self._prefix() + list(argv), **kwargs)

    def _spawn(self, name: str, argv: list[str], env: dict) -> None:
        log = open(os.path.join(self.log_dir, f"{name}.log"), "ab")
        self._procs[name] = subprocess.Popen(self._prefix() + argv, stdout=log,
                                             stderr=subprocess.STDOUT, env=env,
                                             cwd=self.workdir, start_new_session=True)
        log.close()

    def _write_conf(self) -> None:
        conf = os.path.join(self.workdir, "conf")
        for d in (conf, self.log_dir, os.path.join(self.workdir, "work"),
                  os.path.join(self.workdir, "pids"), os.path.join(self.workdir, "livy-logs")):
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(conf, "spark-defaults.conf"), "w") as f:
            f.write("spark.driver.host 127.0.0.1\nspark.driver.bindAddress 127.0.0.1\n"
                    "spark.ui.enabled false\nspark.ui.showConsoleProgress false\n")
        with open(os.path.join(conf, "livy.conf"), "w") as f:
            f.write(f"livy.server.host = 127.0.0.1\nlivy.server.port = {self.livy_port}\n"
                    f"livy.spark.master = {self.master_url}\nlivy.spark.deploy-mode = client\n"
                    "livy.file.local-dir-whitelist = "
                    f"{','.join(self.livy_whitelist) or self.workdir}\n")

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self, timeout: float = 240.0) -> "LocalSpark":
        t0 = time.monotonic()
        self._write_conf()
        if self.netns_name:
            self._netns = Netns(self.netns_name)
        env = {**self.env(), **self.node_env}
        spark_class = os.path.join(self.spark_home, "bin", "spark-class")
        try:
            self._spawn("master", [spark_class, "org.apache.spark.deploy.master.Master",
                                   "--host", "127.0.0.1", "--port", str(self.master_port),
                                   "--webui-port", str(self.webui_port)], env)
            self._spawn("worker", [spark_class, "org.apache.spark.deploy.worker.Worker",
                                   "--host", "127.0.0.1", "--cores", str(self.worker_cores),
                                   "--memory", self.worker_memory,
                                   "--webui-port", str(self.worker_webui_port),
                                   "--work-dir", os.path.join(self.workdir, "work"),
                                   self.master_url], env)
            if self.with_livy:
                livy_env = {**env, "LIVY_CONF_DIR": os.path.join(self.workdir, "conf"),
                            "LIVY_LOG_DIR": os.path.join(self.workdir, "livy-logs")}
                self._spawn("livy", ["java", *JAVA17_OPENS.split(), "-cp",
                                     f"{livy_lib(self.cache_dir)}/*:{self.workdir}/conf",
                                     "org.apache.livy.server.LivyServer"], livy_env)
            self._wait(lambda: self._alive_workers() >= 1, "the Spark worker to register",
                       deadline=t0 + timeout)
            self.timings["spark"] = time.monotonic() - t0
            if self.with_livy:
                self._wait(lambda: self._get(f"{self.livy_url}/batches") is not None,
                           "Livy to answer", deadline=t0 + timeout)
                self.timings["livy"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def _get(self, url: str):
        argv = [sys.executable, "-c", "import sys, urllib.request; "
                "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())",
                url]
        proc = subprocess.run(self._prefix() + argv, capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            return None
        try:
            return json.loads(proc.stdout)
        except ValueError:
            return None

    def _alive_workers(self) -> int:
        state = self._get(f"{self.webui_url}/json/") or {}
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def _wait(self, ready, what: str, *, deadline: float) -> None:
        while time.monotonic() < deadline:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise ClusterError(f"{name} exited with {proc.returncode} while waiting for "
                                       f"{what}; see {self.log_dir}/{name}.log")
            if ready():
                return
            time.sleep(1.0)
        raise ClusterError(f"timed out waiting for {what}; logs in {self.log_dir}")

    def pids(self) -> list[int]:
        return [p.pid for p in self._procs.values() if p.poll() is None]

    def stop(self, timeout: float = 20.0) -> None:
        """Stop Livy, the worker (with the executors and drivers it started) and the master."""
        for name in ("livy", "worker", "master"):
            proc = self._procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # Executors, Livy's spark-submit drivers and their SDK workers live in other process
        # groups: whatever still runs inside the namespace goes with it.
        if self._netns is not None:
            self._netns.delete()
            self._netns = None
        self._procs.clear()

    def __enter__(self) -> "LocalSpark":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.clusters.local_spark", description=__doc__)
    p.add_argument("--workdir", required=True)
    p.add_argument("--cache-dir", default=".cache")
    p.add_argument("--netns", default=None)
    p.add_argument("--no-livy", action="store_true")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--memory", default="6g")
    args = p.parse_args(argv)
    cluster = LocalSpark(args.workdir, cache_dir=os.path.abspath(args.cache_dir),
                         netns=args.netns, worker_cores=args.cores, worker_memory=args.memory,
                         livy=not args.no_livy, livy_whitelist=(args.workdir,))
    cluster.start()
    print(f"master {cluster.master_url}\nlivy {cluster.livy_url}\nstarted in "
          f"{cluster.timings}", flush=True)
    try:
        while all(p.poll() is None for p in cluster._procs.values()):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
