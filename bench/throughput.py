"""End-to-end throughput and memory of the tokenize job, for every tokenizer kind, against the
kind's ceiling (its fastest library alone, in memory) and Megatron's tools/preprocess_data.py.

    python bench/throughput.py [--mb 20] [--kinds bpe spm-bpe ...] [--repeats 3]
                               [--megatron-mb 5] [--vocab 32000] [--workdir DIR]

The corpus is built here: --mb MB (10^6 bytes) of JSONL in 32 files of distinct texts (every
script, code, tiny and huge documents; NullTokenizer reads whitespace-separated integers), and a
4x corpus, also 32 files, whose files start with the 1x files' lines and go on with new texts:
no tokenizer cache helps either run. The tokenizers are trained on the corpus, offline:

  bpe          byte-level BPE (HF folder, --vocab)          HuggingFaceTokenizer
  spm-bpe      SentencePiece BPE, byte fallback (--vocab)   SentencePieceTokenizer
  spm-unigram  SentencePiece unigram, byte fallback         SentencePieceTokenizer
  tiktoken     byte-level BPE ranks in Megatron's JSON      TikTokenizer --tiktoken-pattern v2
  null         integers                                     NullTokenizer
  bert         WordPiece vocab.txt (Megatron's legacy)      BertWordPieceCase --legacy-tokenizer
  hf-unigram   HF Unigram folder (NFKC, Metaspace)          HuggingFaceTokenizer
  hf-wordpiece HF WordPiece folder (BERT normaliser)        HuggingFaceTokenizer

Rows per kind (medians of --repeats; each run a fresh process):
  ceiling      the kind's library alone on the 1x texts already in memory, all cores, a fresh
               instance, ids left in the library's own buffer where it has one: gigatoken
               (``len(encode_batch(texts[i:i+4096]).layout.content)``) when the job's self-check
               chose it (it is exact), else tokenizers' encode_batch_fast / sentencepiece with
               num_threads / tiktoken's encode_ordinary_batch (exact on texts holding no
               special token); NullTokenizer: numpy's int parse
               of ``text.split()`` (one core); BertWordPiece: tokenizers' BertWordPieceTokenizer
               (a ceiling only: the job runs Megatron's Python WordPiece)
  tokenbeam    ``python -m pipelines.tokenize`` with default options (+ --append-eod), whole
               process, on the 1x and the 4x corpus; peak RSS of each. A one-document run before
               them makes the self-check's choice of backend (cached per tokenizer), as a
               user's first run does: the measured runs are every later run
  fixed cost   the same command on one document
  marginal     3x the bytes in (4x time - 1x time): what a further MB costs
  Megatron     tools/preprocess_data.py --workers 2 on a --megatron-mb slice (one file), with
               $TOKENBEAM_MEGATRON_PYTHON and $MEGATRON_LM; tokenbeam's shards of the same slice are
               compared with Megatron's byte for byte (cmp). Where Megatron's python lacks
               sentencepiece or tiktoken, tokenbeam's own copies are lent to it (PYTHONPATH)
Ratios are to the ceiling measured in the same run. Peak RSS of a process tree = ru_maxrss of
its largest process (RUSAGE_CHILDREN). The last table (markdown) has every kind side by side.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from pipelines import demo  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tests"))
import megatron_live  # noqa: E402

MB = 10**6  # a megabyte is 10^6 bytes in every figure tokenbeam prints
FILES = 32
BATCH = 4096
KINDS = ("bpe", "spm-bpe", "spm-unigram", "tiktoken", "null", "bert", "hf-unigram",
         "hf-wordpiece")
TITLES = {"bpe": "byte-level BPE", "spm-bpe": "SentencePiece BPE, byte fallback",
          "spm-unigram": "SentencePiece unigram", "tiktoken": "TikTokenizer",
          "null": "NullTokenizer", "bert": "BertWordPiece (legacy)",
          "hf-unigram": "HF Unigram folder", "hf-wordpiece": "HF WordPiece folder"}
NULL_VOCAB = 65000  # NullTokenizer's --vocab-size: ids below it, uint16 shards


# --- the corpus ---------------------------------------------------------------------------------

def _text_lines(k: int, per_file: int):
    """JSONL lines of file k: demo documents and, every 503 lines from the 51st, a huge one
    (1-3 MB, smaller in small files: about a quarter of the 1x file), each seeded by (file,
    line) so that no two files repeat a text."""
    sentences = max(100, min(20000, per_file // 400))
    for i, rec in enumerate(demo.documents(1000 + k, 10**9, long_every=211, empty_every=97)):
        if i % 503 == 50:
            rec["text"] = demo.document(random.Random(k * 10**7 + i), "en", sentences=sentences)
        yield json.dumps(rec, ensure_ascii=False) + "\n"


def _int_lines(k: int):
    """JSONL lines of whitespace-separated integers below NULL_VOCAB (NullTokenizer)."""
    rng = random.Random(k)
    while True:
        n = rng.choice((1, 5, 60, 300, 2000))
        yield json.dumps({"text": " ".join(str(rng.randrange(NULL_VOCAB)) for _ in range(n))}) \
            + "\n"


def make_corpus(folder: str, mb: float, ints: bool = False) -> dict[str, list[str]]:
    """{"x1": 32 paths of mb MB in all, "x4": 32 paths of 4 * mb MB whose files start with the
    x1 files' lines, "one": [one document]}; files already there of the right size are kept."""
    out = {}
    for name in ("x1", "x4", "one"):
        os.makedirs(os.path.join(folder, name), exist_ok=True)
        out[name] = [os.path.join(folder, name, f"part_{k:02d}.jsonl") for k in range(FILES)]
    out["one"] = out["one"][:1]
    per_file = int(mb * MB) // FILES
    done = os.path.join(folder, f"done-{per_file}")
    if not os.path.exists(done):
        for k in range(FILES):
            lines = _int_lines(k) if ints else _text_lines(k, per_file)
            size, x1_open = 0, True
            with open(out["x1"][k], "w", encoding="utf-8") as x1, \
                    open(out["x4"][k], "w", encoding="utf-8") as x4:
                for line in lines:
                    n = len(line.encode("utf-8"))
                    # x1 stops at the first line that would pass its size; x4 skips such lines
                    # (a huge document) and goes on: both end within a line of their size
                    x1_open = x1_open and size + n <= per_file
                    if size + n > 4 * per_file:
                        if 4 * per_file - size < 4096:
                            break
                        continue
                    if x1_open:
                        x1.write(line)
                    x4.write(line)
                    size += n
        with open(out["x1"][0], encoding="utf-8") as f, \
                open(out["one"][0], "w", encoding="utf-8") as one:
            one.write(f.readline())
        open(done, "w").close()
    return out


def megatron_slice(paths, path: str, mb: float) -> str:
    """The first mb MB of lines of ``paths``, in one file (Megatron's --input)."""
    size = 0
    with open(path, "w", encoding="utf-8") as out:
        for p in paths:
            for line in open(p, encoding="utf-8"):
                out.write(line)
                size += len(line.encode("utf-8"))
                if size >= mb * MB:
                    return path
    return path


def load_texts(paths) -> list[str]:
    return [json.loads(line)["text"] for p in paths for line in open(p, encoding="utf-8")]


def nbytes(paths) -> int:
    return sum(os.path.getsize(p) for p in paths)


# --- the tokenizers (trained here, offline) -----------------------------------------------------

def _hf_folder(tok, folder: str, config: dict) -> str:
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    return folder


def train_spm(texts, path: str, vocab: int, model_type: str) -> str:
    """SentencePiece with byte fallback. BPE: Llama-2's settings (identity normalisation, extra
    whitespace kept, digits split); unigram: T5's (NFKC)."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    bpe = model_type == "bpe"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab,
        model_type=model_type, byte_fallback=True, character_coverage=0.9999,
        normalization_rule_name="identity" if bpe else "nmt_nfkc",
        remove_extra_whitespaces=not bpe, split_digits=bpe, allow_whitespace_only_pieces=bpe,
        bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2, num_threads=os.cpu_count(),
        input_sentence_size=200000, max_sentence_length=1 << 16, hard_vocab_limit=False)
    with open(path, "wb") as f:
        f.write(model.getvalue())
    return path


def _byte_bpe(texts, vocab: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    return tok


def write_tiktoken(texts, path: str, vocab: int) -> int:
    """A byte-level BPE trained by tokenizers, its merged tokens in id order as tiktoken ranks
    after the 256 bytes (each the merge of two earlier ones), in Megatron's JSON layout.
    Returns the number of ranks."""
    from tokenizers import pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    to_byte = {c: b for b, c in _bytes_to_unicode().items()}
    assert set(to_byte) == set(alphabet)
    vocab_map = json.loads(_byte_bpe(texts, vocab).to_str())["model"]["vocab"]
    merged = [bytes(to_byte[c] for c in s) for s, _ in sorted(vocab_map.items(),
                                                               key=lambda kv: kv[1])]
    # the 256 single bytes first, in byte order (Megatron's layout), then the merges in order
    tokens = [bytes([b]) for b in range(256)] + [t for t in merged if len(t) > 1]
    entries = [{"rank": i, "token_bytes": base64.b64encode(t).decode("ascii"),
                "token_str": t.decode("utf-8", errors="replace")} for i, t in enumerate(tokens)]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(entries, f)
    return len(tokens)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map (the ByteLevel pre-tokenizer's alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def prepare(kind: str, work: str, texts: list[str], vocab: int) -> dict:
    """The kind's tokenizer files (trained once per workdir) and its flags: the same for
    tokenbeam and Megatron. Returns {"flags", "model", "ceilings": [library...]}."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    base = os.path.join(work, "tokenizers", kind)
    ready = os.path.join(base, "flags.json")
    if os.path.exists(ready):
        return json.load(open(ready))
    os.makedirs(base, exist_ok=True)
    folder = os.path.join(base, "folder")
    hf = lambda path: ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", path]  # noqa: E731
    if kind == "bpe":
        demo.train_bpe(texts, folder, vocab_size=vocab)
        out = {"flags": hf(folder), "model": folder, "ceilings": ["gigatoken", "tokenizers"]}
    elif kind in ("spm-bpe", "spm-unigram"):
        path = train_spm(texts, os.path.join(base, "tok.model"), vocab, kind[4:])
        out = {"flags": ["--tokenizer-type", "SentencePieceTokenizer", "--tokenizer-model", path],
               "model": path, "ceilings": ["gigatoken", "sentencepiece"]}
    elif kind == "tiktoken":
        path = os.path.join(base, "vocab.json")
        ranks = write_tiktoken(texts, path, vocab)
        out = {"flags": ["--tokenizer-type", "TikTokenizer", "--tokenizer-model", path,
                         "--tiktoken-pattern", "v2", "--vocab-size", str(ranks + 1000)],
               "model": path, "ceilings": ["tiktoken"]}
    elif kind == "null":
        out = {"flags": ["--tokenizer-type", "NullTokenizer", "--vocab-size", str(NULL_VOCAB)],
               "model": None, "ceilings": ["numpy"]}
    elif kind == "bert":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.train_from_iterator(texts, trainers.WordPieceTrainer(
            vocab_size=vocab, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
            show_progress=False))
        path = os.path.join(base, "vocab.txt")
        ids = tok.get_vocab()
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(t + "\n" for t in sorted(ids, key=ids.get)))
        out = {"flags": ["--tokenizer-type", "BertWordPieceCase", "--vocab-file", path,
                         "--legacy-tokenizer"], "model": path, "ceilings": ["bert-tokenizers"]}
    elif kind == "hf-unigram":
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        tok.train_from_iterator(texts, trainers.UnigramTrainer(
            vocab_size=vocab, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
            show_progress=False))
        _hf_folder(tok, folder, {"eos_token": "</s>", "unk_token": "<unk>",
                                 "pad_token": "<pad>", "tokenizer_class": "PreTrainedTokenizerFast"})
        out = {"flags": hf(folder), "model": folder, "ceilings": ["gigatoken", "tokenizers"]}
    elif kind == "hf-wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.train_from_iterator(texts, trainers.WordPieceTrainer(
            vocab_size=vocab, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
            show_progress=False))
        # an EOS for --append-eod: Megatron's HuggingFace wrapper reads eos_token (else sep)
        _hf_folder(tok, folder, {"sep_token": "[SEP]", "eos_token": "[SEP]", "unk_token": "[UNK]",
                                 "pad_token": "[PAD]", "cls_token": "[CLS]",
                                 "mask_token": "[MASK]",
                                 "tokenizer_class": "PreTrainedTokenizerFast"})
        out = {"flags": hf(folder), "model": folder, "ceilings": ["gigatoken", "tokenizers"]}
    else:
        raise ValueError(kind)
    with open(ready, "w") as f:
        json.dump(out, f)
    return out


