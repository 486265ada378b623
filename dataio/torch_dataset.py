"""A PyTorch map-style ``Dataset`` over :class:`dataio.dataset.TokenDataset` (torch optional).

Importing this module needs torch; :mod:`dataio.dataset` does not. Each item is a dict of
tensors: ``input_ids`` and ``document_ids`` (int64, ``context_length``), ``position_ids``
(position inside the document) and, with ``with_mask=True``, ``attention_mask`` (bool,
``context_length`` x ``context_length``, True where attention is allowed). Being map-style with
``__len__``, it works with ``DistributedSampler`` (which shards and shuffles by its own seed) and
with ``DataLoader(num_workers>0)`` (the loader pickles without its memory maps and reopens them
in each worker). For a fixed shuffled order without a sampler, pass ``order_seed``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from dataio.dataset import TokenDataset, shuffled_indices


class TorchTokenDataset(Dataset):
    def __init__(self, dataset: TokenDataset, *, with_mask: bool = False,
                 order_seed: int | None = None):
        self.dataset = dataset
        self.with_mask = with_mask
        self.order = (shuffled_indices(len(dataset), seed=order_seed)
                      if order_seed is not None else None)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        window = self.dataset[int(self.order[i]) if self.order is not None else int(i)]
        # int64 copies: torch has no general uint16 support and the map is read-only.
        item = {
            "input_ids": torch.from_numpy(window.token_ids.astype(np.int64)),
            "document_ids": torch.from_numpy(window.document_ids),
            "position_ids": torch.from_numpy(window.position_ids()),
        }
        if self.with_mask:
            item["attention_mask"] = torch.from_numpy(window.document_mask())
        return item
