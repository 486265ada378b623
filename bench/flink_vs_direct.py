"""Wall time of the tokenize job on a 2-node SLURM + Flink run, with the DirectRunner beside it.

Usage::

    python bench/flink_vs_direct.py                       # 4 files x 5000 docs, 3 repeats
    python bench/flink_vs_direct.py --files 8 --docs 20000 --repeats 5 --nodes 2

Generates a corpus with ``pipelines.demo`` (seeded) and trains its byte-level BPE, then runs
the same ``python -m pipelines.tokenize`` arguments:

- ``direct (ref)``       ``--runner=DirectRunner`` (in-process), and with ``--workers 2``
- ``slurm+flink``        ``python -m runners.slurm submit --wait`` on a local SLURM cluster of
                         ``--nodes`` virtual nodes on this host
                         (tests/clusters/local_slurm.py), each node with all this host's
                         CPUs: JobManager, a TaskManager per node, worker pools and the job
                         server start and stop inside every job

"wall" is submit-to-exit of the command (for SLURM: queueing, Flink start-up, the pipeline,
teardown); "pipeline" is the job's own ``seconds`` line (driver planning to last commit).
Every run writes to a fresh folder and must produce byte-identical shards; the figures are
medians over ``--repeats`` runs, the runners taking turns. Needs ``scripts/setup.sh --test``
(slurm-wlm, munge, Flink, the job-server jar) and root. The virtual nodes share this host's
cores, so this measures the overhead of the cluster path, not a speed-up.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pipelines import demo  # noqa: E402
from tests.clusters.local_slurm import LocalSlurm  # noqa: E402

MB = 10**6  # a megabyte is 10^6 bytes in every figure tokenbeam prints


def make_corpus(folder: str, *, files: int, docs: int) -> tuple[str, str]:
    corpus = os.path.join(folder, "corpus")
    texts = []
    for k in range(files):
        records = list(demo.documents(11 + k, docs, long_every=97, empty_every=53))
        demo.write_jsonl(os.path.join(corpus, f"bench_{k:02d}.jsonl"), records)
        texts.extend(r["text"] for r in records[:2000] if r["text"])
    return corpus, demo.train_bpe(texts, os.path.join(folder, "tokenizer"), vocab_size=4000)


def job_args(corpus: str, tokenizer: str, out: str) -> list[str]:
    return ["--input", os.path.join(corpus, "*.jsonl"), "--output", out, "--tokenizer-type",
            "HuggingFaceTokenizer", "--tokenizer-model", tokenizer, "--json-keys", "text",
            "--append-eod"]


def shard_bytes(folder: str) -> dict:
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith((".bin", ".idx")):
            with open(os.path.join(folder, name), "rb") as f:
                out[name] = f.read()
    return out


def check_and_clear(out: str, reference: dict | None, name: str) -> dict:
    """The shards in ``out`` (removed afterwards), which must equal ``reference`` when given."""
    got = shard_bytes(out)
    if reference is not None and got != reference:
        raise RuntimeError(f"{name}: output differs from the DirectRunner's")
    shutil.rmtree(out)
    return got


def parse_summary(text: str) -> tuple[float, int]:
    seconds = float(re.search(r"^\s*job seconds\s+([\d.]+)", text, re.M).group(1))
    tokens = int(re.search(r"^\s*tokens\s+([\d,]+)", text, re.M).group(1).replace(",", ""))
    return seconds, tokens


def run_direct(args: list[str], *, workers: int) -> tuple[float, float, int]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pipelines.tokenize", "--runner=DirectRunner",
                           f"--workers={workers}", *args], capture_output=True, text=True,
                          cwd=ROOT)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"DirectRunner failed:\n{proc.stderr[-3000:]}")
    return (wall, *parse_summary(proc.stdout))


def run_slurm(args: list[str], *, cluster: LocalSlurm, nodes: int, log_dir: str,
              tm_memory: str) -> tuple[float, float, int]:
    cmd = [sys.executable, "-m", "runners.slurm", "submit", "--config",
           os.path.join(ROOT, "runners/flink_slurm.yaml"), "--cache-dir",
           os.path.join(ROOT, ".cache"), "--python-env", os.path.dirname(os.path.dirname(
               sys.executable)), "--log-dir", log_dir, "--nodes", str(nodes),
           "--cpus-per-node", str(cluster.cpus), "--time", "01:00:00", "--set", "memory=null",
           "--set", "signal_before_end=60", "--taskmanager-memory", tm_memory,
           "--set", "job_server_memory=512m", "--wait", "--", *args]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=cluster.env())
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"SLURM job failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    job = re.search(r"submitted job (\d+)", proc.stdout).group(1)
    with open(os.path.join(log_dir, job, "pipeline.log"), encoding="utf-8") as f:
        return (wall, *parse_summary(f.read()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--docs", type=int, default=5000, help="documents per file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--taskmanager-memory", default="1280m")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temp folder)")
    opts = parser.parse_args(argv)
    scratch = tempfile.mkdtemp(prefix="tokenbeam-bench-", dir=opts.dir)
    try:
        corpus, tokenizer = make_corpus(scratch, files=opts.files, docs=opts.docs)
        mb = sum(os.path.getsize(os.path.join(corpus, n)) for n in os.listdir(corpus)) / MB
        print(f"corpus: {opts.files} files, {opts.files * opts.docs} documents, {mb:.1f} MB; "
              f"{os.cpu_count()} CPUs; {opts.repeats} repeats", flush=True)
        results: dict[str, list[tuple[float, float, int]]] = {}
        reference = None
        with LocalSlurm(os.path.join(scratch, "slurm"), nodes=opts.nodes) as cluster:
            for rep in range(opts.repeats):
                runs = [("direct (ref)", lambda a: run_direct(a, workers=1)),
                        ("direct --workers 2", lambda a: run_direct(a, workers=2)),
                        (f"slurm+flink {opts.nodes} nodes", lambda a: run_slurm(
                            a, cluster=cluster, nodes=opts.nodes,
                            log_dir=os.path.join(scratch, "logs"),
                            tm_memory=opts.taskmanager_memory))]
                for name, fn in runs:
                    out = os.path.join(scratch, f"out-{len(results.get(name, []))}-{rep}-"
                                                f"{name.split()[0]}-{name.split()[-1]}")
                    results.setdefault(name, []).append(fn(job_args(corpus, tokenizer, out)))
                    reference = check_and_clear(out, reference, name)
                    print(f"  repeat {rep + 1}: {name}: {results[name][-1][0]:.1f} s", flush=True)
        ref_wall = statistics.median(r[0] for r in results["direct (ref)"])
        print()
        print("| runner | wall s (median) | pipeline s (median) | tokens/s (pipeline) | "
              "wall vs ref |")
        print("|---|---:|---:|---:|---:|")
        for name, runs in results.items():
            wall = statistics.median(r[0] for r in runs)
            pipe = statistics.median(r[1] for r in runs)
            tokens = runs[0][2]
            print(f"| {name} | {wall:.1f} | {pipe:.1f} | {tokens / pipe:,.0f} | "
                  f"{wall / ref_wall:.2f}x |")
        print("\nall outputs byte-identical to the DirectRunner's")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
