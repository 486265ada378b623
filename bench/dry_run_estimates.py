"""How close ``--dry-run``'s estimates come to the run's counts, per input format.

    python bench/dry_run_estimates.py [--docs 6000] [--workdir DIR]

For each format (plain, gzip and zstd JSONL; Parquet in row groups of 200) a corpus of the
same generated multilingual documents is written twice: shuffled, and with its long documents
first (a corpus sorted by source or date: the head of a file is not like the rest). Each is
planned with ``--dry-run`` and then tokenized; the table puts the estimate and its printed
bound beside the run's counts (the reference), with the dry run's wall seconds. A byte-level
BPE is trained on the corpus (no download).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import zstandard  # noqa: E402

from pipelines import demo, tokenize  # noqa: E402

TOTAL = re.compile(r"^estimate: ~([\d,]+) documents, ~([\d,]+) tokens \(between ([\d,]+) and "
                   r"([\d,]+)\)", re.M)


def _write(path: str, fmt: str, rows: list[dict]) -> None:
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
    if fmt == "jsonl":
        data = lines
    elif fmt == "jsonl.gz":
        data = gzip.compress(lines)
    elif fmt == "jsonl.zst":
        data = zstandard.ZstdCompressor(level=3).compress(lines)
    else:
        pq.write_table(pa.table({"text": [r["text"] for r in rows]}), path, row_group_size=200)
        return
    with open(path, "wb") as f:
        f.write(data)


def _run(inp: str, out: str, tok: str, *extra: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = tokenize.run([f"--input={inp}", "--output", out, "--tokenizer-type",
                               "HuggingFaceTokenizer", "--tokenizer-model", tok,
                               "--log-interval", "0", "--append-eod", *extra])
    if status:
        raise SystemExit(f"tokenize exited {status}:\n{buf.getvalue()}")
    return buf.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=6000)
    parser.add_argument("--workdir", default="")
    args = parser.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="bench_dry_run_")
    rows = list(demo.documents(3, args.docs, long_every=29, empty_every=37))
    tok = os.path.join(work, "tok")
    if not os.path.exists(os.path.join(tok, "tokenizer.json")):
        demo.train_bpe([r["text"] for r in rows if r["text"]], tok, vocab_size=4000)
    shuffled = list(rows)
    random.Random(1).shuffle(shuffled)
    heavy_first = sorted(rows, key=lambda r: -len(r["text"]) if len(r["text"]) > 5000 else 0)
    print(f"{'format':<10} {'layout':<12} {'MB':>6} {'est. tokens':>12} {'bound':>23} "
          f"{'run tokens':>11} {'error':>7} {'within':>6} {'dry s':>6}")
    for fmt in ("jsonl", "jsonl.gz", "jsonl.zst", "parquet"):
        for layout, order in (("shuffled", shuffled), ("long first", heavy_first)):
            case = os.path.join(work, f"{fmt}_{layout.replace(' ', '_')}")
            shutil.rmtree(case, ignore_errors=True)
            os.makedirs(os.path.join(case, "in"))
            inp = os.path.join(case, "in", f"corpus.{fmt}")
            _write(inp, fmt, order)
            t0 = time.monotonic()
            said = _run(inp, os.path.join(case, "out"), tok, "--dry-run")
            seconds = time.monotonic() - t0
            found = TOTAL.search(said)
            _run(inp, os.path.join(case, "out"), tok)
            with open(os.path.join(case, "out", "metadata.json")) as f:
                real = json.load(f)["totals"]["tokens"]
            est, low, high = (int(found.group(i).replace(",", "")) for i in (2, 3, 4))
            print(f"{fmt:<10} {layout:<12} {os.path.getsize(inp) / 1e6:>6.2f} {est:>12,} "
                  f"{f'{low:,}..{high:,}':>23} {real:>11,} {100 * (est - real) / real:>+6.1f}% "
                  f"{'yes' if low <= real <= high else 'NO':>6} {seconds:>6.2f}")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
