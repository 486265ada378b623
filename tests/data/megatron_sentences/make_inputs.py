"""Writes the inputs of the ``--split-sentences`` parity fixture: ``corpus.jsonl`` and the punkt
model ``nltk_data/tokenizers/punkt_tab/english/`` (NLTK's punkt_tab format, as
``tests/punkt_data.py`` writes it).

Run with tokenbeam's environment from the repository root (deterministic; NLTK 3.10.4, the
version the shared .venv and the Megatron venv both have: punkt's training and splitting depend on
the NLTK version)::

    .venv/bin/python tests/data/megatron_sentences/make_inputs.py

The punkt model is trained here on generated English-like text full of abbreviations, initials,
numbers and quotes (nothing is downloaded; it is not NLTK's English model, so the sentences differ
from the real one but the code path is Megatron's). The corpus is hand-written records for the
sentence boundaries where splitters disagree (EDGE_CASES' comments), generated documents joined
by every kind of whitespace, and a few long ones. The tokenizer is
``tests/data/megatron_preprocess/tokenizer`` (byte-level BPE, vocab 2000, EOD id 0), not copied.
``run_megatron.sh`` then runs Megatron-LM's tools/preprocess_data.py on them.
"""

from __future__ import annotations

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # tests/, for punkt_data

from punkt_data import write_punkt_tab  # noqa: E402

ABBREVIATIONS = ["Dr.", "Mr.", "Mrs.", "St.", "e.g.", "i.e.", "etc.", "vs.", "No.", "Fig.",
                 "approx.", "U.S.", "Prof.", "Jan.", "p.m."]
WORDS = ("the river morning light carries quiet stones across old valleys where people build "
         "small houses and count the seasons by rain Smith Jones River Valley The A We They "
         "it was said").split()
SEPARATORS = [" ", " ", " ", "  ", "\n", "\n\n", " \n", "\t", "\n \n", "\r\n", "\n\n\n"]
STARTERS = ["However", "Meanwhile", "Then", "Later"]
ENDS = [".", ".", ".", "!", "?", "...", '."', ".)", "?!", ".'", "!\"", "?)"]

# Each a case where a sentence splitter's choice (or Megatron's whitespace handling) matters.
EDGE_CASES = [
    # abbreviations, times and titles the model may or may not know
    "Dr. Smith met Mr. Jones at 5 p.m. today. They talked! Did it help? Yes.",
    "Prof. Jones arrived on Jan. 5. The meeting, e.g. the long one, ended late.",
    "The U.S. team won. The U.S. Army came later. Then the U.S.",
    # initials and numbers with periods
    "J. R. R. Tolkien wrote it. A. B. Smith agreed. See No. 5 and Fig. 3.",
    "It costs 3.5 dollars. The 2. item is cheaper. Item 12. Then 2024.",
    # quotes and brackets around the sentence end
    'He said "Stop." Then he left. "Why?" she asked. "Go!" He went.',
    "'Really?' she asked. (See Fig. 3.) The end. [Done.] Next one.",
    '"First." "Second." "Third!"',
    # ellipses, repeated marks, lowercase after an end
    "Wait... What happened? Nothing!! Really?! ok. and then? maybe. Fine.",
    # newlines inside and between sentences, blank lines, CR LF, lone CR
    "First line\nsecond line. Next sentence.\nAnother one.\n\nNew paragraph. End.",
    "\n\n\nStarts after blank lines. Then more.\n\n\n",
    "One.\r\nTwo.\rThree.\r\n\r\nFour.",
    "A list:\n- item one.\n- item two.\n\n  Indented sentence. Last.",
    # leading and trailing whitespace (Megatron keeps a document's leading whitespace)
    "   Leading spaces. Second sentence.",
    "\t\tTabbed start. Next.\t",
    "End here.   \n\n  ",
    "  \n  Mixed lead.\n",
    # whitespace only, empty, a lone terminator, no terminator at all
    "   ",
    "\n\n",
    "",
    ".",
    "no sentence end here at all",
    # non-ASCII around the boundaries, the EOD token's text inside a sentence
    "Café. Über alles! 東京。 Ok. Ça va? Oui.",
    "Before.<|endoftext|> After. Done.",
    # a sentence end right before a whitespace-free run with periods inside
    "See example.com/a.b.c/d.e for details. www.example.org. Then stop.",
]


