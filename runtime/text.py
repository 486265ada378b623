"""Text for one line of a message: :func:`printable` escapes what would end or forge a line.

Below errors, log and redact (each applies it to what it prints) and dataio/naming.py (which
refuses such names): it imports nothing of the project.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, U+2028/U+2029 (line ends to Python and JavaScript), and the lone
# surrogates a name that is not UTF-8 decodes to (surrogateescape).
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with each control character written as its escape (``\\n``, ``\\x1b``,
    ``\\u2028``), and each byte of a name that is not UTF-8 as ``\\udcXX``: for messages and
    comments, which a raw newline would end (and a terminal would obey an escape of)."""
    return _UNPRINTABLE.sub(
        lambda m: m.group().encode("unicode_escape", "backslashreplace").decode("ascii"), text)