# --- the ceiling: the library alone, in memory (run in a fresh process) ------------------------

def _ceiling_main(library: str, model: str | None, paths: list[str]) -> None:
    """Prints {"seconds", "tokens"} of ``library`` encoding every text of ``paths``. The texts
    are read and the tokenizer built (a fresh instance: its caches cold) before the clock
    starts: the ceiling is the encoding alone."""
    texts = load_texts(paths)
    encode = _batch_encoder(library, model, os.cpu_count())
    t = time.perf_counter()
    n = sum(encode(texts[i:i + BATCH]) for i in range(0, len(texts), BATCH))
    print(json.dumps({"seconds": time.perf_counter() - t, "tokens": n}))


def _batch_encoder(library: str, model: str | None, cores: int):
    """A function: a batch of texts -> how many ids ``library`` gives them (ids left in the
    library's own buffer where it has one)."""
    if library == "gigatoken":
        import gigatoken

        g = gigatoken.Tokenizer.from_sentencepiece(model) if model.endswith(".model") else \
            gigatoken.Tokenizer(os.path.join(model, "tokenizer.json"))
        return lambda batch: len(g.encode_batch(batch).layout.content)
    if library == "tokenizers":
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
        return lambda batch: sum(map(len, tok.encode_batch_fast(batch, add_special_tokens=False)))
    if library == "bert-tokenizers":
        from tokenizers.implementations import BertWordPieceTokenizer

        bert = BertWordPieceTokenizer(model, lowercase=False, strip_accents=False)
        return lambda batch: sum(map(len, bert.encode_batch(batch, add_special_tokens=False)))
    if library == "sentencepiece":
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_file=model, num_threads=cores)
        return lambda batch: sum(map(len, sp.encode(batch)))
    if library == "tiktoken":
        import tiktoken

        from transforms.tokenizer.simple import TIKTOKEN_PATTERNS

        ranks = {base64.b64decode(e["token_bytes"]): e["rank"] for e in json.load(open(model))}
        enc = tiktoken.Encoding(name="bench", pat_str=TIKTOKEN_PATTERNS["v2"],
                                mergeable_ranks=ranks, special_tokens={})
        return lambda batch: sum(map(len, enc.encode_ordinary_batch(batch, num_threads=cores)))
    if library == "numpy":
        import numpy as np

        return lambda batch: sum(len(np.array(text.split(), dtype=np.int64)) for text in batch)
    raise ValueError(library)


