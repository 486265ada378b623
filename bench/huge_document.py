"""Peak memory of the tokenize job on one huge document: a JSONL file of a single line whose
``text`` is tens to hundreds of MB, with a byte-level BPE (GPT-2 style) trained here.

    python bench/huge_document.py [--mb 50 300] [--backend auto] [--baseline DIR] [--repeats 1]

For each size, runs ``python -m pipelines.tokenize`` (one worker, ``--append-eod``) on the
document and prints: document size, peak RSS of the whole job process (``ru_maxrss`` of the
largest process of its tree, RUSAGE_CHILDREN of a fresh wrapper), seconds, and the same for the
checkout in ``--baseline`` (a git worktree of an older commit, run with this interpreter) beside
it. Checks that both wrote byte-identical shards (the ids are unchanged).

The document and the tokenizer are generated into ``--workdir`` (default /tmp/tokenbeam-huge) on
the first run and reused; nothing is downloaded. Never commit them.
"""

from __future__ import annotations

import argparse
import filecmp
import glob
import json
import os
import random
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from pipelines import demo  # noqa: E402

MB = 10**6  # a megabyte is 10^6 bytes in every figure tokenbeam prints


def make_document(path: str, mb: int, *, seed: int = 13) -> int:
    """One JSONL line ``{"id": ..., "text": ...}`` of about ``mb`` MB: sentences of every script
    and code from pipelines.demo, joined by spaces and blank lines, written in pieces (the text is
    never held whole here). Returns the file size."""
    if os.path.exists(path) and os.path.getsize(path) >= (mb << 20):
        return os.path.getsize(path)
    rng = random.Random(seed)
    pool = [demo.document(rng, lang, sentences=rng.randint(1, 6)) for lang in demo.LANGS
            for _ in range(3000)]
    target = mb << 20
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        size = f.write('{"id": "huge-0", "text": "')
        while size < target:
            piece = (" " if rng.random() < 0.8 else "\n\n").join(rng.choices(pool, k=2000)) + " "
            if rng.random() < 0.02:  # now and then a long run without any space
                piece += "x" * rng.randint(1000, 100_000) + " "
            encoded = json.dumps(piece, ensure_ascii=False)[1:-1]
            f.write(encoded)
            size += len(encoded.encode("utf-8"))
        f.write('"}\n')
    os.replace(tmp, path)
    return os.path.getsize(path)


def make_tokenizer(folder: str, vocab: int) -> str:
    if not os.path.exists(os.path.join(folder, "tokenizer.json")):
        rng = random.Random(1)
        texts = [demo.document(rng, lang) for _ in range(3000) for lang in demo.LANGS]
        demo.train_bpe(texts, folder, vocab_size=vocab)
    return folder


def run_job(checkout: str, document: str, tokenizer: str, out_dir: str, backend: str) -> dict:
    """One job in a fresh wrapper process, so RUSAGE_CHILDREN covers only this job's tree."""
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [sys.executable, "-m", "pipelines.tokenize", "--input", document, "--output", out_dir,
           "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", tokenizer,
           "--append-eod", "--log-interval", "0", "--workers", "1",
           "--tokenizer-backend", backend]
    code = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
            f"r = subprocess.run({cmd!r}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, "
            "text=True); s = time.perf_counter() - t; "
            "print(json.dumps({'rc': r.returncode, 'seconds': s, 'stderr': r.stderr[-3000:], "
            "'rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 10**6}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=checkout,
                         check=True).stdout
    result = json.loads(out)
    if result["rc"] != 0:
        raise SystemExit(f"{checkout}: the job failed (exit {result['rc']}):\n{result['stderr']}")
    return result


def shards(out_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(out_dir, "*.bin"))
                  + glob.glob(os.path.join(out_dir, "*.idx")))


def same_output(a: str, b: str) -> bool:
    sa, sb = shards(a), shards(b)
    return bool(sa) and [os.path.basename(p) for p in sa] == [os.path.basename(p) for p in sb] \
        and all(filecmp.cmp(x, y, shallow=False) for x, y in zip(sa, sb))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, nargs="+", default=[50, 300])
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--backend", default="auto", choices=["auto", "fast", "reference"])
    parser.add_argument("--baseline", default=None,
                        help="a checkout of the commit to compare with (e.g. a git worktree)")
    parser.add_argument("--workdir", default="/tmp/tokenbeam-huge")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    tok = make_tokenizer(os.path.join(args.workdir, f"bpe{args.vocab}"), args.vocab)
    rows = []
    for mb in args.mb:
        doc_dir = os.path.join(args.workdir, f"doc{mb}")
        os.makedirs(doc_dir, exist_ok=True)
        document = os.path.join(doc_dir, f"huge_{mb}mb.jsonl")
        size = make_document(document, mb)
        runs = {}
        for name, checkout in (("now", ROOT), ("baseline", args.baseline)):
            if not checkout:
                continue
            out_dir = os.path.join(args.workdir, f"out_{name}_{mb}")
            results = [run_job(checkout, document, tok, out_dir, args.backend)
                       for _ in range(args.repeats)]
            runs[name] = {"rss_mb": statistics.median(r["rss_mb"] for r in results),
                          "seconds": statistics.median(r["seconds"] for r in results),
                          "backend": next((line for line in results[0]["stderr"].splitlines()
                                           if line.startswith("tokenizer backend:")), "?"),
                          "out": out_dir}
        identical = same_output(runs["now"]["out"], runs["baseline"]["out"]) \
            if "baseline" in runs else None
        rows.append((size, runs, identical))
        print(f"{size / MB:.0f} MB: {runs['now']['backend']}", file=sys.stderr, flush=True)

    print(f"{'document':>10} {'peak RSS now':>14} {'seconds now':>12} {'peak RSS base':>14} "
          f"{'seconds base':>13} {'same shards':>12}")
    for size, runs, identical in rows:
        now, base = runs["now"], runs.get("baseline")
        print(f"{size / MB:>7.0f} MB {now['rss_mb']:>11.0f} MB {now['seconds']:>11.1f}s "
              + (f"{base['rss_mb']:>11.0f} MB {base['seconds']:>12.1f}s {str(identical):>12}"
                 if base else f"{'-':>14} {'-':>13} {'-':>12}"))
    return 0 if all(identical is not False for _, _, identical in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
