"""Which texts the fast backend (gigatoken) would encode differently from SentencePiece, per
model: :func:`sentencepiece_routing` reads them off the model's own normalizer spec and pieces,
and :class:`FastRouting` flags them in a batch so that fast.py sends them to the reference."""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Sequence

import numpy as np

from transforms.tokenizer.sentencepiece import proto_fields

#
# gigatoken serves a SentencePiece BPE (byte fallback) model by converting it to a tokenizer.json
# (gigatoken/_load/sentencepiece.py): the model's precompiled charsmap as HuggingFace's
# ``Precompiled`` normalizer, ``Strip`` + ``Replace(" {2,}", " ")`` for
# remove_extra_whitespaces, ``Prepend("▁")`` for add_dummy_prefix, the control and user-defined
# pieces as added tokens, and BPE merges recovered from the piece scores. Its BPE gives
# SentencePiece's ids (every code point, alone and in contexts, checked), but four of those
# steps differ from SentencePiece's own normalizer (normalizer.cc) on some texts:
#
# 1. Multi-character charsmap rules. SentencePiece replaces the longest charsmap key at each
#    position, across grapheme boundaries. ``Precompiled`` works per grapheme cluster: a cluster
#    under 6 bytes is replaced whole by the rule of its *shortest* key prefix, else char by char.
#    So "ｶﾞ" stays カ + U+3099 (SentencePiece: ガ), conjoining jamo stay apart, and
#    U+113C2 U+113C2 (Unicode 16) is not composed. Needs a key's first two characters in a row.
# 2. A cluster that starts with a character the charsmap rewrites: the whole cluster becomes
#    that character's replacement, so what follows in the cluster is lost ("Ａ\u0301" -> "A",
#    "é\u0301" -> "é"; SentencePiece keeps the accent). Needs a rewritten character followed
#    by one that extends a cluster (Extend, ZWJ, SpacingMark, CR LF, Hangul syllable
#    sequences, regional-indicator pairs; after a Prepend character, anything).
# 3. remove_extra_whitespaces: SentencePiece strips only spaces (and ▁, the escaped space,
#    at the end); ``Strip`` strips every White_Space character. So a text that starts or ends
#    (after spaces and removed characters) with a character whose replacement holds tab,
#    newline, U+0085, U+00A0, U+3000, ... or ▁ differs (identity normalisation: "\t" is [] for
#    gigatoken, ▁ + <0x09> for SentencePiece; nmt_nfkc: only U+0085 survives to the edges).
# 4. add_dummy_prefix without remove_extra_whitespaces: SentencePiece adds ▁ to any non-empty
#    input, ``Prepend`` only to a non-empty normalised text: a text of removed characters only.
# 5. Control and user-defined pieces ("<s>", "</s>") are matched in the text by gigatoken
#    (added tokens) and never by SentencePiece's encode: a text holding one differs.
#
# A text that can meet none of these goes to gigatoken; the others (rare in real corpora) to
# the reference. All character classes come from the model's own normalizer spec and pieces.

_SPACE_SYMBOL = "\u2581"
_UNICODE_WHITE_SPACE = set("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {
    chr(c) for c in range(0x2000, 0x200B)}
# SentencePiece piece types (sentencepiece_model.proto)
_SP_CONTROL, _SP_USER_DEFINED = 3, 4


