"""How honest the progress lines and the summary's seconds are, this checkout against a reference
checkout (issue 26 item 3): ``python bench/progress_eta.py --reference /path/to/old/checkout``.

An uneven corpus (one large file, one small: ``--workers 2`` gives one worker 4/5 of the work)
is tokenized with ``--workers 2`` by each checkout in turn (interleaved, ``--repeats`` times);
every stderr line is timestamped as it arrives. Per run it reports the progress lines, how many
said 100% (of a share or of the job) while the run still had work, the ETA's worst error (the
time a line predicts the tokenizing to end, against the last progress line's time), and the
summary's seconds against the wall time measured here around the process (which includes the
process's exit after the summary). Medians over the repeats.
Timings depend on the machine's load; the counts of lines do not.
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
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pipelines import demo  # noqa: E402


def make_corpus(folder: str, *, docs: int) -> tuple[str, str]:
    """(input glob, tokenizer folder): big.jsonl of 4 parts, small.jsonl of 1."""
    demo.make_demo(os.path.join(folder, "demo"), files=4, docs_per_file=docs)
    parts = sorted(os.path.join(folder, "demo", "corpus", n)
                   for n in os.listdir(os.path.join(folder, "demo", "corpus")))
    os.makedirs(os.path.join(folder, "in"))
    with open(os.path.join(folder, "in", "big.jsonl"), "wb") as big:
        for part in parts[:3] + parts[:1]:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, big)
    shutil.copy(parts[3], os.path.join(folder, "in", "small.jsonl"))
    return os.path.join(folder, "in", "*.jsonl"), os.path.join(folder, "demo", "tokenizer")


def run_once(checkout: str, inputs: str, tokenizer: str, out: str) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, "-m", "pipelines.tokenize", "--input", inputs, "--output", out,
            "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", tokenizer,
            "--append-eod", "--workers", "2", "--log-interval", "1000",
            "--batch-documents", "256"]
    env = dict(os.environ, PYTHONPATH=checkout)
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=checkout, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []

    def read():
        for line in proc.stderr:
            lines.append((time.monotonic() - t0, line.rstrip("\n")))

    reader = threading.Thread(target=read)
    reader.start()
    stdout = proc.stdout.read()
    proc.wait(600)
    reader.join()
    wall = time.monotonic() - t0
    if proc.returncode:
        raise RuntimeError("\n".join(text for _, text in lines[-20:]))
    progress = [(t, text) for t, text in lines if "Processed " in text]
    end = progress[-1][0] if progress else wall
    errors, early_100 = [], 0
    for t, text in progress[:-1]:
        eta = re.search(r"ETA(?: of its share)? (\d+):(\d+)", text)
        if eta:
            errors.append(abs(t + int(eta[1]) * 60 + int(eta[2]) - end))
        if re.search(r"; 100% of", text):
            early_100 += 1
    seconds = {name: float(value) for name, value in
               re.findall(r"^  (seconds|wall seconds|job seconds)\s+([\d.]+)$", stdout, re.M)}
    return {"lines": len(progress), "early_100": early_100,
            "eta_error": max(errors) if errors else float("nan"),
            "summary": seconds.get("wall seconds", seconds.get("seconds")),
            "job": seconds.get("job seconds", seconds.get("seconds")), "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", required=True, help="a checkout to compare with")
    parser.add_argument("--docs", type=int, default=3000, help="documents per demo part")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    temp = tempfile.mkdtemp(prefix="bench-progress-")
    try:
        inputs, tokenizer = make_corpus(temp, docs=args.docs)
        size = sum(os.path.getsize(os.path.join(temp, "in", n))
                   for n in os.listdir(os.path.join(temp, "in")))
        runs: dict[str, list[dict]] = {"reference": [], "this checkout": []}
        for _ in range(args.repeats):
            for name, checkout in (("reference", args.reference), ("this checkout", ROOT)):
                runs[name].append(run_once(checkout, inputs, tokenizer,
                                           os.path.join(temp, "out")))
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    print(f"corpus: {size / 1e6:.1f} MB (10^6 bytes) in 2 files, 4:1; --workers 2; "
          f"medians of {args.repeats}")
    print(f"{'run':<14} {'lines':>6} {'100% early':>11} {'worst ETA err s':>16} "
          f"{'summary s':>10} {'job s':>6} {'wall s':>7}")
    for name, results in runs.items():
        med = {k: statistics.median(r[k] for r in results) for k in results[0]}
        print(f"{name:<14} {med['lines']:>6.0f} {med['early_100']:>11.0f} "
              f"{med['eta_error']:>16.1f} {med['summary']:>10.1f} {med['job']:>6.1f} "
              f"{med['wall']:>7.1f}")


if __name__ == "__main__":
    main()
