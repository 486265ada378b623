"""The tokenize job's planner, without Beam: inputs, tokenizer and options in, a :class:`Job` out
(a :class:`ShardPlan` per shard: its name, fingerprint, and whether it is written or skipped).

What a user can get wrong is checked first (pipelines/tokenize/checks.py), before any input is
read; ``--dry-run`` prints the plan with estimates
(:func:`print_plan`). A shard's fingerprint hashes its input, the tokenizer and the settings of
the one :class:`~transforms.tokenize_config.TokenizeConfig` the pipeline runs with; a committed
shard (dataio/manifest.py) with the same fingerprint is skipped.

Importing this module imports no Beam (a test checks it): pipelines/tokenize/driver.py runs the
job, pipelines/tokenize/graph.py wires it.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import itertools
import json
import logging
import os
import sys

import numpy as np

from runtime import errors
from dataio import fs as fsutil
from dataio import (azure, discovery, file_hashes, indexed, input_hashes, manifest, naming, parts,
                    readers, sampling)
from dataio.elements import WorkItem
from runtime import log
from dataio.dataset_find import HOLDOUT_DIR  # where holdout shards go, and where readers find them
from runtime.redact import redact as _redact
from pipelines import options as opts
from pipelines.tokenize import estimate
from pipelines.tokenize.checks import (preflight, refuse_other_layout, refuse_other_settings,
                                        shown, the_one_input)
from transforms import tokenizer as tk
from transforms.progress import MB  # 10^6 bytes, as every size tokenbeam prints
from transforms.tokenize_config import TokenizeConfig

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


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardPlan:
    shard: str  # relative name without counts: decided here, once, and carried into the pipeline
    stem: str
    key: str
    holdout: bool = False  # the holdout shard of its input and key (under holdout/)
    input: readers.InputFile
    fingerprint: str
    skip: bool
    reason: str
    # what the fingerprint hashes (kept in the commit record, so a later run can say what changed)
    resume_key: dict | None = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass(kw_only=True)
class Job:
    """Everything the driver decided before the pipeline runs."""

    options: object  # pipelines.options.Flags, or PipelineOptions
    output: str
    spec: tk.TokenizerSpec
    config: TokenizeConfig  # the settings the pipeline runs with (and fingerprints hash)
    tokenizer: dict
    files: list[readers.InputFile]
    shards: list[ShardPlan]
    run_id: str = ""  # names this run's _temporary/{run id}/ (set when it holds the lock)
    folder: str = ""  # the driver's working folder: relative input paths are recorded from it
    # path -> the identity each local input's content hash was taken under (--verify-inputs):
    # the readers confirm they read those bytes (dataio/readers.py confirm_unchanged)
    stamps: dict[str, str] = dataclasses.field(default_factory=dict)
    guard: object = None  # dataio.lock.OutputGuard of the output's lease (Azure), else None
    _items: list | None = dataclasses.field(default=None, repr=False, compare=False)
    # shard -> final files of its name already in the output (other runs' counts), from the
    # planner's one listing per folder: what its commit removes (dataio/manifest.py final_files)
    stale: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    # False with --output-name (--output-prefix): shards committed as NAME_{key}_{level},
    # Megatron's names, their counts only in the commit record and metadata
    counted_names: bool = True

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.config.dtype)

    @property
    def to_process(self) -> list[ShardPlan]:
        return [s for s in self.shards if not s.skip]

    def shard_names(self) -> dict[tuple[str, str, bool], str]:
        """(stem, json key, holdout?) -> shard, for the shards this run writes."""
        return {(s.stem, s.key, s.holdout): s.shard for s in self.to_process}

    def items(self) -> list[WorkItem]:
        """The work items of the shards to write, cut once (a Parquet file's are planned from
        its footer: read once per run, not once per caller)."""
        if self._items is None:
            stems = {s.stem for s in self.to_process}
            files = [f for f in self.files if f.stem in stems]
            self._items = readers.plan_items(
                files, split_bytes=opts.flags(self.options).split_bytes, stamps=self.stamps)
        return list(self._items)

    def stem_plans(self, items: list[WorkItem] | None = None,
                   done: dict[str, set[str]] | None = None) -> dict[str, parts.StemPlan]:
        """stem -> where its items' parts are kept (dataio/parts.py) and what its shards are;
        ``items``: of :meth:`items` (counted per stem); ``done``: the item records an earlier
        run left (parts.done_items)."""
        shards: dict[str, list[ShardPlan]] = {}
        for s in self.to_process:
            shards.setdefault(s.stem, []).append(s)
        keys: dict[str, list[str]] = {}
        for item in items or ():
            keys.setdefault(item.stem, []).append(
                parts.item_key(item.index, item.start, item.end, item.row_groups))
        plans = {}
        for stem, of_stem in shards.items():
            of_stem.sort(key=lambda s: s.shard)
            folder = parts.stem_folder(stem, [(s.shard, s.fingerprint) for s in of_stem])
            of_items = keys.get(stem, [])
            plans[stem] = parts.StemPlan(
                stem=stem, folder=folder, items=len(of_items) or 1,
                keys=tuple(of_items) if len(of_items) > 1 else (),
                shards=tuple((s.shard, s.fingerprint, s.resume_key) for s in of_stem),
                done=frozenset((done or {}).get(folder, ())),
                found=done is None or folder in done)
        return plans


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
        # existed, so outputs committed then are still skipped (docs/usage.md, `--no-verify-inputs`).
        payload["content"] = content
    return payload


def _fingerprint_of(payload: dict, alike: dict[str, str] | None = None) -> str:
    """The SHA-256 of ``json.dumps(payload, sort_keys=True)``. ``alike``: key -> that JSON of
    ``payload[key]``, for values every shard of a run has (its settings, its tokenizer): the
    same text, not made again per shard (100,000 inputs: 1.3 s)."""
    if not alike:
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    text = ", ".join(f"{json.dumps(k)}: "
                     f"{alike[k] if k in alike else json.dumps(v, sort_keys=True)}"
                     for k, v in sorted(payload.items()))
    return hashlib.sha256(("{" + text + "}").encode()).hexdigest()


def _content_hashes(files: list[readers.InputFile], *,
                    stamps: dict[str, str] | None = None) -> dict[str, str | None]:
    """--verify-inputs: the content hash of every input whose version is an mtime. An etag
    (object stores) changes with every write already, and hashing would download the corpus.
    ``stamps`` receives the identity each local file was hashed under (input_hashes.stamp)."""
    local = [f.path for f in files if not f.version.lower().startswith("etag:")]
    # Local files' hashes are remembered by file identity between runs (dataio/input_hashes.py):
    # a rerun that skips every shard reads no input.
    remembered = input_hashes.content_hashes([p for p in local if fsutil.is_local(p)],
                                             stamps=stamps)
    return {**remembered, **file_hashes.content_hashes([p for p in local if not fsutil.is_local(p)])}


def plan(options, *, checked: bool = False) -> Job:
    """Resolve inputs, tokenizer and dtype, and decide which shards to produce or skip.
    ``checked``: :func:`preflight` ran already."""
    io = seg = tok_opts = opts.flags(options)  # one Beam-free view of every flag
    if not checked:
        preflight(options)
    spec = tok_opts.tokenizer_spec()
    output, overwrite = io.output, io.overwrite  # a Beam option lookup costs ~40 us
    # One listing of _commits/, not a request per shard; found records checked 16 at a time.
    records = fsutil.files_under(fsutil.join(output, manifest.COMMITS_DIR))
    level = "sentence" if seg.split_sentences else "document"
    keys, holdout = tuple(seg.json_keys), seg.holdout_fraction > 0

    def has_records(f: readers.InputFile) -> bool:
        """Whether the output holds a commit record of a shard of ``f`` under this name."""
        return any(f"{n}.json" in records for n in _names_of(f, keys, level, holdout=holdout))

    def committed_stem(f: readers.InputFile) -> str | None:
        """The stem ``f``'s shards are committed under, when that is its own name (planned
        before an input of the same name elsewhere was added): see discovery.shard_stems."""
        names = _names_of(dataclasses.replace(f, shard_stem=""), keys, level, holdout=False)
        if f"{names[0]}.json" not in records:
            return None
        record = manifest.read_commit_record(output, names[0]) or {}
        given = (record.get("resume_key") or {}).get("input")
        return f.own_stem if isinstance(given, list) and given[:1] == [f.path] else None

    # Of several names of one file, the one whose shards are committed is kept: a name added
    # later (a link beside a file already tokenized) must not write the same data again.
    files = discovery.discover(io.input, leave_out=tk.spec_files(spec), prefer=has_records,
                             layout=getattr(io, "output_layout", "flat"),
                             kept=committed_stem if records else None)
    named = getattr(io, "output_name", None)
    if named:
        files = [dataclasses.replace(the_one_input(files, io), shard_stem=named)]
        if len(keys) > 1:
            _LOG.info("note: with several --json-keys Megatron core_v0.16.1 writes the .idx of "
                      "the last key only (%s); tokenbeam writes every key's .bin and .idx",
                      keys[-1])
    for note in tok_opts.tokenizer_notes():
        _LOG.info("note: %s", note)
    backend, why = tk.choose_backend(spec, sample_texts(files, io.json_keys))
    _LOG.info("tokenizer backend: %s (%s)", backend, why)
    # workers build a HuggingFace folder's Rust backend from what the driver resolved
    spec = tk.for_workers(dataclasses.replace(spec, backend=backend))
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
    config = tokenize_config(seg, dtype=dtype.name)
    settings = config.resume_settings()
    stamps: dict[str, str] = {}
    hashes = _content_hashes(files, stamps=stamps) if io.verify_inputs else {}
    # Only a local file has other names under other stems (links) or a content key to match.
    new = [f for f in files if fsutil.is_local(f.path) and not has_records(f)]
    if new and records and not named:
        files = committed_aliases(output, records, files, new, hashes=hashes, stamps=stamps,
                                  suffixes=tuple(f"_{key}_{level}" for key in keys))

    planned = []
    alike: dict[str, str] = {}
    for f in files:
        # kept in each commit record, so that a later run can say what changed
        resume_key = _resume_payload(f, description, settings, content=hashes.get(f.path))
        if named:
            # only then, so keys of --output runs stay as they were: a shard committed with
            # counts in its name is redone without them (and the reverse)
            resume_key["names"] = "without counts"
        alike = alike or {k: json.dumps(resume_key[k], sort_keys=True)
                          for k in ("settings", "tokenizer")}
        fingerprint = _fingerprint_of(resume_key, alike)
        names = {naming.base_name(f.stem, key, config.level, source=f.path): (key, False)
                 for key in config.keys}
        if config.holdout_fraction > 0:
            names.update({f"{HOLDOUT_DIR}/{n}": (key, True) for n, (key, _) in names.items()})
        planned.append((f, fingerprint, names, resume_key))
    if planned:
        refuse_other_settings(output, records, {n for _, _, names, _ in planned for n in names},
                              planned[0][3], overwrite=overwrite)
        if records and not named:
            refuse_other_layout(output, records, files, keys[0], level, overwrite=overwrite)
    # A record counts only if its files are there with the recorded sizes: checked against one
    # listing of each folder the shards go to, not a request per file. The same listing names
    # the files of older runs that each commit replaces (none is listed again per commit).
    sizes = manifest.listed_sizes(output, {os.path.dirname(n) for _, _, names, _ in planned
                                           for n in names})
    stale = manifest.final_files(sizes, (n for _, _, names, _ in planned for n in names))

    def states_of(f, fingerprint, names, resume_key):
        return {n: manifest.is_committed(output, n, fingerprint, resume_key=resume_key,
                                         sizes=sizes)
                if f"{n}.json" in records else (False, "not committed yet") for n in names}

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        each = pool.map if records else map  # no record: nothing to read, no threads
        all_states = list(each(lambda a: states_of(*a), planned))
    shards = []
    for (f, fingerprint, names, resume_key), states in zip(planned, all_states):
        redo = overwrite or not all(done for done, _ in states.values())
        for n, (key, holdout) in names.items():
            done, why = states[n]
            if overwrite:
                why = "--overwrite"
            elif redo and done:
                why = "another shard of the same input must be redone"
            shards.append(ShardPlan(shard=n, stem=f.stem, key=key, holdout=holdout, input=f,
                                    fingerprint=fingerprint, skip=not redo, reason=why,
                                    resume_key=resume_key))
    return Job(options=options, output=io.output, spec=spec, config=config,
               tokenizer=description, files=files, shards=shards, folder=os.getcwd(),
               stamps=stamps, stale={s.shard: stale[s.shard] for s in shards
                                     if not s.skip and s.shard in stale},
               counted_names=not named)


def _names_of(f: readers.InputFile, keys, level: str, *, holdout: bool) -> list[str]:
    """The shards a run writes for ``f`` (before any name is checked: see naming.base_name)."""
    names = [f"{f.stem}_{key}_{level}" for key in keys]
    return names + [f"{HOLDOUT_DIR}/{n}" for n in names] if holdout else names


def committed_aliases(output: str, records: set[str], files: list[readers.InputFile],
                      new: list[readers.InputFile], *, hashes: dict, stamps: dict,
                      suffixes: tuple[str, ...] = ()) -> list[readers.InputFile]:
    """``files``, where an input ``new`` to the output (no commit record of its own) is data
    the output already holds under another name, as its commit records say, not written twice:

    the same local file (device and inode) as a committed input that is still there under its
    recorded name (a hard link or symlink made after that run, given alone): planned under the
    recorded name, so its committed shards are kept (or redone under that name when the file
    changed). One line on stderr for each. Only the file's identity counts, never its content:
    a copy is another input, as it is in a clean run (a resumed run must give what a clean run
    over the same inputs gives; a corpus may hold equal files on purpose). Costs a read of each commit record (16 at a time) and a stat
    of each local input they name, only in a run that brings new local inputs to an output
    holding records (a rerun of the same command reads none)."""
    shards = sorted(r[:-len(".json")] for r in records if r.endswith(".json"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        read = list(pool.map(lambda shard: manifest.read_commit_record(output, shard), shards))
    by_file: dict[object, tuple[str, str]] = {}  # file key -> (recorded input path, shard)
    seen: set[str] = set()  # recorded paths stat'ed (a shard and its holdout share one)
    for shard, record in zip(shards, read):
        key = (record or {}).get("resume_key")
        given = key.get("input") if isinstance(key, dict) else None
        if not isinstance(given, list) or not given or not isinstance(given[0], str):
            continue  # older records keep no resume key
        if given[0] not in seen and fsutil.is_local(given[0]):
            seen.add(given[0])
            by_file.setdefault(discovery.file_key(given[0]), (given[0], shard))
    stems = {f.stem for f in files}
    replaced: dict[str, readers.InputFile] = {}  # path -> planned as
    for f in new:
        path, shard = by_file.get(discovery.file_key(f.path), (f.path, ""))
        # named as its committed shards are (by its folders too, where it was: shard_stems)
        stem = next((shard.removeprefix(f"{HOLDOUT_DIR}/")[:-len(end)] for end in suffixes
                     if shard.endswith(end)), "")
        alias = dataclasses.replace(f, path=path, shard_stem=stem, folder="")
        if path != f.path and alias.stem not in stems:
            replaced[f.path] = alias
            stems.add(alias.stem)
            for known in (hashes, stamps):  # the same file: the same content and identity
                if f.path in known:
                    known[path] = known.pop(f.path)
            _say(f"inputs: {f.path} is the same file as {path}, whose shards --output {output} "
                 f"holds ({shard}): planned under that name, not written twice")
    if not replaced:
        return files
    return sorted((replaced.get(f.path, f) for f in files), key=lambda f: f.path)


def _say(line: str) -> None:
    print(shown(line), file=sys.stderr, flush=True)


def tokenize_config(flags, *, dtype: str) -> TokenizeConfig:
    """The one settings record of a run, from its flags and the dtype the planner chose."""
    return TokenizeConfig(keys=tuple(flags.json_keys),
                          level="sentence" if flags.split_sentences else "document",
                          append_eod=flags.append_eod, skip_empty=flags.skip_empty,
                          holdout_fraction=flags.holdout_fraction, id_key=flags.id_key,
                          splitter=(flags.sentence_splitter_choice().name
                                    if flags.split_sentences else flags.sentence_splitter),
                          lang=flags.lang,
                          keep_newlines=flags.keep_newlines, dtype=dtype,
                          log_interval=flags.log_interval,
                          max_bad_fraction=flags.max_bad_fraction)


def sample_texts(files, keys, *, per_file: int = 200, max_files: int = 4) -> list[str]:
    """Texts from the start of the first input files (for the tokenizer self-check)."""
    texts: list[str] = []
    for f in files[:max_files]:
        # bounded in bytes: a first line that unpacks to gigabytes is not read whole
        item = sampling.sample_item(f, head=None if f.format == "parquet" else 256 << 10)
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

def print_plan(job: Job, out=None) -> None:
    out = out or sys.stdout
    tokenizer = tk.load_tokenizer(job.spec)
    print(f"tokenizer: {job.spec.kind} {shown(str(job.spec.model or job.spec.vocab_file))} "
          f"(vocab {job.tokenizer['vocab_size']}, EOD {job.tokenizer['eod_id']}), dtype {job.dtype}",
          file=out)
    print(f"output: {shown(job.output)}", file=out)
    print(f"inputs: {len(job.files)} files, {sum(f.size for f in job.files) / MB:.1f} MB", file=out)
    by_stem = [list(shards) for _, shards in itertools.groupby(job.shards, key=lambda s: s.stem)]
    todo = [shards[0].input for shards in by_stem if not shards[0].skip]
    estimates, sampled, total = estimate.estimate_files(todo, job.config.keys, tokenizer,
                                                        eod=job.config.append_eod)
    failing = 0
    for shards in by_stem:
        f = shards[0].input
        found = estimates.get(f.path, "") if not shards[0].skip else ""
        try:
            broken = estimate.unreadable(f) if not shards[0].skip else ""
            if broken:   # also a file beyond the sample the estimates read
                raise readers.CorruptFileError(broken)
            bad_note = estimate.bad_records(f, job.config.keys) if not shards[0].skip else ""
        except readers.CorruptFileError as exc:
            found, bad_note = f"unreadable: {exc}", ""
        # the run fails the shards of a file it cannot read (exit 1), as it says
        fails = isinstance(found, str) and found.startswith("unreadable: ")
        line = found.line() if isinstance(found, estimate.Estimate) else found
        print(f"  {shown(f.path)}  {f.size / MB:.2f} MB  {shown(line)}", file=out)
        if f.path in sampled:
            print(f"    sampled: {sampled[f.path]}", file=out)
        if bad_note:
            print(f"    bad records: {shown(bad_note)}", file=out)
            _LOG.warning("%s: %s", _redact(f.path), _redact(bad_note))
        for s in shards:
            action = "skip" if s.skip else "fail" if fails else "write"
            failing += action == "fail"
            # a shard it skips is shown as committed: its name carries the recorded counts
            record = manifest.read_commit_record(job.output, s.shard) if s.skip else None
            name = (record or {}).get("name") or (f"{s.shard}_dc=?_sc=?_tc=?"
                                                  if job.counted_names else s.shard)
            print(f"    {action:5} {shown(name)}  ({shown(s.reason)})", file=out)
    if total:
        print(total, file=out)
    todo = len(job.to_process)
    chosen = local_workers(job) if todo else None
    workers_line = f"; workers: {chosen[0]} ({chosen[1]})" if chosen else ""
    items = job.items()
    kept = reused_items(items, job.stem_plans(items, parts.done_items(job.output)))
    kept_line = f" ({kept} finished by an earlier run, reused)" if kept else ""
    fail_line = (f", {failing} to fail (their inputs are unreadable: re-copy them or leave "
                 "them out)") if failing else ""
    print(f"plan: {todo - failing} shards to write{fail_line}, {len(job.shards) - todo} to skip, "
          f"{len(items)} work items{kept_line}{workers_line}; nothing written (--dry-run)",
          file=out)


def reused_items(items: list[WorkItem], plans: dict[str, parts.StemPlan]) -> int:
    """How many of ``items`` an earlier run finished (their parts are kept: dataio/parts.py)."""
    return sum(1 for i in items if i.stem in plans and parts.item_key(
        i.index, i.start, i.end, i.row_groups) in plans[i.stem].done)


ANNOUNCED_PER_KIND = 20  # skip and redo lines each; --log-level debug prints every one


def announce_skips(job: Job) -> None:
    """A line per shard skipped, and per committed shard redone (saying what changed): the
    first :data:`ANNOUNCED_PER_KIND` of each, then how many more (a rerun over 100,000 files
    would print 100,000 lines), unless --log-level debug."""
    every = _LOG.isEnabledFor(logging.DEBUG)
    printed = {"skip": 0, "redo": 0}
    for s in job.shards:
        kind = "skip" if s.skip else "redo" if s.reason != "not committed yet" else None
        if kind is not None:
            if every or printed[kind] < ANNOUNCED_PER_KIND:
                print(f"{kind} {s.shard}: {shown(s.reason)}", flush=True)
            printed[kind] += 1
    for kind, count in printed.items():
        if count > ANNOUNCED_PER_KIND and not every:
            print(f"{kind}: {count - ANNOUNCED_PER_KIND:,} more shards (--log-level debug lists "
                  "each)", flush=True)


def local_workers(job: Job) -> tuple[int, str] | None:
    """(processes, why) on the local runner (``--workers``, or auto: pipelines/options.py);
    None on any other runner, whose own configuration says how many."""
    if not opts.runs_locally(job.options):
        return None
    return opts.choose_workers(job.options, backend=job.spec.backend, items=len(job.items()))

