"""Writes the inputs of the preprocess_data.py parity fixture: ``corpus.jsonl`` and ``tokenizer/``.

Run with tokenbeam's environment from the repository root::

    .venv/bin/python tests/data/megatron_preprocess/make_inputs.py

The corpus is ~300 documents from ``pipelines.demo`` (eight scripts, code, emoji, empty
documents, one long document) plus hand-written records for the edge cases a JSONL reader and
tokenizer must agree with Megatron on (listed in EDGE_CASES' comments). The tokenizer is the
demo's byte-level BPE (vocab 2000, ``<|endoftext|>`` as EOS) trained on the corpus texts;
``tokenizer_bos/`` is the same with a post-processor that prepends ``<|endoftext|>`` as a BOS.
``run_megatron.sh`` then runs Megatron-LM's tools/preprocess_data.py on them.
"""

from __future__ import annotations

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

from pipelines import demo  # noqa: E402

SEED = 11

# (json text of the record line, as written byte for byte, without its line ending, and the
# line ending). Each is a case where a JSONL reader or the tokenizer could plausibly differ.
EDGE_CASES = [
    # leading spaces and tabs are kept (no strip) and tokenized
    ('{"id":"edge-leading-spaces","text":"   three leading spaces and two trailing  "}', "\n"),
    ('{"id":"edge-tabs","text":"\\tTabbed\\tline\\twith\\ttabs\\t"}', "\n"),
    # whitespace-only texts are non-empty documents (they get tokens and an EOD)
    ('{"id":"edge-one-space","text":" "}', "\n"),
    ('{"id":"edge-newlines-only","text":"\\n\\n"}', "\n"),
    # a NUL character through the \\u0000 escape
    ('{"id":"edge-nul","text":"before\\u0000after"}', "\n"),
    # (A lone surrogate escape such as "\\ud83d" is NOT here: json.loads accepts it, but the HF
    # tokenizer raises TypeError and preprocess_data.py dies; see README.md.)
    # a valid surrogate pair escape = one emoji; non-ASCII escaped as \\uXXXX (ensure_ascii)
    ('{"id":"edge-escaped","text":"\\u00e9t\\u00e9 \\ud83d\\ude80 \\u6cb3"}', "\n"),
    # raw U+2028, U+2029 and U+0085 inside a value: not line breaks for a JSONL reader
    # (Python's str.splitlines would split there; file iteration does not)
    ('{"id":"edge-unicode-separators","text":"a\u2028b\u2029c\u0085d"}', "\n"),
    # escaped CR/LF inside the value, and a record whose line ends with CRLF
    ('{"id":"edge-crlf-escapes","text":"line one\\r\\nline two\\rthree\\n"}', "\n"),
    ('{"id":"edge-crlf-line-ending","text":"this record ends with CR LF"}', "\r\n"),
    # the EOS token's text inside a document: HF tokenize() maps it to the special id
    ('{"id":"edge-eos-text","text":"before <|endoftext|> after"}', "\n"),
    # combining accent (NFD) next to the precomposed form: no normalizer, so different ids
    ('{"id":"edge-nfd","text":"e\\u0301 vs \\u00e9"}', "\n"),
    # other keys before and after "text", nested values
    ('{"meta":{"text":"not this one","n":[1,2]},"text":"the top-level text key","z":null}', "\n"),
    # a list value = pre-split sentences: one sequence per non-empty sentence, EOD on the last
    ('{"id":"edge-list","text":["First sentence.", " Second one \\ud83d\\ude42.", "", "末尾。"]}',
     "\n"),
    ('{"id":"edge-list-empty","text":[]}', "\n"),
    ('{"id":"edge-list-of-empty","text":[""]}', "\n"),
    # a very long run with no whitespace (a single pre-token)
    ('{"id":"edge-no-spaces","text":"' + "abcdefghij" * 300 + '"}', "\n"),
    # an empty text
    ('{"id":"edge-empty","text":""}', "\n"),
]


def corpus_lines() -> list[tuple[str, str]]:
    records = list(demo.documents(SEED, 290, empty_every=37))
    rng = random.Random(SEED)
    long_text = demo.document(rng, "en", sentences=400)
    records.insert(150, {"id": "long-0", "lang": "en", "text": long_text})
    lines = [(json.dumps(r, ensure_ascii=False), "\n") for r in records]
    # interleave the edge cases so they are not all in one batch of a reader
    for k, case in enumerate(EDGE_CASES):
        lines.insert(5 + 17 * k, case)
    return lines


def _is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def write_bos_variant(folder: str, out: str) -> str:
    """The same tokenizer with a post-processor that puts ``<|endoftext|>`` before every
    encoded text (as Llama-3-style tokenizer.json files do with their BOS): HF's
    ``add_special_tokens=True`` path then adds it, ``tokenize()`` does not."""
    import shutil

    from tokenizers import Tokenizer, processors

    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    bos = "<|endoftext|>"
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    shutil.copyfile(os.path.join(folder, "tokenizer_config.json"),
                    os.path.join(out, "tokenizer_config.json"))
    return out


def main() -> int:
    lines = corpus_lines()
    path = os.path.join(HERE, "corpus.jsonl")
    with open(path, "w", encoding="utf-8", newline="") as f:
        for text, ending in lines:
            f.write(text + ending)
    texts = []
    for text, _ in lines:
        value = json.loads(text)["text"]
        values = value if isinstance(value, list) else [value]
        # the tokenizer trains on well-formed text only (a lone surrogate cannot be encoded)
        texts.extend(v for v in values if v and _is_encodable(v))
    folder = demo.train_bpe(texts, os.path.join(HERE, "tokenizer"), vocab_size=2000)
    bos_folder = write_bos_variant(folder, os.path.join(HERE, "tokenizer_bos"))
    print(f"wrote {path} ({len(lines)} records), {folder} and {bos_folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
