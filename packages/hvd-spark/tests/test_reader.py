"""ShardReader on Parquet files written with pyarrow (no Spark): shards, batches, shuffling, memory."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from horovod.spark.common.columns import ColumnSpec
from horovod.spark.common.reader import WEIGHT_KEY, ShardReader, shard_range, steps_per_epoch

FS = pafs.LocalFileSystem()

COLUMNS = {
    "id": ColumnSpec("id", "int64", ()),
    "vec": ColumnSpec("vec", "float64", (3,)),
    "fixed": ColumnSpec("fixed", "float32", (2,)),
    "label": ColumnSpec("label", "int32", ()),
}


def _table(ids: np.ndarray) -> pa.Table:
    """Rows whose every value follows from the row's id, so that a batch can be checked row by row."""
    vec = np.stack([ids * 1.0, ids + 0.5, -ids * 1.0], axis=1)
    fixed = np.stack([ids * 2.0, ids * 3.0], axis=1).astype(np.float32)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "vec": pa.array(list(vec), pa.list_(pa.float64())),  # as Spark writes array<double>
            "fixed": pa.FixedSizeListArray.from_arrays(pa.array(fixed.ravel()), 2),
            "label": pa.array((ids % 7).astype(np.int32)),
            "weight": pa.array((ids % 3 + 0.5).astype(np.float32)),
            "unused": pa.array([f"row {i}" for i in ids]),  # never read
        }
    )


def write_dataset(path: Path, file_rows: list[int], row_group_size: int) -> int:
    """Parquet files of ``file_rows`` rows each, ids counting up across files, plus the files Spark
    and prepare_data leave beside the parts, which the reader must skip."""
    path.mkdir(parents=True)
    start = 0
    for i, rows in enumerate(file_rows):
        pq.write_table(
            _table(np.arange(start, start + rows)), path / f"part-{i:05d}.parquet", row_group_size=row_group_size
        )
        (path / f".part-{i:05d}.parquet.crc").write_bytes(b"crc")
        start += rows
    (path / "_SUCCESS").write_bytes(b"")
    (path / "_hvd_meta.json").write_text("{}")
    return start


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int]:
    """1003 rows in three files (one empty) of row groups of 97 rows."""
    path = tmp_path_factory.mktemp("reader") / "data"
    return str(path), write_dataset(path, [400, 350, 0, 253], 97)


def reader(path: str, rank: int, size: int, batch_size: int, **kwargs: object) -> ShardReader:
    return ShardReader(FS, path, COLUMNS, rank, size, batch_size, weight_col="weight", **kwargs)  # type: ignore[arg-type]


def real_rows(batches: list[dict[str, np.ndarray]]) -> np.ndarray:
    """The ids of the batches' rows, padding (weight 0) left out."""
    return np.concatenate([b["id"][b[WEIGHT_KEY] > 0] for b in batches])


def check_values(batch: dict[str, np.ndarray]) -> None:
    ids = batch["id"]
    rows = len(ids)
    assert set(batch) == {*COLUMNS, WEIGHT_KEY}
    for name, spec in COLUMNS.items():
        assert batch[name].shape == (rows, *spec.shape) and batch[name].dtype == np.dtype(spec.dtype), name
    assert batch[WEIGHT_KEY].shape == (rows,) and batch[WEIGHT_KEY].dtype == np.float32
    np.testing.assert_array_equal(batch["vec"], np.stack([ids * 1.0, ids + 0.5, -ids * 1.0], axis=1))
    np.testing.assert_array_equal(batch["fixed"], np.stack([ids * 2.0, ids * 3.0], axis=1).astype(np.float32))
    np.testing.assert_array_equal(batch["label"], ids % 7)
    real = batch[WEIGHT_KEY] > 0
    np.testing.assert_array_equal(batch[WEIGHT_KEY][real], (ids[real] % 3 + 0.5).astype(np.float32))


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("batch_size", [1, 7, 32, 300, 2000])
@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_row_once_and_same_steps(dataset: tuple[str, int], size: int, batch_size: int, shuffle: bool) -> None:
    path, rows = dataset
    seen: Counter[int] = Counter()
    for rank in range(size):
        shard = reader(path, rank, size, batch_size, shuffle=shuffle)
        batches = list(shard.epoch(0))
        assert len(batches) == shard.steps_per_epoch == steps_per_epoch(rows, batch_size, size)
        assert shard.steps_per_epoch == math.ceil(math.ceil(rows / size) / batch_size)
        for batch in batches[:-1]:
            assert len(batch["id"]) == batch_size
        for batch in batches:
            check_values(batch)
        ids = real_rows(batches)
        start, stop = shard_range(rows, rank, size)
        if shuffle:
            assert sorted(ids) == list(range(start, stop))
        else:
            assert list(ids) == list(range(start, stop))  # file order
        seen.update(ids.tolist())
    assert seen == Counter(range(rows))


def test_padding_row_when_a_shard_runs_out_early(tmp_path: Path) -> None:
    # size=3, batch 8: shards of 33, 32 and 32 rows; 5 steps for rank 0, 4 full batches for the others.
    size, batch_size = 3, 8
    rows = write_dataset(tmp_path / "data", [50, 47], 10)
    assert shard_range(rows, 1, size) == (33, 65)
    for rank in range(size):
        shard = reader(str(tmp_path / "data"), rank, size, batch_size, seed=3)
        batches = list(shard.epoch(2))
        assert len(batches) == shard.steps_per_epoch == 5
        start, stop = shard_range(rows, rank, size)
        if rank == 0:
            assert len(batches[-1]["id"]) == 1 and batches[-1][WEIGHT_KEY][0] > 0
        else:
            pad = batches[-1]
            assert len(pad["id"]) == 1 and pad[WEIGHT_KEY][0] == 0.0
            assert start <= pad["id"][0] < stop  # a copy of one of its own rows
            check_values(pad)
        assert sorted(real_rows(batches)) == list(range(start, stop))


