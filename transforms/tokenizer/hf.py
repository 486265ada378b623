"""The HuggingFace family: a ``tokenizer.json`` (a file, or a folder holding one, with its
configs) loaded by transformers' ``AutoTokenizer`` as Megatron loads it (hf_auto.py: the
configs' effects, Megatron's special-token fallbacks, ``--tokenizer-special-tokens``).

Ids are ``convert_tokens_to_ids(tokenize(text))``, ``tokenizer(text).input_ids`` with
``add_special_tokens``; vocab size is ``len(tokenizer)``; EOD = the eos token's id (the sep
token's when the folder names no eos). The Rust tokenizer transformers built
(:class:`HFBackendTokenizer`) and gigatoken built from it stand in only after the self-check;
on workers :class:`ResolvedHFTokenizer` rebuilds it from the driver's bytes (hf_resolved.py).
"""

from __future__ import annotations

import functools
import json
import os
from typing import TYPE_CHECKING

from dataio import fs as fsutil
from transforms.tokenizer import hf_auto, hf_resolved
from transforms.tokenizer.base import (RustTokenizer, Tokenizer, TokenizerConfigError,
                                       cut_pattern, parses)
from transforms.tokenizer.probes import ADVERSARIAL, probe_texts

if TYPE_CHECKING:
    from transforms.tokenizer.spec import TokenizerSpec


def hf_folder(model: str | None) -> str:
    if not model:
        raise TokenizerConfigError("HuggingFaceTokenizer needs --tokenizer-model: a tokenizer.json "
                                   "file or a folder holding one (no hub downloads)")
    if model.endswith(".json"):
        return os.path.dirname(model) or "."
    return model


def hf_files(spec: TokenizerSpec) -> list[str]:
    """The files a HuggingFace tokenizer is built from: the named tokenizer.json, the folder's
    configs, and --vocab-file/--merge-file (Megatron hands them to AutoTokenizer too)."""
    folder = hf_folder(spec.model)
    named = spec.model if spec.model.endswith(".json") else None
    files = [p for p in hf_auto.folder_files(folder)
             if not (named and os.path.basename(p) == "tokenizer.json")]
    extra = [p for p in (spec.vocab_file, spec.merge_file) if p]
    return ([named] if named and fsutil.exists(named) else []) + files + extra


