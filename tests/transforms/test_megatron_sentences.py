"""``--split-sentences`` against Megatron-LM core_v0.16.1's own ``tools/preprocess_data.py``.

tests/data/megatron_sentences/ holds a corpus with tricky sentence boundaries, a punkt model
trained here (NLTK's punkt_tab format, under ``nltk_data/``), and what real Megatron with NLTK
3.10.4 made of them with ``--split-sentences`` (with and without ``--keep-newlines`` and
``--append-eod``): its sentence lists (``corpus_ss.jsonl``) and its ``.bin/.idx``. The README
there has the commands. The job runs with its default splitter and ``NLTK_DATA`` pointing at the
model, as a Megatron user would install it, and must give the same bytes. The last two tests
re-run Megatron (the committed variants; a generated document over Megatron's 1,000,000-character
window, too large to commit) when a python for it and a checkout are given, and are skipped
otherwise, saying why.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess

import pytest

import megatron_live

from megatron_reference import read_pair
from pipelines import tokenize
from transforms import sentences as ss

nltk = pytest.importorskip("nltk", reason="NLTK is not installed: pip install -e "
                                          "'.[sentences]' (Megatron's splitter)")

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "megatron_sentences")
NLTK_DATA = os.path.join(DATA, "nltk_data")
MODEL_DIR = os.path.join(NLTK_DATA, "tokenizers", "punkt_tab", "english")
TOKENIZER = os.path.join(os.path.dirname(DATA), "megatron_preprocess", "tokenizer")
NLTK_VERSION = "3.10.4"  # Megatron's outputs were made with it; punkt's output depends on it
VARIANTS = {  # committed folder: the flags given to both Megatron and the job
    "megatron": ["--append-eod"],
    "megatron_keep_newlines": ["--append-eod", "--keep-newlines"],
    "megatron_no_eod": [],
    "megatron_keep_newlines_no_eod": ["--keep-newlines"],
}

if nltk.__version__.split(".")[:2] != NLTK_VERSION.split(".")[:2]:  # setup.py pins 3.10.*
    pytest.skip(f"NLTK {nltk.__version__} is installed; the committed Megatron outputs were made "
                f"with NLTK {NLTK_VERSION}, and punkt's sentences depend on the version",
                allow_module_level=True)


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


@pytest.fixture
def megatron_nltk_data(monkeypatch):
    """NLTK_DATA = the fixture's data, for this process (NLTK read it at import) and any worker
    process the job starts."""
    monkeypatch.setenv("NLTK_DATA", NLTK_DATA)
    monkeypatch.setattr(nltk.data, "path", [NLTK_DATA])


@pytest.mark.parametrize("keep_newlines", [False, True])
def test_sentences_are_megatrons(megatron_nltk_data, keep_newlines):
    texts = _lines(os.path.join(DATA, "corpus.jsonl"))
    folder = "megatron_keep_newlines" if keep_newlines else "megatron"
    megatrons = _lines(os.path.join(DATA, folder, "corpus_ss.jsonl"))
    assert len(megatrons) == len(texts) == 119
    choice = ss.choose_splitter(splitter="auto", lang="english")
    assert choice.name == "nltk"  # the default, since the data is installed
    by_name = ss.make_splitter(splitter=choice.name, lang="english", keep_newlines=keep_newlines)
    by_path = ss.make_splitter(splitter="nltk", lang=MODEL_DIR, keep_newlines=keep_newlines)
    for text, theirs in zip(texts, megatrons):
        # Megatron drops a sentence when it has no tokens; punkt gives no empty ones here
        assert by_name(text) == theirs == by_path(text)
    # the fixture exercises what it is for: --keep-newlines keeps the whitespace after a
    # sentence end, and sentencex (the default before) would have given other sentences
    assert any(s.endswith("\n") for doc in megatrons for s in doc) == keep_newlines
    pytest.importorskip("sentencex", reason="sentencex is not installed")
    other = ss.make_splitter(splitter="sentencex", keep_newlines=keep_newlines)
    assert sum(other(t) != m for t, m in zip(texts, megatrons)) > 20


@pytest.mark.slow  # whole-job runs: see tests/conftest.py
@pytest.mark.parametrize("variant, workers, split_bytes", [
    ("megatron", "1", "1000000"),
    ("megatron", "2", "9000"),
    ("megatron_keep_newlines", "1", "9000"),
    ("megatron_no_eod", "1", "1000000"),
    ("megatron_keep_newlines_no_eod", "1", "1000000"),
])
def test_job_is_byte_identical_to_megatron(tmp_path, capsys, megatron_nltk_data, variant,
                                           workers, split_bytes):
    shutil.copy(os.path.join(DATA, "corpus.jsonl"), tmp_path / "corpus.jsonl")
    out = tmp_path / "out"
    argv = ["--input", str(tmp_path / "corpus.jsonl"), "--output", str(out),
            "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", TOKENIZER,
            "--json-keys", "text", "--split-sentences", "--log-interval", "0",
            "--workers", workers, "--split-bytes", split_bytes, *VARIANTS[variant]]
    assert tokenize.run(argv) == 0
    said = [ln for ln in capsys.readouterr().err.splitlines()
            if ln.startswith("sentence splitter:")]
    assert len(said) == 1 and said[0].startswith("sentence splitter: nltk punkt, Megatron's")
    names = [n[:-4] for n in os.listdir(out) if n.endswith(".idx")]
    assert len(names) == 1 and names[0].startswith("corpus_text_sentence_dc=119_")
    assert read_pair(str(out / names[0])) == \
        read_pair(os.path.join(DATA, variant, "corpus_text_sentence"))
    assert not (out / "_errors").exists()


def _megatron_or_skip():
    return megatron_live.live_or_skip(f"nltk {NLTK_VERSION}")


@pytest.mark.slow  # runs Megatron-LM in subprocesses (about 2 minutes): see tests/conftest.py
def test_live_megatron_split_sentences_matches(tmp_path):
    python, megatron_lm = _megatron_or_skip()
    out = tmp_path / "megatron"
    proc = subprocess.run(["bash", os.path.join(DATA, "run_megatron.sh"), str(out)],
                          env=dict(os.environ, MEGATRON_PYTHON=python, MEGATRON_LM=megatron_lm),
                          capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    for variant in VARIANTS:
        files = sorted(os.listdir(out / variant))
        assert files == sorted(os.listdir(os.path.join(DATA, variant)))
        for name in files:
            with open(out / variant / name, "rb") as f, \
                    open(os.path.join(DATA, variant, name), "rb") as g:
                assert f.read() == g.read(), f"{variant}/{name} differs from the committed one"


@pytest.mark.slow  # runs Megatron-LM in subprocesses (about a minute): see tests/conftest.py
def test_live_megatron_million_character_window(tmp_path, capsys, megatron_nltk_data):
    """A document over Megatron's 1,000,000-character window, cut mid-sentence there (too large
    to commit: generated here, and compared only where Megatron can be re-run)."""
    python, megatron_lm = _megatron_or_skip()
    rng = random.Random(7)
    words = ["the", "river", "stones", "People", "valley", "Dr.", "e.g.", "J.", "3.5", "rain"]
    sentences = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 14))) + rng.choice(
        [".", ".", "?", "!", '."']) for _ in range(23_000)]
    text = "".join(s + rng.choice([" ", " ", "\n", "\n\n", "  "]) for s in sentences)
    assert len(text) > ss.MEGATRON_WINDOW_CHARS + 10_000
    assert not any(c.isspace() for c in text[ss.MEGATRON_WINDOW_CHARS - 1:][:2])  # mid-word
    with open(tmp_path / "long.jsonl", "w", encoding="utf-8") as f:
        f.write(json.dumps({"text": text}) + "\n" + json.dumps({"text": "One. Two."}) + "\n")
    home = tmp_path / "home"
    shutil.copytree(NLTK_DATA, home / "nltk_data")
    env = {k: v for k, v in os.environ.items() if k != "NLTK_DATA"}
    env.update(HOME=str(home), PYTHONPATH=megatron_lm)
    for _ in range(2):  # --partitions 1: the first run only splits (see the fixture's README)
        proc = subprocess.run(
            [python, "-W", "ignore", os.path.join(megatron_lm, "tools", "preprocess_data.py"),
             "--input", str(tmp_path / "long.jsonl"), "--output-prefix", str(tmp_path / "long"),
             "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", TOKENIZER,
             "--json-keys", "text", "--split-sentences", "--workers", "1", "--append-eod"],
            env=env, capture_output=True, text=True, timeout=900, check=False)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    out = tmp_path / "out"
    assert tokenize.run(["--input", str(tmp_path / "long.jsonl"), "--output", str(out),
                         "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
                         TOKENIZER, "--json-keys", "text", "--split-sentences", "--append-eod",
                         "--log-interval", "0", "--workers", "1"]) == 0
    names = [n[:-4] for n in os.listdir(out) if n.endswith(".idx")]
    assert len(names) == 1
    assert read_pair(str(out / names[0])) == read_pair(str(tmp_path / "long_text_sentence"))
    # the window really cut a sentence: one ends at the window's edge, inside a word
    (megatrons,) = _lines(tmp_path / "long_ss.jsonl")[:1]
    assert ss.make_splitter(splitter="nltk", lang="english")(text) == megatrons
    ends, pos = set(), 0
    for sentence in megatrons:
        pos = text.index(sentence, pos) + len(sentence)
        ends.add(pos)
    assert ss.MEGATRON_WINDOW_CHARS in ends
