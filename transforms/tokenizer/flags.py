"""What Megatron-LM core_v0.16.1's ``tools/preprocess_data.py`` does with its tokenizer flags beyond
the tokenizer's files, decided once for tokenbeam's options (pure functions, no Beam).

preprocess_data builds its tokenizer with ``megatron.core.tokenizers.text.utils.build_tokenizer``
(the default path) or ``megatron.training.tokenizer.build_tokenizer`` (``--legacy-tokenizer``):

- ``--tokenizer-special-tokens``: TikTokenizer (both paths: the special tokens, ids 0..);
  SentencePiece types on the default path (the library's wrapper, which raises unless
  ``--tokenizer-sentencepiece-legacy``); HuggingFaceTokenizer and GPT2BPETokenizer on the default
  path (transformers' ``add_special_tokens``; GPT-2 through the hub's ``gpt2`` config, refused
  here); read by nothing else (the legacy classes, NullTokenizer, BertWordPiece).
- ``--tokenizer-sentencepiece-legacy``: the SentencePiece types on the default path only; the
  wrapper then has no eos (``tokenizer.eod`` raises AttributeError), so with ``--append-eod``
  the partition's process dies and no ``.idx`` is written (the script still exits 0).
- ``--tokenizer-metadata``: the default path only, NullTokenizer excepted; the JSON's
  ``library`` picks the library class (overriding the type's), ``model_type`` a wrapper class
  that changes no id, ``tokenizer_class`` crashes (``getattr`` on a string), and every key is
  set as an attribute of the tokenizer (``path`` would redirect the model file).
- ``--tiktoken-special-tokens``: read by nothing (only ``validate_args`` of training copies it
  into ``--tokenizer-special-tokens``; preprocess_data never calls it).
- ``--vocab-extra-ids``: preprocess_data sets ``args.vocab_extra_ids = 0`` after parsing.
- ``--padded-vocab-size``: the legacy path fills it in when absent; the dtype comes from the
  tokenizer's own ``vocab_size`` on both paths.
- ``--vocab-size``: NullTokenizer and TikTokenizer only.
"""

from __future__ import annotations

import json

from dataio import fs as fsutil
from transforms.tokenizer import registry
from transforms.tokenizer.base import TokenizerConfigError

# model_type -> wrapper class (megatron_tokenizer.TOKENIZER_MAPPING_NAMES): none changes an id.
MODEL_TYPES = ("default", "gpt", "mamba", "bert", "t5")
# The keys MegatronTokenizer.write_metadata writes; any other is set as an attribute of the
# tokenizer with effects not checked here (``path`` replaces the model file).
METADATA_KEYS = ("library", "class_name", "class_path", "model_type", "chat_template",
                 "tokenizer_class", "metadata_path")


def reads_special_tokens(kind: str, *, legacy: bool) -> bool:
    """Whether Megatron's tokenizer for ``kind`` reads ``--tokenizer-special-tokens``."""
    reads = registry.kind(kind).special_tokens
    # the legacy classes take no special tokens (TikToken's aside)
    return reads == "always" or (reads == "default" and not legacy)


def megatron_special_tokens(kind: str, tokens: tuple[str, ...], *, legacy: bool,
                            sentencepiece_legacy: bool,
                            append_eod: bool) -> tuple[str, ...] | None:
    """The special tokens the tokenizer spec carries for these flags (None where Megatron
    ignores them, so that such configurations keep their resume keys), or a one-line
    TokenizerConfigError where Megatron fails or tokenbeam cannot be identical."""
    family = registry.kind(kind).family
    sp_wrapper = family == "sentencepiece" and not legacy
    if sp_wrapper and sentencepiece_legacy and append_eod:
        raise TokenizerConfigError(
            "--tokenizer-sentencepiece-legacy with --append-eod: Megatron core_v0.16.1 fails "
            "(its legacy SentencePiece wrapper has no eos: AttributeError on eod, and no .idx "
            "is written, though the script exits 0); leave out "
            "--tokenizer-sentencepiece-legacy (without --tokenizer-special-tokens it changes "
            "no id) or --append-eod")
    if not tokens or not reads_special_tokens(kind, legacy=legacy):
        return None
    if kind == "GPT2BPETokenizer":
        raise TokenizerConfigError(
            "--tokenizer-special-tokens with GPT2BPETokenizer: Megatron core_v0.16.1 adds them "
            "through transformers' AutoTokenizer of the hub's 'gpt2' (not reachable offline, "
            "not reproducible from --vocab-file/--merge-file alone); use HuggingFaceTokenizer "
            "with a folder whose tokenizer_config.json lists them, or --legacy-tokenizer "
            "(which ignores them)")
    if any(not t for t in tokens):
        raise TokenizerConfigError("--tokenizer-special-tokens: an empty token (Megatron would "
                                   "loop forever on it); leave it out")
    if family == "huggingface":  # extra special tokens, as Megatron's HuggingFace class adds them
        return tokens
    if sp_wrapper and not sentencepiece_legacy:
        raise TokenizerConfigError(
            f"--tokenizer-special-tokens with {kind} needs --tokenizer-sentencepiece-legacy "
            "(Megatron core_v0.16.1 raises without it: special tokens of a SentencePiece model "
            "belong in the model); or --legacy-tokenizer, which ignores them")
    return tokens


