"""The README and the docs are the truth: every command block in README.md and in each docs/
page runs as written (issues 16 and 26).

The blocks are read from README.md and docs/**/*.md when the tests are collected
(tests/readme_blocks.py), so whatever the pages say after an edit is what is checked; nothing
here lists their commands. Each shell block is one test, ``test_command_block[FILE:L<line>-<lang>]``
(``README.md:L40-sh``, ``docs/azure.md:L40-sh``):

- **Run as pasted** (README.md, no marker): the README is the quick start, so its blocks run the
  way a new user runs them right after the set-up command: ``bash -euo pipefail`` in a fresh
  shell whose PATH has no venv on it (plain ``python`` is the system's, without numpy) and no
  PYTHONPATH, from the root of a scratch copy of the checkout's tracked files (``git ls-files``)
  in which ``bash scripts/demo.sh`` has already run, as the README says (``.venv`` there is the
  shared one, linked entry by entry; ``.cache`` linked). A block that relies on plain ``python``
  having numpy, or on a path the demo does not make, fails. ``test_readme_uses_the_venv`` says
  the first of these offline.
- **Run** (a docs/ page, no marker): ``bash -euo pipefail`` runs the block, so every line must
  succeed, as for a reader who pastes it. It runs in a fresh copy of a folder made by ``python -m
  pipelines.demo --output DIR`` (``corpus/`` and ``tokenizer/``), with the checkout's venv first
  on PATH and the checkout first on PYTHONPATH (the pages say to ``source .venv/bin/activate``),
  so ``python -m pipelines.X`` and ``tokenbeam-X`` are this checkout's; a block that calls
  ``.venv/bin/python`` runs from the checkout, where ``.venv`` is. Either kind passes with exit
  status 0, no traceback in its output (only a bug prints one), and what the pages say the
  commands leave behind (``_check_results``).
- **Flag-checked** (a ``<!-- readme-test: REASON -->`` line above the fence: a SLURM cluster, an
  Azure account, the whole test suite): not run. Each command of this checkout in it (``python
  -m pipelines.X``/``runners.X``, ``tokenbeam-X``, ``python bench/X.py``, ``bash scripts/X.sh``
  and the commands in that script) must exist and offer every ``--flag`` written (its
  ``--help``; a runner's arguments after ``--`` are tokenize's), every path into the checkout
  must exist, and a ``pytest -m EXPR`` may name only markers pytest.ini declares. Then the test
  *skips* with REASON and what was checked, so ``-rs`` (in the default ``-ra`` here) lists each
  such block and why it did not run.

``test_inline_commands_exist`` does the same offline check for the commands the prose gives in
backquotes, and checks that the extras of its ``pip install`` lines exist.

``test_every_block_is_accounted_for`` prints one line per fenced block (run, flag-checked, or
not a command block and why) with the counts, and fails on a block that holds commands without
a shell language (it would escape both). ``test_python_blocks_compile`` checks the Python
examples: they compile and what they import exists. The tests that start processes are in the
slow tier; the counting, the Python check and the block reader's own tests are unit tests.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import readme_blocks as rb

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
BLOCK_TIMEOUT_S = 300
DEMO_TIMEOUT_S = 600
HELP_TIMEOUT_S = 120
# What a runner (python -m runners.X ... -- ARGS) hands its arguments after `--` to: the README
# writes them as `-- <tokenize args>`.
PASS_THROUGH_MODULE = "pipelines.tokenize"
TRACEBACK = "Traceback (most recent call last)"


def _pages() -> list[Path]:
    """README.md, then every docs/ page in name order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def _readme_blocks() -> list[rb.Block]:
    """Every fenced block of README.md and the docs/ pages."""
    return [block for page in _pages()
            for block in rb.blocks(page.read_text(encoding="utf-8"),
                                   source=page.relative_to(REPO).as_posix())]


def _command_blocks() -> list[rb.Block]:
    return [b for b in _readme_blocks() if b.is_command]


def _venv_bin() -> Path:
    """The checkout's venv (not resolved: a venv's python is a symlink out of it)."""
    venv = REPO / ".venv" / "bin"
    return venv if venv.is_dir() else Path(sys.executable).parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(_venv_bin()), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["VIRTUAL_ENV"] = str(_venv_bin().parent)
    return env


def _python() -> str:
    return str(_venv_bin() / "python")


