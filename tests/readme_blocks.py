"""The fenced blocks of README.md and the docs/ pages, read the way a reader runs them (used by
tests/test_readme.py).

A fenced block is a *command block* when its info string names a shell (``sh``, ``bash``,
``shell``, ``console``, ``zsh``). A command block runs as written, unless the nearest non-blank
line above its opening fence is a marker::

    <!-- readme-test: needs a SLURM cluster -->

which says that the block cannot run as written on a test machine and why; such a block is only
checked offline. Blocks in other languages (``python``, plain text) are not commands.

Also here: the simple commands of a block as argv lists, what each one is (a tokenbeam module,
a console script, a bench script, a shell script of the checkout, anything else), the ``--flags``
written, and the ``--flags`` a command's ``--help`` lists. Pure functions: nothing here runs a
process or reads a file.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex

SHELLS = frozenset({"sh", "bash", "shell", "console", "zsh"})
MARKER = re.compile(r"<!--\s*readme-test:\s*(.*?)\s*-->")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([^\s`]*)")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
# Lines that only a command would start with: an unlabelled block holding them is a command
# block that forgot its language, and would escape both running and checking.
_LOOKS_LIKE_COMMAND = re.compile(
    r"^\s*(\$\s+)?(python\d*(\.\d+)?\s|\.venv/bin/|tokenbeam-|bash\s|export\s|pip\s)")


@dataclasses.dataclass(frozen=True)
class Block:
    line: int                 # 1-based line of the opening fence
    lang: str                 # the info string's first word, lower case; '' for none
    text: str                 # the lines between the fences
    marker: str | None        # the readme-test marker's reason, if the block has one
    source: str = "README.md"  # the file, relative to the checkout (README.md, docs/azure.md)

    @property
    def is_command(self) -> bool:
        return self.lang in SHELLS

    @property
    def ident(self) -> str:
        return f"{self.source}:L{self.line}-{self.lang or 'plain'}"

    @property
    def where(self) -> str:
        return f"{self.source} line {self.line}"

    def looks_like_commands(self) -> bool:
        """An unlabelled block that holds shell commands."""
        return any(_LOOKS_LIKE_COMMAND.match(line) for line in self.text.splitlines())

    def script(self) -> str:
        """The shell text to run: the block itself; for ``console``, only the ``$ `` lines
        (prompt removed) and their continuation lines, not the output shown."""
        if self.lang != "console":
            return self.text
        kept, continuing = [], False
        for line in self.text.splitlines():
            if line.startswith("$ "):
                kept.append(line[2:])
            elif continuing:
                kept.append(line)
            else:
                continue
            continuing = line.rstrip().endswith("\\")
        return "\n".join(kept) + "\n"


def blocks(markdown: str, source: str = "README.md") -> list[Block]:
    """Every fenced block of ``markdown`` (the text of the file ``source``), in order. An
    unclosed fence is an error: everything after it would silently stop being checked."""
    lines = markdown.splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening.group(1)
        closing = re.compile(rf"^\s{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = i + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        if end == len(lines):
            raise ValueError(f"{source} line {i + 1}: fenced block never closed")
        found.append(Block(line=i + 1, lang=opening.group(2).lower(),
                           text="".join(line + "\n" for line in lines[i + 1:end]),
                           marker=_marker_above(lines, i), source=source))
        i = end + 1
    return found


def _marker_above(lines: list[str], fence_index: int) -> str | None:
    k = fence_index - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    found = MARKER.search(lines[k]) if k >= 0 else None
    return found.group(1) if found else None


def commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script as argv lists: continuation lines joined, comments
    dropped, split at ``;``, ``&&``, ``||``, ``|``, ``&`` and line ends, a redirection and its
    target dropped, leading ``NAME=value`` assignments and ``exec``/``time`` dropped. Enough for
    examples (no control flow is understood: ``if``/``for`` lines come out as odd commands that
    name no tokenbeam command; a line inside a quoted string that spans lines is left out). A ``#``
    inside a word starts a comment too (shlex's rule)."""
    found: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current: list[str] = []
        skip_next = False
        try:
            tokens = list(lexer)
        except ValueError:  # a line of a quoted string that spans lines (a script's `sh -c '...'`)
            continue
        for token in tokens:
            if skip_next:
                skip_next = False
            elif token and set(token) <= set("<>&") and set(token) & set("<>"):
                skip_next = not token.endswith("&")   # `> file`; `>&` takes a digit, kept out
            elif token and set(token) <= set(";&|()"):
                found.append(current)
                current = []
            else:
                current.append(token)
        found.append(current)
    return [argv for argv in map(_strip_prefix, found) if argv]


def _strip_prefix(argv: list[str]) -> list[str]:
    k = 0
    while k < len(argv) and (re.match(r"^[A-Za-z_]\w*=", argv[k]) or argv[k] in ("exec", "time")):
        k += 1
    return argv[k:]


