"""Wall time of the tokenize job on Spark through Livy, with the DirectRunner and SLURM + Flink
beside it, and the fixed cost of a Spark job broken down.

Usage::

    python bench/spark_vs_direct.py                        # 4 files x 5000 docs, 3 repeats
    python bench/spark_vs_direct.py --files 8 --docs 20000 --repeats 5 --no-flink

Generates a seeded corpus and its byte-level BPE (as bench/flink_vs_direct.py does), starts a
Spark 3.5 standalone cluster (master + one worker with this host's cores) and a real Apache
Livy 0.7.1 server in a private network namespace (tests/clusters/local_spark.py; needs root
and ``scripts/setup.sh --test``), then runs the same tokenize arguments:

- ``direct (ref)``  ``python -m pipelines.tokenize --runner=DirectRunner``
- ``spark via livy``  ``python -m runners.spark submit --config runners/spark_hdinsight.yaml
  --wait`` (what HDInsight users run), one executor with all the worker's cores
- ``slurm+flink``   ``python -m runners.slurm submit --wait`` on a 1-node local SLURM cluster
  (skip with ``--no-flink``)

The executors' Python SDK workers run the tokenbeam installed in this interpreter's environment
(``python_env``), not the checkout: the two must be the same code, or the workers fail to
unpickle the pipeline.

"wall" is submit to exit of the whole command; every output must be byte-identical to the
DirectRunner's. Medians over ``--repeats``, the runners taking turns. "Per MB beyond the
fixed cost" subtracts each runner's one-document job (its start-up) from its wall: what the
corpus itself costs, the figure to compare between runners.

The fixed cost per Spark job is measured on a one-document input and split by the moments the
launcher reports (to the 1 s of its polling): planning (until the pipeline jar is started),
pipeline jar, staging, submission, Livy until the batch runs (spark-submit starting), and the batch itself (Spark
driver and executor start-up, Python SDK workers, the pipeline, the finish step). "Before"
is what Beam's own ``--output_executable_path`` path costs on top for every job: a copy of the
~100 MB job-server jar holding the pipeline, built (Beam copies the jar, then appends the
pipeline) and staged per job, measured here by doing those copies; "after" is tokenbeam's
kilobyte jar with the runtime staged once per version (runners/spark_jar.py).
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
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from flink_vs_direct import (  # noqa: E402
    check_and_clear, job_args, make_corpus, run_direct, run_slurm)

from pipelines import demo  # noqa: E402
from runners import spark_request  # noqa: E402
from tests.clusters import local_spark  # noqa: E402
from tests.clusters.local_slurm import LocalSlurm  # noqa: E402

CACHE = os.path.join(ROOT, ".cache")
PYTHON_ENV = os.path.dirname(os.path.dirname(sys.executable))


def submit_livy(cluster, args: list[str], *, staging: str, work: str,
                cores: int) -> dict[str, float]:
    """Run ``runners.spark submit --wait`` and time it by the lines it prints as they come."""
    cmd = [sys.executable, "-m", "runners.spark", "submit", "--config",
           "runners/spark_hdinsight.yaml", "--wait", "--work-dir", work,
           "--set", f"livy_url={cluster.livy_url}", "--set", f"staging_dir={staging}",
           "--set", f"python_env={PYTHON_ENV}", "--set", "num_executors=1",
           "--set", f"executor_cores={cores}", "--set", "executor_memory=2g",
           "--set", "driver_memory=1g", "--set", "poll_interval=1", "--", *args]
    env = {**cluster.env(), "HDINSIGHT_USERNAME": "bench", "HDINSIGHT_PASSWORD": uuid.uuid4().hex}
    t0 = time.monotonic()
    proc = cluster.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         env=env)
    seen, lines = {}, []
    for line in proc.stdout:
        lines.append(line)
        now = time.monotonic() - t0
        match = re.match(r"\s*(pipeline jar|staging)\s+([\d.]+) s\s*([\d,]+ bytes)?", line)
        if match:
            seen[match.group(1)] = float(match.group(2))
            if match.group(3):
                seen["jar bytes"] = float(match.group(3).split()[0].replace(",", ""))
        elif line.startswith("submitted batch"):
            seen["submitted at"] = now
        elif re.match(r"batch \S+: running", line):
            seen["running at"] = now
        elif re.match(r"batch \S+: (success|dead|killed)", line):
            seen["ended at"] = now
    err = proc.stderr.read()
    if proc.wait() != 0:
        raise RuntimeError(f"Livy batch failed:\n{''.join(lines)[-3000:]}\n{err[-3000:]}")
    seen["wall"] = time.monotonic() - t0
    return seen


def breakdown(t: dict[str, float]) -> dict[str, float]:
    """Phases of one Livy submission from :func:`submit_livy`'s moments."""
    built = t["submitted at"] - t.get("submission", 0.0)
    return {"planning (driver)": built - t["pipeline jar"] - t["staging"],
            "pipeline jar": t["pipeline jar"], "staging": t["staging"],
            "Livy until running": t["running at"] - t["submitted at"],
            "batch (Spark, SDK workers, job)": t["ended at"] - t["running at"],
            "report": t["wall"] - t["ended at"], "wall": t["wall"],
            "jar bytes": t["jar bytes"]}


