"""Sentence splitting for ``--split-sentences``: text -> the sentence texts to tokenize.

Contract
--------
``make_splitter(splitter=, lang=, keep_newlines=)`` is called once per worker (it may load
models) and returns ``split(text) -> list[str]``. Each returned string is tokenized as one
sequence, in order. Empty sentences are never returned, so an empty or blank document gives
``[]`` (the pipeline keeps it as an empty document). Nothing inside a sentence is rewritten:
newlines, tabs and repeated spaces within a sentence stay as they are.

Splitters (``SPLITTERS``):

``auto`` (the default of ``--sentence-splitter``)
    Megatron's where its data is installed: decided once per run, on the driver, by
    :func:`choose_splitter`, which answers ``nltk`` when NLTK and its punkt data for ``lang``
    are there (``lang`` a path, or ``tokenizers/punkt_tab/<name>/`` on NLTK's data path, as
    Megatron-LM core_v0.16.1 loads it under NLTK >= 3.9; nothing is downloaded), else
    ``sentencex``, with the one line the run prints about its choice. Workers never decide:
    :func:`make_splitter` given ``auto`` builds sentencex, and a sentencex choice keeps the name
    ``auto`` in the run's settings, so shards whose sentences do not change keep their resume
    keys.

``sentencex`` (offline, no data files)
    wikimedia's ``sentencex`` (rule based, written in Rust, ~300 languages with fallbacks;
    abbreviations, quotes and CJK / Arabic / Devanagari terminators). ``lang`` picks its rules.
    - ``keep_newlines=False``: every sentence is stripped of surrounding whitespace; the
      whitespace between sentences (spaces, newlines, blank lines) is dropped.
    - ``keep_newlines=True``: the whitespace after a sentence (newlines included) stays at the
      end of that sentence, the document's leading whitespace stays at the start of the first,
      and only the document's trailing whitespace is dropped. So ``"".join(sentences) ==
      text.rstrip()``: the same shape as Megatron's ``--keep-newlines``.
    Long input is cut by :func:`chunk_long_text` first (at most 100,000 characters per chunk,
    at paragraph, then sentence, then whitespace boundaries) and whitespace-free runs longer
    than 512 characters (CJK paragraphs) are cut after a terminator outside brackets/quotes,
    because sentencex's cost grows with (terminators x run length). A cut is a sentence
    boundary; in ordinary text the cuts fall where sentencex splits anyway.

``nltk`` (Megatron-LM parity)
    Exactly ``tools/preprocess_data.py --split-sentences`` of Megatron-LM: NLTK punkt with the
    model for ``lang`` (Megatron asks NLTK for ``tokenizers/punkt/<lang>.pickle``, which NLTK >=
    3.9 answers with the ``punkt_tab/<lang>/`` model: the same parameters read here); with ``keep_newlines`` the punkt language variables Megatron defines
    (``CustomLanguageVars``: whitespace after a sentence end belongs to the sentence); the text
    is cut into 1,000,000-character windows before splitting, as Megatron does. Sentences are
    punkt's slices unchanged (Megatron strips nothing and collapses nothing: without
    ``keep_newlines`` the whitespace between sentences is dropped, a document's leading
    whitespace stays in its first sentence). Only zero-length sentences are dropped (Megatron
    drops sentences with no tokens after tokenizing; the pipeline does that too). Punkt's
    output depends on the NLTK version (3.8.2 rewrote its boundary search), so parity holds
    against Megatron run with the same NLTK.
    The model: ``lang`` a language name or ISO code resolved to
    ``tokenizers/punkt_tab/<name>/`` on NLTK's data path (``NLTK_DATA``), or ``lang`` a path to
    a punkt_tab directory or to a legacy ``.pickle`` model (loaded with NLTK's allow-listed
    unpickler). Nothing is ever downloaded: missing data raises
    :class:`SplitterUnavailableError` saying how to install it.

``lang`` accepts NLTK/Megatron names (``english``, ``german``, ...) and ISO 639 codes
(``en``, ``de``, ``ar``, ``zh``, ``ja``, ``ru``, ``fr``, ``pt-BR`` -> ``pt``). Unknown splitter
or language names raise ``ValueError`` listing the accepted ones.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from typing import Callable

SPLITTERS = ("auto", "sentencex", "nltk")
DEFAULT_SPLITTER = "sentencex"  # what make_splitter builds for "auto" (choose_splitter decides)
MAX_CHUNK_CHARS = 100_000
MEGATRON_WINDOW_CHARS = 1_000_000  # Megatron's Encoder.split max_len
MAX_RUN_CHARS = 512

# NLTK punkt model names (Megatron's --lang values) and the other languages we name, to ISO 639-1.
LANGUAGE_CODES = {
    "arabic": "ar", "bengali": "bn", "bulgarian": "bg", "catalan": "ca", "chinese": "zh",
    "croatian": "hr", "czech": "cs", "danish": "da", "dutch": "nl", "english": "en",
    "estonian": "et", "finnish": "fi", "french": "fr", "german": "de", "greek": "el",
    "hebrew": "he", "hindi": "hi", "hungarian": "hu", "indonesian": "id", "italian": "it",
    "japanese": "ja", "korean": "ko", "latvian": "lv", "lithuanian": "lt", "malayalam": "ml",
    "marathi": "mr", "norwegian": "no", "persian": "fa", "polish": "pl", "portuguese": "pt",
    "romanian": "ro", "russian": "ru", "serbian": "sr", "slovak": "sk", "slovene": "sl",
    "spanish": "es", "swedish": "sv", "tamil": "ta", "thai": "th", "turkish": "tr",
    "ukrainian": "uk", "urdu": "ur", "vietnamese": "vi",
}
_NAME_OF_CODE = {code: name for name, code in LANGUAGE_CODES.items()}
_ISO_CODE = re.compile(r"([a-z]{2,3})(?:-[a-z0-9]+)*")
_MODEL_NAME = re.compile(r"[a-z][a-z0-9_-]*")


class SplitterUnavailableError(RuntimeError):
    """The chosen splitter's package or model data is not installed (the message says how)."""


