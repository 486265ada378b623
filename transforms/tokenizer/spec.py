"""The picklable description of a tokenizer (kind + file paths + switches) that travels with the
pipeline; load.py builds the heavy object from it on a worker. Its options and files are part of
every shard's resume key: ``registry.spec_options``/``spec_files`` give them from what each kind
declares (not methods here: the families take a spec and the registry names the families, so a
spec that asked the registry would close an import cycle)."""

from __future__ import annotations

import dataclasses

from transforms.tokenizer import hf_resolved


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    kind: str
    model: str | None = None
    vocab_file: str | None = None
    merge_file: str | None = None
    add_special_tokens: bool = False
    eod_id: int | None = None  # explicit override
    vocab_size: int | None = None  # NullTokenizer, TikTokenizer
    backend: str = "reference"
    legacy: bool = False  # Megatron's --legacy-tokenizer
    tiktoken_pattern: str | None = None  # v1 or v2 (TikTokenizer)
    tiktoken_num_special_tokens: int = 1000
    # --tokenizer-special-tokens: TikTokenizer's; a SentencePiece type's (with
    # --tokenizer-sentencepiece-legacy); None where Megatron ignores them (flags.py)
    special_tokens: tuple[str, ...] | None = None
    # A HuggingFace folder's Rust tokenizer as the driver resolved and self-checked it, set by
    # for_workers(): workers build the fast/tokenizers backend from it without transformers.
    # Not a setting (options() and files() leave it out: resume keys do not see it).
    resolved: hf_resolved.ResolvedHF | None = dataclasses.field(default=None, repr=False)
