"""Sentence splitter throughput, with the document-level BPE tokenizer as the reference beside it.

Usage::

    python bench/sentences.py                    # 2 MB multilingual corpus, 1 MB vs 100 MB docs
    python bench/sentences.py --mb 4 --big-mb 100 --repeats 5 --cpu 0

Part 1, the same generated corpus (``pipelines.demo`` documents in en, de, fr, ru, ar, zh, ja)
through every candidate splitter that is installed, one document at a time with its language:

- ``tokenbeam auto``        ``make_splitter()`` = sentencex behind ``chunk_long_text`` (default)
- ``sentencex (raw)``       ``sentencex.segment`` alone: the wrapper's overhead is the difference
- ``tokenbeam nltk``        ``make_splitter(splitter="nltk")`` (Megatron's punkt); the installed
                            punkt_tab model for English if there is one, else one trained here
                            on generated English (every language goes through the English model)
- ``pysbd``, ``blingfire``  other candidates (``pip install pysbd blingfire``), if installed;
                            pysbd only on the first ``--slow-mb`` MB (it is ~100x slower)

and, as the reference, the pipeline's own HuggingFace tokenizer wrapper (a byte-level BPE trained
on the corpus, one thread): ``BPE documents`` encodes whole documents (document level),
``split + BPE sentences`` splits then encodes the sentences (sentence level). ``vs doc-level``
is that row's throughput over the document-level one (the target for sentence level is >= 0.5).

Part 2, one long document (paragraphs of mixed-language text; and Chinese with no whitespace at
all, where sentencex alone is quadratic) of 1 MB and of ``--big-mb`` MB through
``make_splitter()``: seconds per MB should stay flat (linear time). Raw sentencex on the whole
document is shown for the small sizes to show what chunking saves.

Figures are medians over ``--repeats`` runs (the big document runs once). MB = 10^6 bytes of
UTF-8 text.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # per-core figures: tokenizers uses one thread
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pipelines import demo  # noqa: E402
from transforms import sentences as ss  # noqa: E402

LANGS = ["en", "de", "fr", "ru", "ar", "zh", "ja"]


def corpus(mb: float, seed: int = 1) -> list[tuple[str, str]]:
    docs, size = [], 0
    for rec in demo.documents(seed, 10**9, langs=LANGS, long_every=97):
        docs.append((rec["lang"], rec["text"]))
        size += len(rec["text"].encode("utf-8"))
        if size >= mb * 1e6:
            return docs
    return docs


def mb_of(docs) -> float:
    return sum(len(t.encode("utf-8")) for _, t in docs) / 1e6


def median_seconds(fn, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def punkt_model(tmp: str) -> tuple[str, str]:
    """An English punkt model: the installed one, or one trained on generated text."""
    import nltk.data
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return "english", "installed punkt_tab/english"
    except LookupError:
        pass
    from nltk.tokenize import punkt
    rng = random.Random(3)
    text = " ".join(demo.sentence(rng, "en") for _ in range(20_000))
    trainer = punkt.PunktTrainer()
    trainer.train(text, finalize=True)
    params = trainer.get_params()
    model_dir = os.path.join(tmp, "english")
    os.makedirs(model_dir)
    tables = {"collocations.tab": [f"{a}\t{b}" for a, b in params.collocations],
              "sent_starters.txt": list(params.sent_starters),
              "abbrev_types.txt": list(params.abbrev_types),
              "ortho_context.tab": [f"{k}\t{v}" for k, v in params.ortho_context.items()]}
    for name, lines in tables.items():
        with open(os.path.join(model_dir, name), "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
    return model_dir, "punkt trained here on generated English"


def candidates(tmp: str):
    """(name, make(lang) -> split(text), note) for every installed candidate."""
    out = [("tokenbeam auto", lambda lang: ss.make_splitter(lang=lang), "sentencex + chunking")]
    try:
        import sentencex
        out.append(("sentencex (raw)", lambda lang: lambda t: sentencex.segment(lang, t), ""))
    except ImportError:
        print("sentencex: not installed", file=sys.stderr)
    try:
        model, note = punkt_model(tmp)
        splitter = ss.make_splitter(splitter="nltk", lang=model)
        out.append(("tokenbeam nltk", lambda lang: splitter, note))
    except ImportError:
        print("nltk: not installed", file=sys.stderr)
    try:
        import pysbd
        segmenters = {}

        def make_pysbd(lang):
            if lang not in segmenters:
                segmenters[lang] = pysbd.Segmenter(language=lang, clean=False)
            seg = segmenters[lang]
            return lambda t: seg.segment(t) if t else []
        out.append(("pysbd", make_pysbd, "slow"))
    except ImportError:
        print("pysbd: not installed", file=sys.stderr)
    try:
        import blingfire
        out.append(("blingfire", lambda lang: lambda t: blingfire.text_to_sentences(t).split("\n"),
                    "rewrites whitespace"))
    except ImportError:
        print("blingfire: not installed", file=sys.stderr)
    return out


def run_split(make, docs):
    splitters = {}

    def go():
        n = 0
        for lang, text in docs:
            split = splitters.get(lang)
            if split is None:
                split = splitters[lang] = make(lang)
            n += len(split(text))
        return n
    return go


def part1(args, tmp: str) -> None:
    docs = corpus(args.mb)
    slow_docs = corpus(args.slow_mb)
    total = mb_of(docs)
    rows = []

    from transforms.tokenizer import TokenizerSpec, load_tokenizer
    tok_dir = demo.train_bpe([t for _, t in docs[:3000] if t], os.path.join(tmp, "bpe"))
    tok = load_tokenizer(TokenizerSpec("HuggingFaceTokenizer", model=tok_dir))
    texts = [t for _, t in docs]
    batches = [texts[i:i + 1000] for i in range(0, len(texts), 1000)]

    def doc_level():
        return sum(len(tok.encode_batch(b)[1]) for b in batches)
    doc_s, doc_n = median_seconds(doc_level, args.repeats)
    doc_rate = total / doc_s
    split_for = {lang: ss.make_splitter(lang=lang) for lang in LANGS}
    langs = [lang for lang, _ in docs]
    lang_batches = [langs[i:i + 1000] for i in range(0, len(langs), 1000)]

    def sentence_level():
        n = 0
        for b, lb in zip(batches, lang_batches):
            sents = [s for t, lang in zip(b, lb) for s in split_for[lang](t)]
            n += len(tok.encode_batch(sents)[1])
        return n
    sent_s, sent_n = median_seconds(sentence_level, args.repeats)
    rows.append(("BPE documents (ref)", total, doc_rate, doc_n, "document level, 1 thread"))
    rows.append(("split + BPE sentences", total, total / sent_s, sent_n,
                 "sentence level (tokenbeam auto)"))

    for name, make, note in candidates(tmp):
        use = slow_docs if name == "pysbd" else docs
        seconds, n = median_seconds(run_split(make, use), args.repeats)
        rows.append((name, mb_of(use), mb_of(use) / seconds, n, note))

    print(f"\nPart 1: {len(docs)} generated documents ({', '.join(LANGS)}), {total:.2f} MB, "
          f"median of {args.repeats}")
    print(f"{'splitter':24s} {'MB':>6s} {'MB/s':>8s} {'vs doc-level':>12s} {'sequences':>10s}  note")
    for name, mb, rate, n, note in rows:
        print(f"{name:24s} {mb:6.2f} {rate:8.2f} {rate / doc_rate:12.2f} {n:10d}  {note}")


def long_documents(mb: float) -> dict[str, tuple[str, str]]:
    rng = random.Random(7)
    paragraphs, size = [], 0
    while size < mb * 1e6:
        lang = rng.choice(LANGS)
        paragraphs.append(demo.document(rng, lang, sentences=rng.randint(3, 30)))
        size += len(paragraphs[-1].encode("utf-8")) + 2
    mixed = "\n\n".join(paragraphs)
    zh, size = [], 0
    while size < mb * 1e6:
        zh.append(demo.sentence(rng, "zh").replace(" ", ""))
        size += len(zh[-1].encode("utf-8"))
    return {"mixed paragraphs (en)": ("en", mixed), "zh, no whitespace": ("zh", "".join(zh))}


def part2(args) -> None:
    import sentencex
    small = long_documents(1.0)
    print(f"\nPart 2: one long document through make_splitter() (chunk_long_text + sentencex); "
          f"s/MB, median of {args.repeats} (the {args.big_mb:g} MB run once)")
    print(f"{'document':24s} {'size':>8s} {'make_splitter s/MB':>19s} {'raw sentencex s/MB':>19s}"
          f" {'sentences':>10s}")
    for name, (lang, base) in small.items():
        split = ss.make_splitter(lang=lang)
        for label, text, repeats in (("0.25 MB", base[:len(base) // 4], args.repeats),
                                     ("1 MB", base, args.repeats),
                                     (f"{args.big_mb:g} MB", base * int(args.big_mb), 1)):
            mb = len(text.encode("utf-8")) / 1e6
            seconds, sents = median_seconds(lambda: split(text), repeats)
            raw = "-"
            if mb <= 1.01:
                raw_s, _ = median_seconds(lambda: sentencex.segment(lang, text), 1)
                raw = f"{raw_s / mb:.4f}"
            print(f"{name:24s} {label:>8s} {seconds / mb:19.4f} {raw:>19s} {len(sents):10d}")
            del text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=2.0, help="corpus size for part 1")
    parser.add_argument("--slow-mb", type=float, default=0.2, help="corpus size for pysbd")
    parser.add_argument("--big-mb", type=float, default=100, help="the long document in part 2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=None, help="pin the process to this CPU")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    with tempfile.TemporaryDirectory() as tmp:
        part1(args, tmp)
    part2(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
