"""The tokenize job's checks, without Beam: what a user can get wrong is found before any input
is read (:func:`preflight`: the flags, the splitter, the tokenizer files, the output), and an
output holding shards of another tokenizer, other options or another layout is refused while
planning (:func:`refuse_other_settings`, :func:`refuse_other_layout`), each in one line naming
the flag and the fix.
"""

from __future__ import annotations

import dataclasses
import errno
import os

from runtime import errors
from dataio import fs as fsutil
from runtime import log
from dataio import manifest, naming, readers
from dataio import discovery
from runtime.redact import redact as _redact
from pipelines import options as opts
from transforms import tokenizer as tk

_LOG = log.get("tokenize")


def preflight(options) -> None:
    """What a user can get wrong about the paths, found before any input is read: the tokenizer
    files, and an output that is a file, unwritable or full (a probe file is written and removed;
    not with --dry-run, which writes nothing)."""
    flags = opts.flags(options)
    opts.validate(flags)
    check_segmentation(flags)
    check_tokenizer_files(flags.tokenizer_spec())
    if getattr(flags, "output_name", None):  # one input: refused before the output is made
        spec_files = tk.spec_files(flags.tokenizer_spec())
        the_one_input(discovery.discover(flags.input, leave_out=spec_files), flags)
    check_output(flags.output, probe=not flags.plan_only)


def check_segmentation(seg) -> None:
    """With --split-sentences the splitter itself (its flags: options.validate), built once here
    so a missing package or punkt model fails before anything is read or written."""
    if not seg.split_sentences:
        return
    from transforms import sentences

    choice = seg.sentence_splitter_choice()
    try:
        sentences.make_splitter(splitter=choice.name, lang=seg.lang,
                                keep_newlines=seg.keep_newlines)
    except (ValueError, sentences.SplitterUnavailableError) as exc:
        raise opts.OptionsError(str(exc)) from None
    _LOG.info("%s", choice.line)


def check_tokenizer_files(spec: tk.TokenizerSpec) -> None:
    """Each file the tokenizer is built from exists and is a file (a HuggingFace model may be a
    folder holding tokenizer.json); raises ConfigError naming the flag and the fix. Files of
    another kind than the type reads are named as what they are, with the flags that fit them
    (transforms/tokenizer/files.py)."""
    kind = tk.registry.kind(spec.kind)
    wrong = kind.mismatch({"--tokenizer-model": spec.model, "--vocab-file": spec.vocab_file,
                           "--merge-file": spec.merge_file})
    if wrong is not None:
        raise errors.ConfigError(wrong)
    if kind.check is not None:
        kind.check(spec)
    for need in kind.needs:
        flag, path, what = need.flag, getattr(spec, need.attr), need.what
        if not path:
            if not need.required:
                return  # its loader names what is missing
            raise errors.ConfigError(f"{spec.kind} needs {flag}: {what}")
        fs, inner = fsutil.filesystem_and_path(path)
        if not fs.exists(inner):
            raise errors.ConfigError(f"{flag} {path}: no such file; give {what}")
        if fs.isdir(inner):
            if kind.folder_file:
                if not fs.exists(inner.rstrip("/") + "/" + kind.folder_file):
                    raise errors.ConfigError(f"{flag} {path}: the folder holds no "
                                             f"{kind.folder_file}; give {what}")
                continue
            inside = sorted(os.path.basename(p) for p in fs.ls(inner, detail=False)
                            if p.endswith(".model"))[:3]
            hint = f" (in it: {', '.join(inside)})" if inside else ""
            raise errors.ConfigError(f"{flag} {path} is a folder; give {what}{hint}")
    for path in tk.spec_files(spec):  # a FIFO or device would hang the digest and the load
        local = path.removeprefix("file://")
        if fsutil.is_local(path) and os.path.exists(local) and not os.path.isfile(local):
            raise errors.ConfigError(f"tokenizer file {path}: not a regular file (a FIFO or a "
                                     "device); give the tokenizer's files themselves")
    if kind.load_on_check:
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