def check_megatron_metadata(kind: str, path: str) -> None:
    """``--tokenizer-metadata`` on Megatron's default path: accepted when it changes no id
    (the type's own library, a known model_type, only write_metadata's keys), else a one-line
    TokenizerConfigError naming the key. NullTokenizer ignores it (no check)."""
    expected = registry.kind(kind).megatron_library
    if expected is None:
        return
    try:
        with fsutil.open_file(path, "rb") as f:
            metadata = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise TokenizerConfigError(f"--tokenizer-metadata {path}: no such file (Megatron "
                                   "asserts it exists)") from None
    except (OSError, ValueError) as exc:
        raise TokenizerConfigError(f"--tokenizer-metadata {path}: not a JSON file "
                                   f"({type(exc).__name__}); give Megatron's "
                                   "tokenizer_metadata.json or leave the flag out") from None
    if not isinstance(metadata, dict):
        raise TokenizerConfigError(f"--tokenizer-metadata {path}: not a JSON object")
    library = metadata.get("library")
    if library != expected:
        raise TokenizerConfigError(
            f"--tokenizer-metadata {path}: library {library!r}, but --tokenizer-type {kind} "
            f"runs {expected!r} (Megatron would load the model with the file's library; "
            f"tokenbeam runs the type's only); give the type that matches, or the file's "
            f"library {expected!r}")
    if metadata.get("model_type", "default") not in MODEL_TYPES:
        raise TokenizerConfigError(
            f"--tokenizer-metadata {path}: model_type {metadata.get('model_type')!r} (Megatron "
            f"fails on it: KeyError); use one of {', '.join(MODEL_TYPES)}")
    if metadata.get("tokenizer_class"):
        raise TokenizerConfigError(
            f"--tokenizer-metadata {path}: tokenizer_class (Megatron core_v0.16.1 fails on it: "
            "it looks the class up on a string); leave it out")
    unknown = sorted(set(metadata) - set(METADATA_KEYS))
    if unknown:
        raise TokenizerConfigError(
            f"--tokenizer-metadata {path}: key {unknown[0]!r} (Megatron sets every key on its "
            f"tokenizer object, with effects tokenbeam does not reproduce); keep only "
            f"{', '.join(METADATA_KEYS[:5])}")


def ignored_flag_notes(kind: str, *, legacy: bool, special_tokens: bool,
                       tiktoken_special_tokens: bool, sentencepiece_legacy: bool,
                       metadata: bool, vocab_size: bool, vocab_extra_ids: int,
                       padded_vocab_size: int | None) -> list[str]:
    """One line per flag given that Megatron's preprocess_data.py takes and ignores here."""
    why = "with --legacy-tokenizer" if legacy else f"for {kind}"
    notes = []
    if special_tokens and not reads_special_tokens(kind, legacy=legacy):
        notes.append(f"--tokenizer-special-tokens is ignored {why}, as by Megatron")
    if tiktoken_special_tokens:
        notes.append("--tiktoken-special-tokens is ignored, as by Megatron core_v0.16.1's "
                     "preprocess_data.py; to set the tokens, use --tokenizer-special-tokens")
    reads = registry.kind(kind).flags
    if sentencepiece_legacy and (legacy or "--tokenizer-sentencepiece-legacy" not in reads):
        notes.append(f"--tokenizer-sentencepiece-legacy is ignored {why}, as by Megatron")
    if metadata and (legacy or "--tokenizer-metadata" not in reads):
        notes.append(f"--tokenizer-metadata is ignored {why}, as by Megatron")
    if vocab_size and "--vocab-size" not in reads:
        notes.append(f"--vocab-size is ignored for {kind}, as by Megatron")
    if vocab_extra_ids:
        notes.append("--vocab-extra-ids is ignored, as by Megatron's preprocess_data.py "
                     "(which sets it to 0)")
    if padded_vocab_size is not None:
        notes.append("--padded-vocab-size is ignored, as by Megatron's preprocess_data.py "
                     "(the dtype follows the tokenizer's own vocabulary size)")
    return notes
