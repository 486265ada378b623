"""Pipeline options: one PipelineOptions subclass per concern, each with help and validate().

Megatron's flag names are used wherever Megatron has one (``--json-keys``, ``--tokenizer-type``,
``--append-eod``, ``--split-sentences``, ``--keep-newlines``, ``--lang``, ``--workers``,
``--log-interval``); NeMo's ``--tokenizer-library`` is accepted as an alias. Beam's own flags
pass through untouched.

Importing this module does not import Beam: each concern's flags and checks are a plain class
(``InputOutputFlags``, ...), the one definition of every flag, with a ``validate()`` that
:func:`validate` calls for every group of a job, in one place. From them come :func:`help_parser`
and :func:`parse_flags` (:class:`Flags`, what the planner reads: ``--help``, ``--dry-run`` and a
rerun that skips every shard need no Beam). Their PipelineOptions subclasses
(``InputOutputOptions``, ...) and Beam's parse of a command line are in
pipelines/beam_options.py, imported when a pipeline is to run.

Each job accepts its own groups and Beam's (and runners') flags only: Beam's parse
(pipelines/beam_options.py) takes the job's ``groups`` and refuses a flag of another job
(``python -m pipelines.reshard --tokenizer-type x`` is an unknown flag there), although every
job's options are PipelineOptions subclasses that Beam itself would accept wherever they are
imported.
"""

from __future__ import annotations

import argparse
import posixpath

from runtime import cli, errors, log
from runtime import workers as local_workers
from transforms import sentences
from transforms import tokenizer as tk
from transforms.tokenizer import flags as tkf


class OptionsError(errors.ConfigError):
    """Bad configuration; the message names the flag and the fix (exit status 2)."""


class InputOutputFlags:
    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--input", action="append", default=None, metavar="GLOB",
                            help="input files: a glob, a file or a folder (every .jsonl, .json, "
                                 ".jsonl.gz, .jsonl.zst, .parquet in it and in the folders below "
                                 "it); local path or fsspec URL; repeatable")
        parser.add_argument("--output", default=None, metavar="DIR",
                            help="output folder (local path or fsspec URL)")
        parser.add_argument("--output-prefix", default=None, metavar="P",
                            help="Megatron's flag: one input file, its shards written as exactly "
                                 "P_{key}_{level}.bin/.idx (no counts in the name; they stay in "
                                 "the commit record, metadata and count --rename); the same as "
                                 "--output dirname(P) --output-name basename(P)")
        parser.add_argument("--output-name", default=None, metavar="NAME",
                            help="one input file, its shards named NAME_{key}_{level} in "
                                 "--output, without counts (what --output-prefix sets)")
        parser.add_argument("--output-layout", choices=["flat", "mirror"], default="flat",
                            help="flat (default): every shard directly in --output, named by "
                                 "its input's name (by its folders too, joined by _, where two "
                                 "inputs share a name); mirror: shards in the subfolders of "
                                 "--output that the inputs lie in below the input root "
                                 "(CC-MAIN-2024-10/000_00000.parquet -> "
                                 "DIR/CC-MAIN-2024-10/000_00000_text_document_...)")
        parser.add_argument("--json-keys", nargs="+", default=["text"], metavar="KEY",
                            help="keys to tokenize; each key gets its own shards (default: text)")
        parser.add_argument("--on-bad-record", choices=["skip", "fail"], default="skip",
                            help="skip (default): leave bad records out, count them and list them "
                                 "in DIR/_errors/{stem}.jsonl; fail: stop at the first one")
        parser.add_argument("--max-bad-fraction", type=float, default=0.1, metavar="F",
                            help="with --on-bad-record skip: an input whose records are bad "
                                 "for more than this fraction (default 0.1), or all bad, fails "
                                 "its shards instead of committing them (exit 1, the first bad "
                                 "record named); 0: any bad record fails them; 1: never (an "
                                 "input of bad records only commits empty shards)")
        parser.add_argument("--overwrite", action="store_true",
                            help="redo every shard, even those already committed, and write "
                                 "into an output holding shards of another tokenizer or other "
                                 "options (refused otherwise)")
        # Resume key: path, size and mtime/etag; a local edit that keeps the size and restores
        # the mtime is only seen by hashing the bytes. On by default: hashing costs a few percent
        # of a first run's CPU time (bench/verify_inputs.py measures it).
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

    def validate(self) -> None:
        if not self.input:
            raise OptionsError("--input is required: a glob, file or folder of JSONL/Parquet")
        if not self.output:
            raise OptionsError("--output is required: the folder for the shards (or "
                               "Megatron's --output-prefix P)")
        name = getattr(self, "output_name", None)  # reshard has no such flag
        if name is not None and (not name or "/" in name or name in (".", "..")):
            raise OptionsError(f"--output-name {name!r}: give a file name without a folder "
                               "(--output-prefix P: P must not end in /)")
        if not self.json_keys:
            raise OptionsError("--json-keys needs at least one key")
        fraction = getattr(self, "max_bad_fraction", 0.1)  # reshard has no such flag
        if fraction is None or not 0 <= fraction <= 1:
            raise OptionsError(f"--max-bad-fraction {fraction}: give a fraction of the records "
                               "from 0 to 1, e.g. 0.01")