def ceiling(library: str, model: str | None, paths) -> dict:
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--ceiling", library,
                        json.dumps(model), json.dumps(list(paths))],
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode:
        return {"error": _last_error(r.stderr)}
    return json.loads(r.stdout)


def _last_error(stderr: str) -> str:
    """The last line of a traceback that names an exception (Rust adds a location after it)."""
    lines = stderr.strip().splitlines() or ["failed"]
    return next((line for line in reversed(lines) if "Error" in line), lines[-1])[:100]


# --- the job and Megatron (whole processes) -----------------------------------------------------

def _timed(cmd: list[str], cwd: str, env: dict | None = None) -> dict:
    """Runs ``cmd`` in a wrapper process: wall seconds, its peak RSS (MB), its stdout."""
    code = ("import resource, subprocess, sys, time, json; t=time.perf_counter(); "
            "r=subprocess.run(json.loads(sys.argv[1]), stdout=subprocess.PIPE, "
            "stderr=subprocess.PIPE, text=True); "
            "print(json.dumps({'seconds': time.perf_counter()-t, 'stdout': r.stdout, "
            "'stderr': r.stderr[-3000:], 'rc': r.returncode, "
            "'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 10**6}))")
    r = subprocess.run([sys.executable, "-c", code, json.dumps(cmd)], capture_output=True,
                       text=True, check=True, cwd=cwd, env=env)
    return json.loads(r.stdout)


