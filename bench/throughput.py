"""End-to-end throughput and memory of the tokenize job against its ceilings and a Megatron-style
reference, on a generated multilingual corpus and, trained on it, a 32k byte-level BPE
(``--model bpe``) and a 32k SentencePiece BPE with byte fallback (``--model spm``).

    python bench/throughput.py [--mb 200] [--vocab 32000] [--model bpe spm] [--workdir DIR]
                               [--repeats 1]

Rows per model (one run of each unless --repeats; medians printed):
  (a) reference tokenizer in memory, all cores: HF tokenizers encode_batch_fast / sentencepiece
      encode(list) (its num_threads: all cores)
  (b) fast backend (gigatoken encode_batch), in memory, all cores, no routing
  (c) Megatron-style: multiprocessing.Pool(cores).imap(encode one document, chunksize=32) with
      the reference tokenizer, writing .bin/.idx with a list-based builder, like
      tools/preprocess_data.py
  (d) python -m pipelines.tokenize, whole process, --workers 1 and --workers 2; "in-job" is the
      job's own summary time (planning done to last commit: no interpreter or Beam import)
Then (d) again on the corpus repeated 4 times, for peak RSS and the marginal rate (3x the corpus
in the time 4x takes beyond 1x: what a further MB costs once the fixed cost is paid; --skip-4x to
leave out), (d) on one document (the fixed cost), and the shards of (d) compared byte for byte
(cmp) with a --tokenizer-backend reference run.
Peak RSS of a subprocess tree = ru_maxrss of its largest process (RUSAGE_CHILDREN).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pipelines import demo  # noqa: E402

MB = 10**6  # a megabyte is 10^6 bytes in every figure tokenbeam prints


def make_corpus(folder: str, mb: int) -> list[str]:
    """~mb MB of JSONL in 8 files: every script, code, tiny and huge documents."""
    os.makedirs(folder, exist_ok=True)
    paths, per_file = [], (mb << 20) // 8
    for k in range(8):
        path = os.path.join(folder, f"bench_web_part_{k:02d}.jsonl")
        paths.append(path)
        if os.path.exists(path) and os.path.getsize(path) >= per_file:
            continue
        size, i = 0, 0
        with open(path, "w", encoding="utf-8") as f:
            for rec in demo.documents(1000 + k, 10**9, long_every=211, empty_every=97):
                if i % 503 == 502:  # a huge document now and then (~1-3 MB)
                    rec["text"] = demo.document(demo.random.Random(i), "en", sentences=20000)
                line = json.dumps(rec, ensure_ascii=False) + "\n"
                f.write(line)
                size += len(line.encode())
                i += 1
                if size >= per_file:
                    break
    return paths


def load_texts(paths) -> list[str]:
    return [json.loads(line)["text"] for p in paths for line in open(p, encoding="utf-8")]


def peak_rss_mb_children() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / MB  # KiB on Linux


# --- (a), (b): in-memory ceilings --------------------------------------------------------------

def ceiling(kind: str, tokenizer_dir: str, paths, model: str = "bpe") -> dict:
    """Tokenize every text already in memory, in batches of 2048 (a fresh process)."""
    code = f"""
import json, sys, time, resource
texts = [json.loads(l)["text"] for p in json.loads(sys.argv[1]) for l in open(p, encoding="utf-8")]
t = time.perf_counter()
if {model!r} == "spm" and {kind!r} == "reference":
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file={tokenizer_dir!r})
    n = 0
    for i in range(0, len(texts), 2048):
        n += sum(len(ids) for ids in sp.encode(texts[i:i+2048]))
elif {model!r} == "spm":
    import gigatoken
    g = gigatoken.Tokenizer.from_sentencepiece({tokenizer_dir!r})
    n = 0
    for i in range(0, len(texts), 2048):
        n += len(g.encode_batch(texts[i:i+2048]).layout.content)