class HuggingFaceTokenizer(Tokenizer):
    """The reference for a HuggingFace folder: transformers' AutoTokenizer as Megatron builds
    and calls it (hf_auto.py). ``backend`` is the ``tokenizers.Tokenizer`` it ended
    up with (config effects included), which :class:`HFBackendTokenizer` and gigatoken encode
    with wherever the self-check finds them identical."""

    library = "transformers"

    def __init__(self, spec: TokenizerSpec):
        import tokenizers

        try:
            transformers = hf_auto.quiet_transformers()
        except ImportError:
            raise TokenizerConfigError("HuggingFaceTokenizer needs transformers 5 (pip install "
                                       "'transformers>=5.24,<6'): Megatron loads the folder "
                                       "with its AutoTokenizer") from None
        folder = hf_folder(spec.model)
        path = spec.model if spec.model.endswith(".json") else os.path.join(folder, "tokenizer.json")
        if not fsutil.exists(path):
            raise TokenizerConfigError(f"--tokenizer-model {spec.model}: no tokenizer.json there "
                                       "(only local or fsspec files are read; nothing is "
                                       "downloaded from a hub)")
        files = [path, *[p for p in hf_auto.folder_files(folder)
                         if os.path.basename(p) != "tokenizer.json"]]
        local = hf_auto.local_folder(folder, files, tokenizer_json=path)
        if custom := hf_auto.custom_code(local):
            raise TokenizerConfigError(
                f"--tokenizer-model {spec.model}: its {custom} names its own tokenizer code "
                "(auto_map), which tokenbeam never runs (Megatron only with "
                "--trust-remote-code); use a folder whose tokenizer_class transformers has "
                "built in")
        try:
            self._hf = hf_auto.load(local, vocab_file=hf_auto.local_file(spec.vocab_file),
                                    merge_file=hf_auto.local_file(spec.merge_file),
                                    special_tokens=spec.special_tokens, legacy=spec.legacy)
        except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
            if not all(parses(p) for p in files):
                raise  # a damaged file: named by _load_reference
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise TokenizerConfigError(
                f"--tokenizer-model {spec.model}: transformers' AutoTokenizer cannot load this "
                f"folder ({type(exc).__name__}: {first}); Megatron loads it the same way, so "
                "fix its tokenizer_config.json (e.g. a tokenizer_class transformers 5 "
                "has)") from None
        self._tok = self._hf.backend_tokenizer
        # transformers' calls run without truncation or padding and leave its Rust tokenizer
        # so after the first call; set so now, for the backends that encode with it directly
        self._tok.no_truncation()
        self._tok.no_padding()
        self.library_version = transformers.__version__
        self.tokenizers_version = tokenizers.__version__
        self.vocab_size = len(self._hf)
        self._special = spec.add_special_tokens
        # special tokens would be added to every piece; the cut rules hold for the tokenizer
        # transformers ended up with, and tokenize() maps each token to its id on its own
        self.cuts = None if self._special else cut_pattern(json.loads(self._tok.to_str()))
        self.eod = hf_auto.token_id(self._hf, self._hf.eos_token)
        self._folder_eod = self.eod  # before any --eod-id (_build_reference)
        self.bos = hf_auto.token_id(self._hf, self._hf.bos_token)
        self._path = path

    def ids_as_before(self) -> bool:
        """Whether tokenizer.json read alone by ``tokenizers`` (what earlier tokenbeam
        versions encoded with, before transformers loaded folders) gives these ids: same vocabulary size and
        ids on the probe texts, the folder's special tokens among them. Where not, the configs
        change the ids, and shards committed before must not be kept (describe: the key moves).
        Found once per tokenizer (the driver asks for the workers' record and for describe)."""
        return self._ids_as_before

    @functools.cached_property
    def _ids_as_before(self) -> bool:
        import tokenizers

        with fsutil.open_file(self._path, "rb") as f:
            plain = tokenizers.Tokenizer.from_str(f.read().decode("utf-8"))
        plain.no_truncation()
        plain.no_padding()
        if plain.get_vocab_size(with_added_tokens=True) != self.vocab_size:
            return False
        texts = list(ADVERSARIAL) + probe_texts(self)
        before = [e.ids for e in plain.encode_batch_fast(texts, add_special_tokens=self._special)]
        try:
            return before == [list(ids) for ids in self._encode_plain(texts)]
        except ValueError:  # a text without ids (no unk_token): tokenbeam failed it before too
            return False

    @functools.cached_property
    def resolved(self) -> hf_resolved.ResolvedHF:
        """What workers need to build the Rust backends without transformers."""
        return hf_resolved.ResolvedHF.of(self._tok, vocab_size=self.vocab_size,
                                         eod=self._folder_eod, bos=self.bos,
                                         transformers_version=self.library_version,
                                         configs_change_ids=not self.ids_as_before())

    @functools.cached_property
    def backend(self):
        """The Rust tokenizer the fast and tokenizers backends encode with: made from
        :attr:`resolved`'s bytes, so that the self-check runs on what workers build."""
        return self.resolved.build()

    def _encode_plain(self, texts):
        return hf_auto.megatron_ids(self._hf, texts, include_special=self._special)

    def decode(self, ids):
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)


class HFBackendTokenizer(RustTokenizer):
    """The ``tokenizers.Tokenizer`` transformers built for a HuggingFace folder, encoding on its
    own (Rust, batched, threaded) in place of transformers' Python calls: only where the
    self-check found the reference's ids. Vocabulary, EOD, BOS and cuts are the reference's."""

    name = "tokenizers"

    def __init__(self, reference: HuggingFaceTokenizer | ResolvedHFTokenizer):
        self.reference = reference
        self._tok = reference.backend
        self.library_version = reference.tokenizers_version
        self._special = reference._special
        self.vocab_size, self.eod, self.bos = reference.vocab_size, reference.eod, reference.bos
        self.cuts = reference.cuts


class ResolvedHFTokenizer(Tokenizer):
    """A worker's stand-in for :class:`HuggingFaceTokenizer` under the Rust backends: the
    tokenizer, vocabulary, EOD and BOS the driver resolved (``spec.resolved``,
    hf_resolved.py), without transformers. It is not a backend itself: Megatron's
    ids come from transformers' calls, which it does not make."""

    library = "transformers"

    def __init__(self, spec: TokenizerSpec):
        resolved = spec.resolved
        self.resolved = resolved
        self.backend = resolved.build()
        self.library_version = resolved.transformers_version
        self.tokenizers_version = resolved.tokenizers_version
        self.vocab_size, self.eod, self.bos = resolved.vocab_size, resolved.eod, resolved.bos
        self._special = spec.add_special_tokens
        self.cuts = None if self._special else cut_pattern(json.loads(resolved.json_text()))

    def _encode_plain(self, texts):
        raise TokenizerConfigError("a HuggingFace folder's reference ids come from "
                                   "transformers; load the spec with backend='reference'")

    def decode(self, ids):
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=False)

