"""A HuggingFace folder's Rust tokenizer as the driver resolved it, carried to the workers.

The driver loads the folder with transformers (hf_auto.py) and self-checks
the ``tokenizers.Tokenizer`` transformers ended up with against transformers' own ids. When a
Rust backend was chosen (``fast``: gigatoken built from it; ``tokenizers``: that tokenizer
itself), what a worker needs is that tokenizer and a few numbers, not transformers: a
:class:`ResolvedHF` holds them (the tokenizer serialized by ``to_str()``, compressed) inside the
job's :class:`~transforms.tokenizer.TokenizerSpec`, so each worker process builds the Rust
backend from it without importing transformers.

Exactness: the driver's self-check runs on :meth:`ResolvedHF.build`'s tokenizer, made from
these very bytes, so every worker encodes with the tokenizer the driver checked.
``encode_special_tokens`` (what ``split_special_tokens`` sets) is not part of ``to_str()``,
hence kept beside it. A worker whose ``tokenizers`` version is not the driver's loads the
folder with transformers as before (the same bytes could parse differently there).
"""

from __future__ import annotations

import dataclasses
import zlib


@dataclasses.dataclass(frozen=True)
class ResolvedHF:
    tokenizer_json: bytes  # zlib of the tokenizers.Tokenizer's to_str() (untruncated, unpadded)
    encode_special_tokens: bool
    vocab_size: int  # len(transformers tokenizer): added tokens included
    eod: int | None  # the eos token's id (before any --eod-id)
    bos: int | None
    transformers_version: str
    tokenizers_version: str
    # the folder's configs change the ids from its tokenizer.json alone (the driver's finding;
    # it moves the resume key, see tokenizer.describe)
    configs_change_ids: bool = False

    @classmethod
    def of(cls, tok, *, vocab_size: int, eod: int | None, bos: int | None,
           transformers_version: str, configs_change_ids: bool = False) -> "ResolvedHF":
        """The record of ``tok`` (a ``tokenizers.Tokenizer``) and transformers' numbers."""
        import tokenizers

        return cls(tokenizer_json=zlib.compress(tok.to_str().encode("utf-8"), 1),
                   encode_special_tokens=bool(tok.encode_special_tokens),
                   vocab_size=vocab_size, eod=eod, bos=bos,
                   transformers_version=transformers_version,
                   tokenizers_version=tokenizers.__version__,
                   configs_change_ids=configs_change_ids)

    def json_text(self) -> str:
        return zlib.decompress(self.tokenizer_json).decode("utf-8")

    def usable_here(self) -> bool:
        """Whether this process's ``tokenizers`` is the one that made the record."""
        import tokenizers

        return tokenizers.__version__ == self.tokenizers_version

    def build(self):
        """The ``tokenizers.Tokenizer`` this record holds (a new one on every call)."""
        import tokenizers

        tok = tokenizers.Tokenizer.from_str(self.json_text())
        tok.encode_special_tokens = self.encode_special_tokens
        tok.no_truncation()
        tok.no_padding()
        return tok
