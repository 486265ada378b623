"""Every command's argument parser: argparse whose usage errors are one line with a suggestion.

argparse prints the command's whole usage before a usage error (about 170 lines for the
tokenize job, Beam's flags included) and suggests nothing. :class:`ArgumentParser` raises
:class:`~runtime.errors.ConfigError` instead, which :func:`runtime.errors.main` prints as one line,
``error: ...``, with exit status 2 and no traceback:

- a bad choice names the nearest valid one (:func:`nearest`: case-insensitive, then difflib):
  ``--tokenizer-type HuggingfaceTokenizer: not a choice; did you mean --tokenizer-type
  HuggingFaceTokenizer? (choices: ...)``;
- an unknown flag names the nearest flag the command has (``unknown flag --tokenizer-typ; did
  you mean --tokenizer-type?``);
- every other usage error (a missing value, a required argument, an int that is not one) is
  argparse's own message, on one line, pointing at ``--help``.

``--help`` is argparse's, unchanged. Beam-free and dependency-free: every command uses it.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Iterable

from runtime import errors

SEE_HELP = "see --help"

# How alike (difflib's ratio) a word and a suggestion must be. Flags share their leading "--"
# and many of their words, so theirs is higher: --vocab for --vocab-file is 0.74, --outptu for
# --output 0.88, but reshard's --target-size for tokenize's --vocab-size only 0.64.
CHOICE_CUTOFF = 0.6
FLAG_CUTOFF = 0.7


def nearest(word: str, candidates: Iterable[str], *, cutoff: float = CHOICE_CUTOFF) -> str | None:
    """The candidate ``word`` most likely meant: one equal but for case, else difflib's
    closest (ratio ``cutoff`` or more, compared in lower case); None when none is close."""
    lowered: dict[str, str] = {}
    for candidate in candidates:
        lowered.setdefault(str(candidate).lower(), str(candidate))
    key = word.lower()
    if key in lowered:
        return lowered[key]
    found = difflib.get_close_matches(key, list(lowered), n=1, cutoff=cutoff)
    return lowered[found[0]] if found else None


def flag_names(parser: argparse.ArgumentParser) -> list[str]:
    """The long flags ``parser`` accepts (``--x``), in the order they were declared."""
    return [s for action in parser._actions for s in action.option_strings
            if s.startswith("--")]


def unknown_flag_message(flag: str, known: Iterable[str]) -> str:
    """``unknown flag --x; did you mean --y?`` (or ``see --help`` when nothing is close).
    ``flag`` may hold ``=value``; only the name is looked at."""
    name = flag.split("=", 1)[0]
    match = nearest(name, known, cutoff=FLAG_CUTOFF)
    hint = f"did you mean {match}?" if match else SEE_HELP
    return f"unknown flag {name}; {hint}"


def unexpected_message(extras: list[str], parser: argparse.ArgumentParser,
                       sub: argparse.ArgumentParser | None = None) -> str:
    """The one line for what ``parser`` (and its sub-command's parser ``sub``, if any) could
    not place: the first unknown flag with the nearest known one, else the first stray value
    (Megatron's ``--input`` takes one file: ``--input a.jsonl b.jsonl`` leaves b.jsonl stray)."""
    for extra in extras:
        if extra.startswith("-") and extra != "-":
            known = flag_names(parser) + (flag_names(sub) if sub is not None else [])
            return unknown_flag_message(extra, known)
    repeat = " (give --input once per input)" if "--input" in flag_names(parser) else ""
    return (f"unexpected argument {extras[0]!r}: not the value of a flag{repeat}; quote a "
            f"value holding spaces; {SEE_HELP}")


def _chosen(parser: argparse.ArgumentParser, namespace) -> argparse.ArgumentParser | None:
    """The parser of the sub-command ``namespace`` holds, if ``parser`` has sub-commands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(getattr(namespace, action.dest, None))
    return None


def misplaced_flag_message(flag: str, action: argparse.Action) -> str:
    """An unknown flag given before the sub-command (``action``, the sub-parsers): the
    sub-commands that have it and where it goes, else the nearest flag of any of them."""
    name = flag.split("=", 1)[0]
    owners = [cmd for cmd, sub in action.choices.items() if name in flag_names(sub)]
    if owners:
        return (f"unknown flag {name} before the sub-command; it is {' and '.join(owners)}'s: "
                f"give it after {owners[0]}")
    known = [f for sub in action.choices.values() for f in flag_names(sub)]
    return unknown_flag_message(name, known)


def _value_name(action: argparse.Action) -> str:
    if action.option_strings:
        longs = [s for s in action.option_strings if s.startswith("--")]
        return (longs or action.option_strings)[0]
    return str(action.metavar or action.dest).upper()


def bad_choice_message(action: argparse.Action, value) -> str:
    """``--flag VALUE: not a choice; did you mean --flag NEAREST? (choices: a, b, c)``."""
    name = _value_name(action)
    choices = [str(c) for c in action.choices]
    match = nearest(str(value), choices)
    shown = f"{name} {match}" if action.option_strings else match
    hint = f"; did you mean {shown}?" if match else ""
    return f"{name} {value}: not a choice{hint} (choices: {', '.join(choices)})"


class ArgumentParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose usage errors are :class:`~runtime.errors.ConfigError`s of
    one line (see the module docstring); ``--help`` unchanged."""

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            if action.nargs == argparse.PARSER:  # "--nodes 2 submit": 2 taken for the command
                argv = getattr(self, "_argv", [])
                before = argv[:argv.index(value)] if value in argv else []
                typo = [a for a in before if not self._knows(a)]
                if typo:
                    raise errors.ConfigError(misplaced_flag_message(typo[0], action))
            raise errors.ConfigError(bad_choice_message(action, value))
        super()._check_value(action, value)

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            raise errors.ConfigError(unexpected_message(extras, self, _chosen(self, namespace)))
        return namespace

    def parse_known_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message):
        # A mistyped flag comes first: "--outptu x" is also why "--output is required"
        typo = [a for a in self._own_args() if not self._knows(a)]
        if typo:
            raise errors.ConfigError(unknown_flag_message(typo[0], flag_names(self)))
        message = " ".join(message.split()).removeprefix("argument ")  # "argument --x: ..."
        raise errors.ConfigError(f"{message}{self._dash_value_hint(message)}; {SEE_HELP}")

    def _dash_value_hint(self, message: str) -> str:
        """For "--x: expected one argument" where a word starting with '-' follows --x (argparse
        takes it for a flag): how to give it as the value."""
        flag = message.split(":", 1)[0]
        if not message.endswith("expected one argument"):
            return ""
        argv = self._own_args()
        for i, arg in enumerate(argv[:-1]):
            if arg in self._option_string_actions and arg.startswith("-") and (
                    self._option_string_actions[arg] is self._option_string_actions.get(flag)):
                value = argv[i + 1]
                if value.startswith("-") and value != "--":
                    return f"; a value starting with '-' is given as {arg}={value}"
        return ""

    def _own_args(self) -> list[str]:
        """The arguments that are this parser's to judge: none where some are passed on to
        another command (a sub-command, ``pipeline_args`` taken whole); those before ``--``."""
        if any(a.nargs in (argparse.REMAINDER, argparse.PARSER) for a in self._actions):
            return []
        argv = getattr(self, "_argv", [])
        return argv[:argv.index("--")] if "--" in argv else argv

    def _knows(self, arg: str) -> bool:
        """Whether ``arg`` is a value, or a flag this parser has (or abbreviates)."""
        if not arg.startswith("--") or arg == "--":
            return True
        name = arg.split("=", 1)[0]
        return name in self._option_string_actions or (
            self.allow_abbrev and any(s.startswith(name) for s in flag_names(self)))