def expand_output_prefix(argv: list[str]) -> list[str]:
    """Megatron's ``--output-prefix P`` as tokenbeam's flags: ``--output dirname(P)
    --output-name basename(P)`` (the prefix's folder is the output folder; its control files,
    ``_commits/``, ``_errors/``, the lock and ``NAME.metadata.json``, go there). Refused with
    ``--output`` or ``--output-name`` (two places for one output)."""
    found = [(i, a) for i, a in enumerate(argv)
             if a == "--output-prefix" or a.startswith("--output-prefix=")]
    if not found:
        return list(argv)
    if len(found) > 1:
        raise OptionsError("--output-prefix given twice; give it once")
    i, arg = found[0]
    if arg == "--output-prefix":
        if i + 1 >= len(argv):
            raise OptionsError("--output-prefix needs a value: the path and name of the output "
                               "without suffix, e.g. data/my-corpus")
        prefix, rest = argv[i + 1], argv[:i] + argv[i + 2:]
    else:
        prefix, rest = arg.split("=", 1)[1], argv[:i] + argv[i + 1:]
    for other in ("--output", "--output-name"):
        if any(a == other or a.startswith(other + "=") for a in rest):
            raise OptionsError(f"--output-prefix with {other}: give one of them (--output-prefix "
                               "P writes P_{key}_{level}.bin/.idx; --output DIR writes "
                               "{input name}_{key}_{level}_dc=.._sc=.._tc=...bin/.idx)")
    folder, name = posixpath.split(prefix)
    # one token each: a name starting with "-" (Megatron takes it) is not read as a flag
    return rest + [f"--output={folder or '.'}", f"--output-name={name}"]


