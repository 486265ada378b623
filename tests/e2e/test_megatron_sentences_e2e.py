"""``--split-sentences`` against Megatron-LM core_v0.16.1's own ``tools/preprocess_data.py``.

The whole-job runs; the unit tests are in tests/transforms/test_megatron_sentences.py."""

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
from tests.transforms.test_megatron_sentences import DATA, NLTK_DATA, NLTK_VERSION, _lines
from tests.transforms.test_megatron_sentences import megatron_nltk_data  # noqa: F401 (fixture)


TOKENIZER = os.path.join(os.path.dirname(DATA), "megatron_preprocess", "tokenizer")


VARIANTS = {  # committed folder: the flags given to both Megatron and the job
    "megatron": ["--append-eod"],
    "megatron_keep_newlines": ["--append-eod", "--keep-newlines"],
    "megatron_no_eod": [],
    "megatron_keep_newlines_no_eod": ["--keep-newlines"],
}


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
