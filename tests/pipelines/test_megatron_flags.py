"""Every flag of Megatron-LM core_v0.16.1's tools/preprocess_data.py (tests/data/megatron_cli/
flags.tsv, listed from its real parser by list_flags.py) is accepted by ``python -m
pipelines.tokenize`` with Megatron's meaning, or refused in one line that names the flag and
tokenbeam's equivalent. Each case is a Megatron command line (plus --dry-run, which writes
nothing) run in-process."""

import os
import sys

import pytest

from pipelines import tokenize

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "data", "megatron_cli")
sys.path.insert(0, FIXTURES)
import make_inputs  # noqa: E402  (the drop-in test's inputs)

sys.path.remove(FIXTURES)


NULL = ["--input", "ids.jsonl", "--output-prefix", "out/ids", "--tokenizer-type",
        "NullTokenizer", "--vocab-size", "1000", "--workers", "1"]
GPT2 = ["--input", "corpus.jsonl", "--output-prefix", "out/corpus", "--tokenizer-type",
        "GPT2BPETokenizer", "--vocab-file", "gpt2/vocab.json", "--merge-file", "gpt2/merges.txt",
        "--legacy-tokenizer", "--workers", "1"]
HF = ["--input", "corpus.jsonl", "--output-prefix", "out/corpus", "--tokenizer-type",
      "HuggingFaceTokenizer", "--tokenizer-model", "hf", "--workers", "1"]
SPM = ["--input", "corpus.jsonl", "--output-prefix", "out/corpus", "--tokenizer-type",
       "SentencePieceTokenizer", "--tokenizer-model", "spm/unigram.model", "--workers", "1"]
TIKTOKEN = ["--input", "corpus.jsonl", "--output-prefix", "out/corpus", "--tokenizer-type",
            "TikTokenizer", "--tokenizer-model", "tiktoken/vocab.json", "--vocab-size", "2024",
            "--workers", "1"]

# flag -> (command line, None when accepted, else a word the one refusal line must hold
# besides the flag: tokenbeam's equivalent)
CASES = {
    "--input": (NULL, None),
    "--output-prefix": (NULL, None),
    "--workers": (NULL[:-1] + ["64"], None),
    "--vocab-size": (NULL, None),
    "--tokenizer-type": (NULL, None),
    "--json-keys": (NULL + ["--json-keys", "text"], None),
    "--append-eod": (NULL + ["--append-eod"], None),
    "--keep-newlines": (NULL + ["--keep-newlines"], None),
    "--legacy-tokenizer": (NULL + ["--legacy-tokenizer"], None),
    "--log-interval": (NULL + ["--log-interval", "10"], None),
    "--keep-sequential-samples": (NULL + ["--keep-sequential-samples"], None),
    "--partitions": (NULL + ["--partitions", "1"], None),
    "--vocab-file": (GPT2, None),
    "--merge-file": (GPT2, None),
    "--tokenizer-model": (TIKTOKEN, None),
    "--tiktoken-pattern": (TIKTOKEN + ["--tiktoken-pattern", "v1"], None),
    "--tiktoken-num-special-tokens": (TIKTOKEN + ["--tiktoken-num-special-tokens", "1000"],
                                      None),
    "--tokenizer-special-tokens": (TIKTOKEN + ["--tokenizer-special-tokens", "<unk>", "<s>",
                                               "</s>", "<mask>", "<pad>", "<cls>", "<sep>"],
                                   None),
    "--tokenizer-hf-include-special-tokens": (HF + ["--tokenizer-hf-include-special-tokens"],
                                              None),
    "--tokenizer-hf-use-fast": (HF + ["--tokenizer-hf-use-fast"], None),
    "--tokenizer-sentencepiece-legacy": (SPM + ["--tokenizer-sentencepiece-legacy"], None),
    "--vocab-extra-ids": (SPM + ["--vocab-extra-ids", "100"], None),
    "--tokenizer-metadata": (TIKTOKEN + ["--tokenizer-metadata", "tiktoken/tokenizer_metadata.json"],
                             None),
    "--tiktoken-special-tokens": (TIKTOKEN + ["--tiktoken-special-tokens", "<x>"], None),
    "--padded-vocab-size": (SPM + ["--padded-vocab-size", "70000"], None),
    "--split-sentences": (SPM + ["--split-sentences"], None),
    "--lang": (SPM + ["--split-sentences", "--lang", "english"], None),
}
REFUSED = {  # flag values Megatron accepts and tokenbeam refuses, with the equivalent named
    "--partitions": (NULL + ["--partitions", "4"], "--workers"),
    # tokenbeam never runs a folder's own code
    "--trust-remote-code": (HF + ["--trust-remote-code"], "tokenizer_class"),
    # Megatron's SentencePiece wrapper raises without --tokenizer-sentencepiece-legacy
    "--tokenizer-special-tokens": (SPM + ["--tokenizer-special-tokens", "<x>"],
                                   "--tokenizer-sentencepiece-legacy"),
}


def _megatron_flags() -> list[str]:
    with open(os.path.join(FIXTURES, "flags.tsv"), encoding="utf-8") as fh:
        return [line.split("\t")[0] for line in fh if line.strip()]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("flags_inputs"))
    make_inputs.main(folder)
    return folder


def _run(argv, folder, capsys) -> tuple[int, list[str]]:
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        status = tokenize.run([*argv, "--dry-run"])
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err
    return status, [line for line in err.splitlines() if line.startswith("error:")]


def test_every_megatron_flag_has_a_case():
    flags = _megatron_flags()
    assert len(flags) == 28 and "--output-prefix" in flags  # the list is Megatron's parser
    missing = [f for f in flags if f not in CASES and f not in REFUSED]
    assert not missing, f"Megatron flags with no case here: {missing}"


@pytest.mark.parametrize("flag", sorted(CASES))
def test_megatron_flag_accepted(flag, inputs, capsys):
    argv, _ = CASES[flag]
    assert flag in argv
    status, errors = _run(argv, inputs, capsys)
    assert (status, errors) == (0, [])


@pytest.mark.parametrize("flag", sorted(REFUSED))
def test_megatron_flag_refused_in_one_line_naming_the_equivalent(flag, inputs, capsys):
    argv, equivalent = REFUSED[flag]
    status, errors = _run(argv, inputs, capsys)
    assert status == 2 and len(errors) == 1, errors
    assert errors[0].startswith(f"error: {flag}") and equivalent in errors[0], errors[0]


@pytest.mark.parametrize("kind", ["MultimodalTokenizer", "NullMultimodalTokenizer", "SFTTokenizer"])
def test_megatrons_other_tokenizer_types_are_refused(kind, inputs, capsys):
    """Megatron's types for multimodal and SFT data: refused, naming the type (exit 2)."""
    argv = [a if a != "NullTokenizer" else kind for a in NULL]
    cwd = os.getcwd()
    os.chdir(inputs)
    try:
        status = tokenize.run([*argv, "--dry-run"])
    finally:
        os.chdir(cwd)
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert status == 2 and len(errors) == 1 and kind in errors[0], errors
