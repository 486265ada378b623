"""``python -m pipelines.demo --output DIR``: a small generated multilingual corpus and tokenizers.

Writes ``DIR/corpus/*.jsonl`` (several languages and scripts, code, emoji, empty and long
documents), ``DIR/tokenizer/tokenizer.json`` + ``tokenizer_config.json`` (a byte-level BPE trained
on the corpus, with ``<|endoftext|>`` as its end-of-sequence token) and, with ``--sentencepiece``,
``DIR/spm.model``. Everything is generated from a seed, offline; the same seed gives the same
bytes. Tests and benchmarks use the functions directly.
"""

from __future__ import annotations

import json
import os
import random
import sys
from typing import Iterator

from runtime import cli
from runtime import errors

# Word stock per script, written for this generator. Not meant to be meaningful text: it only
# needs to exercise the tokenizer on many scripts, punctuation styles and whitespace.
WORDS = {
    "en": "the river morning light carries quiet stones across old valleys where people build "
          "small houses and count the seasons by rain".split(),
    "de": "der Fluss trägt am Morgen leise Steine über alte Täler wo Menschen kleine Häuser "
          "bauen und die Jahreszeiten zählen Straße größer".split(),
    "fr": "la rivière porte au matin des pierres tranquilles à travers les vallées où l'on "
          "construit de petites maisons été garçon".split(),
    "ru": "река утром несёт тихие камни через старые долины где люди строят маленькие дома и "
          "считают времена года по дождю".split(),
    "ar": "النهر يحمل في الصباح حجارة هادئة عبر الوديان القديمة حيث يبني الناس بيوتا صغيرة "
          "ويعدون الفصول بالمطر".split(),
    "zh": list("河流在清晨带着安静的石头穿过古老的山谷人们在那里建造小房子用雨水计算季节"),
    "ja": list("川は朝に静かな石を運び古い谷を越えて人々が小さな家を建て雨で季節を数える"),
    "hi": "नदी सुबह शांत पत्थरों को पुरानी घाटियों के पार ले जाती है जहाँ लोग छोटे घर बनाते हैं".split(),
}
SENTENCE_END = {"en": ".", "de": ".", "fr": ".", "ru": ".", "ar": "؟", "zh": "。", "ja": "。",
                "hi": "।"}
EMOJI = ["🙂", "🚀", "👩‍💻", "🏳️‍🌈", "👍🏽", "🇩🇪", "❤️"]
CODE = [
    "def add(a, b):\n    return a + b\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += x[i];\n}\n",
    "SELECT name, COUNT(*) FROM t GROUP BY name;\n",
    "fn main() {\n    println!(\"{}\", 42);\n}\n",
    "    if x  is  None:\n        raise ValueError('x')\n",
]


def sentence(rng: random.Random, lang: str) -> str:
    words = WORDS[lang]
    n = rng.randint(3, 14)
    joiner = "" if lang in ("zh", "ja") else " "
    text = joiner.join(rng.choice(words) for _ in range(n))
    if rng.random() < 0.1:
        text += " " + rng.choice(EMOJI)
    if rng.random() < 0.1:
        text += f" {rng.randint(0, 10**6)}"
    return text[:1].upper() + text[1:] + SENTENCE_END[lang]


def document(rng: random.Random, lang: str, *, sentences: int | None = None) -> str:
    if lang == "code":
        return "".join(rng.choice(CODE) for _ in range(rng.randint(1, 6)))
    n = sentences if sentences is not None else rng.randint(1, 12)
    parts = []
    for i in range(n):
        parts.append(sentence(rng, lang))
        if i + 1 < n:
            parts.append("\n\n" if rng.random() < 0.15 else " ")
    return "".join(parts)


LANGS = list(WORDS) + ["code"]


def documents(seed: int, count: int, *, langs=None, long_every: int = 0,
              empty_every: int = 0) -> Iterator[dict]:
    """``count`` records ``{"id", "lang", "text"}``; every ``empty_every``-th text is empty and
    every ``long_every``-th is long (a few hundred sentences)."""
    rng = random.Random(seed)
    langs = langs or LANGS
    for i in range(count):
        lang = langs[i % len(langs)]
        if empty_every and i % empty_every == empty_every - 1:
            text = ""
        elif long_every and i % long_every == long_every - 1:
            text = document(rng, lang if lang != "code" else "en", sentences=400)
        else:
            text = document(rng, lang)
        yield {"id": f"doc-{seed}-{i}", "lang": lang, "text": text}


def write_jsonl(path: str, records) -> int:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    size = 0
    with open(path, "w", encoding="utf-8") as f:
        for rec in records:
            line = json.dumps(rec, ensure_ascii=False) + "\n"
            f.write(line)
            size += len(line.encode("utf-8"))
    return size


def train_bpe(texts, out_dir: str, *, vocab_size: int = 2000) -> str:
    """A byte-level BPE in ``out_dir/tokenizer.json`` with ``<|endoftext|>`` as EOS, plus the
    ``tokenizer_config.json`` a HuggingFace tokenizer folder carries. Returns the folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>",
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=1)
    return out_dir


def train_sentencepiece(texts, model_prefix: str, *, vocab_size: int = 1000,
                        model_type: str = "bpe") -> str:
    """A SentencePiece model (byte fallback on) at ``model_prefix.model``."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(list(texts)), model_writer=model,
                                   vocab_size=vocab_size, model_type=model_type,
                                   byte_fallback=True, character_coverage=1.0,
                                   bos_id=1, eos_id=2, unk_id=0, pad_id=-1,
                                   minloglevel=2, num_threads=1)
    path = model_prefix + ".model"
    with open(path, "wb") as f:
        f.write(model.getvalue())
    return path


def make_demo(out: str, *, files: int = 3, docs_per_file: int = 400, seed: int = 7,
              sentencepiece: bool = False) -> dict:
    corpus = os.path.join(out, "corpus")
    texts = []
    for k in range(files):
        recs = list(documents(seed + k, docs_per_file, long_every=97, empty_every=53))
        write_jsonl(os.path.join(corpus, f"demo_web_part_{k:02d}.jsonl"), recs)
        texts.extend(r["text"] for r in recs if r["text"])
    result = {"corpus": corpus, "tokenizer": train_bpe(texts, os.path.join(out, "tokenizer"))}
    if sentencepiece:
        result["sentencepiece"] = train_sentencepiece(texts, os.path.join(out, "spm"))
    return result


def run(argv=None) -> int:
    return errors.main(_run, argv)


def _run(argv) -> int:
    parser = cli.ArgumentParser(prog="python -m pipelines.demo", description=__doc__)
    parser.add_argument("--output", required=True)
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--docs-per-file", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sentencepiece", action="store_true")
    args = parser.parse_args(argv)
    made = make_demo(args.output, files=args.files, docs_per_file=args.docs_per_file,
                     seed=args.seed, sentencepiece=args.sentencepiece)
    for what, path in made.items():
        print(f"{what}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(errors.main(_run, process=True))