def check_splitter_options(*, splitter: str, lang: str) -> None:
    """Cheap validation of ``--sentence-splitter``/``--lang`` (no imports, no model loading):
    raises ``ValueError`` naming the flag and the accepted values."""
    name = _splitter_name(splitter)
    if _looks_like_path(lang) and splitter.strip().lower() == "auto":
        return  # a punkt model by path: auto runs nltk (choose_splitter)
    if name == "nltk":
        if not _looks_like_path(lang):
            _punkt_model_name(lang)
    else:
        _iso_code(lang)


@dataclasses.dataclass(frozen=True)
class SplitterChoice:
    """What a run splits with: ``name`` goes to the workers (and the resume key), ``line`` is
    printed once at start."""
    name: str
    line: str




def choose_splitter(*, splitter: str = "auto", lang: str = "english") -> SplitterChoice:
    """The splitter ``--sentence-splitter``/``--lang`` ask for, ``auto`` decided (see the module
    docstring). Loads no model and downloads nothing; raises ``ValueError`` as
    :func:`check_splitter_options` does."""
    check_splitter_options(splitter=splitter, lang=lang)
    name = (splitter or "").strip().lower()
    if name == "nltk" or (name == "auto" and _looks_like_path(lang)):
        return SplitterChoice("nltk", f"sentence splitter: nltk punkt, Megatron's "
                                      f"({_punkt_location(lang) or lang})")
    if name == "sentencex":
        return SplitterChoice("sentencex", "sentence splitter: sentencex (--sentence-splitter "
                                           "sentencex; Megatron's is --sentence-splitter nltk)")
    where = _punkt_location(lang)
    if where is not None:
        return SplitterChoice("nltk", f"sentence splitter: nltk punkt, Megatron's ({where}; "
                                      "--sentence-splitter sentencex for the other)")
    return SplitterChoice("auto", f"sentence splitter: sentencex, not Megatron's NLTK punkt "
                                  f"({_why_no_punkt(lang)}); for Megatron's sentences: python "
                                  f"-m nltk.downloader -d DIR punkt_tab, then NLTK_DATA=DIR (or "
                                  f"--lang /path/to/punkt_tab/{_punkt_name_or(lang)})")


