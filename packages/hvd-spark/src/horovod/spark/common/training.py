"""What every framework's training function shares: the data it reads on each rank, batch by batch,
and the resumable run it keeps in the Store. Imported on the ranks: no pyspark here."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from horovod.spark.common.reader import WEIGHT_KEY, ShardReader

Batch = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """The prepared dataset and how each rank reads it (from the Estimator's params)."""

    meta: Any  # DatasetMeta
    store: Any  # the Store's remote view
    feature_cols: list[str]
    label_cols: list[str]
    sample_weight_col: str | None
    batch_size: int
    val_batch_size: int
    shuffle: bool
    shuffle_buffer_size: int | None
    seed: int
    train_steps_per_epoch: int | None
    validation_steps_per_epoch: int | None
    transformation_fn: Callable[[Batch], Batch] | None

    def _reader(self, path: str, rank: int, size: int, batch_size: int, shuffle: bool) -> ShardReader:
        columns = {c: self.meta.columns[c] for c in [*self.feature_cols, *self.label_cols]}
        if self.sample_weight_col:
            columns[self.sample_weight_col] = self.meta.columns[self.sample_weight_col]
        return ShardReader(
            self.store.filesystem,
            self.store.get_localized_path(path),
            columns,
            rank,
            size,
            batch_size,
            shuffle=shuffle,
            shuffle_buffer_size=self.shuffle_buffer_size,
            seed=self.seed,
            weight_col=self.sample_weight_col,
        )

    def train_reader(self, rank: int, size: int) -> ShardReader:
        return self._reader(self.meta.train_path, rank, size, self.batch_size, self.shuffle)

    def val_reader(self, rank: int, size: int) -> ShardReader | None:
        if not self.meta.val_path or not self.meta.val_rows:
            return None
        return self._reader(self.meta.val_path, rank, size, self.val_batch_size, False)

    def train_steps(self, reader: ShardReader) -> int:
        return self.train_steps_per_epoch or reader.steps_per_epoch

    def val_steps(self, reader: ShardReader) -> int:
        return self.validation_steps_per_epoch or reader.steps_per_epoch

    def batches(self, reader: ShardReader, epoch: int, steps: int) -> Iterator[Batch]:
        """``steps`` batches from epoch ``epoch``: a whole pass when ``steps`` is the reader's own
        count; fewer stop early; more go on into further passes (each shuffled anew)."""
        passes = (reader.epoch(epoch * 1_000_003 + i) for i in itertools.count())
        for batch in itertools.islice(itertools.chain.from_iterable(passes), steps):
            yield self.transformation_fn(batch) if self.transformation_fn is not None else batch

    def split(self, batch: Batch) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
        """(features, labels, weights) of a batch, in the params' column order."""
        return (
            [batch[c] for c in self.feature_cols],
            [batch[c] for c in self.label_cols],
            batch[WEIGHT_KEY],
        )


def data_spec(estimator: Any, meta: Any, store: Any) -> DataSpec:
    """The DataSpec of an Estimator's params."""
    get = estimator.getOrDefault
    batch_size = int(get("batch_size"))
    seed = get("random_seed")
    return DataSpec(
        meta=meta,
        store=store,
        feature_cols=list(get("feature_cols")),
        label_cols=list(get("label_cols")),
        sample_weight_col=get("sample_weight_col"),
        batch_size=batch_size,
        val_batch_size=int(get("val_batch_size") or batch_size),
        shuffle=bool(get("shuffle")),
        shuffle_buffer_size=get("shuffle_buffer_size"),
        seed=int(seed) if seed is not None else 0,
        train_steps_per_epoch=get("train_steps_per_epoch"),
        validation_steps_per_epoch=get("validation_steps_per_epoch"),
        transformation_fn=get("transformation_fn"),
    )