elif {kind!r} == "reference":
    import tokenizers
    tok = tokenizers.Tokenizer.from_file({os.path.join(tokenizer_dir, 'tokenizer.json')!r})
    n = 0
    for i in range(0, len(texts), 2048):
        n += sum(len(e.ids) for e in tok.encode_batch_fast(texts[i:i+2048], add_special_tokens=False))
else:
    import gigatoken
    g = gigatoken.Tokenizer({os.path.join(tokenizer_dir, 'tokenizer.json')!r})
    n = 0
    for i in range(0, len(texts), 2048):
        n += len(g.encode_batch(texts[i:i+2048]).layout.content)
print(json.dumps({{"seconds": time.perf_counter() - t, "tokens": n,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 10**6}}))
"""
    return json.loads(subprocess.run([sys.executable, "-c", code, json.dumps(list(paths))],
                                     capture_output=True, text=True, check=True).stdout)


# --- (c): Megatron-style -----------------------------------------------------------------------

_TOK = None


def _init(path):
    global _TOK
    if path.endswith(".model"):  # Megatron's SentencePieceTokenizer: encode_as_ids(text)
        import sentencepiece

        _TOK = sentencepiece.SentencePieceProcessor(model_file=path).encode_as_ids
        return
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(path)
    _TOK = lambda text: tok.encode(text, add_special_tokens=False).ids  # noqa: E731


def _encode(line):
    text = json.loads(line)["text"]
    ids = _TOK(text)
    return ids + [0] if ids else [], len(line)


def megatron_style(paths, tokenizer_dir, out_dir) -> dict:
    t = time.perf_counter()
    tokens = 0
    path = tokenizer_dir if tokenizer_dir.endswith(".model") else \
        os.path.join(tokenizer_dir, "tokenizer.json")
    with mp.Pool(os.cpu_count(), initializer=_init, initargs=(path,)) as pool:
        for path in paths:
            prefix = os.path.join(out_dir, os.path.basename(path) + "_mlm")
            lengths, doc_idx = [], [0]
            with open(prefix + ".bin", "wb") as bin_f, open(path, encoding="utf-8") as f:
                for ids, _ in pool.imap(_encode, f, 32):
                    if ids:
                        bin_f.write(np.asarray(ids, dtype=np.uint16).tobytes())
                        lengths.append(len(ids))
                    doc_idx.append(len(lengths))
                    tokens += len(ids)
            pointers = np.concatenate([[0], np.cumsum(lengths)[:-1]]) * 2 if lengths else []
            with open(prefix + ".idx", "wb") as f:
                f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lengths), len(doc_idx)))
                f.write(np.asarray(lengths, "<i4").tobytes() + np.asarray(pointers, "<i8").tobytes()
                        + np.asarray(doc_idx, "<i8").tobytes())
    return {"seconds": time.perf_counter() - t, "tokens": tokens, "rss": None}


# --- (d): the pipeline -------------------------------------------------------------------------

def pipeline(input_dir, tokenizer_dir, out_dir, workers: int, backend: str = "auto") -> dict:
    shutil.rmtree(out_dir, ignore_errors=True)
    kind = "SentencePieceTokenizer" if tokenizer_dir.endswith(".model") else "HuggingFaceTokenizer"
    cmd = [sys.executable, "-m", "pipelines.tokenize", "--input", input_dir, "--output", out_dir,
           "--tokenizer-type", kind, "--tokenizer-model", tokenizer_dir,
           "--append-eod", "--log-interval", "0", "--workers", str(workers),
           "--tokenizer-backend", backend]
    code = ("import resource, subprocess, sys, time, json; t=time.perf_counter(); "
            f"r=subprocess.run({cmd!r}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True); "
            "assert r.returncode == 0, r.stderr[-2000:]; "
            "print(json.dumps({'seconds': time.perf_counter()-t, 'stdout': r.stdout, "
            "'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 10**6}))")
    result = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                       check=True, cwd=os.path.dirname(os.path.dirname(
                                           os.path.abspath(__file__)))).stdout)
    meta = json.load(open(os.path.join(out_dir, "metadata.json")))
    result["tokens"] = meta["totals"]["tokens"]
    # the job's own summary: seconds from planning done to commit (no interpreter/Beam import)
    result["in_job"] = float(re.search(r"job seconds +([0-9.]+)", result.pop("stdout")).group(1))
    result["backend"] = meta["tokenizer"]["backend"]
    return result


def shards_identical(a: str, b: str) -> str:
    """'identical' when the folders hold the same .bin/.idx files byte for byte (cmp)."""
    names = sorted(n for n in os.listdir(a) if n.endswith((".bin", ".idx")))
    if names != sorted(n for n in os.listdir(b) if n.endswith((".bin", ".idx"))):
        return "DIFFERENT file names"
    for name in names:
        if subprocess.run(["cmp", "-s", os.path.join(a, name), os.path.join(b, name)]).returncode:
            return f"DIFFERENT: {name}"
    return f"identical ({len(names)} files)"


def train_spm(texts, path: str, vocab: int) -> str:
    """SentencePiece BPE with byte fallback, Llama-2's settings: identity normalisation, extra
    whitespace kept, digits split, whitespace-only pieces allowed."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab, model_type="bpe",
        byte_fallback=True, character_coverage=0.9999, normalization_rule_name="identity",
        remove_extra_whitespaces=False, split_digits=True, allow_whitespace_only_pieces=True,
        bos_id=1, eos_id=2, unk_id=0,
        pad_id=-1, minloglevel=2, num_threads=os.cpu_count(), input_sentence_size=200000,
        max_sentence_length=1 << 16)
    with open(path, "wb") as f:
        f.write(model.getvalue())
    return path