# --- flag checks ----------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _help(argv: tuple[str, ...]) -> str:
    """A command's --help (cached: several blocks name the same command)."""
    done = subprocess.run([*argv, "--help"], cwd=REPO, env=_env(), capture_output=True,
                          text=True, timeout=HELP_TIMEOUT_S)
    assert done.returncode == 0, (f"`{' '.join(argv)} --help` exits {done.returncode}:\n"
                                  f"{done.stderr[-2000:]}")
    return done.stdout


@functools.lru_cache(maxsize=None)
def _beam_flags() -> frozenset[str]:
    """Beam's own pipeline flags, which the Beam jobs pass through without listing them."""
    from apache_beam.options.pipeline_options import PipelineOptions

    return frozenset(PipelineOptions([]).get_all_options())


def _passes_beam_flags(help_text: str) -> bool:
    return re.search(r"Beam(?:'s own)? flags", help_text) is not None


def _check_flags(what: str, written: list[str], help_text: str, *, beam: bool) -> list[str]:
    offered = rb.help_flags(help_text)
    problems = []
    for flag in written:
        if flag in offered or flag in ("--help", "-h"):
            continue
        if beam and flag[2:].replace("-", "_") in _beam_flags():
            continue
        problems.append(f"{what}: no flag {flag} in its --help")
    return problems


def _check_paths(what: str, args) -> list[str]:
    """Paths written into the checkout (runners/flink_slurm.yaml, bench/x.py) must exist."""
    tops = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")}
    problems = []
    for arg in rb.positionals(args):
        path = arg.split("=", 1)[-1]
        if "$" in path or path.split("/", 1)[0] not in tops or "/" not in path:
            continue
        if not list(REPO.glob(path)) and not (REPO / path).exists():
            problems.append(f"{what}: {path} does not exist in the checkout")
    return problems


def _module_help_argv(module: str, args) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the argv whose --help lists these args' flags, the args left for it): a subcommand
    (``runners.slurm submit``) is found from the choices the module's usage offers."""
    base = (_python(), "-m", module)
    choices = rb.subcommands(_help(base))
    words = rb.positionals(args)
    if choices and words and words[0] in choices:
        return base + (words[0],), tuple(a for a in args if a != words[0])
    return base, tuple(args)


def check_command(command: rb.Command, *, seen: set[str]) -> tuple[list[str], list[str]]:
    """(problems, what was checked) for one command of a block that is not run."""
    what = command.describe()
    if command.kind == "module":
        if importlib.util.find_spec(command.target.split(".")[0]) is None:
            return [f"{what}: no such package"], [what]
        own, passed = rb.split_pass_through(command.args)
        help_argv, own = _module_help_argv(command.target, own)
        help_text = _help(help_argv)
        problems = _check_flags(" ".join(("python", *help_argv[1:])), rb.flags(own), help_text,
                                beam=_passes_beam_flags(help_text))
        problems += _check_paths(what, command.args)
        checked = [f"{' '.join(help_argv[2:])} ({len(rb.flags(own))} flags)"]
        if passed:
            job = (_python(), "-m", PASS_THROUGH_MODULE)
            job_help = _help(job)
            problems += _check_flags(f"{what} -- ({PASS_THROUGH_MODULE})", rb.flags(passed),
                                     job_help, beam=True)
            checked.append(f"-- {PASS_THROUGH_MODULE} ({len(rb.flags(passed))} flags)")
        return problems, checked
    if command.kind == "entry":
        entries = rb.console_scripts((REPO / "setup.py").read_text(encoding="utf-8"))
        if command.target not in entries:
            return [f"{command.target}: not a console script in setup.py"], [what]
        module, function = entries[command.target].split(":")
        code = (f"import sys; from {module} import {function}; "
                f"sys.argv[0] = {command.target!r}; sys.exit({function}())")
        problems = _check_flags(command.target, rb.flags(command.args),
                                _help((_python(), "-c", code)), beam=False)
        return problems + _check_paths(what, command.args), [
            f"{command.target} ({len(rb.flags(command.args))} flags)"]
    if command.kind == "script":
        script = REPO / command.target
        if "$" in command.target or not script.is_file():
            return [f"{what}: no such file in the checkout"], [what]
        problems = _check_flags(what, rb.flags(command.args),
                                _help((_python(), str(script))), beam=False)
        return problems + _check_paths(what, command.args), [
            f"{command.target} ({len(rb.flags(command.args))} flags)"]
    if command.kind == "shell":
        script = REPO / command.target
        if "$" in command.target:
            return [], []
        if not script.is_file():
            return [f"{what}: no such file in the checkout"], [what]
        text = script.read_text(encoding="utf-8")
        problems = [f"{what}: {flag} appears nowhere in the script"
                    for flag in rb.flags(command.args) if flag not in text]
        checked = [f"{command.target} ({len(rb.flags(command.args))} flags)"]
        if command.target not in seen:   # and what that script runs, once
            seen.add(command.target)
            for inner in map(rb.classify, rb.commands(text)):
                if inner.is_tokenbeam:
                    more, inner_checked = check_command(inner, seen=seen)
                    problems += [f"{command.target}: {p}" for p in more]
                    checked += [f"{command.target}: {c}" for c in inner_checked]
        return problems, checked
    return [], []


