"""Writes the drop-in test's inputs into a folder DEST, from fixtures already in tests/data
(nothing downloaded, trained or committed twice): corpus.jsonl (../megatron_tokenizers/corpus.jsonl, 91 documents of several
scripts, empty and whitespace-only texts among them), ids.jsonl (texts of ids for
NullTokenizer: ../megatron_tokenizers/nulltok/corpus.jsonl), hf/tokenizer.json alone (a byte-level
BPE: ../megatron_preprocess/tokenizer/tokenizer.json) and gpt2/vocab.json + gpt2/merges.txt
(the same BPE in GPT-2's two files). SentencePiece, TikToken and WordPiece files are
copied from ../megatron_tokenizers. run_megatron.sh and tests/test_megatron_dropin.py both
call it: python make_inputs.py DEST
"""

import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)


def main(dest: str) -> None:
    shutil.copyfile(os.path.join(DATA, "megatron_tokenizers", "corpus.jsonl"),
                    os.path.join(dest, "corpus.jsonl"))
    # NullTokenizer reads texts of space-separated ids: its own corpus
    shutil.copyfile(os.path.join(DATA, "megatron_tokenizers", "nulltok", "corpus.jsonl"),
                    os.path.join(dest, "ids.jsonl"))
    source = os.path.join(DATA, "megatron_preprocess", "tokenizer", "tokenizer.json")
    os.makedirs(os.path.join(dest, "hf"), exist_ok=True)
    shutil.copyfile(source, os.path.join(dest, "hf", "tokenizer.json"))
    with open(source, encoding="utf-8") as fh:
        model = json.load(fh)["model"]
    os.makedirs(os.path.join(dest, "gpt2"), exist_ok=True)
    with open(os.path.join(dest, "gpt2", "vocab.json"), "w", encoding="utf-8") as fh:
        json.dump(model["vocab"], fh, ensure_ascii=False)
    with open(os.path.join(dest, "gpt2", "merges.txt"), "w", encoding="utf-8") as fh:
        fh.write("#version: 0.2\n")
        for merge in model["merges"]:
            fh.write((merge if isinstance(merge, str) else " ".join(merge)) + "\n")
    for family, names in (("spm", ["unigram.model"]), ("tiktoken", ["vocab.json", "tokenizer_metadata.json"]),
                          ("wordpiece", ["vocab.txt"])):
        os.makedirs(os.path.join(dest, family), exist_ok=True)
        for name in names:
            shutil.copyfile(os.path.join(DATA, "megatron_tokenizers", family, name),
                            os.path.join(dest, family, name))


if __name__ == "__main__":
    main(sys.argv[1])