def tokenbeam(input_dir: str, out_dir: str, flags: list[str]) -> dict:
    shutil.rmtree(out_dir, ignore_errors=True)
    result = _timed([sys.executable, "-m", "pipelines.tokenize", "--input", input_dir,
                     "--output", out_dir, *flags, "--append-eod", "--log-interval", "0"], ROOT)
    if result["rc"]:
        raise SystemExit(f"tokenbeam failed on {input_dir}:\n{result['stderr']}")
    meta = json.load(open(os.path.join(out_dir, "metadata.json")))
    result["tokens"] = meta["totals"]["tokens"]
    result["backend"] = meta["tokenizer"]["backend"]
    return result


def megatron(input_path: str, out_dir: str, flags: list[str]) -> dict | None:
    # the one lookup of a live Megatron (TOKENBEAM_MEGATRON_PYTHON / MEGATRON_LM, else .cache/)
    python, lm = megatron_live.megatron_python(), megatron_live.megatron_checkout()
    if not (python and lm):
        return None
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    path = os.pathsep.join([lm, *_lent_libraries(python, os.path.dirname(out_dir))])
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = _timed([python, "-W", "ignore", os.path.join(lm, "tools", "preprocess_data.py"),
                     "--input", input_path, "--output-prefix", os.path.join(out_dir, "corpus"),
                     "--json-keys", "text", "--workers", "2", "--append-eod", *flags],
                    out_dir, env)
    # a worker's exception can leave preprocess_data's exit status 0: no .idx is the failure
    if result["rc"] or not os.path.exists(os.path.join(out_dir, "corpus_text_document.idx")):
        result["error"] = _last_error(result["stderr"])
    return result