# --- running a block ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory) -> Path:
    """The demo corpus, made as the README makes it."""
    folder = tmp_path_factory.mktemp("readme_demo")
    done = subprocess.run([_python(), "-m", "pipelines.demo", "--output", str(folder)],
                          cwd=folder, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (folder / "corpus").is_dir() and (folder / "tokenizer").is_dir(), done.stdout
    return folder


def _value(args, flag: str) -> str | None:
    for k, arg in enumerate(args):
        if arg == flag and k + 1 < len(args):
            return args[k + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _check_results(block_commands: list[rb.Command], cwd: Path, output: str) -> list[str]:
    """What the README says each command leaves behind or prints, for the commands a block ran.
    Outputs given through shell variables are not looked at."""
    entries = rb.console_scripts((REPO / "setup.py").read_text(encoding="utf-8"))
    problems = []
    for command in block_commands:
        if command.kind == "entry" and command.target in entries:   # tokenbeam-merge ...
            module = entries[command.target].split(":")[0]
        elif command.kind == "module":
            module = command.target
        else:
            continue
        args = command.args
        if module == "pipelines.tokenize" and "--dry-run" not in args:
            out = _value(args, "--output")
            if out and "$" not in out and "://" not in out:
                # "One shard per input file and json key, named {stem}_{key}_{document|sentence}
                # _dc=.._sc=.._tc=...bin/.idx ... plus metadata.json"
                folder = cwd / out
                shards = [p for p in folder.glob("*.bin")
                          if re.search(r"_(document|sentence)_dc=\d+_sc=\d+_tc=\d+\.bin$", p.name)]
                if not (folder / "metadata.json").is_file():
                    problems.append(f"tokenize --output {out}: no metadata.json")
                if not shards or not all(p.with_suffix(".idx").is_file() for p in shards):
                    problems.append(f"tokenize --output {out}: no .bin/.idx pair named with counts")
            # "The choice is printed as `workers: N (why)` on stderr when the pipeline starts"
            # (the local runner's choice; a cluster's own configuration says how many)
            if _value(args, "--runner") in (None, "DirectRunner") and \
                    not re.search(r"^workers: \d+ \(.+\)$", output, re.M):
                problems.append("tokenize printed no `workers: N (why)` line")
        elif module == "pipelines.merge":
            prefix = _value(args, "--output")
            if prefix and "$" not in prefix and "--no-counts" not in args:
                # "The output is PREFIX_dc=N_sc=N_tc=N"
                made = [p for p in (cwd / prefix).parent.glob(Path(prefix).name + "*.bin")
                        if re.search(r"_dc=\d+_sc=\d+_tc=\d+\.bin$", p.name)]
                if not made or not made[0].with_suffix(".idx").is_file():
                    problems.append(f"merge --output {prefix}: no PREFIX_dc=N_sc=N_tc=N.bin/.idx")
        elif module == "pipelines.signature":
            out = _value(args, "--output")
            if out and "$" not in out:
                # "writes the sorted JSON list of dataset names"
                path = cwd / out
                names = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
                if not (isinstance(names, list) and names and names == sorted(names)):
                    problems.append(f"signature --output {out}: not a sorted, non-empty list")
        elif module == "pipelines.blend":
            out = _value(args, "--output-script")
            if out and "$" not in out:
                # "`data_path.sh` defines `DATA_PATH=( --data-path "p1" "path1" ... )`"
                path = cwd / out
                script = path.read_text(encoding="utf-8") if path.is_file() else ""
                if not re.search(r"DATA_PATH=\(\s*--data-path\s+\"[\d.e-]+\" \"", script):
                    problems.append(f"blend --output-script {out}: no DATA_PATH=( --data-path ...)")
    return problems


def run_block(block: rb.Block, demo: Path, work: Path) -> None:
    block_commands = [rb.classify(argv) for argv in rb.commands(block.script())]
    from_checkout = any(c.argv[0].startswith(".venv/") for c in block_commands)
    if from_checkout:
        cwd = REPO
    else:
        cwd = work / "demo"
        shutil.copytree(demo, cwd)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.script()], cwd=cwd,
                          env=_env(), capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    output = done.stdout + done.stderr
    where = "the checkout" if from_checkout else "a copy of the demo folder"
    print(f"{block.ident}: ran in {where}; exit status {done.returncode}")
    print(output[-4000:])
    assert done.returncode == 0, (f"{block.where}: the block exits "
                                  f"{done.returncode} in {where}:\n{output[-3000:]}")
    assert TRACEBACK not in output, f"{block.where}: a traceback:\n{output[-3000:]}"
    problems = _check_results(block_commands, cwd, output)
    assert not problems, f"{block.where}: " + "; ".join(problems)


# --- running a README block as pasted ---------------------------------------------------------

def _pasted_env() -> dict[str, str]:
    """A fresh shell's environment after the set-up command: no venv on PATH (so plain
    ``python`` is the system's), no PYTHONPATH, no VIRTUAL_ENV."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSAFEPATH")}
    env["PATH"] = os.pathsep.join(
        entry for entry in env.get("PATH", "").split(os.pathsep)
        if entry and not (Path(entry).parent / "pyvenv.cfg").is_file())
    return env


def _copy_tracked(root: Path) -> None:
    """The checkout's files as a fresh clone of this branch has them: tracked files and new
    ones not ignored (the working tree's versions), nothing ignored (.venv, demo_out)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = REPO / name
        if name.split("/", 1)[0] in (".venv", ".cache") or not (
                source.is_file() or source.is_symlink()):
            continue   # the shared environment's links (made below), or deleted here
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, root / name, follow_symlinks=False)


@pytest.fixture(scope="module")
def pasted_checkout(tmp_path_factory) -> Path:
    """A scratch checkout in which the README's demo command has run, as the README says.
    Its ``.venv`` is the shared one linked entry by entry, with its own record that tokenbeam
    is installed for this setup.py: the set-up command then has nothing to do, and never
    installs into the shared environment."""
    root = tmp_path_factory.mktemp("readme_pasted") / "tokenbeam"
    root.mkdir()
    _copy_tracked(root)
    shared = (REPO / ".venv").resolve()
    venv = root / ".venv"
    venv.mkdir()
    for entry in shared.iterdir():
        if entry.name != ".tokenbeam-installed":
            (venv / entry.name).symlink_to(entry)
    digest = hashlib.sha256((root / "setup.py").read_bytes()).hexdigest()
    (venv / ".tokenbeam-installed").write_text(digest + "\n")
    (root / ".cache").symlink_to((REPO / ".cache").resolve())
    done = subprocess.run(["bash", "scripts/demo.sh"], cwd=root, env=_pasted_env(),
                          capture_output=True, text=True, timeout=DEMO_TIMEOUT_S)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "setup: .venv is up to date" in done.stdout, done.stdout[-2000:]
    return root


def run_pasted(block: rb.Block, checkout: Path) -> None:
    """Run a README block as a new user pastes it: from the checkout's root, in a fresh shell
    without the venv on PATH, after the set-up and demo commands."""
    block_commands = [rb.classify(argv) for argv in rb.commands(block.script())]
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.script()], cwd=checkout,
                          env=_pasted_env(), capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT_S)
    output = done.stdout + done.stderr
    print(f"{block.ident}: ran as pasted in a scratch checkout; exit status {done.returncode}")
    print(output[-4000:])
    assert done.returncode == 0, (f"{block.where}: the block exits {done.returncode} as pasted "
                                  f"(fresh shell, no venv on PATH, after the demo):\n"
                                  f"{output[-3000:]}")
    assert TRACEBACK not in output, f"{block.where}: a traceback:\n{output[-3000:]}"
    problems = _check_results(block_commands, checkout, output)
    assert not problems, f"{block.where}: " + "; ".join(problems)


