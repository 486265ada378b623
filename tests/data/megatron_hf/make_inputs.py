"""Writes the inputs of the HuggingFace-folder Megatron parity fixture (deterministic; no network).

Run with tokenbeam's environment from the repository root::

    .venv/bin/python tests/data/megatron_hf/make_inputs.py [--retrain]

Writes, next to this file:

- ``corpus.jsonl``: the records of ``../megatron_tokenizers/corpus.jsonl`` (demo documents in
  eight scripts and the adversarial ones) followed by records aimed at HuggingFace folders:
  each family's special-token strings written in text, an unknown-token literal, upper case
  for ``do_lower_case``, words that a config names as special tokens.
- ``other_vocab.txt``, ``other_merges.txt``: files for ``--vocab-file``/``--merge-file``
  given beside a folder.
- one folder per case (``main`` below): a ``tokenizer.json`` trained here with the
  ``tokenizers`` library on the corpus (kept when it exists: see ``write_folder``), and a
  ``tokenizer_config.json`` (some also a ``special_tokens_map.json``) that mimics a model
  family's, or one effect of a config.

``run_megatron.sh`` then runs Megatron-LM's ``tools/preprocess_data.py`` on each folder.
"""

from __future__ import annotations

import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import processors

HERE = os.path.dirname(os.path.abspath(__file__))
RETRAIN = "--retrain" in sys.argv[1:]
BASE_CORPUS = os.path.join(os.path.dirname(HERE), "megatron_tokenizers", "corpus.jsonl")

HF_RECORDS = [
    "An [UNK] literal, [UNK][UNK] glued, and [unk] in lower case.",
    "UPPER CASE TEXT With Mixed Case for do_lower_case: HELLO World, ÉTÉ Straße.",
    "<s>bos then eos</s> <unk> <pad> <bos> <eos> <mask> <start_of_turn>user",
    "<|endoftext|>, <|im_start|>system\nYou are<|im_end|> <|eot|> <|unused_0|>",
    "T5 sentinels <extra_id_0> a <extra_id_1>b<extra_id_4> c </s>",
    "[CLS] the [SEP] the [MASK] [PAD] thereby the theory",
    "the cat and the hat, then there: the",
    "<|tok_a|> and <|tok_b|> named only in a config",
    " leading space and  two spaces",
    "",
]


def corpus_texts() -> list:
    with open(BASE_CORPUS, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    return texts + HF_RECORDS


def _flat(texts) -> list[str]:
    return [t for v in texts for t in (v if isinstance(v, list) else [v])]


def byte_level_bpe(texts, *, vocab=600, specials=("<|endoftext|>",), add_prefix_space=False):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=list(specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return tok


def llama_bpe(texts, *, vocab=600, specials=("<unk>", "<s>", "</s>")):
    """SentencePiece-style BPE as Llama's tokenizer.json has it: byte fallback, normaliser
    Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer."""
    byte_tokens = [f"<0x{i:02X}>" for i in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=[*specials, *byte_tokens], show_progress=False,
        limit_alphabet=200))
    return tok


def wordpiece(texts, *, vocab=600):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(
        vocab_size=vocab, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
        show_progress=False, limit_alphabet=300))
    return tok


def unigram(texts, *, vocab=500):
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(texts, trainers.UnigramTrainer(
        vocab_size=vocab, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
        show_progress=False))
    return tok


def write_folder(name: str, tok: Tokenizer, config: dict, special_map: dict | None = None):
    """The folder's configs; its tokenizer.json only when missing (or with --retrain): the
    trainers of WordPiece, Unigram and BPE with many special tokens break ties in Rust's hash
    order, so a new training gives another vocabulary, and Megatron's outputs would have to be
    made again (run_megatron.sh)."""
    folder = os.path.join(HERE, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "tokenizer.json")
    for old in os.listdir(folder):
        if old != "tokenizer.json" or RETRAIN:
            os.remove(os.path.join(folder, old))
    if not os.path.exists(path):
        tok.save(path, pretty=False)
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1, ensure_ascii=False)
        f.write("\n")
    if special_map is not None:
        with open(os.path.join(folder, "special_tokens_map.json"), "w", encoding="utf-8") as f:
            json.dump(special_map, f, indent=1, ensure_ascii=False)
            f.write("\n")