def median_of(fn, repeats):
    runs = [fn() for _ in range(repeats)]
    out = dict(runs[0])
    out["seconds"] = statistics.median(r["seconds"] for r in runs)
    return out


def bench_model(args, work, corpus, paths, nbytes, tok, model, title) -> None:
    print(f"\n== {title}", flush=True)
    rows = {}
    if not args.only_pipeline:
        rows["(a) reference in memory"] = median_of(
            lambda: ceiling("reference", tok, paths, model), args.repeats)
        rows["(b) fast in memory"] = median_of(lambda: ceiling("fast", tok, paths, model),
                                               args.repeats)
        out = os.path.join(work, f"out_{model}")
        os.makedirs(out, exist_ok=True)
        rows["(c) Megatron-style pool"] = median_of(lambda: megatron_style(paths, tok, out),
                                                    args.repeats)
    for w in (1, 2):
        rows[f"(d) pipeline --workers {w}"] = median_of(
            lambda: pipeline(corpus, tok, os.path.join(work, f"out_{model}_d{w}"), w,
                             args.backend), args.repeats)
    if not args.skip_4x:
        corpus4 = os.path.join(work, "corpus4x")
        os.makedirs(corpus4, exist_ok=True)
        for r in range(4):
            for p in paths:
                target = os.path.join(corpus4, f"r{r}_" + os.path.basename(p))
                if not os.path.exists(target):
                    os.link(p, target) if hasattr(os, "link") else shutil.copy(p, target)
        best = min((1, 2), key=lambda w: rows[f"(d) pipeline --workers {w}"]["seconds"])
        rows[f"(d) pipeline --workers {best}, 4x corpus"] = median_of(lambda: pipeline(
            corpus4, tok, os.path.join(work, f"out_{model}_4x"), best, args.backend),
            args.repeats)
    # The fixed cost: the same command on one document (interpreter, imports, planning, Beam's
    # pipeline construction and stages, commit, metadata)
    tiny = os.path.join(work, "corpus1doc")
    os.makedirs(tiny, exist_ok=True)
    with open(paths[0], encoding="utf-8") as f, \
            open(os.path.join(tiny, "one.jsonl"), "w", encoding="utf-8") as out:
        out.write(f.readline())
    rows["(d) pipeline --workers 1, one document"] = median_of(
        lambda: pipeline(tiny, tok, os.path.join(work, f"out_{model}_1doc"), 1, args.backend),
        args.repeats)
    reference_out = os.path.join(work, f"out_{model}_reference")
    pipeline(corpus, tok, reference_out, 2, "reference")
    print(f"\n{'run':<38} {'MB/s':>8} {'Mtok/s':>8} {'peak RSS MB':>12} {'seconds':>8} "
          f"{'in-job MB/s':>12} {'backend':>9}")
    for name, r in rows.items():
        size = nbytes * (4 if "4x" in name else 1) if "one document" not in name else 0
        rss = f"{r['rss']:.0f}" if r.get("rss") else "-"
        in_job = f"{size / MB / r['in_job']:.2f}" if r.get("in_job") else "-"
        print(f"{name:<38} {size / MB / r['seconds']:>8.2f} "
              f"{r['tokens'] / r['seconds'] / 1e6:>8.2f} {rss:>12} {r['seconds']:>8.1f} "
              f"{in_job:>12} {r.get('backend', '-'):>9}")
    d = min(rows[f"(d) pipeline --workers {w}"]["seconds"] for w in (1, 2))
    if not args.only_pipeline:
        print(f"\n(d)/(b) = {rows['(b) fast in memory']['seconds'] / d:.2f}   "
              f"(d)/(c) = {rows['(c) Megatron-style pool']['seconds'] / d:.2f}   "
              "(throughput ratios, whole process)")
    fixed = rows["(d) pipeline --workers 1, one document"]["seconds"]
    print(f"(d) fixed cost (one document) = {fixed:.1f} s")
    if not args.skip_4x:
        one = min((rows[f"(d) pipeline --workers {w}"] for w in (1, 2)), key=lambda r: r["seconds"])
        four = [v for k, v in rows.items() if "4x" in k][0]
        print(f"peak RSS 4x / 1x = {four['rss'] / one['rss']:.2f}")
        # what each further MB costs once the fixed cost is paid: 3x the corpus in (4x - 1x)
        marginal = 3 * nbytes / MB / (four["seconds"] - one["seconds"])
        line = f"(d) marginal rate 1x -> 4x = {marginal:.2f} MB/s"
        if not args.only_pipeline:
            b = nbytes / MB / rows["(b) fast in memory"]["seconds"]
            line += f" = {marginal / b:.2f} of (b)"
        print(line)
    for w in (1, 2):
        print(f"(d) --workers {w} vs --tokenizer-backend reference: "
              f"{shards_identical(os.path.join(work, f'out_{model}_d{w}'), reference_out)}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--model", nargs="+", default=["bpe", "spm"], choices=["bpe", "spm"])
    parser.add_argument("--skip-4x", action="store_true")
    parser.add_argument("--backend", default="auto", choices=["auto", "reference", "fast"],
                        help="--tokenizer-backend of the pipeline runs (d)")
    parser.add_argument("--only-pipeline", action="store_true",
                        help="skip (a)-(c): only the pipeline rows (e.g. a memory check)")
    args = parser.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="tokenbeam-bench-")
    corpus = os.path.join(work, "corpus")
    paths = make_corpus(corpus, args.mb)
    nbytes = sum(os.path.getsize(p) for p in paths)
    print(f"corpus: {nbytes / MB:.0f} MB in {len(paths)} files; cores: {os.cpu_count()}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for model in args.model:
        if model == "bpe":
            tok = os.path.join(work, f"bpe{args.vocab}")
            if not os.path.exists(os.path.join(tok, "tokenizer.json")):
                demo.train_bpe(load_texts(paths[:1])[:20000], tok, vocab_size=args.vocab)
            title = f"byte-level BPE {args.vocab}"
        else:
            tok = os.path.join(work, f"spm{args.vocab}.model")
            if not os.path.exists(tok):
                train_spm(load_texts(paths[:1])[:20000], tok, args.vocab)
            title = f"SentencePiece BPE {args.vocab}, byte fallback"
        bench_model(args, work, corpus, paths, nbytes, tok, model, title)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