def _punkt_location(lang: str) -> str | None:
    """Where the punkt model for ``lang`` is (a path given, or found on NLTK's data path);
    None when it is not there or NLTK is not installed."""
    if _looks_like_path(lang):
        return os.path.expanduser(lang)
    try:
        import nltk.data
        name = _punkt_model_name(lang)
        return str(nltk.data.find(f"tokenizers/punkt_tab/{name}/"))
    except (ImportError, LookupError, ValueError):
        return None


def _why_no_punkt(lang: str) -> str:
    try:
        import nltk.data  # noqa: F401 - only whether NLTK is installed
    except ImportError:
        return "NLTK is not installed: pip install 'tokenbeam[sentences]'"
    try:
        name = _punkt_model_name(lang)
    except ValueError:
        return f"NLTK has no punkt model for --lang {lang}"
    return f"no tokenizers/punkt_tab/{name}/ on NLTK's data path"


def _punkt_name_or(lang: str) -> str:
    try:
        return _punkt_model_name(lang)
    except ValueError:
        return "NAME"


def make_splitter(*, splitter: str = "auto", lang: str = "english",
                  keep_newlines: bool = False) -> Callable[[str], list[str]]:
    """Build the ``split(text) -> list[str]`` function described in the module docstring."""
    name = _splitter_name(splitter)
    if name == "nltk":
        return _nltk_splitter(lang, keep_newlines=keep_newlines)
    return _sentencex_splitter(_iso_code(lang), keep_newlines=keep_newlines)


# --- long text -------------------------------------------------------------------------------

_CLOSERS = "\"'”’»)]}」』）】》〉〕］｝›"
_TERMINATORS = ".!?…。！？｡؟۔।॥"
_CJK_TERMINATORS = "。！？｡"  # end a sentence with no space after them
# Searched in the *reversed* window, so the first match is the boundary nearest the window end;
# each match starts (in reverse) where the cut goes.
_REV_PARAGRAPH = re.compile(r"\s*\n[^\S\n]*\n")
_REV_SENTENCE = re.compile(rf"\s+[{re.escape(_CLOSERS)}]*[{re.escape(_TERMINATORS)}]"
                           rf"|[{re.escape(_CLOSERS)}]*[{_CJK_TERMINATORS}]")
_REV_SPACE = re.compile(r"\s+")
_REV_LEVELS = (_REV_PARAGRAPH, _REV_SENTENCE, _REV_SPACE)
_NEXT_BOUNDARY = re.compile(rf"\s+|[{_CJK_TERMINATORS}]+[{re.escape(_CLOSERS)}]*")