@dataclasses.dataclass(frozen=True)
class Command:
    """One command: ``kind`` is ``module`` (``python -m target``), ``script`` (``python
    target``), ``entry`` (a ``tokenbeam-*`` console script), ``shell`` (``bash target``) or
    ``other``; ``args`` are the arguments after the target."""
    argv: tuple[str, ...]
    kind: str
    target: str
    args: tuple[str, ...]

    @property
    def is_tokenbeam(self) -> bool:
        """Names a command of this checkout (the others, pytest, torchrun, echo, are not ours
        to check)."""
        if self.kind == "module":
            return self.target.split(".")[0] in ("pipelines", "runners")
        return self.kind in ("entry", "script", "shell")

    def describe(self) -> str:
        if self.kind == "module":
            return f"python -m {self.target}"
        if self.kind in ("script", "shell"):
            return f"{'python' if self.kind == 'script' else 'bash'} {self.target}"
        return self.target


def classify(argv: list[str]) -> Command:
    head = argv[0]
    if _PYTHON.match(os.path.basename(head)):
        k = 1
        while k < len(argv) and argv[k].startswith("-") and argv[k] not in ("-m", "-c"):
            k += 1 + (argv[k] in ("-X", "-W"))   # interpreter options, two of them with a value
        if k + 1 < len(argv) and argv[k] == "-m":
            return Command(tuple(argv), "module", argv[k + 1], tuple(argv[k + 2:]))
        if k < len(argv) and argv[k] != "-c":
            return Command(tuple(argv), "script", argv[k], tuple(argv[k + 1:]))
    elif head.startswith("tokenbeam-"):
        return Command(tuple(argv), "entry", head, tuple(argv[1:]))
    elif head in ("bash", "sh") and len(argv) > 1 and not argv[1].startswith("-"):
        return Command(tuple(argv), "shell", argv[1], tuple(argv[2:]))
    return Command(tuple(argv), "other", head, tuple(argv[1:]))


def split_pass_through(args: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the command's own arguments, those after a lone ``--``, which runners hand to the
    tokenize job)."""
    if "--" in args:
        at = args.index("--")
        return args[:at], args[at + 1:]
    return args, ()


def flags(args) -> list[str]:
    """The long flags written, in order, without values (``--runner=X`` -> ``--runner``);
    brackets of optional parts (``[--wait]``) do not count."""
    found = []
    for arg in args:
        arg = arg.strip("[]")
        if arg.startswith("--") and len(arg) > 2:
            name = arg.split("=", 1)[0]
            if name not in found:
                found.append(name)
    return found


def positionals(args) -> list[str]:
    """Arguments that are not flags (flag values included: telling them apart needs the
    parser). Used to find a subcommand and paths into the checkout."""
    bare = (a.strip("[]") for a in args)
    return [a for a in bare if a and not a.startswith("-")]


def help_flags(text: str) -> set[str]:
    """The long flags an argparse ``--help`` offers: those in its usage lines and at the head of
    its option entries, not those its prose mentions (``e.g. --runner``)."""
    usage = text.split("\n\n", 1)[0]
    found = set(re.findall(r"(?<![\w-])--[A-Za-z][\w-]*", usage))
    for line in text.splitlines():
        if re.match(r"^\s{1,8}-", line):
            head = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            found.update(re.findall(r"(?<![\w-])--[A-Za-z][\w-]*", head))
    return found


def subcommands(text: str) -> set[str]:
    """The choices of an argparse subcommand (``{submit,status,cancel}`` in the usage)."""
    usage = text.split("\n\n", 1)[0]
    found = re.search(r"\{([\w,-]+)\}", usage)
    return set(found.group(1).split(",")) if found else set()


def console_scripts(setup_py: str) -> dict[str, str]:
    """``{name: "module:function"}`` of the ``tokenbeam-*`` console scripts setup.py declares."""
    return dict(re.findall(r"""["'](tokenbeam-[\w-]+)\s*=\s*([\w.]+:\w+)["']""", setup_py))


_ACTIVATE = re.compile(r"^(source|\.)$")


def outside_venv(script: str, *, activated: bool = False) -> tuple[list[str], bool]:
    """(the commands of ``script`` that, pasted into a fresh shell after the set-up command,
    would run outside the checkout's ``.venv``: a bare ``python``/``pip``/``pytest``/
    ``tokenbeam-*``, which is the system's or missing, whether the script activates the venv
    (``source .venv/bin/activate``) from then on). ``activated``: an earlier block did."""
    found = []
    for argv in commands(script):
        if _ACTIVATE.match(argv[0]) and len(argv) > 1 and argv[1].endswith(".venv/bin/activate"):
            activated = True
            continue
        head = argv[0]
        bare = "/" not in head and (_PYTHON.match(head) or head in ("pip", "pip3", "pytest")
                                    or head.startswith("tokenbeam-"))
        if bare and not activated:
            found.append(" ".join(argv[:3]))
    return found, activated
