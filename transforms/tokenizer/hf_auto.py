"""A HuggingFace tokenizer folder loaded exactly as Megatron-LM core_v0.16.1 loads it.

Megatron's ``HuggingFaceTokenizer`` (``megatron/core/tokenizers/text/libraries/
huggingface_tokenizer.py``, what ``tools/preprocess_data.py`` builds without
``--legacy-tokenizer``) calls ``transformers.AutoTokenizer.from_pretrained(folder,
use_fast=..., trust_remote_code=..., [vocab_file=..., [merge_files=...]])``, which applies
``tokenizer_config.json``, ``special_tokens_map.json`` (and ``config.json``,
``added_tokens.json``) on top of ``tokenizer.json``: the ``tokenizer_class``'s own options
(``legacy``, ``add_prefix_space``, ``do_lower_case``, ``extra_ids`` ...), special tokens named
there (new ids for those the vocabulary lacks; text split on every special token), and
``split_special_tokens``. Then Megatron fills in missing special tokens (sep <- eos, else eos
<- sep; bos <- cls; cls <- bos) and adds ``--tokenizer-special-tokens`` as extra special tokens,
through ``tokenizer.add_special_tokens``. Its ids are ``convert_tokens_to_ids(tokenize(text))``
(``tokenizer(text).input_ids`` with ``--tokenizer-hf-include-special-tokens``), its vocabulary
size ``len(tokenizer)``, its EOD the id of the eos token (None without one).

:func:`load` does exactly that, with transformers itself: nothing here re-implements it. The
folder is read where it is when local; other storage (fsspec) is copied to a local folder
first (:func:`local_folder`). Nothing is downloaded and no remote code is ever run.
"""

from __future__ import annotations

import hashlib
import os
import shutil

from dataio import fs as fsutil

# The files AutoTokenizer reads from a folder that can change a tokenizer's ids.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
OTHER_FILES = ("added_tokens.json", "config.json")


def folder_files(folder: str) -> list[str]:
    """The files of ``folder`` that define the tokenizer, in a fixed order: ``tokenizer.json``
    and its two configs (as before transformers was the reference: the keys of folders that
    have only these do not move), then ``added_tokens.json`` and ``config.json`` where they
    exist (``config.json``'s ``model_type`` chooses the class when the config names none)."""
    names = [os.path.join(folder, n) for n in TOKENIZER_FILES + OTHER_FILES]
    return [n for n in names if fsutil.exists(n)]


def quiet_transformers():
    """transformers, imported without its import-time notices ("PyTorch was not found ...")
    and with its logger at errors only: tokenbeam says itself what it loaded."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    return transformers


def local_folder(folder: str, files: list[str], *, tokenizer_json: str) -> str:
    """A local folder AutoTokenizer can read: ``folder`` itself when it is local and holds
    ``tokenizer_json`` under that name; else a copy of ``files`` (with ``tokenizer_json`` as
    ``tokenizer.json``) in the cache folder, named by their digests."""
    local = folder.removeprefix("file://")
    if fsutil.is_local(folder) and tokenizer_json.removeprefix("file://") == os.path.join(
            local, "tokenizer.json"):
        return local
    blobs = {}
    for path in files:
        name = "tokenizer.json" if path == tokenizer_json else os.path.basename(path)
        with fsutil.open_file(path, "rb") as f:
            blobs[name] = f.read()
    digest = hashlib.sha256()
    for name in sorted(blobs):
        digest.update(name.encode() + b"\0" + hashlib.sha256(blobs[name]).digest())
    target = os.path.join(fsutil.cache_dir(), "hf-folders", digest.hexdigest()[:32])
    if not os.path.isdir(target):
        staging = f"{target}.{os.getpid()}.tmp"
        os.makedirs(staging, exist_ok=True)
        for name, data in blobs.items():
            with open(os.path.join(staging, name), "wb") as f:
                f.write(data)
        try:
            os.rename(staging, target)
        except OSError:  # another process made it first
            shutil.rmtree(staging, ignore_errors=True)
    return target


def local_file(path: str | None) -> str | None:
    """``path`` as a local file (a copy in the cache folder for other storage)."""
    if path is None or fsutil.is_local(path):
        return path.removeprefix("file://") if path else path
    with fsutil.open_file(path, "rb") as f:
        data = f.read()
    target = os.path.join(fsutil.cache_dir(), "hf-files", hashlib.sha256(data).hexdigest()[:32],
                          os.path.basename(path))
    if not os.path.exists(target):
        fsutil.write_cache_file(target, data)
    return target


def custom_code(folder: str) -> str | None:
    """The config file of ``folder`` that names its own tokenizer code (``auto_map``, what
    ``--trust-remote-code`` would run), or None. tokenbeam never runs such code."""
    import json

    for name in ("tokenizer_config.json", "config.json"):
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                config = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(config, dict) and "auto_map" in config:
            return name
    return None


def load(folder: str, *, vocab_file: str | None = None, merge_file: str | None = None,
         special_tokens: tuple[str, ...] | None = None, legacy: bool = False):
    """The transformers tokenizer Megatron's HuggingFaceTokenizer ends up with (its
    ``self.tokenizer``), for a local ``folder``; see the module docstring. ``legacy``:
    ``--legacy-tokenizer``'s class (``megatron.training.tokenizer._HuggingFaceTokenizer``),
    which loads the folder alone: no vocab/merge files, no fallbacks, no extra special tokens
    (its EOD is ``eos_token_id``, None without an eos)."""
    transformers = quiet_transformers()
    kwargs = {"local_files_only": True, "trust_remote_code": False}
    if legacy:
        return transformers.AutoTokenizer.from_pretrained(folder, **kwargs)
    # as Megatron passes them (its keyword for the merges is "merge_files")
    if vocab_file is not None:
        kwargs["vocab_file"] = vocab_file
        if merge_file is not None:
            kwargs["merge_files"] = merge_file
    hf = transformers.AutoTokenizer.from_pretrained(folder, **kwargs)
    additional = list(special_tokens or [])
    specials: dict = {}
    if hf.sep_token is None and hf.eos_token:
        specials["sep_token"] = hf.eos_token
    elif hf.eos_token is None and hf.sep_token:
        specials["eos_token"] = hf.sep_token
    if hf.bos_token is None and hf.cls_token:
        specials["bos_token"] = hf.cls_token
    if hf.cls_token is None and hf.bos_token:
        specials["cls_token"] = hf.bos_token
    specials["additional_special_tokens"] = additional
    hf.add_special_tokens(specials)
    return hf


def token_id(hf, token) -> int | None:
    """Megatron's ``tokens_to_ids([token])[0]``, None for no token."""
    if token is None:
        return None
    return hf.convert_tokens_to_ids([str(token)])[0]


def megatron_ids(hf, texts, *, include_special: bool) -> list[list[int]]:
    """Megatron's ``text_to_ids`` of each text."""
    if include_special:
        out = [hf(text).input_ids for text in texts]
    else:
        out = [hf.convert_tokens_to_ids(hf.tokenize(text)) for text in texts]
    for ids in out:
        if None in ids:  # Megatron's indexed-dataset builder fails on it too
            raise ValueError("a token of this text has no id and the folder names no "
                             "unk_token (Megatron's preprocess_data.py fails on this text too)")
    return out