def _lent_libraries(python: str, work: str) -> list[str]:
    """A folder lending Megatron's python tokenbeam's own sentencepiece and tiktoken (the same
    libraries, the same versions) where it lacks them; [] when it has both."""
    import sentencepiece
    import tiktoken

    missing = [m for m in ("sentencepiece", "tiktoken") if subprocess.run(
        [python, "-c", f"import {m}"], capture_output=True).returncode]
    if not missing:
        return []
    shim = os.path.join(work, "lent-libraries")
    os.makedirs(shim, exist_ok=True)
    site = os.path.dirname(os.path.dirname(sentencepiece.__file__))
    assert site == os.path.dirname(os.path.dirname(tiktoken.__file__))
    for name in os.listdir(site):
        if name.split(".")[0].split("-")[0] in [*missing, "tiktoken_ext"] \
                and not os.path.exists(os.path.join(shim, name)):
            os.symlink(os.path.join(site, name), os.path.join(shim, name))
    return [shim]


def same_shards(tokenbeam_dir: str, megatron_dir: str) -> str:
    """'identical' when tokenbeam's one .bin/.idx pair has Megatron's bytes (cmp)."""
    ours = sorted(n for n in os.listdir(tokenbeam_dir) if n.endswith(".bin"))
    if len(ours) != 1:
        return f"not compared ({len(ours)} shards)"
    for ext in (".bin", ".idx"):
        a = os.path.join(tokenbeam_dir, ours[0][:-4] + ext)
        b = os.path.join(megatron_dir, "corpus_text_document" + ext)
        if subprocess.run(["cmp", "-s", a, b]).returncode:
            return f"DIFFERENT ({ext})"
    return "identical"


def median_run(fn, repeats: int) -> dict:
    runs = [fn() for _ in range(repeats)]
    out = dict(runs[-1])
    for key in ("seconds", "rss"):
        if all(r.get(key) is not None for r in runs):
            out[key] = statistics.median(r[key] for r in runs)
    out["all"] = [r.get("seconds") for r in runs]
    return out


# --- one kind -----------------------------------------------------------------------------------