# The first own-corpus block of the README before issue 26 (line 108 of 1,603): plain `python`,
# and paths of a folder made by `pipelines.demo --output .`, not of the demo command's.
OLD_QUICK_START = """\
python -m pipelines.tokenize --runner=DirectRunner \\
  --input 'corpus/*.jsonl' --output shards/ \\
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model tokenizer/ \\
  --json-keys text --append-eod --workers 2
"""


@pytest.mark.slow
@pytest.mark.parametrize("python, why", [
    ("python", "No module named"),                       # the system's python: no numpy, no beam
    (".venv/bin/python", "tokenizer/: no such file"),    # the venv's: not the demo's paths
])
def test_old_quick_start_fails_as_pasted(pasted_checkout: Path, python: str, why: str) -> None:
    """The harness catches both faults of the old README's first example (issue 26)."""
    block = rb.Block(line=108, lang="sh", marker=None,
                     text=OLD_QUICK_START.replace("python -m", f"{python} -m", 1))
    with pytest.raises(AssertionError, match="exits") as failed:
        run_pasted(block, pasted_checkout)
    assert why in str(failed.value)


def test_readme_uses_the_venv() -> None:
    """Pasted into a fresh shell after the set-up command, no README command runs outside
    ``.venv`` (plain ``python`` has no numpy there): each calls ``.venv/bin/...`` or comes after
    ``source .venv/bin/activate``."""
    activated, problems = False, []
    for block in _readme_blocks():
        if block.source != "README.md" or not block.is_command:
            continue
        outside, activated = rb.outside_venv(block.script(), activated=activated)
        problems += [f"{block.where}: `{c}`" for c in outside]
    assert not problems, ("commands that a fresh shell runs outside .venv (write .venv/bin/X, or "
                          "`source .venv/bin/activate` first): " + "; ".join(problems))