def test_shuffle_changes_order_not_rows_and_is_deterministic(dataset: tuple[str, int]) -> None:
    path, _ = dataset
    shard = reader(path, 1, 2, 16, seed=5)
    first, again, second = (real_rows(list(shard.epoch(e))) for e in (0, 0, 1))
    np.testing.assert_array_equal(first, again)  # epoch() can be called again: a fresh, equal pass
    assert list(first) != list(second)
    assert sorted(first) == sorted(second)
    other_reader = real_rows(list(reader(path, 1, 2, 16, seed=5).epoch(1)))
    np.testing.assert_array_equal(second, other_reader)
    other_seed = real_rows(list(reader(path, 1, 2, 16, seed=6).epoch(1)))
    assert list(other_seed) != list(second)
    # Rows move across row groups: the shuffled order is not piece after piece in file order.
    assert list(first) != sorted(first)


def test_memory_stays_within_the_bound(tmp_path: Path) -> None:
    rows = write_dataset(tmp_path / "big", [12000, 8000], 1000)
    shard = reader(str(tmp_path / "big"), 0, 1, 32, shuffle_buffer_size=256)
    assert shard.read_batch_rows == 64
    count = sum(len(batch["id"]) for batch in shard.epoch(0))
    assert count == rows
    bound = 256 + shard.read_batch_rows + 32
    assert 256 < shard.max_rows_held <= bound < rows // 50


def test_default_buffer_is_bounded_by_the_shard(dataset: tuple[str, int]) -> None:
    path, _ = dataset
    assert reader(path, 0, 4, 8).shuffle_buffer_size == 80
    assert reader(path, 0, 4, 64).shuffle_buffer_size == 251  # the whole shard
    assert reader(path, 0, 4, 64, shuffle=False).shuffle_buffer_size == 0


def group_ranges(file_rows: list[int], row_group_size: int) -> list[range]:
    """The global row range of every row group, in file order."""
    ranges, start = [], 0
    for rows in file_rows:
        for lo in range(0, rows, row_group_size):
            ranges.append(range(start + lo, start + min(lo + row_group_size, rows)))
        start += rows
    return ranges


def test_a_rank_reads_only_its_row_groups(dataset: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    path, rows = dataset
    calls: list[list[int]] = []
    read_ids: list[int] = []  # every row pyarrow handed over, before the reader drops other ranks' rows
    iter_batches = pq.ParquetFile.iter_batches

    def recording(self: pq.ParquetFile, *args: object, **kwargs: object) -> Iterator[pa.RecordBatch]:
        calls.append(list(kwargs["row_groups"]))  # type: ignore[call-overload]
        for batch in iter_batches(self, *args, **kwargs):  # type: ignore[arg-type]
            read_ids.extend(batch.column("id").to_pylist())
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recording)
    groups = group_ranges([400, 350, 0, 253], 97)
    for rank in range(4):
        calls.clear()
        read_ids.clear()
        list(reader(path, rank, 4, 16).epoch(0))
        start, stop = shard_range(rows, rank, 4)
        overlapping = [g for g in groups if g.start < stop and start < g.stop]
        assert all(len(call) == 1 for call in calls)  # one row group at a time
        assert len(calls) == len(overlapping) <= 5 < len(groups)  # 251 rows over groups of 97 or fewer
        allowed = {i for g in overlapping for i in g}
        assert set(range(start, stop)) <= set(read_ids) <= allowed
        assert len(read_ids) == len(set(read_ids))  # nothing read twice


def test_errors(dataset: tuple[str, int], tmp_path: Path) -> None:
    path, _ = dataset
    with pytest.raises(ValueError, match="fewer than the 2000 ranks"):
        reader(path, 0, 2000, 8)
    with pytest.raises(ValueError, match="'nope' is not in the Parquet files"):
        ShardReader(FS, path, {"nope": ColumnSpec("nope", "float64", ())}, 0, 1, 8)
    with pytest.raises(ValueError, match="no Parquet files"):
        reader(str(tmp_path), 0, 1, 8)
    with pytest.raises(ValueError, match="batch_size"):
        reader(path, 0, 1, 0)
    with pytest.raises(ValueError, match="rank 2 is not in"):
        reader(path, 2, 2, 8)
    wrong_shape = {**COLUMNS, "vec": ColumnSpec("vec", "float64", (4,))}
    with pytest.raises(ValueError, match=r"'vec'.*shape"):
        next(ShardReader(FS, path, wrong_shape, 0, 1, 8).epoch(0))


def test_weights_default_to_one(dataset: tuple[str, int]) -> None:
    path, _ = dataset
    batch = next(ShardReader(FS, path, {"label": COLUMNS["label"]}, 0, 2, 10).epoch(0))
    assert set(batch) == {"label", WEIGHT_KEY}
    np.testing.assert_array_equal(batch[WEIGHT_KEY], np.ones(10, np.float32))


def test_reader_does_not_import_pyspark() -> None:
    code = (
        "import sys; sys.modules['pyspark'] = None\n"  # any import of pyspark now fails
        "import pickle, horovod.spark.common.reader\n"
        "from horovod.spark.common.data import ColumnSpec, DatasetMeta\n"
        "meta = DatasetMeta('file:///t', None, 3, 0, {'x': ColumnSpec('x', 'float64', (2,))}, 'abc')\n"
        "assert pickle.loads(pickle.dumps(meta)) == meta\n"  # the ranks unpickle it without Spark
        "assert meta.steps_per_epoch(2, 2) == 1\n"
        "assert not any(m.startswith('pyspark.') for m in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