def bench_kind(kind: str, args, work: str) -> dict:
    ints = kind == "null"
    corpus = make_corpus(os.path.join(work, "corpus-ints" if ints else "corpus"), args.mb, ints)
    x1, x4 = nbytes(corpus["x1"]), nbytes(corpus["x4"])
    sample = [] if ints else [t for t in load_texts(corpus["x1"][:2]) if t][:20000]
    tok = prepare(kind, work, sample, args.vocab)
    flags = tok["flags"]
    out = os.path.join(work, "out", kind)
    print(f"\n== {TITLES[kind]}: {' '.join(flags)}", flush=True)
    row = {"kind": kind}
    # a first run chooses the backend (the self-check) and caches the choice, as a user's first
    # run does; the runs measured below, like every later run of a user's, skip it
    tokenbeam(os.path.dirname(corpus["one"][0]), os.path.join(out, "warm-up"), flags)
    for name in ("x1", "x4", "one"):
        row[name] = median_run(lambda: tokenbeam(os.path.dirname(corpus[name][0]),
                                                 os.path.join(out, name), flags), args.repeats)
    backend = row["x1"]["backend"]
    libs = {}
    for library in tok["ceilings"]:
        libs[library] = median_run(lambda: ceiling(library, tok["model"], corpus["x1"]),
                                   args.repeats)
    # the ceiling: gigatoken where the job's self-check found it exact, else the kind's library
    exact = [lib for lib in tok["ceilings"] if lib != "gigatoken" or backend == "fast"]
    row["ceiling_lib"] = exact[0]
    row["libs"] = libs
    if args.megatron_mb > 0:
        slice_dir = os.path.join(work, "slice-ints" if ints else "slice")
        os.makedirs(slice_dir, exist_ok=True)
        path = os.path.join(slice_dir, "slice.jsonl")
        if not os.path.exists(path) or abs(nbytes([path]) - args.megatron_mb * MB) > MB / 2:
            megatron_slice(corpus["x1"], path, args.megatron_mb)
        row["slice_bytes"] = nbytes([path])
        row["megatron"] = megatron(path, os.path.join(out, "megatron"), flags)
        row["slice"] = tokenbeam(slice_dir, os.path.join(out, "slice"), flags)
        row["identical"] = same_shards(os.path.join(out, "slice"), os.path.join(out, "megatron")) \
            if row["megatron"] and not row["megatron"].get("error") else "Megatron did not run"
    row["x1_bytes"], row["x4_bytes"] = x1, x4
    print_kind(row)
    return row


def _rate(size: int, r: dict | None) -> float | None:
    if not r or r.get("error") or not r.get("seconds"):
        return None
    return size / MB / r["seconds"]


def figures(row: dict) -> dict:
    """The table's figures of one kind (MB/s, ratios to the ceiling, RSS)."""
    x1, x4 = row["x1_bytes"], row["x4_bytes"]
    ceil = _rate(x1, row["libs"][row["ceiling_lib"]])
    f = {"ceiling": ceil, "ceiling_lib": row["ceiling_lib"],
         "libs": {lib: _rate(x1, r) for lib, r in row["libs"].items()},
         "x1": _rate(x1, row["x1"]), "x4": _rate(x4, row["x4"]),
         "fixed": row["one"]["seconds"], "rss1": row["x1"]["rss"], "rss4": row["x4"]["rss"],
         "backend": row["x1"]["backend"]}
    extra = row["x4"]["seconds"] - row["x1"]["seconds"]
    f["marginal"] = (x4 - x1) / MB / extra if extra > 0 else None
    if row.get("megatron") is not None:
        f["megatron"] = _rate(row["slice_bytes"], row["megatron"])
        f["slice_tokenbeam"] = _rate(row["slice_bytes"], row["slice"])
        f["slice_mb"] = row["slice_bytes"] / MB
        f["identical"] = row["identical"]
    return f


def _pct(value, ceiling) -> str:
    return f" ({value / ceiling:.0%})" if value and ceiling else ""