def check_pytest(command: rb.Command) -> tuple[list[str], list[str]]:
    """A test command that is not run (it would run this test): the markers its ``-m``
    expression names are declared in pytest.ini, the test paths it names exist."""
    import configparser

    ini = configparser.ConfigParser()
    ini.read(REPO / "pytest.ini", encoding="utf-8")
    declared = {line.split(":", 1)[0].strip()
                for line in ini.get("pytest", "markers", fallback="").splitlines() if line.strip()}
    args = list(command.args)
    expressions = [args[k + 1] for k, a in enumerate(args[:-1]) if a == "-m"]
    problems = [f"pytest -m {expr!r}: marker {name!r} is not declared in pytest.ini"
                for expr in expressions
                for name in re.findall(r"[A-Za-z_]\w*", expr)
                if name not in ("and", "or", "not") and name not in declared]
    problems += _check_paths("pytest", [a for k, a in enumerate(args)
                                        if k == 0 or args[k - 1] != "-m"])
    return problems, [f"pytest -m {expr!r}" for expr in expressions] or ["pytest"]


def flag_check_block(block: rb.Block) -> str:
    """Check a block that is not run; returns what was checked, for the skip reason."""
    syntax = subprocess.run(["bash", "-n", "-c", block.script()], capture_output=True, text=True)
    assert syntax.returncode == 0, f"{block.where}: not valid shell: {syntax.stderr}"
    problems, checked, others = [], [], []
    seen: set[str] = set()
    for command in map(rb.classify, rb.commands(block.script())):
        if command.is_tokenbeam or (command.kind, command.target) == ("module", "pytest"):
            more, did = (check_command(command, seen=seen) if command.is_tokenbeam
                         else check_pytest(command))
            problems += more
            checked += did
        elif command.target not in others:
            others.append(command.target)
    assert not problems, f"{block.where}: " + "; ".join(problems)
    return (f"{len(checked)} checked: {', '.join(checked) or 'none'}; "
            f"not ours to check: {', '.join(others) or 'none'}")


@pytest.mark.slow
@pytest.mark.parametrize("block", _command_blocks(), ids=lambda b: b.ident)
def test_command_block(block: rb.Block, request, tmp_path: Path) -> None:
    if block.marker is None and block.source == "README.md":
        run_pasted(block, request.getfixturevalue("pasted_checkout"))
        return
    if block.marker is None:
        run_block(block, request.getfixturevalue("demo_folder"), tmp_path)
        return
    checked = flag_check_block(block)
    pytest.skip(f"{block.where} not run as written ({block.marker}); "
                f"flag-checked only: {checked}")


