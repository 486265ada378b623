"""Flink cluster plumbing shared by the SLURM batch script, the launcher and the test fixtures.

- ``flink_conf(...)`` / ``write_conf_dir(...)``: a private ``FLINK_CONF_DIR`` (flat
  ``config.yaml`` + the distribution's console logging files) for one cluster, keeping the
  distribution's JVM options (Java 17 ``--add-opens``) and setting addresses, ports, slots and
  memory. Nothing is written into the Flink distribution itself.
- ``flink_version(home)``: the version of a distribution, from its ``lib/flink-dist-*.jar``.
- ``overview(rest)`` / ``wait_ready(rest, taskmanagers=N)``: poll the REST API;
  ``wait_port(address)`` / ``free_port()``: a port that answers, a port that is free now.

A throw-away cluster on this host for the tests and benchmarks is ``tests/clusters/local_flink.py``
(not shipped).

Command line (used by the sbatch script):
  python -m runners.flink_cluster conf --flink-home H --out DIR --address A --rpc-port P
      --rest-port P --blob-port P --slots N --jobmanager-memory M --taskmanager-memory M
      [--set key=value ...]
  python -m runners.flink_cluster wait --rest HOST:PORT --taskmanagers N [--timeout S]
  python -m runners.flink_cluster wait-port HOST:PORT [--timeout S]
  python -m runners.flink_cluster free-port [--host H]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
from contextlib import closing

import yaml

# Files from the distribution's conf/ that *-foreground start scripts read.
_LOGGING_FILES = ("log4j-console.properties", "logback-console.xml", "log4j.properties",
                  "logback.xml")

# Beam's batch translation on Flink asks for many network buffers per shuffle (sort-shuffle
# wants 512 by default): with the small TaskManagers of a test or a modest node that fails
# with "Insufficient number of network buffers". These keep the need small and the supply up.
DEFAULT_TUNING = {
    "taskmanager.network.sort-shuffle.min-buffers": 64,
    "taskmanager.memory.network.fraction": 0.15,
    # Beam's portable runner keeps state in the SDK workers, not in Flink managed memory.
    "taskmanager.memory.managed.fraction": 0.25,
    # Fail a job in a minute rather than five when slots never arrive.
    "slot.request.timeout": 60000,
}


def flink_version(home: str) -> str:
    """``"1.19.3"`` for a distribution whose lib/ holds flink-dist-1.19.3.jar."""
    jars = glob.glob(os.path.join(home, "lib", "flink-dist*.jar"))
    for jar in jars:
        m = re.search(r"flink-dist[-_a-z0-9.]*?-(\d+\.\d+(?:\.\d+)?)\.jar$", os.path.basename(jar))
        if m:
            return m.group(1)
    raise FileNotFoundError(f"{home}: not a Flink distribution (no lib/flink-dist-*.jar); "
                            "set flink.home to the folder holding bin/ and lib/")


def _flatten(tree, prefix: str = "") -> dict:
    flat = {}
    for key, value in (tree or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def shipped_conf(home: str) -> dict:
    """The distribution's own configuration, flattened (config.yaml, or flink-conf.yaml < 1.19)."""
    for name in ("config.yaml", "flink-conf.yaml"):
        path = os.path.join(home, "conf", name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                return _flatten(yaml.safe_load(f))
    return {}


def flink_conf(*, home: str, address: str, rpc_port: int, rest_port: int, blob_port: int,
               slots: int, jobmanager_memory: str, taskmanager_memory: str,
               tmp_dir: str | None = None, extra: dict | None = None) -> dict:
    """Flat configuration for one cluster whose JobManager listens on ``address``.

    ``tmp_dir``: where the JobManager and TaskManagers keep blobs (the job-server jar, ~160 MB
    per job), spill files and working directories; Flink's default is the system temp folder,
    which a killed cluster never cleans up."""
    shipped = shipped_conf(home)
    conf = {k: v for k, v in shipped.items() if k.startswith("env.java.opts")}
    conf.update(DEFAULT_TUNING)
    conf.update({
        "jobmanager.rpc.address": address,
        "jobmanager.bind-host": address,
        "jobmanager.rpc.port": rpc_port,
        "jobmanager.memory.process.size": jobmanager_memory,
        "rest.address": address,
        "rest.bind-address": address,
        "rest.port": rest_port,
        "blob.server.port": blob_port,
        # TaskManagers get their own host/bind-host as -D flags (one per node).
        "taskmanager.numberOfTaskSlots": slots,
        "taskmanager.memory.process.size": taskmanager_memory,
        "parallelism.default": slots,
    })
    if tmp_dir:
        for sep in (",", "|", os.pathsep):
            if sep in tmp_dir:
                raise ValueError(f"Flink temp folder {tmp_dir!r}: Flink splits io.tmp.dirs at "
                                 f"{sep!r}; choose a path without it")
        conf["io.tmp.dirs"] = tmp_dir
        conf["web.tmpdir"] = tmp_dir   # REST uploads; defaults to java.io.tmpdir, not the above
    conf.update(extra or {})
    return conf


def write_conf_dir(conf: dict, *, home: str, out: str) -> str:
    os.makedirs(out, exist_ok=True)
    for name in _LOGGING_FILES:
        src = os.path.join(home, "conf", name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(out, name))
    with open(os.path.join(out, "config.yaml"), "w", encoding="utf-8") as f:
        f.write(render_conf(conf))
    return out


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.\-]+")


