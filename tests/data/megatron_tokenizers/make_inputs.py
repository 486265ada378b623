"""Writes the inputs of the per-tokenizer Megatron parity fixtures (deterministic; no network).

Run with tokenbeam's environment from the repository root::

    .venv/bin/python tests/data/megatron_tokenizers/make_inputs.py

Writes, next to this file:

- ``corpus.jsonl``: ordinary documents from ``pipelines.demo`` (eight scripts, code, emoji)
  followed by ADVERSARIAL records (control characters, zero-width and combining marks, RTL,
  emoji ZWJ sequences, CJK without spaces, strings that look like every family's special
  tokens, whitespace-only and empty documents, CRLF, tabs, 30,000-character words, pre-split
  sentence lists). Used by every text tokenizer family.
- ``nulltok/corpus.jsonl``: whitespace-separated integers, every form Python's ``int()``
  accepts after Megatron's ``split(' ')`` (no record that makes Megatron crash).
- ``spm/unigram.model`` (T5-like: unigram, NFKC normaliser) and ``spm/bpe.model`` (Llama-like:
  BPE, no normaliser), both with byte fallback, trained on the corpus.
- ``tiktoken/vocab.json``: a byte-level BPE in Megatron's tiktoken JSON layout (a list of
  ``{"rank", "token_bytes", "token_str"}``), trained by the small trainer below.
- ``wordpiece/vocab.txt``: a BERT WordPiece vocabulary (cased, accents kept) with
  ``[PAD] [UNK] [CLS] [SEP] [MASK]``, built by counting.

``run_megatron.sh`` then runs Megatron-LM's ``tools/preprocess_data.py`` on them.
"""

from __future__ import annotations

import base64
import collections
import io
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

from pipelines import demo  # noqa: E402

SEED = 14
SPECIAL_LOOKALIKES = (
    "<s> </s> <unk> <pad> <mask> <cls> <sep> <EOD> <CLS> <SEP> <MASK> <PAD> <BOS> <EOS> "
    "[CLS] [SEP] [MASK] [UNK] [PAD] [EOS] [BOS] <|endoftext|> <SPECIAL_7> <extra_id_0> \u2581")

ADVERSARIAL = [
    # control characters: C0 (NUL included), DEL, C1
    "before\u0000after \u0001\u0002\u0007\u0008\u000b\u000c\u001b[0m\u001f\u007f end",
    "C1: \u0080\u0085\u008d\u009f next",
    # zero-width characters and combining marks (NFD next to NFC, stacked marks)
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u2060wj",
    "e\u0301 vs \u00e9, a\u0300\u0301\u0302\u0303\u0304, Zalgo Z\u0351\u0352\u0353o\u0354",
    # right-to-left text, marks and overrides
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e2\u05d1"
    "\u05e8\u05d9\u05ea \u200fmark\u200e \u202eoverride\u202c done",
    # emoji with ZWJ, skin tones, flags, variation selectors
    "\U0001F469\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 \U0001F3F3\ufe0f\u200d"
    "\U0001F308 \U0001F44D\U0001F3FD \U0001F1E9\U0001F1EA\U0001F1EF\U0001F1F5 \u2764\ufe0f",
    # CJK and kana without spaces, Korean, Thai
    "\u6211\u4eec\u4eca\u5929\u53bb\u516c\u56ed\u6563\u6b65\u7136\u540e\u5403\u5348\u996d"
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u30ab\u30bf\u30ab\u30ca\uff01"
    "\ud55c\uad6d\uc5b4\ud14d\uc2a4\ud2b8\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22",
    # strings that look like special tokens of every family, alone, glued and nested
    SPECIAL_LOOKALIKES,
    "x<s>y</s>z<EOD><EOD><CLS>[CLS]a[SEP]<sep><s><mask>" + "<SPECIAL_999><unk>",
    "<s>",
    "</s>",
    "<EOD>",
    "[MASK]",
    # whitespace-only and empty documents
    " ", "   ", "\t", "\n\n", "\u3000", "\u00a0", "",
    # CRLF, CR, tabs, unicode separators
    "line one\r\nline two\r\n\r\nthree\rfour",
    "\tcol1\tcol2\t\tcol4\t",
    "a\u2028b\u2029c\u0085d",
    # casing and normalisation traps: Greek final sigma, dotted I, sharp s, ligatures, width
    "\u039f\u0394\u039f\u03a3 \u03a3\u039f\u03a6\u039f\u03a3. \u0130STANBUL \u0131i "
    "STRASSE stra\u00dfe \u1e9e \ufb01 \ufb00 \uff21\uff22\uff23 \uff71\uff72 \u2460\u2461 "
    "\U0001d518\U0001d52b\U0001d526",
    # numbers and code
    "1234567890 12 345 6789 0.000001 1e-9 0x1F",
    "def f(x):\n\treturn x**2  # comment\n\n\nclass A: pass\r\n",
    # 30,000-character words
    "x" * 30000,
    "Donaudampfschiff\u00e4hrt" * 1500,
    # pre-split sentences (list values): one sequence each, empty ones dropped
    ["First sentence.", " Second <s> one \U0001F642.", "", "\u672b\u5c3e\u3002"],
    [],
    [""],
]