def main() -> None:
    texts = corpus_texts()
    with open(os.path.join(HERE, "corpus.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
    train = [t[:2000] for t in _flat(texts)]
    # --vocab-file / --merge-file given with a folder (Megatron hands them to AutoTokenizer)
    with open(os.path.join(HERE, "other_vocab.txt"), "w", encoding="utf-8") as f:
        f.write("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nthe\n##s\n")
    with open(os.path.join(HERE, "other_merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\nt h\nth e\n")

    llama = llama_bpe(train)
    for legacy in (True, False):
        write_folder(f"llama_legacy_{str(legacy).lower()}", llama, {
            "tokenizer_class": "LlamaTokenizer", "legacy": legacy, "add_bos_token": True,
            "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
            "unk_token": "<unk>", "pad_token": None, "model_max_length": 4096})
    write_folder("mistral", llama, {
        "tokenizer_class": "LlamaTokenizerFast", "legacy": False, "add_bos_token": True,
        "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "additional_special_tokens": [], "spaces_between_special_tokens": False},
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})
    gemma = llama_bpe(train, specials=("<pad>", "<eos>", "<bos>", "<unk>", "<mask>",
                                       "<start_of_turn>", "<end_of_turn>"))
    write_folder("gemma", gemma, {
        "tokenizer_class": "GemmaTokenizer", "add_bos_token": True, "add_eos_token": False,
        "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
        "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]})

    qwen = byte_level_bpe(train, specials=("<|endoftext|>", "<|im_start|>", "<|im_end|>"))
    write_folder("qwen2", qwen, {
        "tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None, "errors": "replace",
        "split_special_tokens": False, "additional_special_tokens": ["<|im_start|>",
                                                                     "<|im_end|>"]})
    gpt = byte_level_bpe(train)
    write_folder("phi", gpt, {
        "tokenizer_class": "CodeGenTokenizer", "add_prefix_space": False,
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>"})
    write_folder("gpt_neox", gpt, {
        "tokenizer_class": "GPTNeoXTokenizer", "add_prefix_space": False,
        "add_bos_token": False, "add_eos_token": False, "bos_token": "<|endoftext|>",
        "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"})
    write_folder("gpt2_prefix_space", gpt, {
        "tokenizer_class": "GPT2Tokenizer", "add_prefix_space": True,
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>"})
    # special tokens the config names that tokenizer.json lacks: new ids after the vocabulary
    write_folder("missing_specials", gpt, {
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|eot|>",
        "bos_token": "<|endoftext|>",
        "additional_special_tokens": ["<|tok_a|>", "<|tok_b|>"]})
    # named tokens already in the vocabulary (plain words) become special: text split on them
    write_folder("named_in_vocab", gpt, {
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>",
        "additional_special_tokens": ["the", "Ġthe"]})
    write_folder("split_special_tokens", qwen, {
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>",
        "split_special_tokens": True})
    # no eos: Megatron's eod is the sep token
    write_folder("no_eos_sep", gpt, {
        "tokenizer_class": "PreTrainedTokenizerFast", "sep_token": "<|endoftext|>"})

    bert = wordpiece(train)
    for lower in (True, False):
        write_folder(f"bert_lower_{str(lower).lower()}", bert, {
            "tokenizer_class": "BertTokenizer", "do_lower_case": lower,
            "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
            "cls_token": "[CLS]", "mask_token": "[MASK]", "tokenize_chinese_chars": True,
            "strip_accents": None})
    t5 = unigram(train)
    write_folder("t5", t5, {
        "tokenizer_class": "T5Tokenizer", "extra_ids": 5, "eos_token": "</s>",
        "unk_token": "<unk>", "pad_token": "<pad>",
        "additional_special_tokens": [f"<extra_id_{i}>" for i in range(5)]})


if __name__ == "__main__":
    main()
