"""megatron-core trains on what ``pipelines.blend`` writes.

``blend`` turns tokenbeam shards into ``DATA_PATH=( --data-path w1 p1 ... )``; this test passes
that list, exactly as bash reads it, through megatron-core 0.16.1's own parsing
(``get_blend_from_list``) into ``BlendedMegatronDatasetBuilder`` with ``GPTDataset``, draws
every sample, and checks that

- the weights megatron-core realizes are blend's probabilities within 0.02 percentage points
  (its blending is greedy, so the gap is below one sample in N = 5000: 0.0002);
- every sample's tokens are the ones in the ``.bin``: rebuilt here, with tokenbeam's reader, from
  the document order and offsets megatron-core reports for it.

It needs a python with megatron-core (and torch): TOKENBEAM_MEGATRON_PYTHON, or
.cache/megatron-venv/bin/python; without one it is skipped, saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import megatron_live

from dataio import indexed, naming
from pipelines import blend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = 5000
SEQUENCE_LENGTH = 8




# Runs under the megatron python: argv = cache folder, then DATA_PATH as bash reads it.
_MEGATRON_BLEND = r"""
import json, logging, sys, types, warnings
warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
from megatron.core.datasets.utils import get_blend_from_list

cache, samples, length, data_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
import os, torch.distributed as dist
# The builder asks for the rank, as in training: one process, a file rendezvous, loopback only.
os.makedirs(cache, exist_ok=True)
os.environ["GLOO_SOCKET_IFNAME"] = "lo"
dist.init_process_group("gloo", init_method="file://" + os.path.join(cache, "rendezvous"),
                        rank=0, world_size=1)
assert data_path[0] == "--data-path", data_path[:1]
tokenizer = types.SimpleNamespace(vocab_size=65535, eod=0, pad=0, unique_identifiers={})
config = GPTDatasetConfig(random_seed=1234, sequence_length=length,
                          blend=get_blend_from_list(data_path[1:]), split="1,0,0",
                          reset_position_ids=False, reset_attention_mask=False,
                          eod_mask_loss=False, tokenizer=tokenizer, path_to_cache=cache)
train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [samples, 0, 0], lambda: True,
                                            config).build()
out = {"weights": [float(w) for w in train.weights],
       "prefixes": [d.dataset.path_prefix for d in train.datasets],
       "dataset_index": train.dataset_index.tolist(), "samples": [], "datasets": []}
for d in train.datasets:
    out["datasets"].append({"document_index": d.document_index.tolist(),
                            "sample_index": d.sample_index.tolist(),
                            "shuffle_index": d.shuffle_index.tolist()})
for i in range(len(train)):
    item = train[i]
    tokens = item["tokens"].tolist() + item["labels"].tolist()[-1:]
    out["samples"].append([int(train.dataset_index[i]), int(train.dataset_sample_index[i]),
                           tokens])
print("MEGATRON-JSON " + json.dumps(out))
"""

SHARDS = {  # name stem -> (seed, documents)
    "en_web_a_split_00000_text_document": (1, 60),
    "en_books_a_split_00000_text_document": (2, 25),
    "de_web_a_split_00000_text_document": (3, 40),
}


def _write_shards(folder) -> dict[str, list[np.ndarray]]:
    documents = {}
    for stem, (seed, count) in SHARDS.items():
        rng = np.random.default_rng(seed)
        docs = [rng.integers(1, 65000, size=int(n)) for n in rng.integers(1, 40, size=count)]
        tokens = sum(len(d) for d in docs)
        prefix = os.path.join(folder, naming.with_counts(stem, len(docs), len(docs), tokens))
        with indexed.IndexedDatasetWriter(prefix, dtype=np.uint16) as writer:
            for doc in docs:
                writer.add_document(doc.astype(np.int64), [len(doc)])
        documents[os.path.realpath(prefix)] = docs
    return documents


def _data_path(script) -> list[str]:
    proc = subprocess.run(["bash", "-c", 'source "$1" && printf "%s\\0" "${DATA_PATH[@]}"', "_",
                           str(script)], capture_output=True, check=True)
    return proc.stdout.decode().split("\0")[:-1]


@pytest.mark.slow  # runs megatron-core in a subprocess: see tests/conftest.py
def test_megatron_blended_dataset_builder_consumes_blend_output(tmp_path):
    python = megatron_live.python_or_skip()
    shards = tmp_path / "tok"
    shards.mkdir()
    documents = _write_shards(str(shards))
    (tmp_path / "ratio.json").write_text('{"web": 1, "books": 3}')
    (tmp_path / "lang.json").write_text('{"en": 3, "de": 1}')
    script = tmp_path / "data_path.sh"
    assert blend.run(["--input", str(shards), "--data-ratio", str(tmp_path / "ratio.json"),
                      "--lang-prob", str(tmp_path / "lang.json"), "--total-tokens", "40K",
                      "--output-script", str(script)]) == 0
    data_path = _data_path(script)
    wanted = {os.path.realpath(p): float(w) for w, p in zip(data_path[1::2], data_path[2::2])}
    assert len(wanted) == 3 and abs(sum(wanted.values()) - 1) < 1e-9

    proc = subprocess.run([python, "-c", _MEGATRON_BLEND, str(tmp_path / "cache"), str(SAMPLES),
                           str(SEQUENCE_LENGTH), *data_path], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("MEGATRON-JSON ")][-1]
    seen = json.loads(line.removeprefix("MEGATRON-JSON "))

    prefixes = [os.path.realpath(p) for p in seen["prefixes"]]
    assert sorted(prefixes) == sorted(wanted)
    counts = np.bincount(seen["dataset_index"], minlength=len(prefixes))
    drawn = len(seen["samples"])  # megatron-core may draw a sample more than asked
    assert counts.sum() == drawn and SAMPLES <= drawn <= SAMPLES + len(prefixes)
    gaps = {}
    for k, prefix in enumerate(prefixes):
        assert seen["weights"][k] == pytest.approx(wanted[prefix], abs=1e-12)
        gaps[os.path.basename(prefix)] = abs(counts[k] / drawn - wanted[prefix])
    assert max(gaps.values()) < 0.0002, gaps  # 0.02 percentage points

    checked = 0
    for k, prefix in enumerate(prefixes):
        ours = indexed.IndexedDataset(prefix)  # tokenbeam's reader of the same .bin
        docs = [np.asarray(ours.document(j)) for j in range(ours.document_count)]
        assert [d.tolist() for d in docs] == [d.tolist() for d in documents[prefix]]
        index = seen["datasets"][k]
        for dataset_id, sample, tokens in seen["samples"]:
            if dataset_id != k:
                continue
            j = index["shuffle_index"][sample]
            (doc_beg, off_beg), (doc_end, off_end) = (index["sample_index"][j],
                                                      index["sample_index"][j + 1])
            stream = np.concatenate([docs[index["document_index"][d]]
                                     for d in range(doc_beg, doc_end + 1)])
            last = off_end + 1 + sum(len(docs[index["document_index"][d]])
                                     for d in range(doc_beg, doc_end))
            assert len(tokens) == SEQUENCE_LENGTH + 1
            assert tokens == stream[off_beg:last].tolist()
            checked += 1
    assert checked == drawn
    print(f"megatron-core ({python}) drew {drawn} samples from blend's DATA_PATH; realized "
          f"weights within {max(gaps.values()):.6f} of blend's probabilities", file=sys.stderr)
