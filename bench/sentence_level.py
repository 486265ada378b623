"""Document level vs sentence level through the whole tokenize job, on the same corpus, one run.

    python bench/sentence_level.py [--mb 40] [--vocab 32000] [--workdir DIR] [--repeats 3]

Prints documents/s and MB/s of `python -m pipelines.tokenize` (whole process) at document level
and with `--split-sentences` (default splitter), the median of --repeats runs each, interleaved,
and the ratio. Target: sentence level at least half the document-level throughput.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from throughput import make_corpus  # noqa: E402

from pipelines import demo  # noqa: E402

MB = 10**6  # a megabyte is 10^6 bytes in every figure tokenbeam prints

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_job(corpus, tokenizer, out, *extra) -> float:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "pipelines.tokenize", "--input", corpus, "--output", out,
           "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", tokenizer,
           "--append-eod", "--log-interval", "0", *extra]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=40)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="tokenbeam-bench-")
    corpus = os.path.join(work, f"corpus{args.mb}")
    paths = make_corpus(corpus, args.mb)
    nbytes = sum(os.path.getsize(p) for p in paths)
    docs = sum(1 for p in paths for _ in open(p, encoding="utf-8"))
    tok = os.path.join(work, f"bpe{args.vocab}")
    if not os.path.exists(os.path.join(tok, "tokenizer.json")):
        texts = [json.loads(line)["text"] for line in open(paths[0], encoding="utf-8")][:20000]
        demo.train_bpe(texts, tok, vocab_size=args.vocab)
    times = {"document": [], "sentence": []}
    for _ in range(args.repeats):
        times["document"].append(run_job(corpus, tok, os.path.join(work, "doc")))
        times["sentence"].append(run_job(corpus, tok, os.path.join(work, "sent"),
                                         "--split-sentences"))
    meta = {lvl: json.load(open(os.path.join(work, d, "metadata.json")))["totals"]
            for lvl, d in (("document", "doc"), ("sentence", "sent"))}
    print(f"corpus: {nbytes / MB:.0f} MB, {docs:,} documents; medians of {args.repeats} runs")
    print(f"{'level':<10} {'docs/s':>10} {'MB/s':>8} {'sequences':>12} {'seconds':>8}")
    med = {k: statistics.median(v) for k, v in times.items()}
    for lvl in ("document", "sentence"):
        print(f"{lvl:<10} {docs / med[lvl]:>10,.0f} {nbytes / MB / med[lvl]:>8.2f} "
              f"{meta[lvl]['sequences']:>12,} {med[lvl]:>8.1f}")
    print(f"sentence / document throughput = {med['document'] / med['sentence']:.2f} "
          "(target >= 0.5)")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