def beam_uber_jar_cost(scratch: str) -> tuple[float, float, int]:
    """(build s, stage s, bytes) of the per-job jar Beam's own path makes: a copy of the
    job-server jar (Beam copies it, then appends the pipeline) staged for each job."""
    runtime = spark_request.runtime_jar({"job_server_jar": None, "cache_dir": CACHE})
    uber, staged = os.path.join(scratch, "uber.jar"), os.path.join(scratch, "staged-uber.jar")
    t0 = time.monotonic()
    shutil.copyfile(runtime, uber)
    t1 = time.monotonic()
    shutil.copyfile(uber, staged)
    t2 = time.monotonic()
    size = os.path.getsize(uber)
    os.remove(uber)
    os.remove(staged)
    return t1 - t0, t2 - t1, size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--docs", type=int, default=5000, help="documents per file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-flink", action="store_true", help="leave SLURM + Flink out")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temp folder)")
    opts = parser.parse_args(argv)
    missing = local_spark.missing(CACHE)
    if missing or os.geteuid() != 0:
        print(f"cannot run: {', '.join(missing) or 'needs root (a private network namespace)'}"
              "; run `bash scripts/setup.sh --test` as root", file=sys.stderr)
        return 2
    scratch = tempfile.mkdtemp(prefix="tokenbeam-bench-", dir=opts.dir)
    cores = os.cpu_count() or 2
    try:
        corpus, tokenizer = make_corpus(scratch, files=opts.files, docs=opts.docs)
        tiny = os.path.join(scratch, "tiny")
        demo.write_jsonl(os.path.join(tiny, "one.jsonl"), [{"text": "One short document."}])
        mb = sum(os.path.getsize(os.path.join(corpus, n)) for n in os.listdir(corpus)) / 2**20
        print(f"corpus: {opts.files} files, {opts.files * opts.docs} documents, {mb:.1f} MB; "
              f"{cores} CPUs; {opts.repeats} repeats", flush=True)
        walls: dict[str, list[float]] = {}
        fixed: list[dict[str, float]] = []
        tiny_direct: list[float] = []
        reference = None
        staging, work = os.path.join(scratch, "staging"), os.path.join(scratch, "work")
        cluster = local_spark.LocalSpark(os.path.join(scratch, "spark"), cache_dir=CACHE,
                                         netns=f"tbbench{uuid.uuid4().hex[:6]}",
                                         worker_cores=cores, worker_memory="6g",
                                         livy_whitelist=(scratch,))
        slurm = None if opts.no_flink else LocalSlurm(os.path.join(scratch, "slurm"), nodes=1)
        t0 = time.monotonic()
        cluster.start(timeout=300)
        print(f"Spark + Livy up in {time.monotonic() - t0:.1f} s", flush=True)
        try:
            if slurm is not None:
                slurm.start(timeout=120)
            first = submit_livy(cluster, job_args(tiny, tokenizer, os.path.join(scratch, "t0")),
                                staging=staging, work=work, cores=cores)
            print(f"  first Livy job (stages the runtime): staging {first['staging']:.1f} s, "
                  f"wall {first['wall']:.1f} s", flush=True)
            for rep in range(opts.repeats):
                out = os.path.join(scratch, f"tiny-{rep}")
                fixed.append(breakdown(submit_livy(cluster, job_args(tiny, tokenizer, out),
                                                   staging=staging, work=work, cores=cores)))
                tiny_direct.append(run_direct(job_args(tiny, tokenizer, out + "-direct"),
                                              workers=1)[0])
                runs = [("direct (ref)", lambda a: run_direct(a, workers=1)[0]),
                        ("spark via livy", lambda a: submit_livy(
                            cluster, a, staging=staging, work=work, cores=cores)["wall"])]
                if slurm is not None:
                    runs.append(("slurm+flink 1 node", lambda a: run_slurm(
                        a, cluster=slurm, nodes=1, log_dir=os.path.join(scratch, "logs"),
                        tm_memory="1280m")[0]))
                for name, fn in runs:
                    out = os.path.join(scratch, f"out-{rep}-{name.split()[0]}")
                    walls.setdefault(name, []).append(fn(job_args(corpus, tokenizer, out)))
                    reference = check_and_clear(out, reference, name)
                    print(f"  repeat {rep + 1}: {name}: {walls[name][-1]:.1f} s", flush=True)
        finally:
            cluster.stop()
            if slurm is not None:
                slurm.stop()
        ref = statistics.median(walls["direct (ref)"])
        print("\n| runner | wall s (median) | vs direct |\n|---|---:|---:|")
        for name, values in walls.items():
            wall = statistics.median(values)
            print(f"| {name} | {wall:.1f} | {wall / ref:.2f}x |")
        # What a MB costs beyond each runner's fixed cost (its one-document job's wall).
        fixed_wall = {"direct (ref)": statistics.median(tiny_direct),
                      "spark via livy": statistics.median(f["wall"] for f in fixed)}
        print("\nper MB beyond the fixed cost (wall minus the one-document job's, medians):\n")
        print("| runner | one-document job s | s per MB | MB/s |\n|---|---:|---:|---:|")
        for name, one in fixed_wall.items():
            per_mb = (statistics.median(walls[name]) - one) / mb
            if per_mb <= 0:  # the corpus cost less than the runs' noise: a bigger --docs helps
                print(f"| {name} | {one:.1f} | below the noise | - |")
            else:
                print(f"| {name} | {one:.1f} | {per_mb:.3f} | {1 / per_mb:.1f} |")
        print("\nfixed cost of one Spark job through Livy (one-document input, medians):\n")
        print("| phase | s |\n|---|---:|")
        for phase in [p for p in fixed[0] if p != "jar bytes"]:
            print(f"| {phase} | {statistics.median(f[phase] for f in fixed):.1f} |")
        build, stage_s, size = beam_uber_jar_cost(scratch)
        jar = statistics.median(f["pipeline jar"] for f in fixed)
        staged = statistics.median(f["staging"] for f in fixed)
        print("\nper-job jar, before (Beam's uber jar) and after (tokenbeam):\n")
        print("| | per-job jar | build s | stage s (local disk) |\n|---|---:|---:|---:|")
        print(f"| before: job-server copy + pipeline | {size / 2**20:.0f} MB | "
              f"{jar + build:.1f} | {stage_s:.1f} |")
        small = statistics.median(f["jar bytes"] for f in fixed)
        print(f"| after: pipeline only, runtime staged once | {small / 2**10:.0f} KB | {jar:.1f} | "
              f"{staged:.1f} |")
        print("\nall outputs byte-identical to the DirectRunner's")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