def _charsmap_rules(blob: bytes) -> tuple[dict[str, str], set[str], set[str]]:
    """A precompiled charsmap (darts-clone double array of UTF-8 keys + NUL-terminated
    replacements) as: the replacement of each single-character key, the first characters of
    the multi-character keys, and the characters that follow one of those first characters in
    a key. Every code point is looked up at once (numpy), then one character deeper from the
    first characters: vectorised, as an nmt_nfkc map has a quarter of a million keys."""
    if len(blob) < 4:
        return {}, set(), set()
    trie_size = int.from_bytes(blob[:4], "little")
    units = np.frombuffer(blob[4:4 + trie_size], dtype="<u4").astype(np.int64)
    replacements = blob[4 + trie_size:]

    def offset(u):
        return (u >> 10) << ((u & (1 << 9)) >> 6)

    def step(pos, byte):
        """Child of each node ``pos`` by ``byte`` (-1: none); and whether it ends a key."""
        cand = pos ^ byte
        ok = (pos >= 0) & (cand < len(units))
        unit = np.where(ok, units[np.where(ok, cand, 0)], 0)
        ok &= (unit & ((1 << 31) | 0xFF)) == byte
        return np.where(ok, cand ^ offset(unit), -1), ok & (((unit >> 8) & 1) == 1)

    def children(pos, labels):
        """(parent row, label, child node) of every child of the nodes ``pos`` by ``labels``."""
        cand = pos[:, None] ^ labels[None, :]
        ok = cand < len(units)
        unit = np.where(ok, units[np.where(ok, cand, 0)], 0)
        rows, cols = np.nonzero(ok & ((unit & ((1 << 31) | 0xFF)) == labels[None, :]))
        return rows, labels[cols], cand[rows, cols] ^ offset(unit[rows, cols])

    points = np.array([c for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF], np.int64)
    utf8 = _utf8_bytes(points)
    root = int(offset(units[0]))
    pos = np.full(len(points), root, dtype=np.int64)
    leaf = np.zeros(len(points), dtype=bool)
    for k in range(4):
        more = utf8[:, k] > 0
        stepped, stepped_leaf = step(pos[more], utf8[more, k])
        pos[more], leaf[more] = stepped, stepped_leaf
    single = {}
    for point, node in zip(points[leaf].tolist(), pos[leaf].tolist()):
        value = int(units[node] & ((1 << 31) - 1))
        end = replacements.index(b"\0", value)
        single[chr(point)] = replacements[value:end].decode("utf-8", "replace")
    inside = np.flatnonzero(pos >= 0)
    starts = np.unique(children(pos[inside], np.arange(1, 256, dtype=np.int64))[0])
    firsts = {chr(int(points[inside[i]])) for i in starts}
    # one whole UTF-8 character on from each first character's node
    rows, lead, node = children(pos[inside[starts]], np.arange(1, 256, dtype=np.int64))
    size = np.select([lead < 0x80, lead >> 5 == 6, lead >> 4 == 14, lead >> 3 == 30],
                     [1, 2, 3, 4], 0)
    seconds: set[str] = set()
    partial = [(lead[size == n][:, None], node[size == n], n - 1) for n in (1, 2, 3, 4)]
    while partial:
        done, left = [], []
        for prefix, nodes, need in partial:
            if need == 0:
                done.append(prefix)
                continue
            rows, byte, child = children(nodes, np.arange(0x80, 0xC0, dtype=np.int64))
            left.append((np.concatenate([prefix[rows], byte[:, None]], axis=1), child, need - 1))
        for prefix in done:
            seconds.update(bytes(row).decode("utf-8", "replace") for row in prefix.tolist())
        partial = left
    seconds.discard("\ufffd")  # a partial key (bytes that are not a character) never matches
    return single, firsts, seconds


def _utf8_bytes(points: np.ndarray) -> np.ndarray:
    """The UTF-8 bytes of each code point, as rows of 4 (0 after the last byte)."""
    out = np.zeros((len(points), 4), dtype=np.int64)
    one, two, three = points < 0x80, (points >= 0x80) & (points < 0x800), \
        (points >= 0x800) & (points < 0x10000)
    four = points >= 0x10000
    out[one, 0] = points[one]
    p = points[two]
    out[two, 0], out[two, 1] = 0xC0 | (p >> 6), 0x80 | (p & 0x3F)
    p = points[three]
    out[three, 0], out[three, 1], out[three, 2] = (0xE0 | (p >> 12), 0x80 | ((p >> 6) & 0x3F),
                                                   0x80 | (p & 0x3F))
    p = points[four]
    out[four, 0], out[four, 1] = 0xF0 | (p >> 18), 0x80 | ((p >> 12) & 0x3F)
    out[four, 2], out[four, 3] = 0x80 | ((p >> 6) & 0x3F), 0x80 | (p & 0x3F)
    return out


_GRAPHEME_PROPERTIES = {"prepend": r"\p{GCB=Prepend}", "ri": r"\p{GCB=Regional_Indicator}",
                        "L": r"\p{GCB=L}", "V": r"\p{GCB=V}", "T": r"\p{GCB=T}",
                        "LV": r"\p{GCB=LV}", "LVT": r"\p{GCB=LVT}"}
