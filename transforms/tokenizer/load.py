"""Building a tokenizer from its spec (on a worker: from ``DoFn.setup``), and its entry in
metadata.json. The class for each kind, and which backends may stand in for it, come from
registry.py; check.py decides the backend before the workers load it."""

from __future__ import annotations

import dataclasses
import functools

from dataio import locations
from transforms.tokenizer import registry
from transforms.tokenizer.base import Tokenizer, TokenizerConfigError, file_digest, parses
from transforms.tokenizer.fast import FastTokenizer
from transforms.tokenizer.hf import HFBackendTokenizer, HuggingFaceTokenizer, ResolvedHFTokenizer
from transforms.tokenizer.spec import TokenizerSpec


@functools.lru_cache(maxsize=8)
def load_tokenizer(spec: TokenizerSpec) -> Tokenizer:
    """Build the tokenizer (on a worker: call from ``DoFn.setup``). ``spec.backend`` must be
    resolved (``reference`` or ``fast``) by :func:`choose_backend` first; ``auto`` loads the
    reference. Cached per spec: the driver, and the in-process runner's DoFns, load a tokenizer
    once (both backends encode safely from several threads)."""
    if spec.backend not in ("fast", "tokenizers") and spec.resolved is not None:
        return load_tokenizer(dataclasses.replace(spec, resolved=None))
    if spec.backend == "fast":
        return FastTokenizer(_rust_base(spec), spec)
    if spec.backend == "tokenizers" and registry.kind(spec.kind).rust_backend:
        return HFBackendTokenizer(_rust_base(spec))
    return _load_reference(spec)


def _rust_base(spec: TokenizerSpec) -> Tokenizer:
    """What a Rust backend of ``spec`` is built on: the driver's resolved HuggingFace
    tokenizer where the spec carries one this process can rebuild (no transformers), else the
    reference tokenizer."""
    if registry.kind(spec.kind).rust_backend and spec.resolved is not None \
            and spec.resolved.usable_here():
        tok = ResolvedHFTokenizer(spec)
        if spec.eod_id is not None:  # as _build_reference
            tok.eod = spec.eod_id
        return tok
    return load_tokenizer(dataclasses.replace(spec, backend="reference", resolved=None))


def for_workers(spec: TokenizerSpec) -> TokenizerSpec:
    """``spec`` (its backend chosen by :func:`choose_backend`) with what workers need to build
    a HuggingFace folder's Rust backend without transformers: the driver's resolved tokenizer,
    the one its self-check ran on. Other specs are returned as they are."""
    if not registry.kind(spec.kind).rust_backend or spec.backend not in ("fast", "tokenizers"):
        return spec
    reference = load_tokenizer(dataclasses.replace(spec, backend="reference", resolved=None))
    return dataclasses.replace(spec, resolved=reference.resolved)


def _load_reference(spec: TokenizerSpec) -> Tokenizer:
    """The reference tokenizer of ``spec``. A tokenizer file that exists but cannot be parsed
    (truncated, damaged, not the format its flag asks for) raises TokenizerConfigError naming
    it, on the driver's check and on every worker alike, whatever its library raised."""
    try:
        return _build_reference(spec)
    except (TokenizerConfigError, ImportError, OSError, MemoryError):
        raise  # already says what is wrong; a file that cannot be read; a missing library
    except Exception as exc:  # noqa: BLE001 - each library raises its own kind on a bad file
        raise TokenizerConfigError(_damaged_message(spec, exc)) from None


def _damaged_message(spec: TokenizerSpec, exc: Exception) -> str:
    """One line naming the flag and the file its library could not parse (the first text file
    that is not valid UTF-8, or JSON file that is not JSON, else every file of the tokenizer)
    and the fix."""
    flags = {spec.vocab_file: "--vocab-file", spec.merge_file: "--merge-file"}
    files = [p for p in registry.spec_files(spec) if p]
    bad = [p for p in files if not p.endswith(".model") and not parses(p)][:1] or files
    named = ", ".join(f"{flags.get(p, '--tokenizer-model')} {p}" for p in bad) or spec.kind
    reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
    return (f"{named}: not a usable {spec.kind} file: damaged or truncated? ({type(exc).__name__}:"
            f" {reason}); copy it again from its source (compare its sha256 with the original's)")


def _build_reference(spec: TokenizerSpec) -> Tokenizer:
    tok = registry.kind(spec.kind).factory(spec)
    if spec.eod_id is not None:
        tok.eod = spec.eod_id
    return tok


def describe(spec: TokenizerSpec, tok: Tokenizer) -> dict:
    """The tokenizer's entry in metadata.json (and part of every shard's resume key: its
    digests, not its paths, which are recorded resolved so that they name the files from any
    folder). A HuggingFace folder whose configs change the ids from those of its tokenizer.json
    alone adds ``loader: transformers`` to the options: shards that earlier versions committed
    with the same files are then redone, not kept; other folders keep their keys."""
    options = registry.spec_options(spec)
    reference = getattr(tok, "reference", tok)
    if isinstance(reference, HuggingFaceTokenizer):
        changed = not reference.ids_as_before()
    else:  # a worker's, or the driver's built as the workers build it: the driver's finding
        changed = isinstance(reference, ResolvedHFTokenizer) and \
            reference.resolved.configs_change_ids
    if changed:
        options = {**options, "loader": "transformers"}
    return {
        "kind": spec.kind,
        "model": locations.resolved(spec.model),
        "files": [{"path": locations.resolved(p), "sha256": file_digest(p)}
                  for p in registry.spec_files(spec)],
        "vocab_size": tok.vocab_size,
        "eod_id": tok.eod,
        "add_special_tokens": spec.add_special_tokens,
        **({"options": options} if options else {}),
        "backend": tok.name,
        "library": getattr(tok, "reference", tok).library,
        "library_version": getattr(tok, "reference", tok).library_version,
        "backend_library": tok.library,
        "backend_version": tok.library_version,
    }
