"""A tokenize output rewritten with ``--overwrite`` and another tokenizer keeps the shards that
run did not plan: the loader, ``inspect`` and ``validate`` refuse the folder of two tokenizers
with one line naming both and the fix, unless the caller names the shards; the ``--overwrite``
run says what it leaves (issue 23, item 12)."""

import shutil

import pytest

from dataio import dataset
from dataio import dataset_find
from dataio import fs as fsutil
from pipelines import demo, inspect, tokenize, validate

pytestmark = pytest.mark.slow  # whole tokenize runs: see tests/conftest.py


def _argv(inputs, output, tokenizer, *extra):
    return [f"--input={inputs}", f"--output={output}", "--tokenizer-type", "HuggingFaceTokenizer",
            f"--tokenizer-model={tokenizer}", "--append-eod", "--log-interval", "0", *extra]


@pytest.fixture(scope="module")
def outputs(corpus_dir, corpus_texts, hf_tokenizer, tmp_path_factory):
    """``one``: every corpus file with ``hf_tokenizer``; ``mixed``: then c0 alone again with
    another tokenizer and --overwrite (the stderr of that run under ``"stderr"``)."""
    root = tmp_path_factory.mktemp("mixed")
    other = demo.train_bpe([t for ts in corpus_texts.values() for t in ts if t],
                           str(root / "other_bpe"), vocab_size=900)
    one = root / "one"
    assert tokenize.run(_argv(corpus_dir, one, hf_tokenizer)) == 0
    mixed = root / "mixed"
    shutil.copytree(one, mixed)
    return {"one": str(one), "mixed": str(mixed), "other": other,
            "rerun": _argv(corpus_dir / "c0_web.jsonl", mixed, other, "--overwrite")}


@pytest.fixture(scope="module")
def mixed(outputs):
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert tokenize.run(outputs["rerun"]) == 0
    return {**outputs, "stderr": err.getvalue()}


def test_overwrite_says_what_it_leaves(mixed, capfd):
    lines = [line for line in (mixed["stderr"] + capfd.readouterr().err).splitlines()
             if "--overwrite:" in line]
    assert lines and "holds 2 shards this run does not write" in lines[0]
    assert "the tokenizer changed" in lines[0]


def test_loader_refuses_a_folder_of_two_tokenizers(mixed, outputs, hf_tokenizer):
    assert dataset.get_dataset(outputs["one"], 16).vocab_size == 1200  # one tokenizer: fine
    with pytest.raises(dataset.MixedTokenizersError) as caught:
        dataset.get_dataset(mixed["mixed"], 16)
    message = str(caught.value)
    assert "\n" not in message and "2 tokenizers" in message
    assert mixed["other"] in message  # the one metadata.json names, by its path
    assert "c0_web_text_document_dc=" in message and "c1_web_text_document_dc=" in message
    assert "delete the shards" in message and "explicitly" in message
    # named shards are the caller's choice
    prefixes = dataset_find.list_datasets(mixed["mixed"])
    assert len(prefixes) == 3
    assert dataset.get_dataset(prefixes[1:], 16).num_files() == 2


def test_inspect_refuses_with_one_line(mixed, capsys):
    assert inspect.run([mixed["mixed"]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 tokenizers" in err[0]


def test_validate_fails_the_folder_but_not_named_shards(mixed, outputs, capsys):
    assert validate.run([mixed["mixed"]]) == 1
    out = capsys.readouterr().out
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1 and "2 tokenizers" in fails[0]
    assert out.count("\nOK ") + out.startswith("OK ") == 3  # each shard is itself fine
    assert validate.run([p + ".idx" for p in dataset_find.list_datasets(mixed["mixed"])]) == 0
    assert validate.run([outputs["one"]]) == 0
    capsys.readouterr()


def test_a_folder_without_records_says_nothing(mixed, tmp_path):
    """Other tools' datasets carry no commit records: nothing to compare, nothing refused."""
    for prefix in dataset_find.list_datasets(mixed["mixed"]):
        for suffix in (".bin", ".idx"):
            shutil.copy(prefix + suffix, tmp_path)
    assert dataset.get_dataset(str(tmp_path), 16).num_files() == 3
    assert not fsutil.exists(str(tmp_path / "_commits"))
