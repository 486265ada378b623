"""`python -m pipelines.count`: counts from the .idx alone, verification, --rename, recovery.

The whole-job runs; the unit tests are in tests/pipelines/test_count.py."""

import os
import shutil

from megatron_reference import read_pair
from pipelines import count, tokenize


def test_on_tokenize_job_output_and_renamed_names(corpus_dir, hf_tokenizer, tmp_path, capsys):
    out = tmp_path / "tok"
    code = tokenize.run([f"--input={corpus_dir}", "--output", str(out), "--tokenizer-type",
                         "HuggingFaceTokenizer", "--tokenizer-model", str(hf_tokenizer),
                         "--append-eod", "--log-interval", "0"])
    assert code == 0
    written = sorted(n for n in os.listdir(out) if n.endswith(".idx"))
    assert len(written) == 3
    capsys.readouterr()
    assert count.run(["--input", str(out)]) == 0  # the job's own names verify
    assert capsys.readouterr().out.count("verified") == 3
    # Strip the counts (as a dataset from another tool would look) and rename them back.
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in written:
        prefix = name[:-4]
        base = prefix.split("_dc=")[0]
        for ext in (".bin", ".idx"):
            shutil.copy(out / (prefix + ext), plain / (base + ext))
    assert count.run(["--input", str(plain / "*.bin"), "--rename"]) == 0
    assert sorted(n for n in os.listdir(plain) if n.endswith(".idx")) == written
    for name in written:
        assert read_pair(str(plain / name[:-4])) == read_pair(str(out / name[:-4]))
