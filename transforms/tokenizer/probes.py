"""The texts a stand-in backend is checked on before it may replace the reference: always the
same adversarial set, the probes of every known routing rule, and a HuggingFace folder's own
special and added tokens (check.py runs them next to a sample of the real input)."""

from __future__ import annotations

# Text that tends to break tokenizer re-implementations: every script, emoji with ZWJ and skin
# tones, flags, combining marks, whitespace runs, tabs, control characters, CRLF, very long
# words, digits, code. Always part of the self-check, next to a sample of the real input.
ADVERSARIAL = [
    "", " ", "  ", "\t", "\n", "\r\n", "a  b\t\tc \n\n d", "   leading", "trailing   ",
    "The quick brown fox. It's 3.14159 — isn't it? I'll, we've, they'd.",
    "Straße größer Ärger café naïve façade", "Москва́ ёжик Ъ", "مرحبا بالعالم، كيف حالك؟",
    "你好，世界。日本語のテキスト、カタカナ！", "한국어 텍스트", "हिन्दी पाठ ।", "ไทย ภาษา", "עברית",
    "👩‍👩‍👧‍👦 👍🏽 🏳️‍🌈 🇩🇪🇯🇵 ❤️ e\u0301 n\u0303", "\u0000\u0001\u0007\u001b[0m\u007f\u0085",
    "\u200b\u200d\ufeff\u2028\u2029\u00a0 nbsp", "x" * 5000, "ab" * 3000 + " " + "9" * 700,
    "def f(x):\n\treturn x**2  # comment\n\n\nclass A: pass\r\n",
    "{\"json\": [1, 2.5e-3, null], 'q': \"\\\\n\"}", "<|endoftext|> literal special text",
    "1234567890 12 345 6789 0.000001", "ＡＢＣ ｱｲｳ ①②③ ﬁ ﬀ", "\U0001F600" * 50,
]


# Texts each of which meets one of the known differences of gigatoken from SentencePiece (see
# routing.py): the routing must send every one to the reference.
ROUTING_PROBES = [
    "\t", "a\t", "\tb", " \x85 ", "x\x85", "\u3000x\u3000", "x \u2581", "\u2581",
    "\uff76\uff9e", "\u1100\u1161", "\U000113c2\U000113c2", "\uff21\u0301", "e\u0301\u0301",
    "\u00a0\u0301", "x\r\ny", "\u200b", "a </s> b", "<s>", "<unk>", "\u0600\u0661",
]
SAMPLE_CHARS = 1 << 16


def probe_texts(reference) -> list[str]:
    """Texts made from a HuggingFace folder's own special and added tokens (as the config
    left them: named in tokenizer_config.json, added by Megatron, the unknown-token literal),
    each alone, glued between words, spaced, and in other case: where a config's effects
    (splitting on special tokens, split_special_tokens, lower-casing, a prefix space) show."""
    hf = getattr(reference, "_hf", None)
    if hf is None:
        return []
    tokens = sorted({str(t) for t in hf.all_special_tokens}
                    | {str(t) for t in hf.get_added_vocab()})[:200]
    out = []
    for t in tokens:
        out += [t, f"a{t}b", f" {t} ", f"x {t}{t} y", t.lower(), t.upper()]
    out += [" ".join(tokens), "".join(tokens), "Hello World, HELLO É Ö ß", " the The THE"]
    return out