# What may follow the first character inside a cluster (GB9, GB9a); unassigned code points too,
# as a newer Unicode than the ``regex`` module's may make one an extender.
_EXTENDERS = r"[\p{GCB=Extend}\p{GCB=ZWJ}\p{GCB=SpacingMark}\p{Cn}]"


@functools.lru_cache(maxsize=1)
def _grapheme_classes() -> dict:
    """Grapheme_Cluster_Break classes (the ``regex`` module's Unicode data): small ones as sets
    of characters, the extenders as a list of code point ranges."""
    import regex

    everything = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))

    def point(index: int) -> int:
        return index if index < 0xD800 else index + 0x800

    out: dict = {name: frozenset(regex.findall(prop, everything))
                 for name, prop in _GRAPHEME_PROPERTIES.items()}
    out["extend"] = [(point(m.start()), point(m.end() - 1))
                     for m in regex.finditer(_EXTENDERS + "+", everything)]
    return out


def _table_set(table: np.ndarray, chars, bit: int) -> None:
    """Set ``bit`` in ``table`` for ``chars``: characters, or (first, last) code point ranges."""
    for item in chars:
        if isinstance(item, tuple):
            table[item[0]:item[1] + 1] |= bit
        else:
            table[ord(item)] |= bit


@dataclasses.dataclass
class FastRouting:
    """Which texts a fast backend would get wrong for one model (see the comment above):
    :meth:`mask` is True for those. Built by :func:`sentencepiece_routing`.

    Cost per batch: the texts as one UTF-32 array and two table lookups per character (rules
    1, 2: a character pair, bit ``b`` of ``first`` on the left and of ``second`` on the right);
    per text, set lookups of its first and last characters (rules 3, 4) and one regex search
    for the literals (rule 5)."""

    first: np.ndarray | None = None  # uint8 per code point (rules 1, 2)
    second: np.ndarray | None = None
    edge_skip: str = ""  # characters Strip and SentencePiece both see through at the edges
    edge: frozenset = frozenset()  # rule 3: these at an edge (after edge_skip characters)
    removed_only: str = ""  # rule 4: a text of only these characters
    literals: tuple[str, ...] = ()  # rule 5
    describe: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        self._edge_first = frozenset(self.edge) | frozenset(self.edge_skip)
        if not all(self.literals):
            raise ValueError(f"an empty routing literal: {self.literals!r}")
        self._literal_re = re.compile("|".join(map(re.escape, self.literals)))
        # the same on UTF-8 bytes: a literal is in a text exactly when its UTF-8 is in the
        # text's (UTF-8 is self-synchronising); a text without any literal's first byte is
        # passed over at memchr's speed
        encoded = [lit.encode("utf-8", "surrogatepass") for lit in self.literals]
        self._literal_bytes_re = re.compile(b"|".join(map(re.escape, encoded)))
        self._literal_first_bytes = tuple(sorted({lit[:1] for lit in encoded}))

    def needs_reference(self, text: str) -> bool:
        return bool(self.mask([text])[0])

    def _pairs(self, texts: Sequence[str]) -> np.ndarray:
        """Texts holding a flagged character pair."""
        out = np.zeros(len(texts), dtype=bool)
        points = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"),
                               dtype=np.uint32)
        if len(points) < 2:
            return out
        hit = np.flatnonzero(self.second[points[1:]] & self.first[points[:-1]]) + 1
        if len(hit):
            ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
            owner = np.searchsorted(ends, hit, side="right")
            starts = ends - np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
            out[owner[hit > starts[owner]]] = True  # both characters in the same text
        return out

    def mask(self, texts: Sequence[str], *, utf8: Sequence[bytes] | None = None) -> np.ndarray:
        """``utf8``: the texts' UTF-8 bytes where the caller has them (the literals are
        searched there, several times faster than in a ``str``)."""
        out = self._pairs(texts) if self.first is not None else np.zeros(len(texts), bool)
        edge, edge_first, skip = self.edge, self._edge_first, self.edge_skip
        removed = self.removed_only
        if self.literals and len(texts) and utf8 is not None:
            search, firsts = self._literal_bytes_re.search, self._literal_first_bytes
            out |= np.fromiter((any(f in b for f in firsts) and search(b) is not None
                                for b in utf8), dtype=bool, count=len(utf8))
        elif self.literals and len(texts):
            # one search per text: re's literal-prefix scan beats an `in` per literal
            search = self._literal_re.search
            out |= np.fromiter((search(t) is not None for t in texts), dtype=bool,
                               count=len(texts))
        if not (edge or removed):
            return out
        for i, text in enumerate(texts):
            if out[i] or not text:
                continue
            if edge and ((text[0] in edge_first and text.lstrip(skip)[:1] in edge)
                         or (text[-1] in edge_first and text.rstrip(skip)[-1:] in edge)):
                out[i] = True
            elif removed and text[0] in removed and not text.lstrip(removed):
                out[i] = True
        return out


