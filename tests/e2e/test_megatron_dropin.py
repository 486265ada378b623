"""The drop-in promise (issue 25): ``python tools/preprocess_data.py ARGS`` ->
``tokenbeam-tokenize ARGS``, only the program name changed, gives the same files.

tests/data/megatron_cli/cases.tsv holds one Megatron command line per tokenizer type the
machine can run offline (--output-prefix, --workers, --append-eod, and --log-interval,
--partitions 1, --keep-sequential-samples among them); megatron/NAME/ holds every file real
Megatron-LM core_v0.16.1 wrote for it (run_megatron.sh made them, from the inputs
make_inputs.py writes). Each test runs the console script with the identical ARGS in a folder
holding the same inputs, compares every output file byte for byte and checks that tokenbeam
wrote no other .bin/.idx (its control files, _commits/ and metadata.json, are not datasets).
"""

import gzip
import os
import shutil
import subprocess
import sys

import pytest

import megatron_live

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "data", "megatron_cli")
sys.path.insert(0, FIXTURES)
import make_inputs  # noqa: E402  (the fixtures' own script: the same inputs as Megatron's run)

sys.path.remove(FIXTURES)


def _cases() -> dict[str, list[str]]:
    with open(os.path.join(FIXTURES, "cases.tsv"), encoding="utf-8") as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh if line.strip()]
    return {name: args.split() for name, args in rows}


CASES = _cases()


# Files tokenbeam writes beyond Megatron's, each for a stated reason: with several --json-keys,
# Megatron core_v0.16.1 finalizes only the last key's builder (its loop variable after the
# loop), so every other key gets a .bin and no .idx; tokenbeam completes them (and says so).
MORE_THAN_MEGATRON = {"hf_two_keys": {"corpus_text_document.idx"}}


def _console_script() -> str:
    script = os.path.join(os.path.dirname(sys.executable), "tokenbeam-tokenize")
    found = script if os.path.exists(script) else shutil.which("tokenbeam-tokenize")
    assert found, "tokenbeam-tokenize is not installed (pip install -e .)"
    return found


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("dropin_inputs"))
    make_inputs.main(folder)
    return folder


def _datasets(folder: str) -> dict[str, bytes]:
    """{relative path: bytes} of every .bin/.idx under ``folder``."""
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            if name.endswith((".bin", ".idx")):
                path = os.path.join(root, name)
                with open(path, "rb") as fh:
                    found[os.path.relpath(path, folder)] = fh.read()
    return found


def _expected(name: str) -> dict[str, bytes]:
    folder = os.path.join(FIXTURES, "megatron", name)
    expected = {}
    for entry in sorted(os.listdir(folder)):
        with gzip.open(os.path.join(folder, entry), "rb") as fh:
            expected[entry.removesuffix(".gz")] = fh.read()
    return expected


def _output_folder(args: list[str]) -> str:
    return os.path.dirname(args[args.index("--output-prefix") + 1])


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_files_as_megatron(name, inputs, tmp_path):
    args = CASES[name]
    work = tmp_path / "work"
    shutil.copytree(inputs, work)
    out = work / _output_folder(args)
    out.mkdir(parents=True)  # as for Megatron, which writes into an existing folder only
    env = {**os.environ, "PYTHONPATH": REPO}
    done = subprocess.run([_console_script(), *args], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = _expected(name)
    written = _datasets(str(out))
    more = MORE_THAN_MEGATRON.get(name, set())
    assert sorted(written) == sorted(set(expected) | more), \
        "tokenbeam wrote other .bin/.idx than Megatron"
    for file, data in expected.items():
        assert written[file] == data, f"{name}: {file} differs from Megatron's"
    if more:
        assert "note: with several --json-keys Megatron core_v0.16.1 writes the .idx of the " \
               "last key only" in done.stderr


def test_workers_above_the_useful_number_capped_with_one_line(inputs, tmp_path):
    """Megatron users type --workers 64 (it is required there): on a machine of fewer cores
    or an input of fewer work items, the run says what it chose and why, in one line."""
    args = CASES["hf"]
    assert args[args.index("--workers") + 1] == "64"
    work = tmp_path / "work"
    shutil.copytree(inputs, work)
    done = subprocess.run([_console_script(), *args, "--tokenizer-backend", "reference"],
                          cwd=work, env={**os.environ, "PYTHONPATH": REPO},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("workers:")]
    # one input file of 86 KB: one work item (the cores say it first on a machine of one)
    limit = "1 usable core" if len(os.sched_getaffinity(0)) == 1 else "1 work item"
    assert lines == [f"workers: 1 (--workers 64 capped at 1: no more than the {limit}; "
                     "more processes only compete for the cores)"], done.stderr


def test_fixture_is_what_megatron_writes_now(inputs, tmp_path):
    """A live re-run of one case (HuggingFace, the one every Megatron python can run) where
    Megatron is there: the committed outputs are still what it writes."""
    python, lm = megatron_live.live_or_skip()
    args = CASES["hf"]
    work = tmp_path / "work"
    shutil.copytree(inputs, work)
    out = work / _output_folder(args)
    out.mkdir(parents=True)
    done = subprocess.run([python, "-W", "ignore", os.path.join(lm, "tools", "preprocess_data.py"),
                           *args], cwd=work, env={**os.environ, "PYTHONPATH": lm},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert _datasets(str(out)) == _expected("hf")
