"""Writes the merge fixture in this folder: small inputs, and Megatron-LM's own
``tools/merge_datasets.py`` output for them.

Run with a python that has megatron-core 0.16.1 (and torch), and a Megatron-LM checkout of tag
core_v0.16.1 (for ``tools/merge_datasets.py``)::

    MEGATRON_LM=/path/to/Megatron-LM-core_v0.16.1 \
    /path/to/megatron-venv/bin/python tests/data/megatron_merge/make_fixtures.py

It rewrites, next to this script:

- ``inputs/corpus_split_{1,2,10}_text_document.bin/.idx`` and ``inputs/corpus_split_9_text_document``
  (uint16; written by megatron-core's ``IndexedDatasetBuilder.add_document``). Their names sort
  differently in plain ``sorted()`` order (``1, 10, 2, 9``: what Megatron merges in) and in
  natural order (``1, 2, 9, 10``).
- ``megatron/merged.bin/.idx``: the output of ::

      PYTHONPATH=$MEGATRON_LM python $MEGATRON_LM/tools/merge_datasets.py \
          --input inputs --output-prefix megatron/merged

- ``documents.json``: each input's documents (lists of sequences), the order Megatron merged
  them in, and the versions used.

The tests (tests/test_merge_megatron.py) compare ``python -m pipelines.merge`` with these bytes;
they never import megatron-core.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# Inner lists are sequences: several per document, an empty document, a zero-length sequence.
INPUTS = {
    "corpus_split_1_text_document": [[[1, 2, 3], [4]], [], [[5, 6]]],
    "corpus_split_2_text_document": [[[20, 21]], [[22], [], [23, 24]]],
    "corpus_split_9_text_document": [[[90]], [[91, 92, 93, 94]]],
    "corpus_split_10_text_document": [[[100, 101, 102]], [], [[65535, 0]]],
}


def flat(document):
    return [token for sequence in document for token in sequence]


def main() -> int:
    import megatron.core
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

    megatron_lm = os.environ.get("MEGATRON_LM")
    if not megatron_lm:
        print("set MEGATRON_LM to a Megatron-LM checkout of tag core_v0.16.1", file=sys.stderr)
        return 2
    inputs = os.path.join(HERE, "inputs")
    out_dir = os.path.join(HERE, "megatron")
    os.makedirs(inputs, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    for name, documents in INPUTS.items():
        builder = IndexedDatasetBuilder(os.path.join(inputs, name + ".bin"), dtype=np.uint16)
        for doc in documents:
            builder.add_document(flat(doc), [len(s) for s in doc])
        builder.finalize(os.path.join(inputs, name + ".idx"))

    env = dict(os.environ, PYTHONPATH=megatron_lm)
    subprocess.run([sys.executable, "-W", "ignore",
                    os.path.join(megatron_lm, "tools", "merge_datasets.py"),
                    "--input", inputs, "--output-prefix", os.path.join(out_dir, "merged")],
                   env=env, check=True)

    order = sorted(INPUTS)  # what merge_datasets.py does with the names it lists
    merged = IndexedDataset(os.path.join(out_dir, "merged"))
    expected = [s for name in order for doc in INPUTS[name] for s in doc]
    assert [merged[i].tolist() for i in range(len(merged))] == expected

    with open(os.path.join(HERE, "documents.json"), "w", encoding="utf-8") as f:
        json.dump({
            "made_by": "tests/data/megatron_merge/make_fixtures.py",
            "command": "PYTHONPATH=$MEGATRON_LM python $MEGATRON_LM/tools/merge_datasets.py "
                       "--input inputs --output-prefix megatron/merged",
            "megatron_core": megatron.core.__version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "dtype": "uint16",
            "inputs": INPUTS,
            "megatron_order": order,
        }, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote the merge fixture with megatron-core {megatron.core.__version__} into {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