def sentencepiece_routing(model_proto: bytes) -> FastRouting:
    """The :class:`FastRouting` of a SentencePiece BPE model that gigatoken serves, from the
    model's normalizer spec (charsmap, add_dummy_prefix, remove_extra_whitespaces) and pieces."""
    normalizer: dict = {}
    literals = []
    for field, wire, value in proto_fields(model_proto):
        # A piece: piece(1), type(3). Most are NORMAL (type absent or 1); only a message holding
        # the byte 0x18 (the key of field 3 as a varint) can hold another type: parse only those.
        if field == 1 and wire == 2 and b"\x18" in value:
            piece, kind = "", 1
            for f, w, v in proto_fields(value):
                if f == 1 and w == 2:
                    piece = v.decode("utf-8", "replace")
                elif f == 3 and w == 0:
                    kind = v
            if kind in (_SP_CONTROL, _SP_USER_DEFINED) and piece:
                literals.append(piece)
        elif field == 3 and wire == 2:
            normalizer = {f: v for f, _, v in proto_fields(value)}
    dummy_prefix = bool(normalizer.get(3, 1))
    extra_ws = bool(normalizer.get(4, 1))
    single, firsts, others = _charsmap_rules(normalizer.get(2, b""))
    rewritten = set(single)

    def norm(c: str) -> str:
        return single.get(c, c)

    branches = []  # (second characters, first characters) of pairs that route
    if firsts:  # rule 1: a multi-character key can start here
        branches.append((others, firsts))
    if rewritten:  # rule 2: a rewritten character that starts a cluster of two or more
        g = _grapheme_classes()  # built only for models whose charsmap rewrites something
        branches.append((g["extend"], rewritten))
        spaces_or_nothing = extra_ws and not norm("\r").strip(" ") and not norm("\n").strip(" ")
        if "\r" in rewritten and not spaces_or_nothing:
            branches.append(({"\n"}, {"\r"}))
        for after, before in (({"L", "V", "LV", "LVT"}, "L"), ({"V", "T"}, "V"),
                              ({"V", "T"}, "LV"), ({"T"}, "T"), ({"T"}, "LVT"), ({"ri"}, "ri")):
            firsts_here = rewritten & g[before]
            if firsts_here:
                branches.append((set().union(*(g[a] for a in after)), firsts_here))
        prepend = rewritten & g["prepend"]  # a Prepend character joins whatever follows
        if prepend:
            branches.append(([(0, 0x10FFFF)], prepend))
    first = second = None
    if branches:
        first = np.zeros(0x110000, dtype=np.uint16)
        second = np.zeros(0x110000, dtype=np.uint16)
        for bit, (seconds, firsts_of) in enumerate(branches):
            _table_set(second, seconds, 1 << bit)
            _table_set(first, firsts_of, 1 << bit)
    edge, edge_skip = frozenset(), ""
    if extra_ws:
        candidates = _UNICODE_WHITE_SPACE | {_SPACE_SYMBOL} | rewritten
        edge = frozenset(c for c in candidates
                         if any(ch in _UNICODE_WHITE_SPACE - {" "} or ch == _SPACE_SYMBOL
                                for ch in norm(c)))
        edge_skip = "".join(sorted(c for c in rewritten | {" "}
                                   if not norm(c).strip(" ") and c not in edge))
    removed_only = ""
    if dummy_prefix and not extra_ws:
        removed_only = "".join(sorted(c for c in rewritten if norm(c) == ""))
    return FastRouting(first=first, second=second, edge_skip=edge_skip, edge=edge,
                       removed_only=removed_only, literals=tuple(literals),
                       describe={"multi_char_rules": len(firsts), "rewritten": len(rewritten),
                                 "edge_characters": len(edge), "literals": literals})