# --- every block, counted -------------------------------------------------------------------------

def _disposition(block: rb.Block) -> str:
    if block.is_command:
        return "flag-checked" if block.marker is not None else "run"
    if block.lang == "python":
        return "python (compiled, imports checked)"
    return f"not a command block ({block.lang or 'no language'})"


def test_every_block_is_accounted_for() -> None:
    found = _readme_blocks()
    assert found, "README.md has no fenced blocks"
    counts: dict[str, int] = {}
    for block in found:
        kind = _disposition(block)
        counts[kind.split(" (")[0]] = counts.get(kind.split(" (")[0], 0) + 1
        why = f": {block.marker}" if block.marker else ""
        print(f"{block.where:>26} [{block.lang or 'plain'}] {kind}{why}")
    print(f"{len(found)} fenced blocks: "
          + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())))
    unlabelled = [b.where for b in found if not b.lang and b.looks_like_commands()]
    assert not unlabelled, (f"{unlabelled}: commands in a block without a shell "
                            "language (```sh): they would be neither run nor checked")
    stray = [b.where for b in found if b.marker is not None and not b.is_command]
    assert not stray, f"{stray}: a readme-test marker above a block that is not run"
    assert any(b.is_command and b.marker is None and b.source == "README.md" for b in found), \
        "no README block runs"


