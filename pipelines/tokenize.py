"""``python -m pipelines.tokenize``: JSONL/Parquet in, Megatron ``.bin/.idx`` shards out.

One shard per input file and json key: ``{stem}_{key}_{document|sentence}_dc=N_sc=N_tc=N``,
byte-identical to Megatron-LM's ``tools/preprocess_data.py`` for the same input and tokenizer
settings, whatever the runner, ``--workers`` or retries. Rerunning the same command skips shards
already committed with the same inputs, tokenizer and options; ``--dry-run`` prints the plan.
See DESIGN.md for the data flow and dataio/sink.py for the commit protocol.

One run at a time per output folder (dataio/lock.py); its temporaries live under
``_temporary/{run id}/``. Everything a user can get wrong (the output, the tokenizer files) is
checked while planning, before any input is read.

Exit status (dataio/errors.py): 0 when every planned shard is committed; 1 when some shard
failed (they are listed), the data or the run failed, or another run holds the output; 2 for a
bad command line or configuration; 130 / 143 when interrupted by SIGINT / SIGTERM (rerun the
same command to resume). Anticipated failures print one line, never a traceback.

Beam is imported only when a pipeline runs (pipelines/_tokenize_graph.py wires it): ``--help``
reads the flags alone (pipelines/options.py), and the planner reads them from a Beam-free
:class:`~pipelines.options.Flags` when the command line holds only tokenbeam's flags.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime as dt
import errno
import hashlib
import importlib.metadata
import itertools
import json
import os
import sys
import time
import types

import numpy as np

from dataio import commits, errors
from dataio import fs as fsutil
from dataio import lock as output_lock
from dataio import azure, indexed, input_hashes, log, naming, readers, workers
from dataio.dataset import HOLDOUT_DIR  # where holdout shards go, and where readers find them
from dataio.redact import install_logging_filter, redact_argv
from dataio.redact import redact as _redact
from pipelines import options as opts
from transforms import progress
from transforms import tokenizer as tk

_LOG = log.get("tokenize")
FORMAT_VERSION = 1  # bump when a change alters output bytes: it invalidates committed shards

# Their messages already name the file or flag and the fix: one line, no traceback.
errors.anticipate(tk.TokenizerConfigError, readers.InputError, azure.AzureCredentialError,
                  azure.AzurePathError, status=errors.EXIT_USAGE)


def _documents():
    """transforms.documents (the reader's pure core), imported on first use: it imports Beam."""
    from transforms import documents

    errors.anticipate(documents.BadRecord, status=errors.EXIT_FAILED)
    return documents


def __getattr__(name: str):
    # Beam-side names, imported on first use (runners/spark.py and the tests use them).
    if name == "_FinishFn":
        from pipelines import _tokenize_graph

        return _tokenize_graph._FinishFn
    if name == "sink":
        from dataio import sink

        return sink
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    shard: str  # relative name without counts
    stem: str
    key: str
    input: readers.InputFile
    fingerprint: str
    skip: bool
    reason: str
    # what the fingerprint hashes (kept in the commit record, so a later run can say what changed)
    resume_key: dict | None = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass
class Job:
    """Everything the driver decided before the pipeline runs."""

    options: object  # pipelines.options.Flags, or PipelineOptions
    output: str
    spec: tk.TokenizerSpec
    config: types.SimpleNamespace  # TokenizeConfig's fields (the graph makes the config)
    tokenizer: dict
    dtype: np.dtype
    files: list[readers.InputFile]
    shards: list[ShardPlan]
    run_id: str = ""  # names this run's _temporary/{run id}/ (set when it holds the lock)
    folder: str = ""  # the driver's working folder: relative input paths are recorded from it

    @property
    def to_process(self) -> list[ShardPlan]:
        return [s for s in self.shards if not s.skip]

    def items(self) -> list[readers.WorkItem]:
        stems = {s.stem for s in self.to_process}
        files = [f for f in self.files if f.stem in stems]
        return readers.plan_items(files, split_bytes=opts.flags(self.options).split_bytes)


def _fingerprint(input_file: readers.InputFile, tokenizer: dict, settings: dict, *,
                 content: str | None = None) -> str:
    return _fingerprint_of(_resume_payload(input_file, tokenizer, settings, content=content))


def _resume_payload(input_file: readers.InputFile, tokenizer: dict, settings: dict, *,
                    content: str | None = None) -> dict:
    """What a shard's resume key is made of (its fingerprint: :func:`_fingerprint_of`)."""
    payload = {"format": FORMAT_VERSION, "input": [input_file.path, input_file.size,
                                                   input_file.version],
               "tokenizer": [[f["sha256"] for f in tokenizer["files"]], tokenizer["kind"],
                             tokenizer["eod_id"], tokenizer["add_special_tokens"],
                             # only when set, so keys of older configurations do not move
                             *([tokenizer["options"]] if tokenizer.get("options") else [])],
               "settings": settings}
    if content is not None:
        # Only when hashed: with --no-verify-inputs the key is exactly the one before the flag
        # existed, so outputs committed then are still skipped (README: upgrading).
        payload["content"] = content
    return payload


def _fingerprint_of(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _content_hashes(files: list[readers.InputFile]) -> dict[str, str | None]:
    """--verify-inputs: the content hash of every input whose version is an mtime. An etag
    (object stores) changes with every write already, and hashing would download the corpus."""
    local = [f.path for f in files if not f.version.lower().startswith("etag:")]
    # Local files' hashes are remembered by file identity between runs (dataio/input_hashes.py):
    # a rerun that skips every shard reads no input.
    remembered = input_hashes.content_hashes([p for p in local if fsutil.is_local(p)])
    return {**remembered, **fsutil.content_hashes([p for p in local if not fsutil.is_local(p)])}


def preflight(options) -> None:
    """What a user can get wrong about the paths, found before any input is read: the tokenizer
    files, and an output that is a file, unwritable or full (a probe file is written and removed;
    not with --dry-run, which writes nothing)."""
    flags = opts.flags(options)
    opts.validate(flags)
    check_segmentation(flags)
    check_tokenizer_files(flags.tokenizer_spec())
    check_output(flags.output, probe=not flags.plan_only)


def check_segmentation(seg) -> None:
    """With --split-sentences the splitter itself (its flags: options.validate), built once here
    so a missing package or punkt model fails before anything is read or written."""
    if not seg.split_sentences:
        return
    from transforms import sentences

    try:
        sentences.check_splitter_options(splitter=seg.sentence_splitter, lang=seg.lang)
        sentences.make_splitter(splitter=seg.sentence_splitter, lang=seg.lang,
                                keep_newlines=seg.keep_newlines)
    except (ValueError, sentences.SplitterUnavailableError) as exc:
        raise opts.OptionsError(str(exc)) from None


def check_tokenizer_files(spec: tk.TokenizerSpec) -> None:
    """Each file the tokenizer is built from exists and is a file (a HuggingFace model may be a
    folder holding tokenizer.json); raises ConfigError naming the flag and the fix."""
    if spec.kind in tk.HF_KINDS and spec.model:
        wanted = [("--tokenizer-model", spec.model, "a tokenizer.json or a folder holding one")]
    elif spec.kind in tk.SP_KINDS:
        wanted = [("--tokenizer-model", spec.model, "the SentencePiece .model file")]
    elif spec.kind in tk.GPT2_KINDS:
        wanted = [("--vocab-file", spec.vocab_file, "the GPT-2 vocab.json"),
                  ("--merge-file", spec.merge_file, "the GPT-2 merges.txt")]
    elif spec.kind in tk.TIKTOKEN_KINDS:
        tk.check_tiktoken_spec(spec)
        wanted = [("--tokenizer-model", spec.model, "the tiktoken vocabulary JSON")]
    elif spec.kind in tk.WORDPIECE_KINDS:
        wanted = [("--vocab-file", spec.vocab_file, "the WordPiece vocab.txt")]
    elif spec.kind in tk.NULL_KINDS:
        if spec.vocab_size is None:
            raise errors.ConfigError("NullTokenizer needs --vocab-size N (EOD = N, as in "
                                     "Megatron)")
        return
    else:
        return
    for flag, path, what in wanted:
        if not path:
            raise errors.ConfigError(f"{spec.kind} needs {flag}: {what}")
        fs, inner = fsutil.filesystem_and_path(path)
        if not fs.exists(inner):
            raise errors.ConfigError(f"{flag} {path}: no such file; give {what}")
        if fs.isdir(inner):
            if spec.kind in tk.HF_KINDS:
                if not fs.exists(inner.rstrip("/") + "/tokenizer.json"):
                    raise errors.ConfigError(f"{flag} {path}: the folder holds no "
                                             f"tokenizer.json; give {what}")
                continue
            inside = sorted(os.path.basename(p) for p in fs.ls(inner, detail=False)
                            if p.endswith(".model"))[:3]
            hint = f" (in it: {', '.join(inside)})" if inside else ""
            raise errors.ConfigError(f"{flag} {path} is a folder; give {what}{hint}")
    if spec.kind in tk.TIKTOKEN_KINDS + tk.WORDPIECE_KINDS:
        # their files' contents are checked against the flags when loaded (cached for later)
        tk.load_tokenizer(dataclasses.replace(spec, backend="reference"))


def check_output(output: str, *, probe: bool) -> None:
    """The output is a folder (or can be made one) that this run can write to: a small probe
    file is written and removed, so a read-only, unwritable or full output fails now, before
    any work, rather than when the first shard is written."""
    fs, inner = fsutil.filesystem_and_path(output)
    flag = f"--output {output}"
    if fs.isfile(inner):
        raise errors.ConfigError(f"{flag} is a file; give a folder (created if missing)")
    if not probe:
        return
    probe_path = fsutil.join(output, f".probe-{os.getpid()}")
    try:
        fsutil.makedirs(fs, inner)
        fsutil.write_bytes_atomic(probe_path, b"tokenbeam write probe\n")
        fsutil.remove(probe_path)
    except OSError as exc:
        message = errors.os_error_message(exc.errno, None) if exc.errno else None
        reason = message or f"{exc.strerror or exc}; give --output a folder this run can write"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise errors.RunError(f"{flag}: {reason}") from None
        raise errors.ConfigError(f"{flag}: cannot write there: {reason}") from None


def plan(options, *, checked: bool = False) -> Job:
    """Resolve inputs, tokenizer and dtype, and decide which shards to produce or skip.
    ``checked``: :func:`preflight` ran already."""
    io = seg = tok_opts = opts.flags(options)  # one Beam-free view of every flag
    if not checked:
        preflight(options)
    spec = tok_opts.tokenizer_spec()
    files = readers.discover(io.input, leave_out=spec.files())
    backend, why = tk.choose_backend(spec, sample_texts(files, io.json_keys))
    _LOG.info("tokenizer backend: %s (%s)", backend, why)
    spec = dataclasses.replace(spec, backend=backend)
    tokenizer = tk.load_tokenizer(spec)
    if tok_opts.append_eod and tokenizer.eod is None:
        raise opts.OptionsError(f"--append-eod: the {spec.kind} at {spec.model} names no "
                                "end-of-sequence token (HuggingFace: eos_token in "
                                "tokenizer_config.json); give --eod-id ID")
    description = tk.describe(spec, tokenizer)
    dtype = np.dtype(tok_opts.dtype) if tok_opts.dtype else indexed.optimal_dtype(tokenizer.vocab_size)
    if tokenizer.vocab_size - 1 > np.iinfo(dtype).max:
        raise opts.OptionsError(f"--dtype {dtype}: the vocabulary has {tokenizer.vocab_size} ids, "
                                "which do not fit; use int32")
    level = "sentence" if seg.split_sentences else "document"
    # transforms/tokenize.py imports Beam, which planning does without: TokenizeConfig's fields
    config = types.SimpleNamespace(keys=tuple(io.json_keys), level=level,
                                   append_eod=tok_opts.append_eod, skip_empty=seg.skip_empty,
                                   holdout_fraction=seg.holdout_fraction,
                                   splitter=seg.sentence_splitter, lang=seg.lang,
                                   keep_newlines=seg.keep_newlines, log_interval=io.log_interval)
    settings = {"keys": list(config.keys), "level": level, "append_eod": config.append_eod,
                "skip_empty": config.skip_empty, "holdout": config.holdout_fraction,
                "id_key": seg.id_key, "splitter": config.splitter if seg.split_sentences else None,
                "lang": config.lang if seg.split_sentences else None,
                "keep_newlines": config.keep_newlines if seg.split_sentences else None,
                "dtype": dtype.name}
    hashes = _content_hashes(files) if io.verify_inputs else {}
    output, overwrite = io.output, io.overwrite  # a Beam option lookup costs ~40 us
    # One listing of _commits/, not a request per shard; found records checked 16 at a time.
    records = fsutil.files_under(fsutil.join(output, commits.COMMITS_DIR))

    def states_of(f, fingerprint, names, resume_key):
        return {n: commits.is_committed(output, n, fingerprint, resume_key=resume_key)
                if f"{n}.json" in records else (False, "not committed yet") for n in names}

    planned = []
    for f in files:
        # kept in each commit record, so that a later run can say what changed
        resume_key = _resume_payload(f, description, settings, content=hashes.get(f.path))
        fingerprint = _fingerprint_of(resume_key)
        names = [naming.base_name(f.stem, key, level) for key in config.keys]
        if config.holdout_fraction > 0:
            names += [f"{HOLDOUT_DIR}/{n}" for n in names]
        planned.append((f, fingerprint, names, resume_key))
    if planned and not overwrite:
        refuse_other_settings(output, records, {n for _, _, names, _ in planned for n in names},
                              planned[0][3])
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        each = pool.map if records else map  # no record: nothing to read, no threads
        all_states = list(each(lambda a: states_of(*a), planned))
    shards = []
    for (f, fingerprint, names, resume_key), states in zip(planned, all_states):
        redo = overwrite or not all(done for done, _ in states.values())
        for n in names:
            done, why = states[n]
            if overwrite:
                why = "--overwrite"
            elif redo and done:
                why = "another shard of the same input must be redone"
            key = next(k for k in config.keys if n.endswith(f"_{k}_{level}"))
            shards.append(ShardPlan(n, f.stem, key, f, fingerprint, not redo, why,
                                    resume_key=resume_key))
    return Job(options, io.output, spec, config, description, dtype, files, shards,
               folder=os.getcwd())


def refuse_other_settings(output: str, records: set[str], names: set[str], resume_key: dict,
                          *, looked_at: int = 3) -> None:
    """An output holds the shards of one tokenizer and one set of options: a run whose options
    (level, keys, EOD, dtype...) or tokenizer differ from those of shards already committed there
    under other names is refused, naming the difference (``--overwrite`` writes beside them).
    Only records this run does not plan are read, at most ``looked_at`` of them (a rerun of the
    same command reads none); records without a resume key (older versions) say nothing."""
    foreign = sorted(r[:-len(".json")] for r in records
                     if r.endswith(".json") and r[:-len(".json")] not in names)
    for shard in foreign[:looked_at]:
        before = (commits.read_commit_record(output, shard) or {}).get("resume_key")
        if not isinstance(before, dict):
            continue
        if any(before.get(k) != resume_key.get(k) for k in ("tokenizer", "settings", "format")):
            why = commits.what_changed({**before, "input": None, "content": None},
                                       {**resume_key, "input": None, "content": None})
            raise opts.OptionsError(
                f"--output {output} holds shards written with another tokenizer or other options "
                f"(e.g. {shard}; {why}); give another --output, or --overwrite to write these "
                "shards beside them")
        return  # the same settings: so are the others (each run checked this)


def sample_texts(files, keys, *, per_file: int = 200, max_files: int = 4) -> list[str]:
    """Texts from the start of the first input files (for the tokenizer self-check)."""
    texts: list[str] = []
    for f in files[:max_files]:
        end = min(f.size, 256 << 10) if f.format == "jsonl" else None
        item = readers.WorkItem(f.path, f.stem, f.format, 0, 0, end,
                                row_groups=(0,) if f.format == "parquet" else ())
        taken = 0
        try:
            for out in _documents().read_documents(item, keys, max_docs=64):
                if isinstance(out, _documents().DocumentBatch):
                    for values in out.texts.values():
                        for v in values:
                            texts.extend([v] if isinstance(v, str) else v)
                    taken += len(out)
                if taken >= per_file:
                    break
        except (readers.CorruptFileError, OSError):
            continue  # the run reports unreadable files; the sample just skips them
    return texts


# --- dry run -----------------------------------------------------------------------------------

def _estimate(job: Job, input_file: readers.InputFile, tokenizer) -> str:
    """Documents and tokens extrapolated from the first ~1 MB of the file."""
    if input_file.format in ("jsonl.gz", "jsonl.zst"):
        return "compressed: not estimated"
    item = readers.WorkItem(input_file.path, input_file.stem, input_file.format, 0, 0,
                            min(input_file.size, 1 << 20),
                            row_groups=(0,) if input_file.format == "parquet" else ())
    n_docs = n_bytes = n_tokens = 0
    try:
        for out in _documents().read_documents(item, job.config.keys, max_docs=256):
            if isinstance(out, _documents().DocumentBatch):
                n_docs += len(out)
                n_bytes += out.num_bytes
                for key in job.config.keys:
                    texts = [t if isinstance(t, str) else "".join(t) for t in out.texts[key]]
                    n_tokens += int(tokenizer.encode_batch(texts)[1].sum())
            if n_docs >= 1000:
                break
    except readers.CorruptFileError as exc:
        return f"unreadable: {exc}"
    if not n_docs:
        return "no documents in the sample"
    if input_file.format == "parquet":
        import pyarrow.parquet as pq

        with fsutil.open_file(input_file.path, "rb") as fh:
            total_docs = pq.ParquetFile(fh).metadata.num_rows
        scale = total_docs / n_docs
    else:
        scale = input_file.size / max(n_bytes, 1)
    return f"~{int(n_docs * scale):,} documents, ~{int(n_tokens * scale):,} tokens"


def print_plan(job: Job, out=None) -> None:
    out = out or sys.stdout
    tokenizer = tk.load_tokenizer(job.spec)
    print(f"tokenizer: {job.spec.kind} {job.spec.model or job.spec.vocab_file} "
          f"(vocab {job.tokenizer['vocab_size']}, EOD {job.tokenizer['eod_id']}), dtype {job.dtype}",
          file=out)
    print(f"output: {redact(job.output)}", file=out)
    print(f"inputs: {len(job.files)} files, {sum(f.size for f in job.files) / 2**20:.1f} MB", file=out)
    by_stem = itertools.groupby(job.shards, key=lambda s: s.stem)
    for stem, shards in by_stem:
        shards = list(shards)
        f = shards[0].input
        estimate = _estimate(job, f, tokenizer) if not shards[0].skip else ""
        print(f"  {redact(f.path)}  {f.size / 2**20:.2f} MB  {estimate}", file=out)
        for s in shards:
            action = "skip" if s.skip else "write"
            # a shard it skips is shown as committed: its name carries the recorded counts
            record = commits.read_commit_record(job.output, s.shard) if s.skip else None
            name = (record or {}).get("name") or f"{s.shard}_dc=?_sc=?_tc=?"
            print(f"    {action:5} {name}  ({s.reason})", file=out)
    todo = len(job.to_process)
    chosen = local_workers(job) if todo else None
    workers_line = f"; workers: {chosen[0]} ({chosen[1]})" if chosen else ""
    print(f"plan: {todo} shards to write, {len(job.shards) - todo} to skip, "
          f"{len(job.items())} work items{workers_line}; nothing written (--dry-run)", file=out)


def redact(text: str) -> str:
    return _redact(text)


# --- the pipeline ------------------------------------------------------------------------------

def build(pipeline, job: Job, *, storage=None, finish_argv=None):
    """Wire the job into ``pipeline`` (a ``beam.Pipeline``); returns the PCollection of
    ShardResult. See pipelines/_tokenize_graph.py."""
    from pipelines import _tokenize_graph

    return _tokenize_graph.build(pipeline, job, storage=storage, finish_argv=finish_argv)


def prepare_output(job: Job) -> None:
    """Before the pipeline: clear the records and temporaries of the shards this run redoes."""
    io = opts.flags(job.options)
    for s in job.to_process:
        if io.overwrite:
            fsutil.remove(commits.commit_record_path(job.output, s.shard))
        fsutil.remove(commits.failure_record_path(job.output, s.shard))
    for stem in {s.stem for s in job.to_process}:
        fsutil.remove(fsutil.join(job.output, commits.ERRORS_DIR, stem + ".jsonl"))
    # Temporaries an interrupted run left beside the final files of the shards we redo.
    bases = tuple("." + os.path.basename(s.shard) + "_" for s in job.to_process)
    for folder in {os.path.dirname(s.shard) for s in job.to_process}:
        fsutil.remove_temporaries(
            fsutil.join(job.output, folder) if folder else job.output,
            is_temporary=lambda p: indexed.is_temporary_name(p)
            and os.path.basename(p).startswith(bases))


def _count_errors(output: str, stems) -> int:
    total = 0
    for stem in stems:
        path = fsutil.join(output, commits.ERRORS_DIR, stem + ".jsonl")
        if fsutil.exists(path):
            total += fsutil.read_bytes(path).count(b"\n")
    return total


def _versions(job: Job) -> dict:
    def version(dist):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {"tokenbeam": version("tokenbeam"), "apache-beam": version("apache-beam"),
            "numpy": np.__version__, job.tokenizer["library"]: job.tokenizer["library_version"],
            job.tokenizer["backend_library"]: job.tokenizer["backend_version"]}


def write_metadata(job: Job, *, argv, started: str, finished: str, results: dict) -> dict:
    shards = []
    for s in job.shards:
        record = commits.read_commit_record(job.output, s.shard) or {}
        shards.append({"shard": s.shard, "input": redact(fsutil.resolved(s.input.path, job.folder)),
                       "key": s.key,
                       "name": record.get("name"), "documents": record.get("documents"),
                       "sequences": record.get("sequences"), "tokens": record.get("tokens"),
                       "status": results.get(s.shard, "skipped" if s.skip else "missing")})
    committed = [x for x in shards if x["name"]]
    meta = {
        "tokenizer": job.tokenizer,
        "dtype": job.dtype.name,
        "level": job.config.level,
        "versions": _versions(job),
        # paths resolved from the driver's folder (this may run on a Spark worker)
        "inputs": [{"path": redact(fsutil.resolved(f.path, job.folder)), "size": f.size,
                    "version": f.version} for f in job.files],
        "shards": shards,
        "totals": {"shards": len(committed),
                   "documents": sum(x["documents"] for x in committed),
                   "sequences": sum(x["sequences"] for x in committed),
                   "tokens": sum(x["tokens"] for x in committed)},
        "options": redact_argv(argv),
        "run_id": job.run_id,
        "started": started,
        "finished": finished,
    }
    fsutil.write_bytes_atomic(fsutil.join(job.output, "metadata.json"),
                              json.dumps(meta, indent=1, ensure_ascii=False).encode("utf-8"))
    return meta


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _summary(job: Job, results: list, *, seconds: float, bad_records: int, out=None) -> None:
    out = out or sys.stdout
    written = [r for r in results if r.failed is None]
    docs_ = sum(r.counts.documents for r in written)
    toks = sum(r.counts.tokens for r in written)
    mb = sum(r.counts.num_bytes for r in written) / 2**20
    skipped = sum(1 for s in job.shards if s.skip)
    rows = [("shards written", f"{len(written)}"), ("shards skipped", f"{skipped}"),
            ("shards failed", f"{len(results) - len(written)}"), ("documents", f"{docs_:,}"),
            ("tokens", f"{toks:,}"), ("input MB", f"{mb:.2f}"), ("seconds", f"{seconds:.1f}"),
            ("MB/s", f"{mb / seconds:.2f}" if seconds else "-"),
            ("tokens/s", f"{toks / seconds:,.0f}" if seconds else "-"),
            ("bad records", f"{bad_records}")]
    width = max(len(k) for k, _ in rows)
    print("summary", file=out)
    for k, v in rows:
        print(f"  {k:<{width}}  {v:>14}", file=out)
    for r in written:
        print(f"  committed {r.name}", file=out)


def collect_results(job: Job) -> list[commits.ShardResult]:
    """What became of each shard this run had to write, from the commit and failure records
    (not back through Beam, so the same code reads them whatever the runner)."""
    results = []
    for s in job.to_process:
        record = commits.read_commit_record(job.output, s.shard)
        failure = None
        if fsutil.exists(commits.failure_record_path(job.output, s.shard)):
            failure = json.loads(fsutil.read_bytes(commits.failure_record_path(job.output, s.shard)))
        if failure is not None or record is None or record.get("fingerprint") != s.fingerprint:
            reason = failure["reason"] if failure else "no commit record after the run"
            results.append(commits.ShardResult(s.shard, None, commits.ShardCounts(), failed=reason))
        else:
            results.append(commits.ShardResult(s.shard, record["name"], commits.ShardCounts(
                record["documents"], record["sequences"], record["tokens"],
                record.get("input_bytes", 0))))
    return results


def finish(job: Job, argv, *, started: str) -> tuple[list[commits.ShardResult], int]:
    """After the pipeline (idempotent): remove this run's temporaries, write metadata.json;
    returns (the shard results, the number of bad records)."""
    results = collect_results(job)
    if job.run_id:
        fsutil.remove_tree(commits.temporary_dir(job.output, job.run_id))
    _remove_if_empty(commits.temporary_dir(job.output))
    bad = _count_errors(job.output, {s.stem for s in job.to_process})
    status = {r.shard: ("failed" if r.failed else "written") for r in results}
    write_metadata(job, argv=argv, started=started, finished=_now(), results=status)
    return results, bad


def report(job: Job, results: list, *, seconds: float, bad_records: int) -> int:
    """The summary on stdout, failed shards on stderr; returns the exit status."""
    _summary(job, results, seconds=seconds, bad_records=bad_records)
    failed = [r for r in results if r.failed]
    for r in failed:
        _LOG.error("FAILED %s: %s", r.shard, r.failed)
    return 1 if failed else 0


def announce_skips(job: Job) -> None:
    """A line per shard skipped, and per committed shard redone (saying what changed)."""
    for s in job.shards:
        if s.skip:
            print(f"skip {s.shard}: {s.reason}", flush=True)
        elif s.reason != "not committed yet":
            print(f"redo {s.shard}: {s.reason}", flush=True)


def local_workers(job: Job) -> tuple[int, str] | None:
    """(processes, why) on the local runner (``--workers``, or auto: pipelines/options.py);
    None on any other runner, whose own configuration says how many."""
    if not opts.runs_locally(job.options):
        return None
    return opts.choose_workers(job.options, backend=job.spec.backend, items=len(job.items()))


def execute(job: Job, argv, *, storage=None) -> int:
    """Run the job to completion; returns the exit status."""
    started, t0 = _now(), time.monotonic()
    announce_skips(job)
    if job.to_process:
        prepare_output(job)
        workers.mark_driver()  # local workers die with this process (dataio/workers.py)
        chosen = local_workers(job)
        if chosen is not None:
            _LOG.info("workers: %d (%s)", chosen[0], chosen[1])
        options = opts.pipeline_options(job.options, workers=chosen and chosen[0])
        job.config.progress = _progress_plan(job, workers=chosen and chosen[0])
        import apache_beam as beam

        t0 = time.monotonic()  # the summary's seconds: the job, not Beam's import or planning
        with beam.Pipeline(options=options) as pipeline:
            build(pipeline, job, storage=storage)
    results, bad = finish(job, argv, started=started)
    return report(job, results, seconds=time.monotonic() - t0, bad_records=bad)


def _progress_plan(job: Job, *, workers: int | None) -> progress.ProgressPlan:
    """What the workers' progress lines need: the planned bytes (comparable only for plain
    JSONL, see transforms/progress.py) and the local workers (None: a cluster's own)."""
    todo = [f for f in job.files if f.stem in {s.stem for s in job.to_process}]
    return progress.ProgressPlan(
        interval=job.config.log_interval, workers=workers or 1, run=job.run_id,
        planned_bytes=progress.planned_bytes([(f.format, f.size) for f in todo])
        if workers else 0)


def _remove_if_empty(folder: str) -> None:
    """Remove ``folder`` when nothing is left in it (a rerun that skips every shard must not
    leave an empty ``_temporary/`` behind)."""
    if fsutil.is_local(folder):
        try:
            os.rmdir(folder)
        except OSError:
            pass  # absent, or not empty
    elif fsutil.exists(folder) and not fsutil.list_names(folder):
        fsutil.remove_tree(folder)


def take_over(output: str, held: output_lock.OutputLock, *, ended=None) -> None:
    """Under the lock no other run is alive (unless a detached one: see dataio/lock.py, refused
    unless ``ended(hold)`` proves it over): whatever is in ``_temporary/`` was left by dead runs
    (killed, or killed between their last commit and their cleanup) and goes."""
    for hold in output_lock.refuse_detached(output, ended=ended) if held.exclusive else []:
        _LOG.info("note: %s has ended; removing its temporaries",
                  output_lock.describe_detached(hold))
    if held.stale:
        _LOG.info("note: taking over %s from a run that is no longer running (%s); removing "
                  "its temporaries", held.path, output_lock.describe_holder(held.stale))
    if held.exclusive:
        fsutil.remove_tree(commits.temporary_dir(output))


def run(argv=None) -> int:
    """The command (also for in-process callers): returns the exit status; what goes wrong
    is one line on stderr (see dataio/errors.py)."""
    return errors.main(_run, argv)


def setup(argv, *, beam_free: bool = False) -> tuple[list[str], object, object]:
    """Parse and check a tokenize command line before anything is written: returns (argv
    without secrets, the options, the storage plan workers adopt). The options are
    PipelineOptions, or with ``beam_free`` a :class:`~pipelines.options.Flags` where argv holds
    only tokenbeam's flags."""
    log.setup(log.level_from_argv(argv))  # before Beam's import, which logs
    install_logging_filter()
    # Secrets leave argv before Beam sees it: Beam serialises every option into the job.
    argv, secrets = azure.prepare_argv(argv)
    # beam_free: tokenbeam's flags alone need no Beam (PipelineOptions come when a pipeline runs)
    options = ((opts.parse_flags(argv) if beam_free else None)
               or opts.parse(argv, groups=opts.GROUPS))
    storage = configure_storage(options, secrets)
    preflight(options)
    return argv, options, storage


def lock_output(options, argv, *, run_id: str) -> output_lock.OutputLock:
    """Take the output's lock (dataio/lock.py) for this run."""
    return output_lock.acquire(opts.flags(options).output, run_id=run_id,
                               command=" ".join(["tokenize", *redact_argv(argv)]))


def _run(argv) -> int:
    if "-h" in argv or "--help" in argv:
        opts.help_parser("python -m pipelines.tokenize").print_help()
        return 0
    argv, options, storage = setup(argv, beam_free=True)
    io = opts.flags(options)
    if io.plan_only:
        print_plan(plan(options, checked=True))
        return 0
    run_id = output_lock.new_run_id()
    # The lock comes before the plan: what is committed must not change while we decide.
    with lock_output(options, argv, run_id=run_id) as held:
        take_over(io.output, held)
        job = plan(options, checked=True)
        job.run_id = run_id
        try:
            return execute(job, argv, storage=storage)
        except Exception as exc:
            space = space_error(exc, io.output)
            if space is not None:
                raise space from None
            raise
        finally:  # failed or interrupted: this run's parts are of no use to the next
            fsutil.remove_tree(commits.temporary_dir(io.output, run_id))
            _remove_if_empty(commits.temporary_dir(io.output))


def space_error(exc: Exception, output: str) -> errors.RunError | None:
    """A write to an open file says no name: when space ran out, name the output."""
    known = errors.describe(exc)
    if known and known[0].startswith(errors.SPACE_MESSAGES):
        return errors.RunError(f"--output {output}: {known[0]}")
    return None


def configure_storage(options, secrets: dict):
    """Credentials for every remote path of the job, checked up front; returns the secret-free
    plan workers adopt in ``DoFn.setup`` (None when nothing remote needs one)."""
    io = tok = opts.flags(options)
    paths = [*(io.input or []), io.output, tok.tokenizer_model, tok.vocab_file, tok.merge_file]
    return azure.configure_from_options({**options.get_all_options(), **secrets},
                                        paths=[p for p in paths if p])


def main() -> int:
    """The command line (``python -m pipelines.tokenize``, the ``tokenbeam-tokenize`` script):
    :func:`run` with its interrupt handling (exit 130 / 143, see dataio/errors.py)."""
    return errors.main(_run, process=True)


if __name__ == "__main__":
    sys.exit(main())