def chunk_long_text(text: str, *, max_chars: int = MAX_CHUNK_CHARS) -> list[str]:
    """Cut ``text`` into chunks of at most ``max_chars`` characters whose concatenation is
    ``text``. Each cut is the last paragraph break (blank line), else the last sentence end
    (terminator + whitespace, or a CJK terminator), else the last whitespace in the upper half
    of the window; failing those, the last such boundary anywhere in the window. A window with
    no whitespace and no CJK terminator at all is unsplittable: its chunk runs on to the next
    boundary (so it may exceed ``max_chars``). Time is linear in ``len(text)``; ``""`` -> []."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    if len(text) <= max_chars:
        return [text] if text else []
    chunks, pos, end = [], 0, len(text)
    while end - pos > max_chars:
        cut = _find_cut(text, pos, pos + max_chars)
        chunks.append(text[pos:cut])
        pos = cut
    if pos < end:
        chunks.append(text[pos:])
    return chunks


def _find_cut(text: str, start: int, stop: int) -> int:
    # Prefer the upper half so chunks stay large and the number of cuts stays ~len/max_chars.
    half = start + (stop - start) // 2
    for lo in (half, start):
        window = text[lo:stop][::-1]
        for pattern in _REV_LEVELS:
            m = pattern.search(window)
            if m:
                return stop - m.start()
    m = _NEXT_BOUNDARY.search(text, stop)
    return m.end() if m else len(text)


# --- sentencex -------------------------------------------------------------------------------

# Whitespace-free runs; the lookbehind anchors each try at a run start, keeping the scan linear.
_LONG_RUN = re.compile(rf"(?<!\S)\S{{{MAX_RUN_CHARS},}}")
_RUN_TERMINATORS = _CJK_TERMINATORS + "!?؟।"
_OPEN_QUOTES = "“「『（(《〈【〔［｛«"
_CLOSE_QUOTES = "”」』）)》〉】〕］｝»"
# What makes sentencex slow: a terminator with no whitespace after it (a cheap first check).
_IN_RUN_TERMINATOR = re.compile(rf"[{re.escape(_RUN_TERMINATORS)}]\S")
# One character class (several times faster in `re` than alternatives); sorted out in Python.
_RUN_MARK = re.compile(f"[{re.escape(_RUN_TERMINATORS + _OPEN_QUOTES + _CLOSE_QUOTES)}]")


def _bound_runs(chunk: str) -> list[str]:
    """``chunk`` cut inside whitespace-free runs longer than MAX_RUN_CHARS, after terminators
    (with their closing quotes) outside brackets/quotes, where sentencex splits too; pieces
    stay under MAX_RUN_CHARS where such terminators allow. Concatenation is ``chunk``."""
    if not _IN_RUN_TERMINATOR.search(chunk) or not _LONG_RUN.search(chunk):
        return [chunk]
    cuts: list[int] = []
    for run in _LONG_RUN.finditer(chunk):
        _cuts_in_run(chunk, run.start(), run.end(), cuts)
    pieces, prev = [], 0
    for cut in cuts:
        pieces.append(chunk[prev:cut])
        prev = cut
    pieces.append(chunk[prev:])
    return pieces


def _cuts_in_run(text: str, start: int, stop: int, cuts: list[int]) -> None:
    last_cut, depth = start, 0
    closed = latest = None  # the latest sentence end at bracket depth 0 / at any depth
    pending = None  # end of a terminator run that more terminators or closing quotes may extend

    def offer(end: int) -> None:
        nonlocal last_cut, closed, latest
        if end - last_cut > MAX_RUN_CHARS:
            cut = closed if closed is not None else latest if latest is not None else end
            if cut < stop:
                cuts.append(cut)
                last_cut, closed, latest = cut, None, None
        if last_cut < end < stop:
            latest = end
            if depth == 0:
                closed = end

    terminators, openers = _RUN_TERMINATORS, _OPEN_QUOTES
    for m in _RUN_MARK.finditer(text, start, stop):
        char, pos = m[0], m.start()
        is_open = char in openers
        if not is_open:
            if char not in terminators:
                depth = max(0, depth - 1)
            if pos == pending:
                pending = pos + 1
                continue
        if pending is not None:
            offer(pending)
            pending = None
        if is_open:
            depth += 1
        elif char in terminators:
            pending = pos + 1
    if pending is not None:
        offer(pending)


def _sentencex_splitter(code: str, *, keep_newlines: bool) -> Callable[[str], list[str]]:
    try:
        import sentencex
    except ImportError:
        raise SplitterUnavailableError(
            "the default sentence splitter needs the sentencex package: "
            "pip install 'tokenbeam[sentences]' (or --sentence-splitter nltk)") from None
    segment = sentencex.segment

    strip = str.strip

    def pieces_of(text: str) -> list[str]:
        # Most documents are short, with no terminator inside a word: one call, no cutting.
        if len(text) <= MAX_CHUNK_CHARS and (len(text) <= MAX_RUN_CHARS
                                             or not _IN_RUN_TERMINATOR.search(text)):
            return segment(code, text)
        return [s for chunk in chunk_long_text(text) for piece in _bound_runs(chunk)
                for s in segment(code, piece)]

    if not keep_newlines:
        def split(text: str) -> list[str]:
            return [s for s in map(strip, pieces_of(text)) if s]
        return split

    def split_keeping_newlines(text: str) -> list[str]:
        out: list[str] = []
        lead = ""  # the document's leading whitespace, for the first sentence
        for piece in pieces_of(text):
            body = piece.lstrip()
            gap = piece[:len(piece) - len(body)]
            if out:
                out[-1] += gap
            else:
                lead += gap
            if body:
                out.append(lead + body if lead else body)
                lead = ""
        if out:
            out[-1] = out[-1].rstrip()
        return out
    return split_keeping_newlines


# --- NLTK punkt, as Megatron-LM uses it --------------------------------------------------------

def _nltk_splitter(lang: str, *, keep_newlines: bool) -> Callable[[str], list[str]]:
    try:
        from nltk.tokenize import punkt
    except ImportError:
        raise SplitterUnavailableError(
            "--sentence-splitter nltk needs NLTK: pip install 'tokenbeam[sentences]'") from None
    params = _load_punkt_params(lang)
    lang_vars = _language_vars(keep_newlines=keep_newlines)()
    tokenizer = punkt.PunktSentenceTokenizer(train_text=params, lang_vars=lang_vars)
    window = MEGATRON_WINDOW_CHARS

    def split(text: str) -> list[str]:
        out: list[str] = []
        for i in range(0, len(text), window):
            out.extend(s for s in tokenizer.tokenize(text[i:i + window]) if s)
        return out
    return split


# Punkt's boundary search and NLTK's time limit. Newer NLTK (nltk.redos) runs every regex under
# a 5-second limit, and for the `finditer` punkt walks a whole window with, the clock runs from
# the first match to the last *including punkt's own work between matches* (processor time). A
# million characters of ordinary prose take about that long, so whether a long document
# splits or raises TimeoutError would depend on the machine and its load: not reproducible.
# The boundary search therefore runs without the limit (its pattern is linear in the text; see
# KEEP_NEWLINES_PERIOD_CONTEXT for Megatron's keep-newlines pattern, which was not); every other
# punkt regex keeps NLTK's limit, and a document that still trips one is a bad record.

# Megatron's CustomLanguageVars pattern (``\S* [.?!] \s* (?=...)``: the whitespace after a
# sentence end is part of the match instead of being required before the next token, so each
# sentence slice keeps its trailing newlines), anchored at the start of a whitespace-free run.
# Unanchored, ``finditer`` tries it at every position, and inside a run with no sentence end from
# that position on, ``\S*`` runs to the end of the run and backtracks all the way, at every
# position: quadratic in the run's length. A 30,000-character run (base64, a URL list, a table
# without spaces) took NLTK past its time limit (the job failed; Megatron's run stops there)
# and a run of a million would take hours. The anchor changes no match: from a later start in a
# run the pattern reaches only sentence ends that the run's start reaches too, and the match from
# the run's start ends at the run's *last* usable sentence end (``\S*`` is greedy), after which
# nothing in that run can match; so every match starts at a run's start. With the anchor each
# run is scanned a bounded number of times. (tests/transforms/test_bad_record_units.py checks the
# matches against the unanchored pattern.)
KEEP_NEWLINES_PERIOD_CONTEXT = (r"(?<!\S) \S* %(SentEndChars)s \s*"
                                r"(?=(?P<after_tok> %(NonWord)s | (?P<next_tok>\S+) ))")


@functools.cache
def _language_vars(*, keep_newlines: bool):
    from nltk.tokenize.punkt import PunktLanguageVars

    class LanguageVars(PunktLanguageVars):
        if keep_newlines:  # compiled VERBOSE by punkt
            _period_context_fmt = KEEP_NEWLINES_PERIOD_CONTEXT

        def period_context_re(self):
            try:
                return self._boundary_search
            except AttributeError:
                self._boundary_search = _untimed(super().period_context_re())
                return self._boundary_search

    return LanguageVars


def _untimed(pattern):
    """``pattern`` without NLTK's time limit (NLTK before nltk.redos compiles with ``re``)."""
    if isinstance(pattern, re.Pattern):
        return pattern
    from nltk import redos

    return redos.compile(pattern, timeout=None)