class TokenizerFlags:
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
                                 "<mask> <pad> <cls> <sep> without --legacy-tokenizer). "
                                 "SentencePiece types: tokens split out of the text (new ids "
                                 "after the pieces), in Megatron's SentencePiece legacy mode "
                                 "only. Ignored where Megatron ignores it (legacy classes, "
                                 "NullTokenizer)")
        parser.add_argument("--tiktoken-special-tokens", nargs="+", default=None,
                            metavar="TOKEN",
                            help="ignored, as by Megatron core_v0.16.1's preprocess_data.py "
                                 "(only its training arguments copy it); use "
                                 "--tokenizer-special-tokens")
        parser.add_argument("--tokenizer-sentencepiece-legacy", action="store_true",
                            help="SentencePiece types, without --legacy-tokenizer: Megatron's "
                                 "legacy wrapper, which takes special tokens (ids unchanged "
                                 "without them; no EOD, so not with --append-eod)")
        parser.add_argument("--tokenizer-metadata", default=None, metavar="JSON",
                            help="Megatron's tokenizer metadata file: accepted when it names "
                                 "the --tokenizer-type's own library (ids unchanged); ignored "
                                 "with --legacy-tokenizer and for NullTokenizer, as in Megatron")
        parser.add_argument("--vocab-extra-ids", type=int, default=0, metavar="N",
                            help="ignored, as by Megatron's preprocess_data.py (which sets it "
                                 "to 0)")
        parser.add_argument("--padded-vocab-size", type=int, default=None, metavar="N",
                            help="ignored, as by Megatron's preprocess_data.py: the dtype "
                                 "follows the tokenizer's own vocabulary size")
        parser.add_argument("--tokenizer-hf-include-special-tokens", action="store_true",
                            help="HuggingFaceTokenizer: Megatron's flag, ids of tokenizer(text) "
                                 "(the special tokens its post-processor adds, e.g. BOS); the "
                                 "same as --add-special-tokens")
        parser.add_argument("--tokenizer-hf-use-fast", action="store_true",
                            help="HuggingFaceTokenizer: accepted, changes nothing (transformers "
                                 "5 always loads the fast tokenizer, as Megatron's does)")
        parser.add_argument("--trust-remote-code", action="store_true",
                            help="refused: tokenbeam never runs a folder's Python code")
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
                            help="reference: the library Megatron runs (transformers for "
                                 "HuggingFace folders, sentencepiece, ...); fast: gigatoken "
                                 "where it gives identical ids; auto: fast (else a HuggingFace "
                                 "folder's own Rust tokenizer) only after a self-check passes")

    def validate(self) -> None:
        self.tokenizer_spec()  # raises OptionsError / TokenizerConfigError naming the flag

    def tokenizer_spec(self) -> tk.TokenizerSpec:
        kind = tk.resolve_kind(self.tokenizer_type, self.tokenizer_library)
        declared = tk.KINDS[kind]
        special_tokens = tkf.megatron_special_tokens(
            kind, tuple(self.tokenizer_special_tokens or ()), legacy=self.legacy_tokenizer,
            sentencepiece_legacy=self.tokenizer_sentencepiece_legacy,
            append_eod=self.append_eod)
        if self.tokenizer_metadata and not self.legacy_tokenizer:
            tkf.check_megatron_metadata(kind, self.tokenizer_metadata)
        if self.trust_remote_code:
            raise OptionsError("--trust-remote-code: tokenbeam never runs a tokenizer folder's "
                               "own Python code; use a folder whose tokenizer_class transformers "
                               "has built in (a tokenizer.json with its configs)")
        flag = ("--tokenizer-hf-include-special-tokens" if self.tokenizer_hf_include_special_tokens
                else "--tokenizer-hf-use-fast" if self.tokenizer_hf_use_fast else None)
        if flag and flag not in declared.flags:
            raise OptionsError(f"{flag} is supported for HuggingFaceTokenizer only, not "
                               f"{kind}; leave it out")
        if declared.legacy_only and not self.legacy_tokenizer:
            raise OptionsError(f"--tokenizer-type {kind} needs --legacy-tokenizer: "
                               f"{declared.legacy_only}")
        pattern = self.tiktoken_pattern
        if "--tiktoken-pattern" in declared.flags and pattern is None \
                and not self.legacy_tokenizer:
            pattern = "v2"  # Megatron's default on its default path
        return tk.TokenizerSpec(kind=kind, model=self.tokenizer_model, vocab_file=self.vocab_file,
                                merge_file=self.merge_file,
                                # Megatron's legacy HF class calls tokenizer(text): special
                                # tokens added, as the default path's include-special flag
                                add_special_tokens=self.add_special_tokens or (
                                    self.tokenizer_hf_include_special_tokens) or (
                                    self.legacy_tokenizer and declared.family == "huggingface"),
                                eod_id=self.eod_id,
                                vocab_size=self.vocab_size, backend=self.tokenizer_backend,
                                legacy=self.legacy_tokenizer, tiktoken_pattern=pattern,
                                tiktoken_num_special_tokens=self.tiktoken_num_special_tokens,
                                special_tokens=special_tokens)

    def tokenizer_notes(self) -> list[str]:
        """One line for each flag given that Megatron core_v0.16.1's preprocess_data.py takes
        and ignores (so tokenbeam ignores it too: the same ids), printed once at start."""
        kind = tk.resolve_kind(self.tokenizer_type, self.tokenizer_library)
        return tkf.ignored_flag_notes(
            kind, legacy=self.legacy_tokenizer,
            special_tokens=bool(self.tokenizer_special_tokens),
            tiktoken_special_tokens=bool(self.tiktoken_special_tokens),
            sentencepiece_legacy=self.tokenizer_sentencepiece_legacy,
            metadata=bool(self.tokenizer_metadata), vocab_size=self.vocab_size is not None,
            vocab_extra_ids=self.vocab_extra_ids, padded_vocab_size=self.padded_vocab_size)


