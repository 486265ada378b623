"""Which backend encodes: gigatoken (``fast``), a HuggingFace folder's own Rust tokenizer
(``tokenizers``) or the reference, chosen by a self-check against the reference on adversarial
texts and input samples, whose outcome is cached per tokenizer files, options and library
versions. What each kind allows comes from registry.py."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.metadata
import json
import os
from typing import Sequence

import numpy as np

from dataio import fs as fsutil
from transforms.tokenizer import registry
from transforms.tokenizer.base import Tokenizer, TokenizerConfigError, file_digest
from transforms.tokenizer.hf import HFBackendTokenizer
from transforms.tokenizer import load
from transforms.tokenizer.hf_resolved import ResolvedHF
from transforms.tokenizer.load import load_tokenizer
from transforms.tokenizer.probes import ADVERSARIAL, ROUTING_PROBES, SAMPLE_CHARS, probe_texts
from transforms.tokenizer.spec import TokenizerSpec


def self_check(fast: Tokenizer, reference: Tokenizer, samples: Sequence[str]) -> str | None:
    """None when ``fast`` gives the reference's ids on every text, else the first difference.
    A fast backend with routing must be exact through it (the texts it routes are encoded by
    the reference): this checks the routing, not global agreement. Samples are compared on
    their first SAMPLE_CHARS characters: the first record of an input can be one huge
    document, and the driver would tokenize it twice here."""
    texts = list(ADVERSARIAL) + list(ROUTING_PROBES) + probe_texts(reference) + [
        s[:SAMPLE_CHARS] for s in samples]
    got_ids, got_lengths = fast.encode_batch(texts)
    try:
        want_ids, want_lengths = reference.encode_batch(texts)
    except Exception:  # noqa: BLE001 - the reference refuses a text: which, and why
        for i, text in enumerate(texts):
            try:
                reference.encode_batch([text])
            except Exception as exc:  # noqa: BLE001
                return (f"text {i} ({text[:40]!r}...): the reference fails on it ({exc}), "
                        "the fast one does not")
        raise
    if np.array_equal(got_lengths, want_lengths) and np.array_equal(
            np.asarray(got_ids, dtype=np.int64), np.asarray(want_ids, dtype=np.int64)):
        return None
    starts = np.concatenate([[0], np.cumsum(want_lengths)])
    fast_starts = np.concatenate([[0], np.cumsum(got_lengths)])
    for i, text in enumerate(texts):
        want = want_ids[starts[i]:starts[i + 1]].tolist()
        got = got_ids[fast_starts[i]:fast_starts[i + 1]].tolist()
        if want != got:
            return f"text {i} ({text[:40]!r}...): fast {got[:8]}... != reference {want[:8]}..."
    return "outputs differ"


# The self-check's outcome is kept per tokenizer files, options and library versions in a
# small JSON file, so that later runs with the same tokenizer skip it. Bump CHECK_VERSION when
# the check or the routing changes (4: HuggingFace folders checked on the tokenizer rebuilt
# from the bytes workers get, hf_resolved.py).
CHECK_VERSION = 4


def check_cache_path() -> str:
    return os.path.join(fsutil.cache_dir(), "backend-check.json")


def _check_key(spec: TokenizerSpec) -> str:
    versions = {}
    for package in ("gigatoken", "tokenizers", "sentencepiece", "regex",  # regex: GCB data
                    "transformers"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    key = {"check": CHECK_VERSION, "kind": spec.kind, "versions": versions,
           "files": [file_digest(p) for p in registry.spec_files(spec)],
           "options": registry.spec_options(spec),
           "add_special_tokens": spec.add_special_tokens, "eod_id": spec.eod_id}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _read_check_cache() -> dict:
    try:
        with open(check_cache_path(), encoding="utf-8") as f:
            cache = json.load(f)
        return cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):
        return {}  # missing or corrupt: checked again, and rewritten


def _write_check_cache(key: str, entry: dict) -> None:
    path = check_cache_path()
    cache = _read_check_cache()
    cache[key] = entry
    # a read-only home: the check runs every time
    fsutil.write_cache_file(path, json.dumps(cache, indent=1, sort_keys=True).encode())


def _check_fast(spec: TokenizerSpec, reference: Tokenizer,
                samples: Sequence[str]) -> tuple[str | None, str]:
    """(why fast cannot be used or None, what was checked)."""
    try:
        fast = load_tokenizer(dataclasses.replace(spec, backend="fast"))
    except ImportError:
        return "gigatoken is not installed (pip install 'tokenbeam[fast]')", ""
    except Exception as exc:  # noqa: BLE001 - any load failure means "not supported"
        first = (str(exc).strip().splitlines() or [""])[0]  # Rust errors add a location
        return f"gigatoken does not support this tokenizer ({type(exc).__name__}: {first})", ""
    why_not = self_check(fast, reference, samples)
    if why_not:
        return f"self-check found different ids: {why_not}", ""
    checked = (f"gigatoken gave identical ids on {_probe_count(reference)} adversarial "
               f"texts and {len(samples)} input samples")
    if fast.routing is not None:
        checked += ("; the kinds of text it gets wrong with this model's normaliser and pieces "
                    "go to the reference")
    return None, checked


def _probe_count(reference: Tokenizer) -> int:
    return len(ADVERSARIAL) + len(ROUTING_PROBES) + len(probe_texts(reference))


def _check_hf_backend(reference: Tokenizer, samples: Sequence[str]) -> tuple[str | None, str]:
    """(why the folder's own tokenizers.Tokenizer cannot stand in for transformers or None,
    what was checked)."""
    why_not = self_check(HFBackendTokenizer(reference), reference, samples)
    if why_not:
        return f"its tokenizers.Tokenizer gave other ids than transformers ({why_not})", ""
    return None, (f"the folder's tokenizers.Tokenizer gave transformers' ids on "
                  f"{_probe_count(reference)} adversarial texts and {len(samples)} input samples")


def choose_backend(spec: TokenizerSpec, samples: Sequence[str]) -> tuple[str, str]:
    """The backend to run and why, for ``spec.backend`` auto/fast/reference: ``fast``
    (gigatoken), ``tokenizers`` (a HuggingFace folder's own Rust tokenizer, as transformers
    built it) or ``reference``. Raises TokenizerConfigError when ``fast`` was demanded but
    cannot be exact. The self-check's outcome is cached (:func:`check_cache_path`)."""
    if spec.backend == "reference":
        return "reference", "--tokenizer-backend reference"
    kind = registry.kind(spec.kind)
    no_fast = None
    if kind.fast is None:
        no_fast = f"{spec.kind} has no fast backend"
    else:
        no_fast = next((f"{flag} is only supported by the reference backend"
                        for field, flag in kind.reference_only if getattr(spec, field)), None)
    if no_fast and (not kind.rust_backend or spec.backend == "fast"):
        if spec.backend == "fast":
            raise TokenizerConfigError(f"--tokenizer-backend fast: {no_fast}; use auto or "
                                       "reference")
        return "reference", no_fast
    key = _check_key(spec)
    cached = _read_check_cache().get(key)
    if isinstance(cached, dict) and cached.get("backend") in ("fast", "tokenizers", "reference"):
        chosen, why_not = cached["backend"], cached.get("why_not")
        checked = f"{cached.get('checked')} (cached self-check)"
    else:
        # the reference is loaded only to check against it (a HuggingFace folder's: transformers,
        # 1-2 s); a cached verdict was reached on these very files and library versions
        reference = load_tokenizer(dataclasses.replace(spec, backend="reference"))
        chosen, why_not, checked = _check_backends(spec, reference, samples, no_fast)
        if "not installed" not in (why_not or ""):
            _write_check_cache(key, {"backend": chosen, "why_not": why_not, "checked": checked})
    if chosen != "fast" and spec.backend == "fast":
        raise TokenizerConfigError(f"--tokenizer-backend fast: {why_not}; use auto or reference")
    return chosen, why_not if chosen == "reference" else checked


