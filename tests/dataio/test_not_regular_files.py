"""A FIFO or a device where tokenbeam reads one of its own files (a shard's ``.idx``/``.bin``, a
commit record, a reshard manifest) is refused with one line naming it, never read (issue 23
item 16): a FIFO blocks the open for ever, ``/dev/zero`` never ends (and read whole, fills the
memory). ``validate`` reports such a dataset or record as a FAIL line and goes on.

Every call runs in a forked child (:func:`_finishes`) with a time limit and a memory limit: the
hang detector, which also keeps an unfixed read of ``/dev/zero`` from eating the machine."""

import io
import json
import multiprocessing
import os
import resource
import traceback
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from dataio import dataset, indexed, jsonl_sink, manifest
from dataio import discovery
from runtime import errors
from dataio import fs as fsutil

LIMIT_S = 60  # generous: each call takes milliseconds once it does not hang
SHARD = "x_text_document"


def _address_space() -> int:
    """This process's virtual size in bytes (what RLIMIT_AS counts)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _child(conn, fn):
    # 2 GiB more than the forked child starts with: a test session that has loaded Beam and the
    # tokenizers already maps gigabytes of address space (threads' stacks, arenas, mmaps)
    limit = _address_space() + (2 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            value = fn()
        conn.send(("ok", repr(value), out.getvalue(), err.getvalue()))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as text
        conn.send((type(exc).__name__, str(exc), out.getvalue(),
                   err.getvalue() + traceback.format_exc()))
    conn.close()


def _finishes(fn):
    """``(outcome, text, stdout, stderr)`` of ``fn()`` run in a forked child; fails the test
    when the child does not end within LIMIT_S (it hangs) or dies. ``outcome`` is ``"ok"`` (then
    ``text`` is the repr of what it returned) or the name of the exception it raised."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn), daemon=True)
    proc.start()
    child.close()
    ready = parent.poll(LIMIT_S)
    if not ready:
        proc.kill()
        proc.join()
        pytest.fail(f"hangs: still running after {LIMIT_S} s")
    try:
        result = parent.recv()
    except EOFError:
        result = None
    proc.join(LIMIT_S)
    if result is None:
        pytest.fail(f"the call died (exit {proc.exitcode}): out of memory reading a device?")
    return result


def _plant(path, kind):
    """A FIFO, or a symbolic link to /dev/zero, at ``path``."""
    if os.path.lexists(path):
        os.unlink(path)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)


KINDS = ["fifo", "devzero"]
NOT_REGULAR = {"fifo": "a FIFO (named pipe)", "devzero": "a character device"}


def _assert_refused(result, path, kind):
    outcome, text, _, err = result
    assert outcome == "NotRegularFileError", (outcome, text, err)
    assert str(path) in text and NOT_REGULAR[kind] in text and "remove it" in text, text
    assert len(text.splitlines()) == 1, text
    assert errors.EXIT_FAILED == fsutil.NotRegularFileError(text).exit_status


