"""Interoperability with megatron-core's own bytes, both ways.

The whole-job runs; the unit tests are in tests/dataio/test_megatron_interop.py."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from dataio import indexed as ix
from tests import megatron_live
from tests.dataio.test_megatron_interop import DATASETS, write_like_megatron


# Runs under the megatron python: reads each prefix with megatron-core's IndexedDataset and
# prints what it sees as JSON.
_MEGATRON_READ = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import logging
logging.disable(logging.CRITICAL)
from megatron.core.datasets.indexed_dataset import IndexedDataset
out = {}
for prefix in sys.argv[1:]:
    ds = IndexedDataset(prefix)
    out[prefix] = {
        "dtype": __import__("numpy").dtype(ds.index.dtype).name,
        "sequences": [ds[i].tolist() for i in range(len(ds))],
        "document_indices": ds.document_indices.tolist(),
        "sequence_lengths": ds.sequence_lengths.tolist(),
        "partial": ds.get(len(ds) - 1, offset=1, length=2).tolist() if len(ds) else [],
    }
print("MEGATRON-JSON " + json.dumps(out))
"""


def test_megatron_core_reads_what_we_wrote(tmp_path):
    python = megatron_live.python_or_skip()
    cases, dtypes = {}, {}
    for name in ("mc_uint16", "mc_int32"):
        spec = DATASETS[name]
        prefix = str(tmp_path / f"ours_{name}")
        write_like_megatron(prefix, spec["documents"], np.dtype(spec["dtype"]))
        cases[prefix] = spec["documents"]
        dtypes[prefix] = spec["dtype"]
    # a bigger one through add_batch, the pipeline's path, with ids up to the uint16 limit
    rng = np.random.default_rng(5)
    lengths = rng.integers(0, 50, size=500)
    tokens = rng.integers(0, 65500, size=int(lengths.sum()))
    big = str(tmp_path / "ours_batch")
    with ix.IndexedDatasetWriter(big, dtype=np.uint16) as writer:
        writer.add_batch(tokens, lengths[lengths > 0], (lengths > 0).astype(int))
    ends = np.cumsum(lengths)
    cases[big] = [[tokens[e - n:e].tolist()] if n else [] for e, n in zip(ends, lengths)]
    merged = str(tmp_path / "ours_merged")
    ix.merge([next(iter(cases)), big], merged)
    cases[merged] = cases[next(iter(cases))] + cases[big]

    proc = subprocess.run([python, "-c", _MEGATRON_READ, *cases], capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("MEGATRON-JSON ")][-1]
    seen = json.loads(line.removeprefix("MEGATRON-JSON "))
    for prefix, documents in cases.items():
        got = seen[prefix]
        assert got["dtype"] == dtypes.get(prefix, "uint16")
        sequences = [s for d in documents for s in d]
        assert got["sequences"] == sequences, prefix
        assert got["sequence_lengths"] == [len(s) for s in sequences]
        doc_idx = np.concatenate([[0], np.cumsum([len(d) for d in documents])]).tolist()
        assert got["document_indices"] == doc_idx
        if sequences:
            assert got["partial"] == sequences[-1][1:3]
    print(f"megatron-core ({python}) read {len(cases)} datasets written by tokenbeam",
          file=sys.stderr)
