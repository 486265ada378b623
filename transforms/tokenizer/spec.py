"""The picklable description of a tokenizer (kind + file paths + switches) that travels with the
pipeline; load.py builds the heavy object from it on a worker. Its ``options()`` and ``files()``
are part of every shard's resume key: what each kind contributes is declared in registry.py."""

from __future__ import annotations

import dataclasses

from transforms.tokenizer import hf_resolved, registry


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

    def options(self) -> dict:
        """The switches beyond kind, files and EOD that change the ids (metadata, resume key);
        empty for the configurations that existed before them, so their keys do not move."""
        out = {"legacy": True} if self.legacy else {}
        out.update(registry.kind(self.kind).options(self))
        return out

    def files(self) -> list[str]:
        """The files that define this tokenizer (hashed into metadata and resume keys)."""
        return registry.kind(self.kind).files(self)
