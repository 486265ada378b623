"""Pipeline options: one PipelineOptions subclass per concern, each with help and validate().

Megatron's flag names are used wherever Megatron has one (``--json-keys``, ``--tokenizer-type``,
``--append-eod``, ``--split-sentences``, ``--keep-newlines``, ``--lang``, ``--workers``,
``--log-interval``); NeMo's ``--tokenizer-library`` is accepted as an alias. Beam's own flags
pass through untouched.
"""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import (DirectOptions, PipelineOptions,
                                                  WorkerOptions, StandardOptions)

from dataio import errors
from dataio import workers as local_workers
from transforms import tokenizer as tk


class OptionsError(errors.ConfigError):
    """Bad configuration; the message names the flag and the fix (exit status 2)."""


class InputOutputOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--input", action="append", default=None, metavar="GLOB",
                            help="input files: a glob, a file or a folder (every .jsonl, .json, "
                                 ".jsonl.gz, .jsonl.zst, .parquet in it); local path or fsspec URL; "
                                 "repeatable")
        parser.add_argument("--output", default=None, metavar="DIR",
                            help="output folder (local path or fsspec URL)")
        parser.add_argument("--json-keys", nargs="+", default=["text"], metavar="KEY",
                            help="keys to tokenize; each key gets its own shards (default: text)")
        parser.add_argument("--on-bad-record", choices=["skip", "fail"], default="skip",
                            help="skip (default): leave bad records out, count them and list them "
                                 "in DIR/_errors/{stem}.jsonl; fail: stop at the first one")
        parser.add_argument("--overwrite", action="store_true",
                            help="redo every shard, even those already committed")
        # Resume key: path, size and mtime/etag; a local edit that keeps the size and restores
        # the mtime is only seen by hashing the bytes. On by default: bench/verify_inputs.py
        # measured +4.2% CPU time on a 500 MB first run (0.54 s of hashing; the bar was 5%).
        parser.add_argument("--verify-inputs", dest="verify_inputs", action="store_true",
                            default=True,
                            help="(default) resume by content too: hash every local input "
                                 "(sha256) while planning, so a same-size edit with its mtime "
                                 "restored redoes the shard (object-store etags already change "
                                 "on every write, so URLs with an etag are not read)")
        parser.add_argument("--no-verify-inputs", dest="verify_inputs", action="store_false",
                            help="resume by path, size and mtime/etag only: no hashing, and the "
                                 "resume key of versions before --verify-inputs")
        parser.add_argument("--dry-run", dest="plan_only", action="store_true",
                            help="print the plan (inputs, planned shards, what is skipped and why, "
                                 "estimated documents and tokens) and exit without writing")
        parser.add_argument("--split-bytes", type=int, default=256 << 20,
                            help="uncompressed JSONL files larger than this are read in ranges of "
                                 "this many bytes by several workers (default 256 MiB)")
        parser.add_argument("--batch-documents", type=int, default=2048,
                            help="documents per batch (tokenizer call and part file)")
        parser.add_argument("--batch-bytes", type=int, default=8 << 20,
                            help="input bytes per batch at most (default 8 MiB)")

    def validate_io(self) -> None:
        if not self.input:
            raise OptionsError("--input is required: a glob, file or folder of JSONL/Parquet")
        if not self.output:
            raise OptionsError("--output is required: the folder for the shards")
        if not self.json_keys:
            raise OptionsError("--json-keys needs at least one key")


class TokenizerOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--tokenizer-type", default=None, choices=list(tk.KINDS),
                            help="Megatron's tokenizer type")
        parser.add_argument("--tokenizer-library", default=None,
                            choices=list(tk.LIBRARY_ALIASES),
                            help="NeMo's name for the tokenizer family (alias of --tokenizer-type)")
        parser.add_argument("--tokenizer-model", default=None,
                            help="tokenizer.json (or a folder holding it) / SentencePiece .model")
        parser.add_argument("--vocab-file", default=None,
                            help="GPT-2 vocab.json; BERT WordPiece vocab.txt")
        parser.add_argument("--merge-file", default=None, help="GPT-2 merges.txt")
        parser.add_argument("--vocab-size", type=int, default=None,
                            help="NullTokenizer: N, the EOD id (vocabulary N + 1, as in "
                                 "Megatron); TikTokenizer: the whole vocabulary, special "
                                 "tokens included")
        parser.add_argument("--legacy-tokenizer", action="store_true",
                            help="Megatron's legacy tokenizer classes (core_v0.16.1's "
                                 "--legacy-tokenizer): other special tokens and EOD ids for "
                                 "SentencePieceTokenizer, BOS on every text for "
                                 "Llama2Tokenizer, no special tokens in text for TikTokenizer, "
                                 "special tokens added for HuggingFaceTokenizer; required for "
                                 "BertWordPiece*")
        parser.add_argument("--tiktoken-pattern", default=None, choices=["v1", "v2"],
                            help="TikTokenizer pre-tokenizer pattern (default v2; required "
                                 "with --legacy-tokenizer, as in Megatron)")
        parser.add_argument("--tiktoken-num-special-tokens", type=int, default=1000,
                            help="TikTokenizer: ids 0..N-1 are special tokens, ranks start at "
                                 "N (default 1000)")
        parser.add_argument("--tokenizer-special-tokens", nargs="+", default=None,
                            metavar="TOKEN",
                            help="TikTokenizer: the special tokens (ids 0..), instead of "
                                 "Megatron's defaults; must include <unk> <s> </s> (and "
                                 "<mask> <pad> <cls> <sep> without --legacy-tokenizer)")
        parser.add_argument("--tiktoken-special-tokens", nargs="+", default=None,
                            metavar="TOKEN",
                            help="refused: Megatron core_v0.16.1 accepts it but ignores it; "
                                 "use --tokenizer-special-tokens")
        parser.add_argument("--append-eod", action="store_true",
                            help="append the EOD id to every non-empty document")
        parser.add_argument("--eod-id", type=int, default=None,
                            help="EOD id to use instead of the tokenizer's end-of-sequence token")
        parser.add_argument("--add-special-tokens", action="store_true",
                            help="let the tokenizer add its special tokens (e.g. BOS); off by "
                                 "default, as in Megatron core_v0.16.1")
        parser.add_argument("--dtype", default=None, choices=["uint16", "int32", "int64"],
                            help="token dtype; default Megatron's rule: uint16 below a vocab of "
                                 "65500, else int32")
        parser.add_argument("--tokenizer-backend", default="auto",
                            choices=["auto", "reference", "fast"],
                            help="reference: tokenizers/sentencepiece; fast: gigatoken where it "
                                 "gives identical ids; auto: fast only after a self-check passes")

    def tokenizer_spec(self) -> tk.TokenizerSpec:
        kind = tk.resolve_kind(self.tokenizer_type, self.tokenizer_library)
        if self.tiktoken_special_tokens:
            raise OptionsError("--tiktoken-special-tokens is ignored by Megatron core_v0.16.1's "
                               "preprocess_data.py; give the tokens as "
                               "--tokenizer-special-tokens")
        if self.tokenizer_special_tokens and kind not in tk.TIKTOKEN_KINDS:
            raise OptionsError(f"--tokenizer-special-tokens is supported for TikTokenizer only, "
                               f"not {kind}; leave it out")
        if kind in tk.WORDPIECE_KINDS and not self.legacy_tokenizer:
            raise OptionsError(f"--tokenizer-type {kind} needs --legacy-tokenizer: Megatron "
                               "core_v0.16.1's default path loads a bert-large tokenizer from "
                               "the HuggingFace hub; tokenbeam runs the legacy WordPiece "
                               "semantics only")
        pattern = self.tiktoken_pattern
        if kind in tk.TIKTOKEN_KINDS and pattern is None and not self.legacy_tokenizer:
            pattern = "v2"  # Megatron's default on its default path
        return tk.TokenizerSpec(kind=kind, model=self.tokenizer_model, vocab_file=self.vocab_file,
                                merge_file=self.merge_file,
                                # Megatron's legacy HF class calls tokenizer(text): special
                                # tokens added, as the default path's include-special flag
                                add_special_tokens=self.add_special_tokens or (
                                    self.legacy_tokenizer and kind in tk.HF_KINDS),
                                eod_id=self.eod_id,
                                vocab_size=self.vocab_size, backend=self.tokenizer_backend,
                                legacy=self.legacy_tokenizer, tiktoken_pattern=pattern,
                                tiktoken_num_special_tokens=self.tiktoken_num_special_tokens,
                                special_tokens=tuple(self.tokenizer_special_tokens)
                                if self.tokenizer_special_tokens else None)


class SegmentationOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--split-sentences", action="store_true",
                            help="one sequence per sentence; shards named *_sentence_*")
        parser.add_argument("--keep-newlines", action="store_true",
                            help="keep newlines in sentence text (Megatron's flag)")
        parser.add_argument("--sentence-splitter", default="auto",
                            help="sentence splitter (see README); nltk = Megatron's punkt splitting")
        parser.add_argument("--lang", default="english",
                            help="language for sentence splitting (NLTK name or ISO code)")
        parser.add_argument("--skip-empty", action="store_true",
                            help="drop empty documents instead of keeping them as documents with "
                                 "no sequence (NeMo's behaviour)")
        parser.add_argument("--holdout-fraction", type=float, default=0.0,
                            help="send this fraction of documents (by a stable hash of their id) "
                                 "to holdout shards under DIR/holdout/")
        parser.add_argument("--id-key", default=None,
                            help="document id key for --holdout-fraction (default: hash the text)")

    def validate_segmentation(self) -> None:
        if not 0.0 <= self.holdout_fraction < 1.0:
            raise OptionsError("--holdout-fraction must be in [0, 1), e.g. 0.001")


class RunOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--workers", type=int, default=1,
                            help="worker processes on the local runner (default 1)")
        parser.add_argument("--log-interval", type=int, default=10_000,
                            help="progress line every N documents per worker (0: off)")


class AzureOptions(PipelineOptions):
    """Azure Blob credentials (see dataio/azure.py). The secret flags are taken out of argv by
    ``dataio.azure.prepare_argv`` before Beam parses it; they are declared here for --help."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--azure-sas-token", default=None,
                            help="SAS token for every Azure path (never logged or pickled)")
        parser.add_argument("--azure-account-key", default=None,
                            help="storage account key (never logged or pickled)")
        parser.add_argument("--azure-account-name", default=None,
                            help="storage account for az:// and abfs:// URLs")
        parser.add_argument("--azure-auth", default="auto",
                            choices=["auto", "sas", "account-key", "connection-string", "default"],
                            help="use only this credential method (default: try SAS, account key, "
                                 "connection string, then DefaultAzureCredential)")
        parser.add_argument("--azure-block-size-mb", type=float, default=None,
                            help="upload block size in MiB (bounds memory per open upload)")


ALL = (InputOutputOptions, TokenizerOptions, SegmentationOptions, RunOptions, AzureOptions)
LOCAL_RUNNERS = ("DirectRunner", "FnApiRunner", None)


def parse(argv) -> PipelineOptions:
    """Parse ``argv`` into PipelineOptions, refusing unknown flags (Beam silently drops them)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for cls in PipelineOptions.__subclasses__():
        try:
            cls._add_argparse_args(parser)
        except argparse.ArgumentError:
            pass  # a flag two Beam option classes both declare
    _, unknown = parser.parse_known_args(argv)
    unknown = [u for u in unknown if u.startswith("--")]
    if unknown:
        raise OptionsError(f"unknown flag {unknown[0]}; see --help")
    options = PipelineOptions(argv)
    _local_runner(options)
    return options


def _local_runner(options: PipelineOptions) -> None:
    """DirectRunner means the in-process FnApiRunner: Beam 2.77's DirectRunner would first try
    to download its Prism runner from the internet. ``--workers N`` > 1 runs N processes."""
    std = options.view_as(StandardOptions)
    if std.runner in LOCAL_RUNNERS:
        std.runner = "FnApiRunner"
        workers = options.view_as(RunOptions).workers
        direct = options.view_as(DirectOptions)
        if workers > 1:
            direct.direct_running_mode = "multi_processing"
            direct.direct_num_workers = workers
            # worker processes log every gRPC step at INFO; keep their stderr to progress lines
            worker = options.view_as(WorkerOptions)
            if worker.default_sdk_harness_log_level is None:
                worker.default_sdk_harness_log_level = "WARNING"
            # The same runner, whose workers die with the driver (kill -9 of the driver
            # included) and leave Ctrl-C to it: dataio/workers.py.
            std.runner = local_workers.RUNNER
        else:
            direct.direct_running_mode = "in_memory"


def help_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="tokenbeam options (Beam's own flags, "
                                     "e.g. --runner, pass through)")
    for cls in ALL:
        cls._add_argparse_args(parser)
    return parser


__all__ = ["InputOutputOptions", "TokenizerOptions", "SegmentationOptions", "RunOptions", "parse",
           "OptionsError", "help_parser"]