_PUNKT_FILES = ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab")


def _load_punkt_params(lang: str):
    import nltk.data
    from nltk.tokenize import punkt

    if _looks_like_path(lang):
        path = os.path.expanduser(lang)
        if os.path.isdir(path):
            return _read_punkt_tab(path)
        if os.path.isfile(path) and path.endswith(".pickle"):
            return _read_punkt_pickle(path)
        raise SplitterUnavailableError(
            f"--lang {lang!r}: no punkt model there; give a punkt_tab directory (with "
            f"{', '.join(_PUNKT_FILES)}) or a legacy punkt .pickle file")
    name = _punkt_model_name(lang)
    try:
        model_dir = nltk.data.find(f"tokenizers/punkt_tab/{name}/")
    except LookupError:
        searched = ", ".join(str(p) for p in nltk.data.path)
        raise SplitterUnavailableError(
            f"NLTK punkt data for --lang {lang!r} (tokenizers/punkt_tab/{name}/) is not "
            f"installed; tokenbeam never downloads at run time. Install it once: "
            f"python -m nltk.downloader -d DIR punkt_tab  and set NLTK_DATA=DIR on every "
            f"worker (or pass --lang /path/to/punkt_tab/{name}). Searched: {searched}") from None
    return punkt.load_punkt_params(model_dir)


