"""Writes flags.tsv: every flag of Megatron-LM core_v0.16.1's tools/preprocess_data.py parser,
taken from the real parser (get_args() with parse_args intercepted), one line each:
FLAG <TAB> nargs <TAB> the argparse action (store, store_true, ...) <TAB> the default.
Not run by the tests (they read flags.tsv). Run with Megatron's python:

  PYTHONPATH=$MEGATRON_LM $MEGATRON_PYTHON \
    tests/data/megatron_cli/list_flags.py $MEGATRON_LM > tests/data/megatron_cli/flags.tsv
"""

import argparse
import importlib.util
import os
import sys


class _Captured(Exception):
    pass


def main(megatron_lm: str) -> None:
    sys.path.insert(0, megatron_lm)
    spec = importlib.util.spec_from_file_location(
        "preprocess_data", os.path.join(megatron_lm, "tools", "preprocess_data.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    captured = {}

    def intercept(self, *args, **kwargs):
        captured["parser"] = self
        raise _Captured

    argparse.ArgumentParser.parse_args = intercept
    try:
        module.get_args()
    except _Captured:
        pass
    parser = captured["parser"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        kind = type(action).__name__.removeprefix("_").removesuffix("Action").lower()
        for flag in action.option_strings:
            print(f"{flag}\t{action.nargs}\t{kind}\t{action.default!r}")


if __name__ == "__main__":
    main(sys.argv[1])
