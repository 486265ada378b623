"""What a SLURM partition can give one job, and which pending reasons mean a job never starts.

``runners.slurm submit`` asks for ``--nodes`` nodes with ``--cpus-per-node`` CPUs and
``--memory`` each, for ``--time``. A request no node or partition limit can satisfy is not
always refused by ``sbatch``: SLURM queues it and it stays PENDING for ever (reason
``PartitionConfig``, ``PartitionNodeLimit``...), so ``submit --wait`` would wait for ever.

Contract:

- :func:`read_partition` reads the partition the job goes to (``--partition``, else the one
  marked ``Default=YES``) with ``scontrol show partition -o`` and its nodes with ``scontrol
  show node -o``; ``None`` where they cannot be read (no ``scontrol``, the controller does not
  answer): the check is then left to SLURM.
- :func:`check_request` raises :class:`runners.config.ConfigError` (exit 2, one line naming
  the flag, the limit and the fix) for a request the partition can never satisfy: more nodes
  than it has or allows (``MaxNodes``), more CPUs or memory per node than its largest node
  has or it allows (``MaxCPUsPerNode``, ``MaxMemPerNode``), fewer nodes with both the CPUs and
  the memory than ``--nodes``, a longer ``--time`` than ``MaxTime``; and for a partition that
  does not exist.
- :func:`never_starts` says, for a pending job's ``scontrol show job`` record, why it can never
  start (``None`` while it may). The reasons (squeue(1), "JOB REASON CODES") are those that
  name the job's own request against the configuration, which waiting does not change:
  :data:`NEVER_REASONS`. ``PartitionNodeLimit`` also stands for nodes that are DOWN or DRAINED
  for now, so it counts only when the job asks for more nodes than the partition has or
  allows. Reasons that pass with time or load (``Resources``, ``Priority``,
  ``ReqNodeNotAvail``, ``PartitionDown``, QOS usage limits...) are not in it.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess

from runners.config import ConfigError

NEVER_REASONS = {
    # set at submission for any request beyond the partition's limits (a --time over MaxTime
    # too, refined to PartitionTimeLimit on the scheduler's next pass)
    "PartitionConfig": "the request exceeds what the partition allows or its nodes have "
                       "(--nodes, --cpus-per-node, --memory, --time)",
    "PartitionTimeLimit": "--time is longer than the partition's MaxTime",
    "PartitionNodeLimit": "--nodes is more than the partition has or allows",
    "BadConstraints": "no node has the features the request asks for (extra_sbatch)",
    "DependencyNeverSatisfied": "a job it depends on failed",
    "InvalidAccount": "--account is not valid",
    "InvalidQOS": "--qos is not valid",
    "AccountNotAllowed": "the partition does not allow this --account",
    "QOSNotAllowed": "the partition does not allow this --qos",
}
# extra_sbatch options that change what the check reads from the config: with one of them the
# request is SLURM's to judge (and the wait fails fast if it never starts).
_OVERRIDING = ("--partition", "-p", "--nodes", "-N", "--cpus-per-task", "-c", "--mem",
               "--mem-per-cpu", "--time", "-t")


@dataclasses.dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    memory_mb: int


@dataclasses.dataclass(frozen=True)
class Partition:
    name: str
    total_nodes: int
    max_nodes: int | None
    max_cpus_per_node: int | None
    max_mem_per_node_mb: int | None
    max_time_s: int | None
    nodes: tuple[Node, ...]


def parse_oneliner(text: str) -> dict:
    """``Key=value Key=value ...`` (one ``-o`` line of scontrol) -> dict; a value runs up to
    the next `` Key=`` (and may end in spaces: scontrol pads some fields)."""
    info: dict = {}
    for m in re.finditer(r"(?:^|\s)([A-Za-z][\w:/]*)=(.*?)(?=\s[A-Za-z][\w:/]*=|\s*$)",
                         text.strip()):
        info.setdefault(m.group(1), m.group(2))
    return info


def time_seconds(text: str | None) -> int | None:
    """SLURM's time formats (``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``,
    ``days-hours[:minutes[:seconds]]``) in seconds; None for UNLIMITED/INFINITE/NONE."""
    if not text or text.upper() in ("UNLIMITED", "INFINITE", "NONE", "N/A"):
        return None
    days, dash, rest = text.partition("-")
    if not dash:
        days, rest = "0", text
    parts = [int(p) for p in rest.split(":")]
    if dash:
        parts += [0] * (3 - len(parts))                   # days-hours[:min[:sec]]
        h, m, s = parts
    elif len(parts) == 3:
        h, m, s = parts
    elif len(parts) == 2:
        h, m, s = 0, parts[0], parts[1]                    # minutes:seconds
    else:
        h, m, s = 0, parts[0], 0                           # minutes
    return ((int(days) * 24 + h) * 60 + m) * 60 + s


def memory_mb(text: str | None) -> int | None:
    """``--mem`` (``4096``, ``32G``...; MB without a unit) in MB; None for none or 0 (all)."""
    if not text:
        return None
    m = re.fullmatch(r"(\d+)([KMGT]?)", str(text).strip().upper())
    if not m:
        return None
    value = int(m.group(1)) * {"K": 1, "": 1024, "M": 1024, "G": 1024**2,
                               "T": 1024**3}[m.group(2)] // 1024
    return value or None


def _limit(value: str | None) -> int | None:
    if not value or not value.isdigit():
        return None   # UNLIMITED, N/A...
    return int(value)


def _scontrol(args: list[str], env: dict | None) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True, env=env,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None


def read_partition(name: str | None, env: dict | None = None) -> Partition | None:
    """The partition ``name`` (None: the default one) with its nodes; None when SLURM cannot
    be asked. Raises :class:`ConfigError` when SLURM answers that it has no such partition."""
    out = _scontrol(["show", "partition", "-o"], env)
    if out is None or out.returncode != 0:
        return None
    parts = [{k: v.strip() for k, v in parse_oneliner(line).items()}
             for line in out.stdout.splitlines() if line.strip()]
    if name:
        chosen = [p for p in parts if p.get("PartitionName") == name]
        if not chosen:
            known = ", ".join(p.get("PartitionName", "?") for p in parts) or "none"
            raise ConfigError(f"--partition {name}: SLURM has no such partition (it has: "
                              f"{known}); name one of them")
    else:
        chosen = [p for p in parts if p.get("Default") == "YES"]
        if not chosen:
            return None   # no default: sbatch says so itself
    part = chosen[0]
    nodes_out = _scontrol(["show", "node", "-o"], env)
    if nodes_out is None or nodes_out.returncode != 0:
        return None
    nodes = []
    for line in nodes_out.stdout.splitlines():
        info = {k: v.strip() for k, v in parse_oneliner(line).items()}
        if part["PartitionName"] not in (info.get("Partitions") or "").split(","):
            continue
        cpus = info.get("CPUEfctv") or info.get("CPUTot") or "0"
        nodes.append(Node(info.get("NodeName", "?"), int(cpus) if cpus.isdigit() else 0,
                          _limit(info.get("RealMemory")) or 0))
    total = _limit(part.get("TotalNodes"))
    return Partition(name=part["PartitionName"],
                     total_nodes=total if total is not None else len(nodes),
                     max_nodes=_limit(part.get("MaxNodes")),
                     max_cpus_per_node=_limit(part.get("MaxCPUsPerNode")),
                     max_mem_per_node_mb=_limit(part.get("MaxMemPerNode")),
                     max_time_s=time_seconds(part.get("MaxTime")), nodes=tuple(nodes))


def overridden_by_extra(cfg: dict) -> bool:
    """True when extra_sbatch sets what the check would read from the config."""
    return any(opt.split("=", 1)[0] in _OVERRIDING or
               any(opt.startswith(short) and len(opt) > 2 and not opt.startswith("--")
                   for short in ("-p", "-N", "-c", "-t"))
               for opt in cfg.get("extra_sbatch") or [])


def check_request(cfg: dict, part: Partition) -> None:
    """Refuse (:class:`ConfigError`, one line) a request ``part`` can never satisfy."""
    p = part.name
    where = f"partition {p}"
    other = "; ask for less or choose another --partition"
    nodes, cpus = int(cfg["nodes"]), int(cfg["cpus_per_node"])
    mem = memory_mb(cfg.get("memory"))
    if part.max_nodes is not None and nodes > part.max_nodes:
        raise ConfigError(f"--nodes {nodes}: {where} allows at most {part.max_nodes} nodes per "
                          f"job (MaxNodes){other}")
    if nodes > part.total_nodes:
        raise ConfigError(f"--nodes {nodes}: {where} has {part.total_nodes} node"
                          f"{'s' if part.total_nodes != 1 else ''}{other}")
    if part.max_cpus_per_node is not None and cpus > part.max_cpus_per_node:
        raise ConfigError(f"--cpus-per-node {cpus}: {where} allows at most "
                          f"{part.max_cpus_per_node} CPUs per node (MaxCPUsPerNode){other}")
    if part.nodes and cpus > max(n.cpus for n in part.nodes):
        raise ConfigError(f"--cpus-per-node {cpus}: the largest node of {where} has "
                          f"{max(n.cpus for n in part.nodes)} CPUs{other}")
    if mem is not None:
        if part.max_mem_per_node_mb is not None and mem > part.max_mem_per_node_mb:
            raise ConfigError(f"--memory {cfg['memory']}: {where} allows at most "
                              f"{part.max_mem_per_node_mb} MB per node (MaxMemPerNode){other}")
        if part.nodes and mem > max(n.memory_mb for n in part.nodes):
            raise ConfigError(f"--memory {cfg['memory']}: the largest node of {where} has "
                              f"{max(n.memory_mb for n in part.nodes)} MB (RealMemory){other}")
    if part.nodes:
        fit = [n for n in part.nodes if n.cpus >= cpus and (mem is None or n.memory_mb >= mem)]
        if len(fit) < nodes:
            raise ConfigError(f"--nodes {nodes}: only {len(fit)} node(s) of {where} have "
                              f"{cpus} CPUs" + (f" and {cfg['memory']} memory" if mem else "")
                              + f" (--cpus-per-node, --memory){other}")
    limit = part.max_time_s
    asked = time_seconds(cfg.get("time"))
    if limit is not None and asked is not None and asked > limit:
        raise ConfigError(f"--time {cfg['time']}: {where} allows at most "
                          f"{_format_time(limit)} (MaxTime){other}")


def _format_time(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return (f"{days}-" if days else "") + f"{h:02d}:{m:02d}:{s:02d}"


def check_before_submit(cfg: dict, env: dict | None = None) -> None:
    """:func:`check_request` against the job's partition, where its limits can be read."""
    if overridden_by_extra(cfg):
        return
    part = read_partition(cfg.get("partition"), env)
    if part is not None:
        check_request(cfg, part)


def never_starts(info: dict, env: dict | None = None) -> str | None:
    """Why the pending job ``info`` (``scontrol show job``) can never start, or None."""
    if info.get("JobState") != "PENDING":
        return None
    reason = info.get("Reason")
    if reason not in NEVER_REASONS:
        return None
    if reason == "PartitionNodeLimit":
        part = read_partition(info.get("Partition"), env)
        asked = int(re.match(r"\d*", info.get("NumNodes") or "").group() or 0)
        if part is None or (asked <= part.total_nodes
                            and (part.max_nodes is None or asked <= part.max_nodes)):
            return None   # nodes DOWN or DRAINED for now: they may come back
    return f"{reason}: {NEVER_REASONS[reason]}"
