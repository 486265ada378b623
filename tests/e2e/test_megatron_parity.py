"""Byte-identity with Megatron-LM core_v0.16.1 `tools/preprocess_data.py` itself.

The expected bytes in tests/data/megatron_preprocess/ were written by Megatron's own script (see
the README there for the exact commands and versions); this runs the tokenize job on the same
input and tokenizer and compares.
"""

import os
import shutil

import pytest

from megatron_reference import read_pair
from pipelines import tokenize

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "megatron_preprocess")


@pytest.mark.parametrize("variant, tokenizer, flags, workers", [
    ("megatron", "tokenizer", ["--append-eod"], "1"),
    ("megatron", "tokenizer", ["--append-eod"], "2"),
    ("megatron_no_eod", "tokenizer", [], "1"),
    ("megatron_bos_include_special", "tokenizer_bos", ["--append-eod", "--add-special-tokens"], "1"),
])
def test_identical_to_megatron_preprocess_data(tmp_path, variant, tokenizer, flags, workers):
    shutil.copy(os.path.join(DATA, "corpus.jsonl"), tmp_path / "corpus.jsonl")
    out = tmp_path / "out"
    argv = ["--input", str(tmp_path / "corpus.jsonl"), "--output", str(out),
            "--tokenizer-type", "HuggingFaceTokenizer",
            "--tokenizer-model", os.path.join(DATA, tokenizer), "--json-keys", "text",
            "--log-interval", "0", "--workers", workers, "--split-bytes", "50000", *flags]
    assert tokenize.run(argv) == 0
    names = [n[:-4] for n in os.listdir(out) if n.endswith(".idx")]
    assert len(names) == 1 and names[0].startswith("corpus_text_document_dc=308_")
    expected = read_pair(os.path.join(DATA, variant, "corpus_text_document"))
    assert read_pair(str(out / names[0])) == expected
    assert not (out / "_errors").exists()  # every record Megatron accepted is accepted


@pytest.mark.parametrize("ends", ["cr", "crlf", "mixed"])
def test_line_ends_as_megatron_reads_them(tmp_path, ends):
    """CR-only, CR LF and mixed line ends (tests/data/megatron_preprocess/make_line_ends.py):
    Megatron reads JSONL in Python's text mode, where each ends a line, and wrote the same
    bytes for the three files; so must the job, also where a byte range starts between the CR
    and the LF of one line end."""
    name = f"line_ends_{ends}.jsonl"
    shutil.copy(os.path.join(DATA, name), tmp_path / name)
    data = (tmp_path / name).read_bytes()
    crlf = data.find(b"\r\n")
    split = crlf + 1 if crlf > 0 else 997  # the second range starts at the LF of a CR LF
    out = tmp_path / "out"
    argv = ["--input", str(tmp_path / name), "--output", str(out),
            "--tokenizer-type", "HuggingFaceTokenizer",
            "--tokenizer-model", os.path.join(DATA, "tokenizer"), "--json-keys", "text",
            "--log-interval", "0", "--split-bytes", str(split), "--append-eod"]
    assert tokenize.run(argv) == 0
    names = [n[:-4] for n in os.listdir(out) if n.endswith(".idx")]
    assert len(names) == 1 and names[0].startswith(f"line_ends_{ends}_text_document_dc=130_")
    expected = read_pair(os.path.join(DATA, "megatron_line_ends", "line_ends_text_document"))
    assert read_pair(str(out / names[0])) == expected
    assert not (out / "_errors").exists()