def test_python_blocks_compile() -> None:
    for block in _readme_blocks():
        if block.lang != "python":
            continue
        tree = ast.parse(block.text, filename=f"{block.source}:{block.line}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = __import__(node.module, fromlist=["_"])
                for alias in node.names:
                    assert hasattr(module, alias.name), (
                        f"{block.where}: {node.module} has no {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert importlib.util.find_spec(alias.name), (
                        f"{block.where}: no module {alias.name}")


# --- commands written in the prose --------------------------------------------------------------

def _inline_commands() -> list[str]:
    """Code spans of the prose (fenced blocks left out) that are commands of this checkout or
    ``pip install`` lines; placeholders (``python -m pipelines.<name>``) are not commands."""
    spans = []
    for page in _pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        source = page.relative_to(REPO).as_posix()
        for block in rb.blocks("\n".join(lines), source=source):
            for k in range(block.line - 1, block.line + block.text.count("\n") + 1):
                lines[k] = ""
        spans += re.findall(r"`([^`\n]+(?:\n[^`\n]+)?)`", "\n".join(lines))
    found = []
    for span in (" ".join(s.split()) for s in spans):
        try:
            argvs = [] if span.startswith("pip install") else rb.commands(span)
        except ValueError:   # an apostrophe in printed output, not a command
            continue
        command = rb.classify(argvs[0]) if argvs else None
        if span.startswith("pip install") or (
                command and command.is_tokenbeam
                and not re.search(r"[<*]", span.split(" -- ")[0])):
            found.append(span)
    return found


@pytest.mark.slow
def test_inline_commands_exist() -> None:
    """Commands the prose gives in backquotes (`python -m runners.local --config
    runners/direct.yaml -- ...`) name modules, scripts and flags that exist, and the extras
    `pip install` lines name are declared in setup.py."""
    setup_py = (REPO / "setup.py").read_text(encoding="utf-8")
    extras = set(re.findall(r'^\s*"([\w-]+)": \[', setup_py.split("extras_require", 1)[1]
                            .split("entry_points", 1)[0], re.M))
    problems, checked = [], []
    for span in _inline_commands():
        if span.startswith("pip install"):
            for group in re.findall(r"\[([\w,-]+)\]", span):
                problems += [f"`{span}`: no extra {name!r} in setup.py"
                             for name in group.split(",") if name not in extras]
            checked.append(span)
            continue
        command = rb.classify(rb.commands(span)[0])
        if command.kind == "module" and not rb.flags(command.args):
            # nothing written to check against a --help; some of these are servers
            if importlib.util.find_spec(command.target) is None:
                problems.append(f"`{span}`: no module {command.target}")
        else:
            problems += check_command(command, seen=set())[0]
        checked.append(span)
    print("\n".join(checked))
    assert checked, "no command found in the README's prose"
    assert not problems, "; ".join(problems)


# --- the block reader itself ----------------------------------------------------------------------

SAMPLE = """\
text
```sh
python -m pipelines.tokenize --input 'a b/*.jsonl' \\
    --output out/ --runner=DirectRunner   # a comment --not-a-flag
echo '{"x": 1}' > x.json && tokenbeam-count --input 'out/*.idx'
```

<!-- readme-test: needs a SLURM cluster -->

```bash
FOO=1 python -m runners.slurm submit --config runners/flink_slurm.yaml [--wait] -- --input x
```
````
```sh
inner
```
````
```
https://example.com/x
```
"""


def test_blocks_are_found_with_their_markers() -> None:
    found = rb.blocks(SAMPLE)
    assert [(b.line, b.lang, b.marker) for b in found] == [
        (2, "sh", None), (10, "bash", "needs a SLURM cluster"), (13, "", None), (18, "", None)]
    assert found[2].text == "```sh\ninner\n```\n"
    assert [b.is_command for b in found] == [True, True, False, False]
    assert not found[3].looks_like_commands()
    with pytest.raises(ValueError, match="line 1: fenced block never closed"):
        rb.blocks("```sh\necho\n")


def test_commands_flags_and_kinds() -> None:
    first, second = rb.blocks(SAMPLE)[:2]
    argvs = rb.commands(first.script())
    assert argvs == [
        ["python", "-m", "pipelines.tokenize", "--input", "a b/*.jsonl", "--output", "out/",
         "--runner=DirectRunner"],
        ["echo", '{"x": 1}'],
        ["tokenbeam-count", "--input", "out/*.idx"]]
    kinds = [rb.classify(a) for a in argvs]
    assert [(c.kind, c.target, c.is_tokenbeam) for c in kinds] == [
        ("module", "pipelines.tokenize", True), ("other", "echo", False),
        ("entry", "tokenbeam-count", True)]
    assert rb.flags(kinds[0].args) == ["--input", "--output", "--runner"]
    (slurm,) = map(rb.classify, rb.commands(second.script()))
    own, passed = rb.split_pass_through(slurm.args)
    assert (slurm.target, rb.flags(own), rb.flags(passed)) == (
        "runners.slurm", ["--config", "--wait"], ["--input"])
    assert rb.positionals(own) == ["submit", "runners/flink_slurm.yaml"]
    assert rb.classify([".venv/bin/python", "bench/x.py", "--n", "1"]).kind == "script"
    assert rb.classify(["python", "-c", "pass"]).kind == "other"
    assert rb.classify(["bash", "scripts/demo.sh"]).target == "scripts/demo.sh"


def test_console_prompts_and_help_parsing() -> None:
    console = rb.Block(line=1, lang="console", marker=None,
                       text="$ tokenbeam-count \\\n  --input x\nOK shown output\n$ echo\n")
    assert console.script() == "tokenbeam-count \\\n  --input x\necho\n"
    help_text = ("usage: prog [-h] [--input GLOB] {submit,status}\n\nprose, e.g. --runner\n\n"
                 "options:\n  -h, --help   show\n  --input GLOB  inputs; not --output\n"
                 "  --verify, --no-verify\n")
    assert rb.help_flags(help_text) == {"--input", "--help", "--verify", "--no-verify"}
    assert rb.subcommands(help_text) == {"submit", "status"}
    assert rb.console_scripts('"tokenbeam-count=pipelines.count:run",') == {
        "tokenbeam-count": "pipelines.count:run"}


def test_outside_venv() -> None:
    assert rb.outside_venv("python -m pipelines.tokenize --help\n") == (
        ["python -m pipelines.tokenize"], False)
    assert rb.outside_venv(".venv/bin/python -m x && tokenbeam-count --input y\n") == (
        ["tokenbeam-count --input y"], False)
    assert rb.outside_venv("source .venv/bin/activate\npython -m x\npip install -e .\n") == (
        [], True)
    assert rb.outside_venv("pytest -q\n", activated=True) == ([], True)
    assert rb.outside_venv("bash scripts/demo.sh\necho python\n") == ([], False)
    found = rb.blocks("x\n```sh\necho\n```\n", source="docs/azure.md")
    assert [b.ident for b in found] == ["docs/azure.md:L2-sh"]
