"""Writes the inputs of the line-ends parity fixture: the first 130 records of ``corpus.jsonl``
(edge cases included) three times, with other line ends:

- ``line_ends_cr.jsonl``: every line ends with CR alone (old Mac OS);
- ``line_ends_crlf.jsonl``: every line ends with CR LF (Windows);
- ``line_ends_mixed.jsonl``: LF, CR LF or CR, chosen per line (seed 23), the last line without
  any line end.

Megatron reads JSONL in Python's text mode (universal newlines), where each of them ends a line,
so ``run_megatron.sh`` checks that its output is the same for the three and stores it once in
``megatron_line_ends/``. Run with tokenbeam's environment from the repository root, after
make_inputs.py::

    .venv/bin/python tests/data/megatron_preprocess/make_line_ends.py
"""

from __future__ import annotations

import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS = 130
SEED = 23


def records() -> list[bytes]:
    """The first RECORDS lines of corpus.jsonl, without their line ends (LF, or CR LF for one)."""
    with open(os.path.join(HERE, "corpus.jsonl"), "rb") as f:
        lines = f.read().split(b"\n")[:RECORDS]
    return [line.removesuffix(b"\r") for line in lines]


def main() -> int:
    lines = records()
    rng = random.Random(SEED)
    mixed = [rng.choice([b"\n", b"\r\n", b"\r"]) for _ in lines[:-1]] + [b""]
    for name, ends in (("cr", [b"\r"] * len(lines)), ("crlf", [b"\r\n"] * len(lines)),
                       ("mixed", mixed)):
        path = os.path.join(HERE, f"line_ends_{name}.jsonl")
        with open(path, "wb") as f:
            f.write(b"".join(line + end for line, end in zip(lines, ends)))
        print(f"wrote {path} ({len(lines)} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
