"""What a HuggingFace folder costs each worker process before any work, with a reference run
beside it: this checkout (workers build the Rust backend from the driver's resolved
tokenizer, transforms/tokenizer/hf_resolved.py), ``--before`` (the code where every process
loaded the folder with transformers, main after the merge of HuggingFace folder support) and ``--reference`` (the code
before it, which read ``tokenizer.json`` alone with the ``tokenizers`` library; given the
folder's ``tokenizer.json`` only).

    python bench/hf_workers.py [--folders qwen2 gemma] [--repeats 5] [--before 5c524e3]
                               [--reference d3afe0a] [--skip-jobs]

``--folders``: folders under tests/data/megatron_hf (or paths) with a ``tokenizer_config.json``.
The two older versions are ``git archive``d into a temporary folder; every process runs this
interpreter. Rows per folder and version (medians of ``--repeats``; the first of each kind is
a warm-up, not counted; each version has its own cache folder, so self-checks are cached):

  worker load   a fresh process: import transforms.tokenizer, unpickle the job's spec (as the
                driver planned it), load_tokenizer (what a DoFn's setup does); seconds inside
                the process, and whether it imported transformers
  1 doc job     python -m pipelines.tokenize on one one-document file, whole process, --workers 1
  2 x 1 doc     two one-document files, --workers 2 (two worker processes)

"vs ref" divides by the reference version's figure. The machine may be shared: the load
average is printed, and the figures are noisy when it is high.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "megatron_hf")

# Run in a checkout: the job's spec as its planner resolves it, pickled.
PLAN = """
import dataclasses, pickle, sys
from transforms import tokenizer as tk
spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=sys.argv[1], backend="auto")
chosen, _ = tk.choose_backend(spec, ["hello world"])
spec = dataclasses.replace(spec, backend=chosen)
spec = tk.for_workers(spec) if hasattr(tk, "for_workers") else spec
open(sys.argv[2], "wb").write(pickle.dumps(spec))
print(chosen)
"""
WORKER = """
import time
start = time.perf_counter()
import pickle, sys
from transforms import tokenizer as tk
tok = tk.load_tokenizer(pickle.load(open(sys.argv[1], "rb")))
tok.encode_batch(["warm"])
print(time.perf_counter() - start, "transformers" in sys.modules)
"""


def checkout(commit: str, into: str) -> str:
    os.makedirs(into)
    archive = subprocess.run(["git", "-C", ROOT, "archive", commit], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def run(code_dir: str, argv: list[str], cache: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": code_dir, "XDG_CACHE_HOME": cache}
    return subprocess.run([sys.executable, *argv], cwd=code_dir, env=env, capture_output=True,
                          text=True, check=True, timeout=600)


def job(code_dir: str, folder: str, inputs: str, out: str, workers: int, cache: str) -> float:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    run(code_dir, ["-m", "pipelines.tokenize", "--input", inputs, "--output", out,
                   "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", folder,
                   "--json-keys", "text", "--log-interval", "0",
                   "--workers", str(workers)], cache)
    return time.perf_counter() - start


def measure(code_dir: str, folder: str, work: str, repeats: int, jobs: bool) -> dict:
    cache = os.path.join(work, "cache")
    spec_file = os.path.join(work, "spec.pickle")
    backend = run(code_dir, ["-c", PLAN, folder, spec_file], cache).stdout.split()[-1]
    loads, imported = [], set()
    for i in range(repeats + 1):
        seconds, hf = run(code_dir, ["-c", WORKER, spec_file], cache).stdout.split()
        imported.add(hf)
        if i:
            loads.append(float(seconds))
    out = {"backend": backend, "load": statistics.median(loads),
           "transformers": "/".join(sorted(imported))}
    if jobs:
        one, two = os.path.join(work, "one"), os.path.join(work, "two")
        for d, n in ((one, 1), (two, 2)):
            os.makedirs(d, exist_ok=True)
            for k in range(n):
                with open(os.path.join(d, f"doc{k}.jsonl"), "w", encoding="utf-8") as f:
                    f.write(json.dumps({"text": f"One short document, number {k}."}) + "\n")
        for key, inputs, workers in (("job1", one, 1), ("job2", two, 2)):
            times = [job(code_dir, folder, inputs, os.path.join(work, "out"), workers, cache)
                     for _ in range(repeats + 1)][1:]
            out[key] = statistics.median(times)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folders", nargs="+", default=["qwen2", "gemma"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", default="5c524e3")
    parser.add_argument("--reference", default="d3afe0a")
    parser.add_argument("--skip-jobs", action="store_true")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}; load average: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="bench-hf-workers-") as tmp:
        versions = {"this": ROOT,
                    f"before {args.before}": checkout(args.before, os.path.join(tmp, "before")),
                    f"ref {args.reference}": checkout(args.reference, os.path.join(tmp, "ref"))}
        header = (f"{'folder':<14} {'version':<16} {'backend':<10} {'worker load s':>13} "
                  f"{'transformers':>12} {'1 doc job s':>11} {'2 x 1 doc s':>11} | "
                  f"{'vs ref load':>11} {'1 doc':>6} {'2 x 1':>6}")
        print(header)
        for name in args.folders:
            folder = name if os.path.isdir(name) else os.path.join(DATA, name)
            json_only = os.path.join(tmp, f"{os.path.basename(folder)}-tokenizer-json-only")
            os.makedirs(json_only, exist_ok=True)
            shutil.copy(os.path.join(folder, "tokenizer.json"), json_only)
            rows = {}
            for label, code_dir in versions.items():
                work = os.path.join(tmp, "work", f"{os.path.basename(folder)}-{label.split()[0]}")
                os.makedirs(work, exist_ok=True)
                used = json_only if label.startswith("ref") else folder
                rows[label] = measure(code_dir, used, work, args.repeats, not args.skip_jobs)
            ref = rows[f"ref {args.reference}"]
            for label, r in rows.items():
                def fmt(key, r=r):
                    return f"{r[key]:.2f}" if key in r else "-"

                def ratio(key, r=r):
                    return f"{r[key] / ref[key]:.2f}" if key in r else "-"

                print(f"{os.path.basename(folder):<14} {label:<16} {r['backend']:<10} "
                      f"{r['load']:>13.3f} {r['transformers']:>12} {fmt('job1'):>11} "
                      f"{fmt('job2'):>11} | {ratio('load'):>11} {ratio('job1'):>6} "
                      f"{ratio('job2'):>6}", flush=True)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