def the_one_input(files: list[readers.InputFile], io) -> readers.InputFile:
    """--output-prefix / --output-name: the one input file (Megatron's --input is one file),
    or one line saying what to do instead."""
    if len(files) != 1:
        shown_files = ", ".join(shown(f.path) for f in files[:3])
        more = f" and {len(files) - 3} more" if len(files) > 3 else ""
        raise opts.OptionsError(
            f"--output-prefix/--output-name takes one input file (as Megatron's --input), and "
            f"--input {' '.join(io.input)} gives {len(files)} ({shown_files}{more}); give one "
            "file, or --output DIR for one shard per input file")
    return files[0]


def refuse_other_settings(output: str, records: set[str], names: set[str], resume_key: dict,
                          *, overwrite: bool = False, looked_at: int = 3) -> None:
    """An output holds the shards of one tokenizer and one set of options: a run whose options
    (level, keys, EOD, dtype...) or tokenizer differ from those of shards already committed there
    under other names is refused, naming the difference. ``--overwrite`` writes beside them and
    says so in one line: it deletes no shard it does not plan (they are other inputs' data, and
    the loader and ``validate`` refuse a folder of two tokenizers until one's are removed).
    Only records this run does not plan are read, at most ``looked_at`` of them (a rerun of the
    same command reads none); records without a resume key (older versions) say nothing."""
    foreign = sorted(r[:-len(".json")] for r in records
                     if r.endswith(".json") and r[:-len(".json")] not in names)
    for shard in foreign[:looked_at]:
        before = (manifest.read_commit_record(output, shard) or {}).get("resume_key")
        if not isinstance(before, dict):
            continue
        if any(before.get(k) != resume_key.get(k) for k in ("tokenizer", "settings", "format")):
            why = manifest.what_changed({**before, "input": None, "content": None},
                                       {**resume_key, "input": None, "content": None})
            if overwrite:
                _LOG.warning("--overwrite: --output %s holds %d shards this run does not write, "
                             "some made with another tokenizer or other options (e.g. %s; %s); "
                             "they stay beside the new ones, and get_dataset and validate refuse "
                             "the folder while it holds two tokenizers: delete them if unwanted",
                             output, len(foreign), shard, why)
                return
            raise opts.OptionsError(
                f"--output {output} holds shards written with another tokenizer or other options "
                f"(e.g. {shard}; {why}); give another --output, or --overwrite to write these "
                "shards beside them")
        return  # the same settings: so are the others (each run checked this)


def refuse_other_layout(output: str, records: set[str], files: list[readers.InputFile],
                        key: str, level: str, *, overwrite: bool = False) -> None:
    """An input whose shards the output holds under the name another ``--output-layout`` gives
    it (``CC-MAIN-2024-10/000_00000_...`` of a mirrored run, now planned flat as
    ``CC-MAIN-2024-10_000_00000_...``, or the reverse) would be written twice, and the loader
    would read its documents twice: refused, naming both names and the fix; ``--overwrite``
    writes beside them and says so. Costs a set lookup per input (a commit record is read only
    where one is found under such a name)."""
    for f in files:
        if not f.folder and f.stem == f.own_stem:
            continue  # directly in the input root, named as ever: one name in every layout
        flat = f"{f.folder.replace('/', '_')}_{f.own_stem}" if f.folder else f.own_stem
        mirrored = f"{f.folder}/{f.own_stem}" if f.folder else f.own_stem
        for stem in dict.fromkeys((f.own_stem, flat, mirrored)):
            shard = f"{stem}_{key}_{level}"
            if stem == f.stem or f"{shard}.json" not in records:
                continue
            given = ((manifest.read_commit_record(output, shard) or {}).get("resume_key")
                     or {}).get("input")
            if not isinstance(given, list) or given[:1] != [f.path]:
                continue  # another input's shards (of the same name elsewhere)
            why = (f"--output {output} holds the shards of {f.path} as {shard}, and this run "
                   f"names them {f.stem}_{key}_{level} (another --output-layout)")
            if overwrite:
                _LOG.warning("--overwrite: %s; both stay, and its documents are in the output "
                             "twice: delete %s_* and its _commits/ record if unwanted", why, shard)
                return
            raise opts.OptionsError(f"{why}; give the --output-layout it was written with, "
                                    "another --output, or --overwrite to write beside them")


def shown(text: str) -> str:
    """``text`` (a path, a note) as the plan prints it: secrets redacted, control characters
    escaped (a folder named with a newline or a terminal escape forges no line)."""
    return naming.printable(_redact(text))
