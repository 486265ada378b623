"""Every ``--tokenizer-type`` tokenbeam runs, declared once: its files, the flags it reads, the
class that builds its reference tokenizer and the backends that may stand in for it.

The planner (which files must exist), the options (choices, which flags apply), flags.py
(Megatron's treatment of the flags), files.py (which file kinds fit) and the backend choice all
look a kind up here, so adding a kind is one :class:`Kind` below (plus its class, in its
family's module). Megatron's types that tokenbeam does not run are in :data:`REFUSED`, each
with the reason given to the user.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

from transforms.tokenizer import files as tf
from transforms.tokenizer import hf, simple
from transforms.tokenizer.base import Tokenizer, TokenizerConfigError
from transforms.tokenizer.sentencepiece import SentencePieceTokenizer

if TYPE_CHECKING:
    from transforms.tokenizer.spec import TokenizerSpec

# Where the fast backend (gigatoken, fast.py) builds its tokenizer from.
FAST_FROM_SENTENCEPIECE = "sentencepiece .model"  # converted; texts it gets wrong are routed
FAST_FROM_RUST = "the reference's tokenizers.Tokenizer"


@dataclasses.dataclass(frozen=True)
class Need:
    """A file flag a kind cannot do without: checked to exist before any input is read."""

    flag: str
    attr: str  # the TokenizerSpec field that holds it
    what: str  # named in the message: "give {what}"
    required: bool = True  # False: left to the loader's own message when missing


@dataclasses.dataclass(frozen=True, eq=False)  # compared and hashed by identity (dict fields)
class Kind:
    name: str  # Megatron's --tokenizer-type value
    family: str  # the module its class lives in: huggingface, sentencepiece, simple
    factory: Callable[[TokenizerSpec], Tokenizer]  # builds the reference tokenizer
    # the library Megatron's default path runs it with (--tokenizer-metadata); None: no library
    megatron_library: str | None = None
    needs: tuple[Need, ...] = ()
    # which file kinds (files.py) fit each flag it reads: others are named as what they are
    file_kinds: dict = dataclasses.field(default_factory=dict)
    folder_file: str | None = None  # a folder is accepted when it holds this file
    # the flags it reads beyond the common ones (--append-eod, --eod-id, --tokenizer-backend)
    flags: tuple[str, ...] = ()
    # how --tokenizer-special-tokens reaches it: "always", "default" (not with
    # --legacy-tokenizer) or None (never read)
    special_tokens: str | None = None
    fast: str | None = None  # FAST_FROM_*: gigatoken can stand in (after the self-check)
    rust_backend: bool = False  # its own tokenizers.Tokenizer can stand in (HuggingFace)
    # (spec field, flag): set, the fast backend cannot be exact (reference only)
    reference_only: tuple[tuple[str, str], ...] = ()
    legacy_only: str | None = None  # why only --legacy-tokenizer runs it, if so
    load_on_check: bool = False  # the driver loads it once before planning (contents vs flags)
    check: Callable[[TokenizerSpec], None] | None = None  # flag checks before the files
    files: Callable[[TokenizerSpec], list] = lambda spec: []  # hashed into resume keys
    options: Callable[[TokenizerSpec], dict] = lambda spec: {}  # switches that change ids

    def mismatch(self, given: dict[str, str | None]) -> str | None:
        """One line when the files ``given`` (flag -> path) are of another kind than this type
        reads (files.py), else None."""
        return tf.mismatch(self.name, self.file_kinds, given)


def _fields(*names: str) -> Callable[[TokenizerSpec], list]:
    return lambda spec: [getattr(spec, name) for name in names]


def _special_tokens_option(spec: TokenizerSpec) -> dict:
    return {"special_tokens": list(spec.special_tokens)} if spec.special_tokens else {}


def _tiktoken_options(spec: TokenizerSpec) -> dict:
    return dict(vocab_size=spec.vocab_size, pattern=spec.tiktoken_pattern,
                num_special_tokens=spec.tiktoken_num_special_tokens,
                special_tokens=list(spec.special_tokens or []) or None)


def _needs_vocab_size(spec: TokenizerSpec) -> None:
    if spec.vocab_size is None:
        raise TokenizerConfigError("NullTokenizer needs --vocab-size N (EOD = N, as in "
                                   "Megatron)")


_SP_MODEL = Need("--tokenizer-model", "model", "the SentencePiece .model file")
_SP = dict(family="sentencepiece", factory=SentencePieceTokenizer,
           megatron_library="sentencepiece", needs=(_SP_MODEL,),
           file_kinds={"--tokenizer-model": (tf.SENTENCEPIECE,)},
           flags=("--tokenizer-model", "--legacy-tokenizer", "--tokenizer-special-tokens",
                  "--tokenizer-sentencepiece-legacy", "--tokenizer-metadata",
                  "--add-special-tokens"),
           special_tokens="default", fast=FAST_FROM_SENTENCEPIECE,
           reference_only=(("legacy", "--legacy-tokenizer"),
                           ("special_tokens", "--tokenizer-special-tokens")),
           files=_fields("model"), options=_special_tokens_option)
_WORDPIECE = dict(family="simple", factory=simple.WordPieceTokenizer, megatron_library="megatron",
                  needs=(Need("--vocab-file", "vocab_file", "the WordPiece vocab.txt"),),
                  file_kinds={"--vocab-file": (tf.WORDPIECE,)},
                  flags=("--vocab-file", "--legacy-tokenizer", "--tokenizer-metadata"),
                  legacy_only=("Megatron core_v0.16.1's default path loads a bert-large tokenizer "
                               "from the HuggingFace hub; tokenbeam runs the legacy WordPiece "
                               "semantics only"),
                  load_on_check=True, files=_fields("vocab_file"))

KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("HuggingFaceTokenizer", family="huggingface", factory=hf.HuggingFaceTokenizer,
         megatron_library="huggingface",
         needs=(Need("--tokenizer-model", "model", "a tokenizer.json or a folder holding one",
                     required=False),),
         file_kinds={"--tokenizer-model": (tf.HF_JSON,)}, folder_file="tokenizer.json",
         # Megatron hands --vocab-file/--merge-file to AutoTokenizer too
         flags=("--tokenizer-model", "--vocab-file", "--merge-file", "--legacy-tokenizer",
                "--tokenizer-special-tokens", "--tokenizer-metadata", "--add-special-tokens",
                "--tokenizer-hf-include-special-tokens", "--tokenizer-hf-use-fast"),
         special_tokens="default", fast=FAST_FROM_RUST, rust_backend=True,
         reference_only=(("add_special_tokens", "--add-special-tokens"),),
         files=hf.hf_files, options=_special_tokens_option),
    Kind("SentencePieceTokenizer", **_SP),
    Kind("GPTSentencePieceTokenizer", **_SP),
    Kind("Llama2Tokenizer", **_SP),
    Kind("GPT2BPETokenizer", family="simple", factory=simple.GPT2BPETokenizer,
         megatron_library="megatron",
         needs=(Need("--vocab-file", "vocab_file", "the GPT-2 vocab.json"),
                Need("--merge-file", "merge_file", "the GPT-2 merges.txt")),
         file_kinds={"--vocab-file": (tf.GPT2_VOCAB,), "--merge-file": (tf.GPT2_MERGES,)},
         flags=("--vocab-file", "--merge-file", "--legacy-tokenizer", "--tokenizer-metadata",
                "--tokenizer-special-tokens", "--add-special-tokens"),
         special_tokens="default", fast=FAST_FROM_RUST,
         reference_only=(("add_special_tokens", "--add-special-tokens"),),
         files=_fields("vocab_file", "merge_file")),
    Kind("NullTokenizer", family="simple", factory=simple.NullTokenizer,
         flags=("--vocab-size",), check=_needs_vocab_size),
    Kind("TikTokenizer", family="simple", factory=simple.TikTokenizer, megatron_library="tiktoken",
         needs=(Need("--tokenizer-model", "model", "the tiktoken vocabulary JSON"),),
         file_kinds={"--tokenizer-model": (tf.TIKTOKEN_JSON,)},
         flags=("--tokenizer-model", "--vocab-size", "--legacy-tokenizer", "--tiktoken-pattern",
                "--tiktoken-num-special-tokens", "--tokenizer-special-tokens",
                "--tokenizer-metadata"),
         special_tokens="always", load_on_check=True, check=simple.check_tiktoken_spec,
         files=_fields("model"), options=_tiktoken_options),
    Kind("BertWordPieceLowerCase", **_WORDPIECE),
    Kind("BertWordPieceCase", **_WORDPIECE),
)}

# Megatron's other --tokenizer-type values: not run, and why.
REFUSED = {
    "MultimodalTokenizer": "tokenbeam prepares text pretraining data, not multimodal data",
    "NullMultimodalTokenizer": "tokenbeam prepares text pretraining data, not multimodal data",
    "SFTTokenizer": "tokenbeam prepares pretraining data, not chat-formatted SFT data",
}

# NeMo's --tokenizer-library names, accepted as aliases of Megatron's --tokenizer-type.
LIBRARY_ALIASES = {"huggingface": "HuggingFaceTokenizer", "sentencepiece": "SentencePieceTokenizer",
                   "megatron": "GPT2BPETokenizer"}


def kind(name: str) -> Kind:
    """The declaration of ``--tokenizer-type name``; TokenizerConfigError when it has none."""
    try:
        return KINDS[name]
    except KeyError:
        if name in REFUSED:
            raise TokenizerConfigError(f"--tokenizer-type {name} is not supported: "
                                       f"{REFUSED[name]}") from None
        raise TokenizerConfigError(f"unknown tokenizer kind {name}") from None


def resolve_kind(tokenizer_type: str | None, tokenizer_library: str | None) -> str:
    if tokenizer_type:
        if tokenizer_type not in KINDS:
            why = f" ({REFUSED[tokenizer_type]})" if tokenizer_type in REFUSED else ""
            raise TokenizerConfigError(f"--tokenizer-type {tokenizer_type} is not supported"
                                       f"{why}; choose one of {', '.join(KINDS)}")
        return tokenizer_type
    if tokenizer_library:
        if tokenizer_library not in LIBRARY_ALIASES:
            raise TokenizerConfigError(f"--tokenizer-library {tokenizer_library} is not supported; "
                                       f"choose one of {', '.join(LIBRARY_ALIASES)}")
        return LIBRARY_ALIASES[tokenizer_library]
    raise TokenizerConfigError("no tokenizer: give --tokenizer-type (e.g. HuggingFaceTokenizer) "
                               "and --tokenizer-model")


def spec_options(spec: TokenizerSpec) -> dict:
    """The switches beyond kind, files and EOD that change the ids (metadata, resume key);
    empty for the configurations that existed before them, so their keys do not move."""
    out = {"legacy": True} if spec.legacy else {}
    out.update(kind(spec.kind).options(spec))
    return out


def spec_files(spec: TokenizerSpec) -> list:
    """The files that define this tokenizer (hashed into metadata and resume keys)."""
    return kind(spec.kind).files(spec)