def _read_punkt_tab(path: str):
    # Read the four files ourselves: NLTK >= 3.10 refuses paths outside its data roots.
    from nltk.tabdata import PunktDecoder
    from nltk.tokenize.punkt import PunktParameters

    missing = [f for f in _PUNKT_FILES if not os.path.isfile(os.path.join(path, f))]
    if missing:
        raise SplitterUnavailableError(
            f"--lang {path!r}: not a punkt_tab model directory (missing {', '.join(missing)})")
    decode = PunktDecoder()
    params = PunktParameters()

    def read(file_name, parse):
        with open(os.path.join(path, file_name), encoding="utf-8") as f:
            return parse(f)
    params.collocations = set(read("collocations.tab", decode.tab2tups))
    params.sent_starters = read("sent_starters.txt", decode.txt2set)
    params.abbrev_types = read("abbrev_types.txt", decode.txt2set)
    params.ortho_context = read("ortho_context.tab", decode.tab2intdict)
    return params


def _read_punkt_pickle(path: str):
    from nltk.tokenize import punkt

    loader = getattr(punkt, "punkt_pickle_load", None)
    if loader is None:
        raise SplitterUnavailableError(
            f"--lang {path!r}: this NLTK cannot load pickled punkt models safely; use NLTK >= "
            "3.10 or convert the model to a punkt_tab directory")
    with open(path, "rb") as f:
        model = loader(f)
    params = getattr(model, "_params", model)
    if not isinstance(params, punkt.PunktParameters):
        raise SplitterUnavailableError(f"--lang {path!r}: not a punkt model "
                                       f"({type(model).__name__})")
    return params


# --- names ------------------------------------------------------------------------------------

def _splitter_name(splitter: str) -> str:
    name = (splitter or "").strip().lower()
    if name not in SPLITTERS:
        raise ValueError(f"unknown sentence splitter {splitter!r} (--sentence-splitter): "
                         f"choose one of {', '.join(SPLITTERS)}")
    return DEFAULT_SPLITTER if name == "auto" else name


def _looks_like_path(lang: str) -> bool:
    return os.sep in lang or "/" in lang or lang.endswith(".pickle") or lang.startswith("~")


def _iso_code(lang: str) -> str:
    key = (lang or "").strip().lower().replace("_", "-")
    if key in LANGUAGE_CODES:
        return LANGUAGE_CODES[key]
    m = _ISO_CODE.fullmatch(key)
    if m:
        return m.group(1)
    if _looks_like_path(lang):
        raise ValueError(f"--lang {lang!r} is a path: only --sentence-splitter nltk loads "
                         "a model from a path")
    raise ValueError(f"unknown language {lang!r} (--lang): use an ISO 639 code (en, de, ar, "
                     f"zh, ...) or one of {', '.join(sorted(LANGUAGE_CODES))}")


def _punkt_model_name(lang: str) -> str:
    key = (lang or "").strip().lower().replace("_", "-")
    if key in LANGUAGE_CODES:
        return key
    m = _ISO_CODE.fullmatch(key)
    if m:
        if m.group(1) not in _NAME_OF_CODE:
            raise ValueError(f"--lang {lang!r}: no NLTK punkt model name is known for this "
                             "code; pass the model's name or a path to it")
        return _NAME_OF_CODE[m.group(1)]
    if _MODEL_NAME.fullmatch(key):
        return key  # a punkt model the user installed under that name
    raise ValueError(f"unknown language {lang!r} (--lang): use an NLTK punkt model name "
                     f"({', '.join(sorted(LANGUAGE_CODES))}), an ISO 639 code, or a path")
