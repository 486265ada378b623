"""`python -m pipelines.merge`: equals writing everything at once, order, names, failures.

The whole-job runs; the unit tests are in tests/pipelines/test_merge.py."""

import os

from megatron_reference import read_pair
from pipelines import merge, tokenize


def test_merge_of_tokenized_shards_equals_tokenizing_the_concatenation(corpus_dir, hf_tokenizer,
                                                                       tmp_path):
    def tokenize_into(inputs, out):
        argv = [f"--input={p}" for p in inputs]
        argv += ["--output", str(out), "--tokenizer-type", "HuggingFaceTokenizer",
                 "--tokenizer-model", str(hf_tokenizer), "--append-eod", "--log-interval", "0"]
        assert tokenize.run(argv) == 0

    files = sorted(corpus_dir.glob("*.jsonl"))
    tokenize_into([corpus_dir], tmp_path / "shards")
    concatenated = tmp_path / "all" / "all.jsonl"
    concatenated.parent.mkdir()
    concatenated.write_bytes(b"".join(f.read_bytes() for f in files))
    tokenize_into([concatenated], tmp_path / "whole")
    (whole,) = [n[:-4] for n in os.listdir(tmp_path / "whole") if n.endswith(".idx")]
    assert merge.run(["--input", str(tmp_path / "shards"), "--output",
                      str(tmp_path / "merged" / "all_text_document")]) == 0
    (merged,) = [n[:-4] for n in os.listdir(tmp_path / "merged")
                 if n.endswith(".idx")]
    assert merged == whole  # same counts in the name
    assert read_pair(str(tmp_path / "merged" / merged)) == \
        read_pair(str(tmp_path / "whole" / whole))