class SegmentationFlags:
    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--split-sentences", action="store_true",
                            help="one sequence per sentence; shards named *_sentence_*")
        parser.add_argument("--keep-newlines", action="store_true",
                            help="keep newlines in sentence text (Megatron's flag)")
        parser.add_argument("--sentence-splitter", default="auto",
                            help="auto (default): Megatron's NLTK punkt where its data for --lang "
                                 "is installed (NLTK_DATA), else sentencex; the run says which "
                                 "in one line. nltk: Megatron's punkt splitting; sentencex: "
                                 "offline, no data files (see docs/sentences.md)")
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

    def validate(self) -> None:
        if not 0.0 <= self.holdout_fraction < 1.0:
            raise OptionsError("--holdout-fraction must be in [0, 1), e.g. 0.001")

    def sentence_splitter_choice(self) -> sentences.SplitterChoice:
        """The splitter this run uses, ``auto`` decided here on the driver (never on a worker):
        its ``name`` is what the workers and the resume key get, its ``line`` is printed once."""
        try:
            return sentences.choose_splitter(splitter=self.sentence_splitter, lang=self.lang)
        except ValueError as exc:
            raise OptionsError(str(exc)) from None


class RunFlags:
    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--workers", type=_workers, default="auto", metavar="N|auto",
                            help="worker processes on the local runner; auto (default): 1 with "
                                 "the fast tokenizer backend (its threads use every core), one "
                                 "per core (at most one per work item) with the reference "
                                 "backend; the choice is printed as 'workers: N (why)'")
        parser.add_argument("--log-interval", type=int, default=10_000, metavar="N",
                            help="a progress line each time a worker process has tokenized "
                                 "another N documents (default 10000; 0: no progress): "
                                 "documents, MB, tokens, rates and an ETA; counted at batch "
                                 "ends, so at most one line per batch (--batch-documents). "
                                 "On a terminal with one worker: a live bar instead")
        parser.add_argument("--partitions", type=int, default=1, metavar="N",
                            help="Megatron's flag: 1 (its default) accepted; more refused: "
                                 "Megatron then reads --input as a glob, deals its lines "
                                 "round-robin into N files and merges their outputs in that "
                                 "order; tokenbeam splits the work itself (--workers, "
                                 "--split-bytes) and keeps input order")
        parser.add_argument("--keep-sequential-samples", action="store_true",
                            help="Megatron's flag (keep input order with --partitions > 1): "
                                 "accepted, tokenbeam always keeps input order")
        parser.add_argument("--log-level", default=log.DEFAULT_LEVEL, choices=list(log.LEVELS),
                            help="tokenbeam's messages at this level and above (default info); "
                                 "debug also shows Beam's and other libraries' messages, which "
                                 "are hidden otherwise")

    def validate(self) -> None:
        partitions = getattr(self, "partitions", 1)
        if partitions != 1:
            raise OptionsError(
                f"--partitions {partitions}: not supported (Megatron deals the glob's lines "
                "round-robin into partitions and merges them out of input order); leave it "
                "out: tokenbeam splits the work itself over --workers (and --split-bytes) in "
                "input order; for one dataset from several inputs tokenize them into --output "
                "DIR and join them with python -m pipelines.merge")
        if self.log_interval < 0:
            raise OptionsError(f"--log-interval {self.log_interval}: give a number of "
                               "documents >= 1, or 0 for no progress")