def _check_backends(spec: TokenizerSpec, reference: Tokenizer, samples: Sequence[str],
                    no_fast: str | None) -> tuple[str, str | None, str]:
    """(backend, why gigatoken is not used or None, what was checked): gigatoken when exact;
    for a HuggingFace folder then its own tokenizers.Tokenizer when exact; else the reference."""
    why_not, checked = (no_fast, "") if no_fast else _check_fast(spec, reference, samples)
    if why_not is None:
        return "fast", None, checked
    if registry.kind(spec.kind).rust_backend:
        why_hf, checked_hf = _check_hf_backend(reference, samples)
        if why_hf is None:
            return "tokenizers", why_not, f"{checked_hf}; gigatoken not used: {why_not}"
        why_not = f"{why_not}; {why_hf}: tokenized by transformers, as Megatron does"
    return "reference", why_not, ""




def for_workers(spec: TokenizerSpec) -> TokenizerSpec:
    """:func:`transforms.tokenizer.load.for_workers`, with what it resolved kept in the cache
    folder beside the self-check's verdict, under the same key (the tokenizer's files, options
    and library versions, transformers' included): a later run's driver then builds the Rust
    backend from it, as the workers do, without importing transformers (1-2 s of every run's
    start)."""
    if not registry.kind(spec.kind).rust_backend or spec.backend not in ("fast", "tokenizers"):
        return spec
    path = os.path.join(fsutil.cache_dir(), "hf-resolved", _check_key(spec) + ".json")
    resolved = _read_resolved(path)
    if resolved is not None and resolved.usable_here():
        return dataclasses.replace(spec, resolved=resolved)
    spec = load.for_workers(spec)
    if spec.resolved is not None:
        record = dataclasses.asdict(spec.resolved)
        record["tokenizer_json"] = base64.b64encode(spec.resolved.tokenizer_json).decode("ascii")
        fsutil.write_cache_file(path, json.dumps(record).encode())
    return spec


def _read_resolved(path: str) -> ResolvedHF | None:
    """The record kept at ``path``, or None (absent, damaged, or of another layout)."""
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        record["tokenizer_json"] = base64.b64decode(record["tokenizer_json"], validate=True)
        return ResolvedHF(**record)
    except (OSError, ValueError, TypeError, KeyError):
        return None
