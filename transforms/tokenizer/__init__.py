"""Tokenizers as Megatron-LM's ``tools/preprocess_data.py`` uses them, behind one batch interface
(Megatron core_v0.16.1 is the reference for byte-identical output).

A :class:`TokenizerSpec` is the picklable description that travels with the pipeline;
:func:`load_tokenizer` builds the heavy object on a worker, after :func:`choose_backend` picked
the backend on the driver. ``from transforms import tokenizer as tk`` gives the names below;
each lives in one module of this package:

- registry.py: every ``--tokenizer-type``, its files, flags, class and backends (one place)
- spec.py: TokenizerSpec; base.py: the Tokenizer interface, the error, long-text cuts
- hf.py (+ hf_auto.py, hf_resolved.py): HuggingFace; sentencepiece.py: the SentencePiece types;
  simple.py: GPT-2 BPE, Null, TikToken, BERT WordPiece
- fast.py + routing.py: the gigatoken backend and the texts it must leave to the reference
- probes.py, check.py: the self-check, the backend choice and its cache; load.py: loading and
  metadata; files.py: what a tokenizer file is; flags.py: Megatron's tokenizer flags
"""

from transforms.tokenizer.base import (CALL_CHARS, FAST_CALL_CHARS, LONG_TEXT, SPACE_AND_PUNCT_CUTS,
                                       SPACE_CUTS, Tokenizer, TokenizerConfigError, cut_pattern,
                                       cut_points, file_digest, split_long_text)
from transforms.tokenizer.check import (CHECK_VERSION, check_cache_path, choose_backend,
                                        for_workers, self_check)
from transforms.tokenizer.fast import FastTokenizer
from transforms.tokenizer.hf import (HFBackendTokenizer, HuggingFaceTokenizer, ResolvedHFTokenizer,
                                     hf_folder)
from transforms.tokenizer.load import describe, load_tokenizer
from transforms.tokenizer.probes import ADVERSARIAL, ROUTING_PROBES, SAMPLE_CHARS, probe_texts
from transforms.tokenizer.registry import (KINDS, LIBRARY_ALIASES, REFUSED, resolve_kind,
                                           spec_files, spec_options)
from transforms.tokenizer.routing import FastRouting, sentencepiece_routing
from transforms.tokenizer.sentencepiece import (SentencePieceTokenizer, sentencepiece_cut_pattern,
                                                sentencepiece_model_type)
from transforms.tokenizer.simple import (GPT2BPETokenizer, NullTokenizer, TikTokenizer,
                                         WordPieceTokenizer, check_tiktoken_spec)
from transforms.tokenizer.spec import TokenizerSpec

__all__ = [
    "ADVERSARIAL", "CALL_CHARS", "CHECK_VERSION", "FAST_CALL_CHARS", "KINDS", "LIBRARY_ALIASES",
    "LONG_TEXT", "REFUSED", "ROUTING_PROBES", "SAMPLE_CHARS", "SPACE_AND_PUNCT_CUTS",
    "SPACE_CUTS", "FastRouting", "FastTokenizer", "GPT2BPETokenizer", "HFBackendTokenizer",
    "HuggingFaceTokenizer", "NullTokenizer", "ResolvedHFTokenizer", "SentencePieceTokenizer",
    "TikTokenizer", "Tokenizer", "TokenizerConfigError", "TokenizerSpec", "WordPieceTokenizer",
    "check_cache_path", "check_tiktoken_spec", "choose_backend", "cut_pattern", "cut_points",
    "describe", "file_digest", "for_workers", "hf_folder", "load_tokenizer", "probe_texts",
    "resolve_kind", "self_check", "sentencepiece_cut_pattern", "sentencepiece_model_type",
    "sentencepiece_routing", "spec_files", "spec_options", "split_long_text",
]
