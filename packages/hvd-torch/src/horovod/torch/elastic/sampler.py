"""``ElasticSampler``: splits a dataset over the ranks, and after a reset splits what the epoch has
not processed yet over the new set of ranks, so no sample is skipped or repeated because of it."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator, Sized
from typing import Any

import torch.utils.data
from horovod.common import rank, size


class ElasticSampler(torch.utils.data.Sampler[int]):
    """Horovod's ``ElasticSampler(dataset, shuffle=True, seed=0)``.

    Like ``DistributedSampler``, rank ``r`` of ``n`` takes every ``n``-th index of the epoch's
    (seeded) permutation, padded with the first indices so that every rank gets as many (ranks step
    together). Unlike it, it remembers which indices were processed this epoch (``record_batch`` /
    ``record_indices``), and ``reset()`` (after a resize) partitions only the rest.

    ``record_batch(batch_idx, batch_size)`` records batch ``batch_idx`` of **every** rank: in
    data-parallel training each step is one collective over all ranks, so all ranks process their
    batch ``batch_idx`` in the same step, and the record needs no communication. Keep the sampler in
    a ``TorchState``, record after each step and commit: a worker lost after a commit loses nothing
    of what the sampler recorded. Call ``set_epoch`` at the end of an epoch (it clears the record).

    :param dataset: the dataset sampled (anything with a length).
    :param shuffle: visit the indices in a permutation drawn anew each epoch (default ``True``); in order otherwise.
    :param seed: the seed of the permutation, added to the epoch number; the same on every rank (default 0).
    """

    def __init__(self, dataset: Sized, shuffle: bool = True, seed: int = 0) -> None:
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices: set[int] = set()
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices: list[int] = []
        self.num_samples = 0
        self.total_size = 0
        self.indices: list[int] = []
        self._world_indices: list[int] = []
        self.reset()

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch ``epoch`` (its own permutation); forgets what was processed.

        :param epoch: the epoch number, which seeds its permutation (with ``seed``).
        """
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx: int, batch_size: int) -> None:
        """Records batch ``batch_idx`` (of ``batch_size``) of every rank as processed.

        :param batch_idx: the index of the batch within this rank's indices since the last reset.
        :param batch_size: the number of samples per batch on each rank.
        """
        start = batch_idx * batch_size
        for r in range(self.num_replicas):
            mine = self._world_indices[r : self.total_size : self.num_replicas]
            self.processed_indices.update(mine[start : min(start + batch_size, len(mine))])

    def record_indices(self, indices: Iterable[int]) -> None:
        """Records ``indices`` as processed (this rank's only: a sync unites every rank's record).

        :param indices: dataset indices this rank has processed.
        """
        self.processed_indices.update(int(i) for i in indices)

    def get_indices(self, batch_idx: int, batch_size: int) -> list[int]:
        """This rank's indices of batch ``batch_idx``.

        :param batch_idx: the index of the batch within this rank's indices since the last reset.
        :param batch_size: the number of samples per batch.
        """
        start = batch_idx * batch_size
        return self.indices[start : min(start + batch_size, len(self.indices))]

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "processed_indices": set(self.processed_indices)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores the epoch and the processed indices of ``state_dict`` and partitions the rest anew.

        :param state_dict: a dict ``state_dict()`` returned (the epoch and the processed indices).
        """
        self.epoch = int(state_dict["epoch"])
        self.processed_indices = set(state_dict["processed_indices"])
        self.reset()

    def reset(self) -> None:
        """Partitions the epoch's unprocessed indices over the current ranks."""
        self.num_replicas = size()
        self.rank = rank()
        remaining = [i for i in range(len(self.dataset)) if i not in self.processed_indices]
        if self.shuffle:
            # The same permutation on every rank (seed and epoch agree); only the processed ones are left out.
            order = list(range(len(self.dataset)))
            random.Random(self.seed + self.epoch).shuffle(order)
            left = set(remaining)
            remaining = [i for i in order if i in left]
        self.remaining_indices = remaining
        self.num_samples = math.ceil(len(remaining) / self.num_replicas) if remaining else 0
        self.total_size = self.num_samples * self.num_replicas
        padded = remaining + remaining[: self.total_size - len(remaining)]
        self._world_indices = padded
        self.indices = padded[self.rank : self.total_size : self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        self.indices = self._world_indices[self.rank : self.total_size : self.num_replicas]
        return iter(self.indices)

    def __len__(self) -> int:
        return self.num_samples
