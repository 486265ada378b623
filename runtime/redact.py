"""Secret redaction for anything tokenbeam echoes: log lines, progress, metadata.json, errors
files, dry-run output, generated job scripts, exception messages.

Contract:

- :func:`redact` takes any string (a URL, a command line, a connection string, an error message)
  and returns it with every credential replaced by ``REDACTED``: SAS signatures (``sig=``),
  ``AccountKey=`` and ``SharedAccessSignature=`` in connection strings, ``Bearer`` tokens and
  JWTs, the values of secret command-line flags (``--azure-sas-token X``), ``key=value`` pairs
  whose key names a secret (``client_secret=``, ``AZURE_STORAGE_KEY=``...), and every exact
  value registered with :func:`register_secret` (a bare account key has no recognisable shape).
- :func:`redact_options` returns a copy of an options mapping (nested dicts/lists too) where
  values of secret-named keys are ``REDACTED`` and every other string went through
  :func:`redact`. :func:`redact_argv` does the same for an argv list.
- The secret names (:data:`SECRET_NAMES`) are listed once, here: a flag names a secret when its
  name, without leading dashes, lower-cased and with ``-`` read as ``_``, is one of them.
  :func:`split_secret_flags` takes every such flag and its value out of an argv (what a job runs
  before Beam parses, and what a launcher runs before writing a command into a job script);
  :func:`redact_argv` masks the same flags' values in place. :func:`secret_name_pattern`
  gives the same names as a regular expression for other programs' redaction settings.
- Redaction is idempotent and never raises; non-strings pass through unchanged.
- :class:`RedactingFilter` applies :func:`redact` to log records (install it once with
  :func:`install_logging_filter`); in tokenbeam's own records it first escapes the control
  characters of what a message puts into its text (:func:`runtime.text.printable`).

Pure functions, no Beam and no Azure import.
"""

from __future__ import annotations

import logging
import numbers
import re
import threading
from typing import Any, Iterable, Mapping, Sequence

from runtime.text import printable

MASK = "REDACTED"

# Option / flag / env names whose *value* is a secret (compared after lower-casing and
# turning "-" into "_", with leading dashes stripped).
SECRET_NAMES = frozenset({
    "azure_sas_token", "sas_token", "sas",
    "azure_account_key", "account_key", "azure_storage_key", "azure_storage_account_key",
    "accountkey",
    "azure_connection_string", "connection_string", "azure_storage_connection_string",
    "azure_storage_sas_token",
    "azure_client_secret", "client_secret", "azure_storage_client_secret",
    "credential", "password", "secret", "token", "access_token", "bearer",
    "sharedaccesssignature", "tokenbeam_azure_secrets",
})

_SECRET_KEY_ALTERNATION = "|".join(sorted((re.escape(n) for n in SECRET_NAMES), key=len,
                                          reverse=True))

_PATTERNS: list[tuple[re.Pattern, str]] = [
    # SAS signature in a URL query or a bare SAS token: keep the other (harmless) parameters,
    # they tell a reader which permissions and expiry were used.
    (re.compile(r"(?i)(\bsig=)[^&\s;\"'<>]+"), r"\1" + MASK),
    # Connection string fields. SharedAccessSignature holds a whole SAS, possibly ';'-free.
    (re.compile(r"(?i)(\bAccountKey=)[^;\s\"']+"), r"\1" + MASK),
    (re.compile(r"(?i)(\bSharedAccessSignature=)[^;\s\"']+"), r"\1" + MASK),
    # HTTP Authorization values.
    (re.compile(r"(?i)(\bBearer\s+)[A-Za-z0-9\-._~+/]+=*"), r"\1" + MASK),
    (re.compile(r"(?i)(\bSharedKey\s+[^:\s]+:)[A-Za-z0-9+/]+=*"), r"\1" + MASK),
    # A password in a URL's user part: scheme://user:PASSWORD@host.
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://[^/\s:@\"'<>]+:)[^@/\s\"'<>]+(@)"),
     r"\1" + MASK + r"\2"),
    # A JWT anywhere (access tokens printed by SDK errors).
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"), MASK),
    # --secret-flag=value / --secret-flag value (command lines, job scripts).
    (re.compile(r"(?i)(--(?:" + _SECRET_KEY_ALTERNATION.replace("_", "[-_]") + r")(?:=|\s+))"
                r"(?:'[^']*'|\"[^\"]*\"|[^\s]+)"), r"\1" + MASK),
    # NAME=value / "name": "value" / name: value where the name is a secret's
    # (env assignments, reprs of option dicts, JSON, YAML).
    (re.compile(r"(?i)(\b(?:" + _SECRET_KEY_ALTERNATION + r")\b[\"']?[ \t]*[:=][ \t]*)"
                r"(?!REDACTED)(?:'[^']*'|\"[^\"]*\"|[^\s,;&}\]\)]+)"), r"\1" + MASK),
]

# What every pattern above needs somewhere in a text to match: a text with none of these is
# left as it is without running them (a plain path: metadata.json names every input).
_ANY_PATTERN_MAY_MATCH = re.compile(r"[=:]|--|eyJ|(?i:bearer)")

_registered: set[str] = set()
_registered_lock = threading.Lock()
_MIN_REGISTERED_LENGTH = 8  # shorter values would mask ordinary words


def register_secret(value: str | None) -> None:
    """Remember an exact secret value (e.g. a bare account key) so :func:`redact` masks it
    wherever it appears, whatever its surroundings. Process-local; never persisted."""
    if value and isinstance(value, str) and len(value) >= _MIN_REGISTERED_LENGTH:
        with _registered_lock:
            _registered.add(value)
            # The URL-encoded form shows up in SAS query strings.
            from urllib.parse import quote
            _registered.add(quote(value, safe=""))