def render_conf(conf: dict) -> str:
    """Flat ``key: value`` lines, which every Flink version reads. Strings are double-quoted
    YAML scalars with every control character escaped (JSON's escapes are YAML's), keys too
    unless plain: no value (a path holding a newline, ``: `` or ``#``) can end a line early or
    add a key."""
    lines = []
    for key, value in conf.items():
        key = str(key)
        shown_key = key if _PLAIN_KEY.fullmatch(key) else json.dumps(key)
        shown = json.dumps(value) if isinstance(value, str) else value
        lines.append(f"{shown_key}: {shown}\n")
    return "".join(lines)


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now, for a server started next. Drawn below the kernel's
    ephemeral range where there is room: a port the kernel hands out (bind to 0) is one it may
    hand again to any outgoing connection before the server binds it (Flink's BLOB server was
    refused so once, "Address already in use")."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(200) if low > 11000 else ():
        port = rng.randrange(10000, low)
        with closing(socket.socket()) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with closing(socket.socket()) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _ephemeral_low() -> int:
    """The lowest port of the kernel's ephemeral range (Linux; 32768 where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def overview(rest: str, timeout: float = 5.0) -> dict:
    url = rest if rest.startswith("http") else f"http://{rest}"
    with urllib.request.urlopen(f"{url}/overview", timeout=timeout) as resp:
        return json.load(resp)


def _check_alive(procs=(), pids=()) -> None:
    for name, proc in procs:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with status {proc.returncode}")
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise RuntimeError(f"process {pid} (a cluster component) has exited") from None
        except PermissionError:
            pass


def wait_ready(rest: str, *, taskmanagers: int, slots: int = 0, timeout: float = 180.0,
               procs=(), pids=()) -> dict:
    """Poll ``/overview`` until ``taskmanagers`` are registered offering ``slots`` slots in all
    (slots register just after their TaskManager); raise TimeoutError otherwise.

    ``procs``: (name, Popen) pairs, ``pids``: process ids; the exit of any ends the wait at once.
    """
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        _check_alive(procs, pids)
        try:
            last = overview(rest, timeout=2.0)
            if (last.get("taskmanagers", 0) >= taskmanagers
                    and last.get("slots-total", 0) >= slots):
                return last
        except (OSError, urllib.error.URLError, ValueError):
            pass
        time.sleep(0.5)
    raise TimeoutError(f"Flink at {rest}: {taskmanagers} TaskManager(s) / {slots} slots not "
                       "registered after "
                       f"{timeout:.0f} s (last overview: {last})")


def wait_port(address: str, *, timeout: float = 120.0, pids=()) -> None:
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _check_alive(pids=pids)
        try:
            with socket.create_connection((host, int(port)), timeout=2.0):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"nothing listening on {address} after {timeout:.0f} s")


def _kv(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set {item!r}: expected key=value")
        out[key] = yaml.safe_load(value) if value else ""
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runners.flink_cluster")
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("conf", help="write a FLINK_CONF_DIR")
    c.add_argument("--flink-home", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--address", required=True)
    for name in ("--rpc-port", "--rest-port", "--blob-port", "--slots"):
        c.add_argument(name, type=int, required=True)
    c.add_argument("--jobmanager-memory", required=True)
    c.add_argument("--taskmanager-memory", required=True)
    c.add_argument("--tmp-dir", default=None, help="Flink's io.tmp.dirs")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    w = sub.add_parser("wait", help="wait until N TaskManagers are registered")
    w.add_argument("--rest", required=True)
    w.add_argument("--taskmanagers", type=int, required=True)
    w.add_argument("--slots", type=int, default=0, help="slots in all")
    w.add_argument("--timeout", type=float, default=180.0)
    w.add_argument("--watch-pid", type=int, action="append", default=[],
                   help="fail at once when this process has exited")
    p = sub.add_parser("wait-port", help="wait until HOST:PORT accepts connections")
    p.add_argument("address")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--watch-pid", type=int, action="append", default=[])
    f = sub.add_parser("free-port", help="print a port that is free now")
    f.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "conf":
            conf = flink_conf(home=args.flink_home, address=args.address,
                              rpc_port=args.rpc_port, rest_port=args.rest_port,
                              blob_port=args.blob_port, slots=args.slots,
                              jobmanager_memory=args.jobmanager_memory,
                              taskmanager_memory=args.taskmanager_memory,
                              tmp_dir=args.tmp_dir, extra=_kv(args.set))
            write_conf_dir(conf, home=args.flink_home, out=args.out)
        elif args.cmd == "wait":
            info = wait_ready(args.rest, taskmanagers=args.taskmanagers, slots=args.slots,
                              timeout=args.timeout, pids=args.watch_pid)
            print(f"Flink {info.get('flink-version')} at {args.rest}: "
                  f"{info.get('taskmanagers')} TaskManager(s), {info.get('slots-total')} slots")
        elif args.cmd == "wait-port":
            wait_port(args.address, timeout=args.timeout, pids=args.watch_pid)
        else:
            print(free_port(args.host))
    except (TimeoutError, RuntimeError, FileNotFoundError, ValueError) as exc:
        print(f"runners.flink_cluster {args.cmd}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