def ordinary(count: int = 60):
    return [r["text"] for r in demo.documents(SEED, count)]


def write_corpus(path: str, texts) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"id": f"doc-{i}", "text": text}, ensure_ascii=False) + "\n")


def null_texts():
    rng = random.Random(SEED)
    texts = ["1 2 3", "0", "7", "65498 65499 65500", "3\n", "12\r\n", "+4 -0 007 1_000",
             "\u0661\u0662\u0663 \uff11\uff12", "\t5\t", " ".join(map(str, range(999, 1010)))]
    texts += [" ".join(str(rng.randrange(65536)) for _ in range(rng.randint(1, 40)))
              for _ in range(40)]
    texts.append(" ".join(str(rng.randrange(1000)) for _ in range(5000)))
    texts.append(["1 2", "3", "4 5 6"])
    return texts


def train_sentencepiece(texts, path: str, *, model_type: str, vocab_size: int,
                        normalization: str) -> None:
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size,
        model_type=model_type, byte_fallback=True, character_coverage=1.0, bos_id=1, eos_id=2,
        unk_id=0, pad_id=-1, minloglevel=2, num_threads=1, hard_vocab_limit=False,
        normalization_rule_name=normalization)
    with open(path, "wb") as f:
        f.write(model.getvalue())


def train_byte_bpe(texts, merges: int) -> list[bytes]:
    """Byte-level BPE: 256 single bytes, then the most frequent adjacent pair of each round
    (ties broken by the pair's bytes), over words split like GPT-2 does. Returns the tokens
    in rank order, which is what tiktoken's ranks are."""
    import regex

    split = regex.compile(r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+")
    words = collections.Counter()
    for text in texts:
        for word in split.findall(text):
            words[tuple(bytes([b]) for b in word.encode("utf-8"))] += 1
    vocab = [bytes([i]) for i in range(256)]
    known = set(vocab)
    for _ in range(merges):
        pairs = collections.Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        candidates = [(n, pair) for pair, n in pairs.items() if pair[0] + pair[1] not in known]
        if not candidates:
            break
        _, (a, b) = max(candidates)
        vocab.append(a + b)
        known.add(a + b)
        merged = collections.Counter()
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return vocab


def write_tiktoken_vocab(path: str, vocab: list[bytes]) -> None:
    entries = [{"rank": i, "token_bytes": base64.b64encode(t).decode("ascii"),
                "token_str": t.decode("utf-8", errors="replace")} for i, t in enumerate(vocab)]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(entries, f, ensure_ascii=False)


def train_wordpiece(texts, folder: str) -> None:
    """A WordPiece vocabulary built by counting (deterministic, unlike a trainer with hash-map
    ties): the special tokens, every character seen (alone and as ``##c``), the most frequent
    words (cased and lower-cased) and the most frequent word endings as ``##`` pieces."""
    import regex

    words = collections.Counter()
    for text in texts:
        words.update(regex.findall(r"\p{L}+|\p{N}+|[^\s\p{L}\p{N}]", text))
    chars = sorted({c for w in words for c in w})
    top = [w for w, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:500]]
    lowered = sorted({w.lower() for w in top} - set(top))
    endings = collections.Counter()
    for w, n in words.items():
        for k in (2, 3, 4):
            if len(w) > k:
                endings["##" + w[-k:]] += n
    suffixes = [e for e, _ in sorted(endings.items(), key=lambda kv: (-kv[1], kv[0]))[:300]]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    for token in chars + ["##" + c for c in chars] + top + lowered + suffixes:
        if token not in vocab:
            vocab.append(token)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in vocab))


def main() -> None:
    texts = ordinary() + ADVERSARIAL
    write_corpus(os.path.join(HERE, "corpus.jsonl"), texts)
    training = [t for t in ordinary(400) if t] + [SPECIAL_LOOKALIKES]
    for family in ("nulltok", "spm", "tiktoken", "wordpiece"):
        os.makedirs(os.path.join(HERE, family), exist_ok=True)
    write_corpus(os.path.join(HERE, "nulltok", "corpus.jsonl"), null_texts())
    train_sentencepiece(training, os.path.join(HERE, "spm", "unigram.model"),
                        model_type="unigram", vocab_size=1000, normalization="nmt_nfkc")
    train_sentencepiece(training, os.path.join(HERE, "spm", "bpe.model"),
                        model_type="bpe", vocab_size=1000, normalization="identity")
    write_tiktoken_vocab(os.path.join(HERE, "tiktoken", "vocab.json"),
                         train_byte_bpe(training, merges=768))
    train_wordpiece(training, os.path.join(HERE, "wordpiece"))


if __name__ == "__main__":
    main()
