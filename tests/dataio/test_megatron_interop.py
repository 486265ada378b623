"""Interoperability with megatron-core's own bytes, both ways.

- Files written by megatron-core 0.16.1's ``IndexedDatasetBuilder`` (committed under
  tests/data/megatron/, made by its make_fixtures.py) are accepted by ``pipelines.validate`` and
  read exactly by ``dataio.indexed.IndexedDataset``; our writer makes byte-identical files from
  the same documents, and ``merge`` equals Megatron's ``add_index``.
- Corrupted copies of them are rejected, each with a reason naming the problem.
- megatron-core's ``IndexedDataset`` reads what our writer wrote: this needs a python with
  megatron-core (and torch), given by the env var TOKENBEAM_MEGATRON_PYTHON or found at
  .cache/megatron-venv/bin/python; without one that test is skipped, saying why.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from dataio import indexed as ix
from pipelines import validate as validate_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "data", "megatron")
with open(os.path.join(FIXTURES, "documents.json"), encoding="utf-8") as _f:
    MANIFEST = json.load(_f)
DATASETS = MANIFEST["datasets"]
NAMES = sorted(DATASETS)


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_like_megatron(prefix: str, documents, dtype) -> None:
    """Our writer, fed what make_fixtures.py fed Megatron: one add_document(tokens, lengths)
    per document (lengths may contain 0, an empty document has none)."""
    with ix.IndexedDatasetWriter(prefix, dtype=dtype) as writer:
        for doc in documents:
            flat = [t for seq in doc for t in seq]
            writer.add_document(np.asarray(flat, dtype=np.int64), [len(s) for s in doc])


def copy_dataset(name: str, dest_dir) -> str:
    prefix = os.path.join(str(dest_dir), name)
    for suffix in (".bin", ".idx"):
        shutil.copyfile(fixture(name) + suffix, prefix + suffix)
    return prefix


# ---------------------------------------------------------------------------------------------
# Megatron's files -> tokenbeam


def test_fixtures_were_made_by_megatron_core_0_16_1():
    assert MANIFEST["megatron_core"] == "0.16.1"
    assert set(NAMES) == {"mc_uint16", "mc_int32", "mc_uint16_b", "mc_merged", "mc_empty"}


@pytest.mark.parametrize("name", NAMES)
def test_validate_cli_accepts_megatron_files(name, capsys):
    assert validate_cli.run([fixture(name)]) == 0
    out = capsys.readouterr().out
    docs = DATASETS[name]["documents"]
    sequences = sum(len(d) for d in docs)
    tokens = sum(len(s) for d in docs for s in d)
    assert out.startswith("OK ")
    assert f"dtype={DATASETS[name]['dtype']} documents={len(docs)} sequences={sequences} " \
           f"tokens={tokens}" in out


def test_validate_cli_accepts_the_whole_folder(capsys):
    assert validate_cli.run([FIXTURES]) == 0
    assert f"{len(NAMES)} datasets: {len(NAMES)} OK, 0 FAIL" in capsys.readouterr().out


@pytest.mark.parametrize("name", NAMES)
def test_reader_reads_megatron_files_exactly(name):
    spec = DATASETS[name]
    ds = ix.IndexedDataset(fixture(name))
    assert ds.dtype == np.dtype(spec["dtype"])
    assert ds.document_count == len(spec["documents"])
    got = [[seq.tolist() for seq in doc] for doc in ds.documents()]
    assert got == spec["documents"]
    for j, doc in enumerate(spec["documents"]):
        assert ds.document(j).tolist() == [t for seq in doc for t in seq]


@pytest.mark.parametrize("name", ["mc_uint16", "mc_int32", "mc_uint16_b", "mc_empty"])
def test_our_writer_is_byte_identical_to_megatron(name, tmp_path):
    spec = DATASETS[name]
    prefix = str(tmp_path / name)
    write_like_megatron(prefix, spec["documents"], np.dtype(spec["dtype"]))
    for suffix in (".idx", ".bin"):
        assert read_bytes(prefix + suffix) == read_bytes(fixture(name) + suffix), suffix


def test_one_sequence_documents_match_megatron_through_add_batch(tmp_path):
    # add_batch (what the pipeline's sink uses) against Megatron's bytes, on the fixture's
    # documents that have at most one sequence: same .bin and .idx as Megatron would write.
    docs = [d for d in DATASETS["mc_uint16"]["documents"] if len(d) <= 1]
    prefix = str(tmp_path / "batch")
    with ix.IndexedDatasetWriter(prefix, dtype=np.uint16) as writer:
        flat = [t for d in docs for s in d for t in s]
        writer.add_batch(np.asarray(flat), [len(s) for d in docs for s in d],
                         [len(d) for d in docs])
    reference = str(tmp_path / "reference")
    write_like_megatron(reference, docs, np.uint16)
    ds = ix.IndexedDataset(prefix)
    assert [[s.tolist() for s in d] for d in ds.documents()] == docs
    for suffix in (".idx", ".bin"):
        assert read_bytes(prefix + suffix) == read_bytes(reference + suffix)


def test_merge_is_byte_identical_to_megatron_add_index(tmp_path):
    out = str(tmp_path / "merged")
    ix.merge([fixture("mc_uint16"), fixture("mc_uint16_b")], out)
    for suffix in (".idx", ".bin"):
        assert read_bytes(out + suffix) == read_bytes(fixture("mc_merged") + suffix), suffix


def test_megatron_empty_dataset_opens(tmp_path):
    ds = ix.IndexedDataset(fixture("mc_empty"))
    assert (ds.sequence_count, ds.document_count, ds.token_count) == (0, 0, 0)
    assert ds.document_indices.tolist() == [0]


# ---------------------------------------------------------------------------------------------
# Megatron-LM's tools/preprocess_data.py output (tests/data/megatron_preprocess/README.md)

PREPROCESS = os.path.join(ROOT, "tests", "data", "megatron_preprocess")


def _corpus_records() -> int:
    with open(os.path.join(PREPROCESS, "corpus.jsonl"), "rb") as f:
        return sum(1 for line in f if line.strip())


@pytest.mark.parametrize("variant,eod", [("megatron", True), ("megatron_no_eod", False),
                                         ("megatron_bos_include_special", True)])
def test_validate_accepts_preprocess_data_output(variant, eod, capsys):
    prefix = os.path.join(PREPROCESS, variant, "corpus_text_document")
    args = [prefix, "--vocab-size", "2000"] + (["--eod-id", "0"] if eod else [])
    assert validate_cli.run(args) == 0, capsys.readouterr().out
    result = ix.validate(prefix, vocab_size=2000, eod_id=0 if eod else None)
    assert result.dtype == np.uint16
    assert result.counts.documents == _corpus_records()


def test_validate_eod_check_rejects_preprocess_output_without_eod():
    prefix = os.path.join(PREPROCESS, "megatron_no_eod", "corpus_text_document")
    result = ix.validate(prefix, eod_id=0)
    assert not result.ok and "does not end with the EOD id 0" in result.reason


# ---------------------------------------------------------------------------------------------
# corrupted copies are rejected


def _patch(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _n(prefix: str) -> int:
    return ix.read_header(prefix).sequence_count


CORRUPTIONS = {
    "truncated .bin": (lambda p: os.truncate(p + ".bin", os.path.getsize(p + ".bin") - 2),
                       ".bin is"),
    "extra .bin bytes": (lambda p: open(p + ".bin", "ab").write(b"\x00\x00"), ".bin is"),
    "bad magic": (lambda p: _patch(p + ".idx", 0, b"MMIDIDY"), "bad magic"),
    "version 2": (lambda p: _patch(p + ".idx", 9, (2).to_bytes(8, "little")), "version 2"),
    "unknown dtype code": (lambda p: _patch(p + ".idx", 17, bytes([9])), "dtype code 9"),
    "ambiguous float code": (lambda p: _patch(p + ".idx", 17, bytes([6])), "dtype code 6"),
    # the pointers were computed for 2-byte items, so they are the first thing that disagrees
    "dtype int32 over uint16 data": (lambda p: _patch(p + ".idx", 17, bytes([4])),
                                     "sequence_pointers[1]"),
    "sequence count +1": (lambda p: _patch(p + ".idx", 18, (_n(p) + 1).to_bytes(8, "little")),
                          "bytes"),
    "truncated .idx": (lambda p: os.truncate(p + ".idx", os.path.getsize(p + ".idx") - 8),
                       "bytes"),
    "bad pointer": (lambda p: _patch(p + ".idx", 34 + 4 * _n(p) + 8 * 2,
                                     (7).to_bytes(8, "little")), "sequence_pointers[2]"),
    "bad length": (lambda p: _patch(p + ".idx", 34, (4).to_bytes(4, "little")),
                   "sequence_pointers[1]"),
    "document_indices not starting at 0": (
        lambda p: _patch(p + ".idx", 34 + 12 * _n(p), (1).to_bytes(8, "little")),
        "document_indices[0]"),
    "document_indices decreasing": (
        lambda p: _patch(p + ".idx", 34 + 12 * _n(p) + 8 * 2, (0).to_bytes(8, "little")),
        "decrease"),
    "document_indices ending past N": (
        lambda p: _patch(p + ".idx", os.path.getsize(p + ".idx") - 8,
                         (_n(p) + 1).to_bytes(8, "little")), "end at"),
    "missing .bin": (lambda p: os.remove(p + ".bin"), "missing"),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corrupted_megatron_file_is_rejected(corruption, tmp_path, capsys):
    prefix = copy_dataset("mc_uint16", tmp_path)
    assert ix.validate(prefix).ok  # the intact copy passes
    damage, reason = CORRUPTIONS[corruption]
    damage(prefix)
    result = ix.validate(prefix)
    assert not result.ok
    assert reason in result.reason, result.reason
    capsys.readouterr()
    assert validate_cli.run([prefix]) == 1
    assert capsys.readouterr().out.startswith("FAIL ")


def test_megatron_file_with_wrong_counts_in_its_name_is_rejected(tmp_path, capsys):
    docs = DATASETS["mc_uint16"]["documents"]
    dc, sc = len(docs), sum(len(d) for d in docs)
    tc = sum(len(s) for d in docs for s in d)
    prefix = copy_dataset("mc_uint16", tmp_path)
    renamed = str(tmp_path / f"mc_text_document_dc={dc}_sc={sc}_tc={tc + 1}")
    for suffix in (".bin", ".idx"):
        os.rename(prefix + suffix, renamed + suffix)
    assert validate_cli.run([renamed]) == 1
    assert f"name says tc={tc + 1}" in capsys.readouterr().out
    right = str(tmp_path / f"mc_text_document_dc={dc}_sc={sc}_tc={tc}")
    for suffix in (".bin", ".idx"):
        os.rename(renamed + suffix, right + suffix)
    assert validate_cli.run([right]) == 0


def test_vocab_and_eod_checks_on_megatron_file():
    # mc_uint16 holds 65535, so a vocabulary of 65500 is violated; no document ends with an EOD
    assert ix.validate(fixture("mc_uint16"), vocab_size=65536).ok
    result = ix.validate(fixture("mc_uint16"), vocab_size=65500)
    assert not result.ok and "65535" in result.reason
    assert not ix.validate(fixture("mc_uint16"), eod_id=0).ok


# ---------------------------------------------------------------------------------------------
# tokenbeam's files -> megatron-core's reader