# --- the primitives -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_read_bytes_refuses_what_is_not_a_file(tmp_path, kind):
    path = tmp_path / "record.json"
    _plant(path, kind)
    _assert_refused(_finishes(lambda: fsutil.read_bytes(str(path))), path, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_map_or_read_and_open_file_refuse_what_is_not_a_file(tmp_path, kind):
    path = tmp_path / "x.idx"
    _plant(path, kind)
    _assert_refused(_finishes(lambda: fsutil.map_or_read(str(path))), path, kind)
    _assert_refused(_finishes(lambda: fsutil.open_file(str(path), "rb").read(10)), path, kind)


def test_regular_files_and_links_to_them_still_read(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b'{"a": 1}')
    os.symlink(path, tmp_path / "link.json")
    for p in (path, tmp_path / "link.json"):
        assert fsutil.read_bytes(str(p)) == b'{"a": 1}'
        assert bytes(fsutil.map_or_read(str(p))) == b'{"a": 1}'
        with fsutil.open_file(str(p), "rb") as f:
            assert f.read() == b'{"a": 1}'
    empty = tmp_path / "empty.idx"
    empty.write_bytes(b"")
    assert fsutil.map_or_read(str(empty)) == b""
    with pytest.raises(FileNotFoundError):
        fsutil.read_bytes(str(tmp_path / "absent.json"))
    with pytest.raises(IsADirectoryError):
        fsutil.read_bytes(str(tmp_path))


# --- (a) a reshard manifest in an input folder ---------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_manifest_that_is_not_a_file_refuses_the_inputs(tmp_path, kind):
    (tmp_path / "a.jsonl").write_bytes(b'{"text": "a"}\n')
    manifest_file = tmp_path / jsonl_sink.MANIFEST_NAME
    _plant(manifest_file, kind)
    _assert_refused(_finishes(lambda: discovery.find_inputs([str(tmp_path)])), manifest_file, kind)


# --- (b) a shard's .idx or .bin --------------------------------------------------------------


@pytest.fixture
def datasets_dir(tmp_path):
    """good_text_document (a real dataset) and x_text_document (its .idx or .bin replaced)."""
    folder = tmp_path / "ds"
    folder.mkdir()
    for name in ("good_text_document", SHARD):
        indexed.write_documents(str(folder / name), [[1, 2, 3], [4, 5]], dtype=np.uint16)
    return folder


@pytest.mark.parametrize("suffix", [".idx", ".bin"])
@pytest.mark.parametrize("kind", KINDS)
def test_validate_fails_that_dataset_and_goes_on(datasets_dir, kind, suffix):
    from pipelines import validate

    path = datasets_dir / (SHARD + suffix)
    _plant(path, kind)
    outcome, code, out, err = _finishes(lambda: validate.run([str(datasets_dir)]))
    assert outcome == "ok", (outcome, code, err)
    assert code == "1", out + err
    lines = out.splitlines()
    assert any(line.startswith("OK") and "good_text_document" in line for line in lines), out
    failed = [line for line in lines if line.startswith("FAIL")]
    assert len(failed) == 1 and str(path) in failed[0] and NOT_REGULAR[kind] in failed[0], out
    assert "Traceback" not in err, err


@pytest.mark.parametrize("suffix", [".idx", ".bin"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_loader_and_the_dataset_commands_refuse_it(datasets_dir, kind, suffix):
    from pipelines import count, inspect, merge

    path = datasets_dir / (SHARD + suffix)
    _plant(path, kind)
    _assert_refused(_finishes(lambda: dataset.get_dataset(str(datasets_dir), 4)), path, kind)
    _assert_refused(_finishes(lambda: indexed.IndexedDataset(str(datasets_dir / SHARD))),
                    path, kind)
    merged = str(datasets_dir.parent / "merged")
    commands = [(inspect.run, [str(datasets_dir)]),
                (merge.run, ["--input", str(datasets_dir / "*.idx"), "--output", merged])]
    if suffix == ".idx":  # count reads the indexes only
        commands.append((count.run, ["--input", str(datasets_dir / "*.idx")]))
    for run, argv in commands:
        outcome, code, out, err = _finishes(lambda run=run, argv=argv: run(argv))
        assert outcome == "ok" and code == "1", (run.__module__, outcome, code, out, err)
        said = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(said) == 1 and str(path) in said[0] and NOT_REGULAR[kind] in said[0], \
            (run.__module__, err)
        assert "Traceback" not in err, err


# --- (c) a commit record ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_commit_record_that_is_not_a_file(tmp_path, kind):
    from pipelines import validate

    out = tmp_path / "out"
    out.mkdir()
    name = f"{SHARD}_dc=2_sc=2_tc=5"
    indexed.write_documents(str(out / name), [[1, 2, 3], [4, 5]], dtype=np.uint16)
    record = out / manifest.COMMITS_DIR / f"{SHARD}.json"
    record.parent.mkdir()
    record.write_text(json.dumps({"shard": SHARD, "name": name, "fingerprint": "f"}))
    _plant(record, kind)
    _assert_refused(_finishes(lambda: manifest.read_commit_record(str(out), SHARD)), record, kind)
    outcome, code, stdout, err = _finishes(lambda: validate.run([str(out)]))
    assert outcome == "ok" and code == "1", (outcome, code, stdout, err)
    failed = [line for line in stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1 and str(record) in failed[0] and NOT_REGULAR[kind] in failed[0], \
        stdout
    assert any(line.startswith("OK") for line in stdout.splitlines()), stdout
