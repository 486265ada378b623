"""Helpers shared by the runner tests, unit (tests/runners/) and end-to-end (tests/e2e/runners/),
imported by name (tests/ is on sys.path through tests/conftest.py; the clusters they start are in
tests/clusters)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".cache")
PYTHON = sys.executable


def submit_flink(*extra, marker="", timeout=480) -> subprocess.CompletedProcess:
    """``python -m runners.flink submit`` with runners/flink.yaml and the checkout's cache;
    ``marker`` goes into the environment every process of the run inherits."""
    cmd = [PYTHON, "-m", "runners.flink", "submit", "--config",
           os.path.join(ROOT, "runners/flink.yaml"), "--cache-dir", os.path.join(ROOT, ".cache"),
           *extra]
    env = dict(os.environ, TOKENBEAM_TEST_MARKER=marker)
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env=env)


def tokenize_args(corpus_dir, tokenizer, output) -> list[str]:
    return ["--input", os.path.join(str(corpus_dir), "*.jsonl"), "--output", str(output),
            "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", str(tokenizer),
            "--json-keys", "text", "--append-eod"]


def shards(folder) -> dict:
    """{file name: bytes} of the committed .bin/.idx files in ``folder``."""
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith((".bin", ".idx")):
            with open(os.path.join(folder, name), "rb") as f:
                out[name] = f.read()
    return out


def processes_with(marker: str) -> list[psutil.Process]:
    """Live processes whose command line or environment mentions ``marker`` (a tmp path)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
                continue
            text = " ".join(proc.info["cmdline"] or [])
            if marker in text or any(marker in v for v in proc.environ().values()):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def assert_no_processes_left(marker: str, *, grace: float = 30.0) -> None:
    deadline = time.monotonic() + grace
    left = processes_with(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = processes_with(marker)
    assert not left, "left running: " + "; ".join(
        f"{p.pid} {' '.join(p.cmdline())[:120]}" for p in left)


FLINK_TEMP_PREFIXES = ("flink-io-", "flink-netty-shuffle-", "flink-dist-cache-", "flink-web-",
                       "flink-rpc-", "blobStore-", "executionGraphStore-", "jm_", "tm_")


def flink_temp_entries() -> set:
    """What Flink leaves in the system temp folder when nobody points it elsewhere."""
    import tempfile

    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(FLINK_TEMP_PREFIXES)}


# --- listening sockets ---------------------------------------------------------------------------

def listening_sockets() -> list[tuple[str, int, int, str]]:
    """Every listening TCP socket as (address, port, pid, process name), from ``ss -Hltnp``
    (iproute2; as root it sees every process's sockets)."""
    import re
    import subprocess

    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        address, _, port = fields[3].rpartition(":")
        for name, pid in re.findall(r'\("([^"]*)",pid=(\d+)', line):
            found.append((address, int(port), int(pid), name))
    return found


def is_loopback(address: str) -> bool:
    """``127.0.0.1``, ``[::1]``, ``[::ffff:127.0.0.1]``, ``127.0.0.1%lo`` -> True;
    ``*``, ``0.0.0.0``, ``[::]`` (every interface) or any other address -> False."""
    import ipaddress

    address = address.strip("[]").split("%")[0]
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


def describe(pid: int) -> str:
    """A process's command line."""
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "(gone)"


# --- secrets -------------------------------------------------------------------------------------

def files_holding(roots, secrets) -> list[str]:
    """Every file under ``roots`` (folders or files) whose bytes hold one of ``secrets``; a jar
    or zip is searched entry by entry, decompressed (``JAR!ENTRY``), as a reader of it would,
    except compiled classes (Beam's and Flink's own code, the same in every job: what a job adds
    to a jar, its pipeline and options, is under ``BEAM-PIPELINE/``)."""
    import zipfile

    needles = [s.encode() if isinstance(s, str) else s for s in secrets if s]
    found = []

    def check(name: str, data: bytes) -> None:
        if any(n in data for n in needles):
            found.append(name)

    for root in roots:
        root = str(root)
        paths = [root] if os.path.isfile(root) else [
            os.path.join(base, n) for base, _dirs, names in os.walk(root) for n in names]
        for path in paths:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:   # a socket, a file removed meanwhile
                continue
            check(path, data)
            if data[:4] == b"PK\x03\x04":
                try:
                    with zipfile.ZipFile(path) as jar:
                        for entry in jar.namelist():
                            if entry.endswith(".class"):
                                continue
                            check(f"{path}!{entry}", jar.read(entry))
                except (zipfile.BadZipFile, OSError):
                    pass
    return found
