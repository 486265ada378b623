"""The coder of the pipeline's batch elements (DocumentBatch, TokenBatch: dataio/elements.py),
registered by the transforms that emit them (transforms/read.py, transforms/tokenize.py).

Beam's workers estimate the size of the elements of every PCollection for their metrics by
encoding a sample of them (the first 10, then about 10/N of the N-th: opcounters.py). With the
default coder that is a full pickle of an 8 MB batch, and a job of a few hundred MB has so few
batches that nearly all of them are pickled for nothing. :class:`BatchCoder` encodes as pickle
does and takes the estimate from the element itself (``estimated_size()``).
"""

from __future__ import annotations

import pickle

import apache_beam as beam



class BatchCoder(beam.coders.Coder):
    def encode(self, value) -> bytes:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)

    def decode(self, encoded: bytes):
        return pickle.loads(encoded)

    def is_deterministic(self) -> bool:
        return False

    def estimate_size(self, value) -> int:
        return value.estimated_size()


def register(*types) -> None:
    """Use :class:`BatchCoder` for PCollections whose element type hint is one of ``types``."""
    for t in types:
        beam.coders.registry.register_coder(t, BatchCoder)