def _workers(value: str):
    if value == "auto":
        return value
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a number of processes >= 1 or auto, "
                                         f"not {value!r}")
    return n


class AzureFlags:
    """Azure Blob credentials (see the dataio.azure package). The secret flags are taken out of
    argv by ``dataio.azure.prepare_argv`` before Beam parses it; they are declared here for
    --help."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--azure-sas-token-file", default=None, metavar="FILE",
                            help="read the SAS token for every Azure path from FILE (a "
                                 "trailing newline is dropped); like AZURE_STORAGE_SAS_TOKEN, "
                                 "keeps the secret off the command line")
        parser.add_argument("--azure-account-key-file", default=None, metavar="FILE",
                            help="read the storage account key from FILE; like "
                                 "AZURE_STORAGE_KEY, keeps the secret off the command line")
        parser.add_argument("--azure-sas-token", default=None,
                            help="SAS token for every Azure path (never logged or pickled, but "
                                 "visible in ps while the job runs: prefer "
                                 "AZURE_STORAGE_SAS_TOKEN or --azure-sas-token-file)")
        parser.add_argument("--azure-account-key", default=None,
                            help="storage account key (never logged or pickled, but visible "
                                 "in ps while the job runs: prefer AZURE_STORAGE_KEY or "
                                 "--azure-account-key-file)")
        parser.add_argument("--azure-account-name", default=None,
                            help="storage account for az:// and abfs:// URLs")
        parser.add_argument("--azure-auth", default="auto",
                            choices=["auto", "sas", "account-key", "connection-string", "default"],
                            help="use only this credential method (default: try SAS, account key, "
                                 "connection string, then DefaultAzureCredential)")
        parser.add_argument("--azure-block-size-mb", type=float, default=None,
                            help="upload block size in MiB (bounds memory per open upload)")

    def validate(self) -> None:
        if self.azure_block_size_mb is not None and self.azure_block_size_mb <= 0:
            raise OptionsError(f"--azure-block-size-mb {self.azure_block_size_mb}: give a "
                               "positive size in MiB, e.g. 64")


# The tokenize job's groups: its --help, its Flags, what its parse accepts.
GROUPS = (InputOutputFlags, TokenizerFlags, SegmentationFlags, RunFlags, AzureFlags)
# The order the groups are validated in: the output and inputs first, the tokenizer (which may
# load files) after the cheap checks.
_VALIDATION_ORDER = (InputOutputFlags, SegmentationFlags, RunFlags, AzureFlags, TokenizerFlags)
LOCAL_RUNNERS = ("DirectRunner", "FnApiRunner", None)


def is_local_runner(name: str | None) -> bool:
    """``name`` is a local runner as Beam matches it (any case, "Runner" optional)."""
    if name in LOCAL_RUNNERS:
        return True
    key = name.lower().removesuffix("runner")
    return any(r and r.lower().removesuffix("runner") == key for r in LOCAL_RUNNERS)


class Flags(*GROUPS):
    """tokenbeam's own flags parsed without Beam (:func:`parse_flags`), or read from parsed
    PipelineOptions (:func:`flags`): attribute access and the groups' checks, one object for
    every group; ``argv`` is what it was parsed from (secrets already taken out)."""

    def __init__(self, values: dict, argv=()):
        self.__dict__.update(values)
        self.argv = list(argv)

    def get_all_options(self) -> dict:
        return {k: v for k, v in vars(self).items() if k != "argv"}


class _QuietParser(cli.ArgumentParser):
    """Raises instead of printing usage and exiting (the caller falls back to Beam's parser);
    a bad choice of one of tokenbeam's flags is a ConfigError whatever Beam's flags are."""

    def error(self, message):
        raise ValueError(message)


def _flag_parser(parser_class=argparse.ArgumentParser, **kwargs) -> argparse.ArgumentParser:
    parser = parser_class(**kwargs)
    for group in GROUPS:
        group._add_argparse_args(parser)
    return parser


def parse_flags(argv) -> Flags | None:
    """``argv`` parsed without importing Beam; None when it holds anything but tokenbeam's own
    flags and ``--runner`` (Beam's flags are known only to Beam: use :func:`parse`)."""
    parser = _flag_parser(_QuietParser, add_help=False, allow_abbrev=False)
    parser.add_argument("--runner", default=None)
    try:
        values, unknown = parser.parse_known_args(argv)
    except errors.ConfigError:
        raise  # a bad choice: the nearest valid one named (runtime/cli.py)
    except (ValueError, argparse.ArgumentError):
        return None  # a bad value: parse() reports it as Beam's parser always has
    if unknown:
        return None
    return Flags(vars(values), argv)


def flags(options) -> Flags:
    """tokenbeam's flag values of a :class:`Flags` or of parsed PipelineOptions."""
    if isinstance(options, Flags):
        return options
    return Flags(options.get_all_options())


def validate(options, groups=GROUPS) -> None:
    """The one place each group's ``validate()`` is called: raises the first problem found
    (OptionsError naming the flag and the fix). ``options``: a :class:`Flags`, or parsed
    PipelineOptions of a job with those groups."""
    check_runner(flags(options).__dict__.get("runner"))
    for group in [g for g in _VALIDATION_ORDER if g in groups] + \
            [g for g in groups if g not in _VALIDATION_ORDER]:
        check = getattr(group, "validate", None)  # another job's class may have none
        if check is None:
            continue
        if isinstance(options, group):
            check(options)  # unbound: a Flags object is every group at once
        elif group in GROUPS:
            check(flags(options))  # one of these groups, read from parsed PipelineOptions
        else:
            check(options.view_as(group))  # a job's own PipelineOptions subclass


def check_runner(name: str | None) -> None:
    """Beam's ``--runner``: one it knows (as Beam matches it: any case, "Runner" optional) or a
    module.Class name; else one line naming the nearest, not Beam's traceback when the
    pipeline starts. Beam is imported only for a runner other than the local ones."""
    if not name or "." in name or name in LOCAL_RUNNERS:
        return
    from apache_beam.options.pipeline_options import StandardOptions

    known = list(StandardOptions.KNOWN_RUNNER_NAMES)
    lowered = {k.lower() for k in known}
    if name.lower() in lowered or name.lower() + "runner" in lowered:
        return
    match = cli.nearest(name, known)
    hint = f"did you mean --runner {match}? " if match else ""
    raise OptionsError(f"--runner {name}: not a runner Beam knows; {hint}(DirectRunner runs "
                       "here; FlinkRunner, SparkRunner, PortableRunner on a cluster; or a "
                       "module.Class name)")


def runs_locally(options) -> bool:
    """The runner is the local one (DirectRunner, its FnApiRunner, or ours with workers)."""
    runner = flags(options).runner
    return is_local_runner(runner) or runner == local_workers.RUNNER


def choose_workers(options, *, backend: str, items: int) -> tuple[int, str]:
    """The number of local worker processes and why: ``--workers N`` as given, capped at the
    useful number (cores, work items: Megatron users type 64 out of habit); ``auto`` from the
    tokenizer backend and the cores (runtime/workers.py)."""
    requested = flags(options).workers
    cores = local_workers.usable_cores()
    if requested != "auto":
        return local_workers.capped_workers(requested, cores=cores, items=items)
    return local_workers.auto_workers(backend=backend, cores=cores, items=items)


def help_parser(prog: str) -> argparse.ArgumentParser:
    return _flag_parser(cli.ArgumentParser, prog=prog,
                        description="tokenbeam options (Beam's own flags, e.g. --runner, pass "
                                    "through)")