def english_like_text(rng: random.Random, sentences: int) -> str:
    """Sentences with abbreviations, initials, numbers, quotes and ellipses, joined by every
    kind of whitespace (the generator of tests/transforms/test_sentences.py, widened)."""
    out = [rng.choice(["", "", "", "  ", "\n", "\t", "\n\n"])]
    for i in range(sentences):
        words = []
        for _ in range(rng.randint(2, 14)):
            r = rng.random()
            if r < 0.12:
                words.append(rng.choice(ABBREVIATIONS))
            elif r < 0.17:
                words.append(rng.choice("ABCDJKMR") + ".")
            elif r < 0.22:
                words.append(rng.choice(["3.5", "1.", "12", "2024", "(see", "it)", '"so"']))
            else:
                words.append(rng.choice(WORDS))
        text = " ".join(words)
        out.append(text[:1].upper() + text[1:] + rng.choice(ENDS))
        if i + 1 < sentences:
            out.append(rng.choice(SEPARATORS))
    out.append(rng.choice(["", "", "", " ", "\n", "\n\n ", "  \n"]))
    return "".join(out)


def long_documents(rng: random.Random) -> list[str]:
    # ~20,000 characters of paragraphs; one line of ~9,000 characters with no newline; one
    # sentence of ~8,000 characters with no end; a 3,000-character run without whitespace that
    # has periods inside (Megatron's --keep-newlines pattern backtracks over such runs).
    paragraphs = "\n\n".join(english_like_text(rng, 12) for _ in range(30))
    one_line = " ".join(english_like_text(rng, 8).replace("\n", " ").replace("\r", " ")
                        for _ in range(15))
    no_end = " ".join(rng.choice(WORDS) for _ in range(1600)) + " and so on"
    run = "Start. " + ".".join(rng.choice(["ab", "x", "Dr", "U", "s"]) for _ in range(1000)) \
        + ". After the run. End."
    return [paragraphs, one_line, no_end, run]


def train_punkt(rng: random.Random):
    from nltk.tokenize import punkt

    training = "\n".join(english_like_text(rng, 40) for _ in range(200))
    # sentence starters: capitalised words far more often after a sentence end than elsewhere
    training += "\n" + " ".join(
        rng.choice(STARTERS) + " " + " ".join(rng.choice(WORDS[:20]) for _ in range(6)) + "."
        for _ in range(3000))
    trainer = punkt.PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    trainer.train(training, finalize=True)
    params = trainer.get_params()
    assert params.abbrev_types and params.sent_starters and params.ortho_context
    return params


def main() -> None:
    import nltk

    if nltk.__version__ != "3.10.4":
        sys.exit(f"make_inputs.py: NLTK {nltk.__version__}; the committed model was trained "
                 "with 3.10.4 (punkt's training depends on the version)")
    model_dir = os.path.join(HERE, "nltk_data", "tokenizers", "punkt_tab", "english")
    os.makedirs(model_dir, exist_ok=True)
    write_punkt_tab(train_punkt(random.Random(2511)), model_dir)

    rng = random.Random(25)
    texts = list(EDGE_CASES)
    texts += [english_like_text(rng, rng.randint(1, 14)) for _ in range(90)]
    texts += long_documents(rng)
    with open(os.path.join(HERE, "corpus.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"id": i, "text": text}) + "\n")
    print(f"corpus.jsonl: {len(texts)} documents, {sum(map(len, texts))} characters; "
          f"punkt model in {os.path.relpath(model_dir, HERE)}")


if __name__ == "__main__":
    main()