def print_kind(row: dict) -> None:
    f = figures(row)
    n = lambda v, p=1: "-" if v is None else f"{v:.{p}f}"  # noqa: E731
    print(f"{'run':<46} {'MB/s':>9} {'of ceiling':>11} {'peak RSS MB':>12} {'seconds':>8}")
    for lib, rate in f["libs"].items():
        r = row["libs"][lib]
        mark = " <- ceiling" if lib == f["ceiling_lib"] else ""
        err = f"  {r['error']}" if r.get("error") else ""
        print(f"{'in memory: ' + lib:<46} {n(rate):>9} {'':>11} {'-':>12} "
              f"{n(r.get('seconds')):>8}{mark}{err}")
    for key, label, rate in (("x1", f"tokenbeam, whole process, {row['x1_bytes'] / MB:.0f} MB",
                              f["x1"]),
                             ("x4", f"tokenbeam, whole process, {row['x4_bytes'] / MB:.0f} MB",
                              f["x4"])):
        r = row[key]
        print(f"{label:<46} {n(rate):>9} {_pct(rate, f['ceiling']).strip():>11} "
              f"{n(r['rss'], 0):>12} {n(r['seconds']):>8}")
    print(f"{'tokenbeam, one document (fixed cost)':<46} {'':>9} {'':>11} "
          f"{n(row['one']['rss'], 0):>12} {n(f['fixed']):>8}")
    print(f"{'tokenbeam marginal rate (4x - 1x)':<46} {n(f['marginal']):>9} "
          f"{_pct(f['marginal'], f['ceiling']).strip():>11}")
    if "megatron" in f:
        m = row["megatron"]
        err = f"  {m['error']}" if m.get("error") else ""
        print(f"{'Megatron preprocess_data, 2 workers, %.1f MB' % f['slice_mb']:<46} "
              f"{n(f['megatron']):>9} {'':>11} {n(m.get('rss'), 0):>12} "
              f"{n(m.get('seconds')):>8}{err}")
        print(f"{'tokenbeam, same slice':<46} {n(f['slice_tokenbeam']):>9} {'':>11} "
              f"{n(row['slice']['rss'], 0):>12} {n(row['slice']['seconds']):>8}")
    print(f"backend {f['backend']}; peak RSS 4x/1x {f['rss4'] / f['rss1']:.2f}; "
          f"shards vs Megatron: {f.get('identical', 'not run')}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


def print_summary(rows: list[dict], args) -> None:
    """Every kind side by side (markdown, for docs/benchmarks.md)."""
    figs = [figures(r) for r in rows]
    n = lambda v, p=1: "-" if v is None else f"{v:.{p}f}"  # noqa: E731
    print(f"\n| run ({args.mb:g} MB, 32 files; medians of {args.repeats}) | "
          + " | ".join(TITLES[r["kind"]] for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    lines = [
        ("ceiling: library in memory, all cores",
         lambda f: f"{n(f['ceiling'])} MB/s ({f['ceiling_lib']})"),
        ("tokenbeam backend", lambda f: f["backend"]),
        ("tokenbeam whole process, 1x",
         lambda f: f"{n(f['x1'])} MB/s{_pct(f['x1'], f['ceiling'])}"),
        ("tokenbeam whole process, 4x",
         lambda f: f"{n(f['x4'])} MB/s{_pct(f['x4'], f['ceiling'])}"),
        ("fixed cost (one-document job)", lambda f: f"{n(f['fixed'])} s"),
        ("marginal rate (4x - 1x)",
         lambda f: f"{n(f['marginal'])} MB/s{_pct(f['marginal'], f['ceiling'])}"),
        ("peak RSS 1x / 4x",
         lambda f: f"{n(f['rss1'], 0)} / {n(f['rss4'], 0)} MB ({f['rss4'] / f['rss1']:.2f})"),
    ]
    if all("megatron" in f for f in figs):
        lines += [
            (f"Megatron preprocess_data, 2 workers ({args.megatron_mb:g} MB slice)",
             lambda f: f"{n(f['megatron'], 2)} MB/s" + (
                 f" ({f['slice_tokenbeam'] / f['megatron']:.1f}x slower than tokenbeam)"
                 if f['megatron'] and f['slice_tokenbeam'] else "")),
            ("shards vs Megatron (cmp)", lambda f: f["identical"]),
        ]
    for label, cell in lines:
        print(f"| {label} | " + " | ".join(cell(f) for f in figs) + " |")
    print(f"\nload average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"cores {os.cpu_count()}")


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--ceiling":
        _ceiling_main(sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=20,
                        help="size of the 1x corpus in MB (10^6 bytes); the issue's is 679")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each row (median)")
    parser.add_argument("--megatron-mb", type=float, default=5,
                        help="size of Megatron's slice in MB (0: no Megatron column)")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--workdir", default=None, help="kept (corpus, tokenizers) when given")
    args = parser.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="tokenbeam-bench-")
    print(f"corpus {args.mb:g} MB and {4 * args.mb:g} MB in {FILES} files each; cores "
          f"{os.cpu_count()}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
          flush=True)
    try:
        rows = [bench_kind(kind, args, work) for kind in args.kinds]
        print_summary(rows, args)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
