"""Watch a command's process tree for secrets on command lines (issue 23, item 3): start a
command, poll /proc/PID/cmdline of it and every descendant until it ends."""

from __future__ import annotations

import os
import subprocess
import threading
import time


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def run_watching_cmdlines(cmd, *, secrets, timeout: float = 600, **popen):
    """Run ``cmd`` (stdout discarded, stderr kept); returns (its exit status, its stderr,
    {pid: command line} of every process of the tree seen, those holding a secret)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **popen)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    reader.start()
    wanted = [s.encode() for s in secrets]
    seen: dict[int, bytes] = {}
    deadline = time.monotonic() + timeout   # a hang detector, not a timing
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            for pid in {proc.pid, *descendants(proc.pid)}:
                line = cmdline(pid)
                if line and (pid not in seen or any(s in line for s in wanted)):
                    seen[pid] = line
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait()
        reader.join(30)
    leaks = {pid: line for pid, line in seen.items() if any(s in line for s in wanted)}
    return proc.returncode, "".join(err), seen, leaks