def redact(text: Any) -> Any:
    """``text`` with every recognisable credential replaced by ``REDACTED`` (non-strings are
    returned unchanged)."""
    if not isinstance(text, str) or not text:
        return text
    with _registered_lock:
        registered = sorted(_registered, key=len, reverse=True)
    for secret in registered:
        if secret in text:
            text = text.replace(secret, MASK)
    if _ANY_PATTERN_MAY_MATCH.search(text):
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
    return text


def _is_secret_name(name: Any) -> bool:
    return isinstance(name, str) and \
        name.lstrip("-").lower().replace("-", "_") in SECRET_NAMES


def secret_flag(arg: str) -> str | None:
    """The secret's name (``"azure_sas_token"``) when ``arg`` is a secret flag (``--flag`` or
    ``--flag=value``), else ``None``."""
    if not arg.startswith("--"):
        return None
    name = arg.partition("=")[0]
    return name.lstrip("-").lower().replace("-", "_") if _is_secret_name(name) else None


class SecretFlagError(ValueError):
    """A secret flag ending argv without its value. Exit status 2 as runtime.errors.ConfigError
    (main() reads ``exit_status``); its own class because errors imports this module to redact
    every message, and this module stays below it."""

    exit_status = 2


def split_secret_flags(argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """(``argv`` without its secret flags and their values, those values by secret name).

    ``--azure-sas-token X`` and ``--azure_sas_token=X`` both give ``{"azure_sas_token": "X"}``
    (the later of two wins). Every value taken is registered with :func:`register_secret`.
    Raises :class:`SecretFlagError` (exit status 2) when a secret flag ends argv without its value.
    """
    clean: list[str] = []
    secrets: dict[str, str] = {}
    items = [str(arg) for arg in argv]
    i = 0
    while i < len(items):
        arg = items[i]
        name = secret_flag(arg)
        if name is None:
            clean.append(arg)
        else:
            flag, eq, value = arg.partition("=")
            if not eq:
                if i + 1 >= len(items):
                    raise SecretFlagError(f"{flag} needs a value")
                i += 1
                value = items[i]
            secrets[name] = value
            register_secret(value)
        i += 1
    return clean, secrets


def secret_name_pattern() -> str:
    """A regular expression, the same in Java's syntax and Python's, that finds any of
    :data:`SECRET_NAMES` (case-insensitive, ``_`` read as an optional ``.``, ``_`` or ``-``,
    not inside a longer word) or a SAS signature (``sig=``) in a name or a value: for another
    program's redaction setting (Spark's ``spark.redaction.regex``, runners/spark.py)."""
    names = sorted(SECRET_NAMES, key=len, reverse=True)
    alternation = "|".join(re.escape(n).replace("_", "[._-]?") for n in names)
    return f"(?i)(?<![a-z])(?:{alternation})(?![a-z])|sig="


def redact_options(options: Any) -> Any:
    """A redacted deep copy of an options structure (mapping, list, tuple, or scalar)."""
    if isinstance(options, Mapping):
        out = {}
        for key, value in options.items():
            if _is_secret_name(key) and value not in (None, "", False, [], {}):
                out[key] = MASK
            else:
                out[key] = redact_options(value)
        return out
    if isinstance(options, (list, tuple)):
        return type(options)(redact_options(v) for v in options)
    return redact(options)


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A redacted copy of a command line: values of secret flags (``--flag=value`` and
    ``--flag value``, the flags :func:`split_secret_flags` takes out) and any credential inside
    other arguments."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        arg = str(arg)
        if mask_next:
            out.append(MASK)
            mask_next = False
        elif secret_flag(arg) is not None:
            flag, eq, _ = arg.partition("=")
            out.append(f"{flag}={MASK}" if eq else arg)
            mask_next = not eq
        else:
            out.append(redact(arg))
    return out


def _shown_argument(value: Any) -> Any:
    """A log message's argument as it may be printed: text (a path, a name, another library's
    message) with its control characters escaped; numbers as they are (``%d`` needs them)."""
    if value is None or isinstance(value, numbers.Number):
        return value
    return printable(str(value))


def _message(record: logging.LogRecord) -> str:
    """The record's message; in tokenbeam's own records, the message's text (tokenbeam's: its
    structure, lines included, is kept) with each ``%s`` argument escaped, so that no file or
    folder name put into it ends the line early, forges another, or sends a terminal escape."""
    args = record.args
    if not args or record.name.split(".", 1)[0] != "tokenbeam":
        return record.getMessage()
    shown = ({k: _shown_argument(v) for k, v in args.items()} if isinstance(args, Mapping)
             else tuple(_shown_argument(v) for v in args))
    return str(record.msg) % shown


class RedactingFilter(logging.Filter):
    """Rewrites each record's message (after %-formatting, with tokenbeam's own records'
    arguments escaped: :func:`_message`) through :func:`redact`. The one rewrite of a record:
    the arguments are merged into the message here, so escaping them cannot come later."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = _message(record)
        except Exception:  # a malformed record is the logging module's business, not ours
            return True
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_FILTER = RedactingFilter()


def install_logging_filter(logger: logging.Logger | None = None) -> None:
    """Attach the redacting filter to every handler of ``logger`` (default: the root logger)
    and to the logger itself. Safe to call more than once."""
    target = logger or logging.getLogger()
    if _FILTER not in target.filters:
        target.addFilter(_FILTER)
    for handler in target.handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
