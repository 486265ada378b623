"""The fast backend on SentencePiece BPE models: texts it would get wrong go to the reference.

The whole-job runs; the unit tests are in tests/transforms/tokenizer/test_fast_routing.py."""

import pytest
from transforms import tokenizer as tk
from tests.transforms.tokenizer.test_fast_routing import _both, _differences
from tests.transforms.tokenizer.test_fast_routing import models  # noqa: F401 (fixture)


CODE_POINTS = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


# context: (the code point is {}, code points per document); "at the edges" puts one code
# point at a text's start and another at its end
CONTEXTS = {
    "at the edges": ("{}", 2), "between spaces": ("{} ", 128), "inside a word": ("a{}b", 128),
    "repeated": ("{}{}{}", 128), "after a rewritten character": ("\uff21{}", 128),
    "before a combining mark": ("{}\u0301 ", 128),
}


# the unit tier runs these (a few seconds each); the slow tier every context for both models
UNIT_CONTEXTS = {"nmt_nfkc": ("between spaces", "repeated"), "identity": ("between spaces",)}


def _sweep(models, name, contexts):
    fast, ref = _both(models[name])
    gigatoken_alone = tk.FastTokenizer(ref, tk.TokenizerSpec("SentencePieceTokenizer",
                                                             model=models[name]))
    gigatoken_alone.routing = None
    for context in contexts:
        form, per_doc = CONTEXTS[context]
        pieces = [form.format(*[c] * form.count("{}")) for c in CODE_POINTS]
        texts = ["".join(pieces[i:i + per_doc]) for i in range(0, len(pieces), per_doc)]
        assert _differences(fast, ref, texts) == [], context
        # texts really took the fast path (after a rewritten character, a cluster joins any
        # extender, unassigned code points included: most astral documents route)
        assert fast.last_routed() < 0.9 * len(texts), context
        if context == "at the edges":
            # the routing is needed: gigatoken alone differs on some of these
            assert _differences(gigatoken_alone, ref, texts)


@pytest.mark.parametrize("name", ["nmt_nfkc", "identity"])
def test_every_code_point_in_contexts(models, name):
    _sweep(models, name, UNIT_CONTEXTS[name])


@pytest.mark.parametrize("name", ["nmt_nfkc", "identity"])
def test_every_code_point_in_every_context(models, name):
    _sweep(models, name, [c for c in CONTEXTS if c not in UNIT_CONTEXTS[name]])
