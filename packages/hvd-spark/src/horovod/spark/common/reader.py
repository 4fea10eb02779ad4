"""Each rank's view of a prepared dataset: its shard of the Parquet files, streamed in batches.

Rank side only: pyarrow and numpy, no Spark. The files are those :func:`~horovod.spark.common.data.
prepare_data` wrote (or any Parquet dataset with the same columns). Every rank lists the same files
in the same order and reads only their footers to learn the row counts, so all ranks agree on the
global row order without talking to each other. Rank ``r`` of ``size`` owns one contiguous range of
that order and reads only the row groups that overlap it.

An epoch yields the same number of batches on every rank (each training step is a collective, so a
rank with fewer steps would leave the others waiting); see :meth:`ShardReader.epoch`.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from horovod.spark.common.columns import ColumnSpec

#: The key of the per-row weights in every batch.
WEIGHT_KEY = "__weight__"

#: Bounds of the rows asked of pyarrow at once by default (the batch size, within them).
_MIN_DEFAULT_READ_ROWS = 64
_MAX_DEFAULT_READ_ROWS = 1024


@dataclass(frozen=True)
class ParquetPart:
    """One file of a dataset: its path, its metadata, and the row count of each row group."""

    path: str
    metadata: pq.FileMetaData
    row_group_rows: tuple[int, ...]

    @property
    def num_rows(self) -> int:
        return sum(self.row_group_rows)


@dataclass(frozen=True)
class Piece:
    """The rows ``[start, stop)`` of one row group (offsets inside the row group)."""

    part: ParquetPart
    row_group: int
    start: int
    stop: int


def steps_per_epoch(rows: int, batch_size: int, num_proc: int) -> int:
    """Batches per epoch on every rank: those of the largest shard, ``ceil(rows / num_proc)`` rows."""
    return math.ceil(math.ceil(rows / num_proc) / batch_size)


def is_data_file(path: str) -> bool:
    """Parquet part files only: Spark's ``_SUCCESS``, ``.crc`` checksums and our metadata are not data."""
    name = posixpath.basename(path)
    return name.endswith(".parquet") and not name.startswith(("_", "."))


def list_parts(filesystem: pafs.FileSystem, path: str) -> list[ParquetPart]:
    """The dataset's Parquet files under ``path`` in sorted order, with their footers (no data read)."""
    infos = filesystem.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    files = sorted(info.path for info in infos if info.type == pafs.FileType.File and is_data_file(info.path))
    if not files:
        raise ValueError(f"no Parquet files under {path!r}: was the dataset written there?")
    parts = []
    for file in files:
        with filesystem.open_input_file(file) as source:
            metadata = pq.read_metadata(source)
        rows = tuple(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups))
        parts.append(ParquetPart(file, metadata, rows))
    return parts


def dataset_rows(filesystem: pafs.FileSystem, path: str) -> int:
    """Total rows of the dataset under ``path``, from the footers alone."""
    return sum(part.num_rows for part in list_parts(filesystem, path))


def shard_range(num_rows: int, rank: int, size: int) -> tuple[int, int]:
    """Rank ``rank``'s global rows ``[start, stop)``: ``num_rows // size`` each, one more for the
    first ``num_rows % size`` ranks, so that shard lengths differ by at most one row."""
    base, extra = divmod(num_rows, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def shard_pieces(parts: list[ParquetPart], start: int, stop: int) -> list[Piece]:
    """The row-group slices covering global rows ``[start, stop)``, in file order."""
    pieces = []
    offset = 0  # global index of the current row group's first row
    for part in parts:
        for group, rows in enumerate(part.row_group_rows):
            lo, hi = max(start, offset), min(stop, offset + rows)
            if lo < hi:
                pieces.append(Piece(part, group, lo - offset, hi - offset))
            offset += rows
    return pieces


def _to_numpy(array: pa.Array | pa.ChunkedArray, name: str, spec: ColumnSpec) -> np.ndarray:
    """One column of a record batch as ``(rows, *spec.shape)`` in the spec's dtype."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    rows = len(array)
    if array.null_count:
        raise ValueError(f"column {name!r} has {array.null_count} null values; the models cannot take nulls")
    values = array
    # A vector column is list<...> (Spark) or fixed_size_list<...>; flatten() honours slicing.
    while (
        pa.types.is_list(values.type) or pa.types.is_large_list(values.type) or pa.types.is_fixed_size_list(values.type)
    ):
        values = values.flatten()
        if values.null_count:
            raise ValueError(f"column {name!r} has null elements inside its arrays")
    flat: np.ndarray = values.to_numpy(zero_copy_only=False)
    expected = rows * math.prod(spec.shape)
    if flat.size != expected:
        raise ValueError(
            f"column {name!r}: {flat.size} values in {rows} rows do not fit the shape {spec.shape} of each row"
        )
    return flat.astype(spec.dtype, copy=False).reshape((rows, *spec.shape))


class _RowBuffer:
    """Rows held between reading and batching, in preallocated column arrays.

    Rows taken at random are refilled from the buffer's tail, so that taking ``k`` rows costs O(k)
    copies instead of shifting the whole buffer.
    """

    def __init__(self, specs: Mapping[str, ColumnSpec], capacity: int) -> None:
        self._arrays = {name: np.empty((capacity, *spec.shape), dtype=spec.dtype) for name, spec in specs.items()}
        self.size = 0

    def append(self, rows: Mapping[str, np.ndarray], count: int) -> None:
        for name, array in self._arrays.items():
            array[self.size : self.size + count] = rows[name]
        self.size += count

    def take_first(self, count: int) -> dict[str, np.ndarray]:
        out = {}
        for name, array in self._arrays.items():
            out[name] = array[:count].copy()
            # The rest moves to the front; without shuffling it is under one batch plus one read.
            array[: self.size - count] = array[count : self.size]
        self.size -= count
        return out

    def take_random(self, count: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        taken = rng.choice(self.size, size=count, replace=False)
        tail_start = self.size - count
        holes = taken[taken < tail_start]
        # The tail rows that were not taken fill the holes the taken rows left before the tail.
        tail_kept = np.setdiff1d(np.arange(tail_start, self.size), taken, assume_unique=True)
        out = {}
        for name, array in self._arrays.items():
            out[name] = array[taken]
            array[holes] = array[tail_kept]
        self.size = tail_start
        return out


class ShardReader:
    """Rank ``rank``'s shard of the Parquet dataset under ``path``, read in batches of ``batch_size``.

    ``columns`` names the columns to yield with their per-row dtype and shape. ``weight_col`` names
    the sample-weight column (read even when not in ``columns``); every batch carries the weights
    under ``"__weight__"`` (float32, 1.0 without ``weight_col``).

    With ``shuffle``, each epoch visits the shard's row-group pieces in a random order and passes the
    rows through a buffer of ``shuffle_buffer_size`` rows (default: ten batches, at most the shard)
    from which random rows are emitted; the order is a function of ``(seed, epoch, rank)``.

    Memory is bounded whatever the dataset's size: at most ``shuffle_buffer_size + read_batch_rows +
    batch_size`` rows are held at once (``read_batch_rows``: rows asked of pyarrow at a time, by
    default the batch size, within [64, 1024]). :attr:`max_rows_held` records the most rows held so far.
    """

    def __init__(
        self,
        filesystem: pafs.FileSystem,
        path: str,
        columns: Mapping[str, ColumnSpec],
        rank: int,
        size: int,
        batch_size: int,
        *,
        shuffle: bool = True,
        shuffle_buffer_size: int | None = None,
        seed: int = 0,
        weight_col: str | None = None,
        read_batch_rows: int | None = None,
    ) -> None:
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} is not in [0, {size})")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        if not columns:
            raise ValueError("no columns to read")
        self.filesystem = filesystem
        self.path = path
        self.rank, self.size, self.batch_size = rank, size, batch_size
        self.shuffle, self.seed = shuffle, seed
        self.columns = dict(columns)
        self.weight_col = weight_col
        self._parts = list_parts(filesystem, path)
        self._check_schema(self._parts[0])
        self.num_rows = sum(part.num_rows for part in self._parts)
        if self.num_rows < size:
            raise ValueError(
                f"the dataset under {path!r} has {self.num_rows} rows, fewer than the {size} ranks: "
                "every rank needs at least one row"
            )
        self.shard_start, self.shard_stop = shard_range(self.num_rows, rank, size)
        self._pieces = shard_pieces(self._parts, self.shard_start, self.shard_stop)
        if shuffle_buffer_size is None:
            shuffle_buffer_size = 10 * batch_size
        if shuffle_buffer_size < 0:
            raise ValueError(f"shuffle_buffer_size must not be negative, not {shuffle_buffer_size}")
        # A buffer as large as the shard already shuffles it completely.
        self.shuffle_buffer_size = min(shuffle_buffer_size, self.shard_rows) if shuffle else 0
        if read_batch_rows is not None and read_batch_rows < 1:
            raise ValueError(f"read_batch_rows must be at least 1, not {read_batch_rows}")
        # Small reads cost a call each; large ones hold more rows: the batch size, within bounds.
        self.read_batch_rows = read_batch_rows or min(max(batch_size, _MIN_DEFAULT_READ_ROWS), _MAX_DEFAULT_READ_ROWS)
        #: The most rows this reader held at any moment (buffer, batch being cut, padding row).
        self.max_rows_held = 0

    @property
    def shard_rows(self) -> int:
        return self.shard_stop - self.shard_start

    @property
    def steps_per_epoch(self) -> int:
        """Batches per epoch, the same on every rank: enough for the largest shard."""
        return steps_per_epoch(self.num_rows, self.batch_size, self.size)

    @property
    def row_groups(self) -> list[tuple[str, int]]:
        """The (file, row group) pairs this rank reads, in file order."""
        return [(piece.part.path, piece.row_group) for piece in self._pieces]

    def _check_schema(self, part: ParquetPart) -> None:
        names = part.metadata.schema.to_arrow_schema().names
        for name in self._read_columns():
            if name not in names:
                raise ValueError(f"column {name!r} is not in the Parquet files under {self.path!r}; they hold {names}")

    def _read_columns(self) -> list[str]:
        names = list(self.columns)
        if self.weight_col is not None and self.weight_col not in self.columns:
            names.append(self.weight_col)
        return names

    def _specs(self) -> dict[str, ColumnSpec]:
        """What the buffer holds: the yielded columns and the weights."""
        return {**self.columns, WEIGHT_KEY: ColumnSpec(WEIGHT_KEY, "float32", ())}

    def _convert(self, batch: pa.RecordBatch) -> dict[str, np.ndarray]:
        rows = {name: _to_numpy(batch.column(name), name, spec) for name, spec in self.columns.items()}
        if self.weight_col is None:
            rows[WEIGHT_KEY] = np.ones(batch.num_rows, dtype=np.float32)
        else:
            weight = ColumnSpec(self.weight_col, "float32", ())
            rows[WEIGHT_KEY] = _to_numpy(batch.column(self.weight_col), self.weight_col, weight)
        return rows

    def _read_piece(self, piece: Piece) -> Iterator[pa.RecordBatch]:
        """The piece's rows, at most ``read_batch_rows`` at a time; rows of other ranks are dropped."""
        with self.filesystem.open_input_file(piece.part.path) as source:
            parquet = pq.ParquetFile(source, metadata=piece.part.metadata)
            offset = 0  # of the next batch inside the row group
            batches = parquet.iter_batches(
                batch_size=self.read_batch_rows, row_groups=[piece.row_group], columns=self._read_columns()
            )
            for batch in batches:
                lo, hi = max(piece.start - offset, 0), min(piece.stop - offset, batch.num_rows)
                offset += batch.num_rows
                if lo < hi:
                    yield batch.slice(lo, hi - lo)
                if offset >= piece.stop:
                    break

    def _note_held(self, rows: int) -> None:
        self.max_rows_held = max(self.max_rows_held, rows)

    def epoch(self, epoch: int = 0) -> Iterator[dict[str, np.ndarray]]:
        """One pass over the shard: exactly :attr:`steps_per_epoch` batches, each a dict of column name
        to array ``(rows, *shape)``, plus ``"__weight__"``; every shard row appears once.

        A shard one row shorter than the largest, with a length that is a multiple of the batch size,
        runs out one step early. It then yields a last batch of one padding row, a copy of a row it
        read, with weight 0.0: every rank must run the same number of steps, because each step's
        gradient allreduce is a collective that would wait forever for a missing rank, and a zero
        weight makes the padding row add nothing to the loss.
        """
        rng = np.random.default_rng((self.seed, epoch, self.rank))
        pieces = list(self._pieces)
        if self.shuffle:
            pieces = [pieces[i] for i in rng.permutation(len(pieces))]
        buffer = _RowBuffer(self._specs(), self.shuffle_buffer_size + self.read_batch_rows + self.batch_size)
        keep = self.shuffle_buffer_size + self.batch_size  # rows the buffer keeps before emitting
        steps = 0
        last: dict[str, np.ndarray] | None = None  # one emitted row, for padding
        for piece in pieces:
            for batch in self._read_piece(piece):
                buffer.append(self._convert(batch), batch.num_rows)
                self._note_held(buffer.size + (last is not None))
                while buffer.size >= keep:
                    out = self._take(buffer, self.batch_size, rng)
                    last = {name: array[-1:].copy() for name, array in out.items()}
                    steps += 1
                    yield out
        while buffer.size:
            out = self._take(buffer, min(self.batch_size, buffer.size), rng)
            last = {name: array[-1:].copy() for name, array in out.items()}
            steps += 1
            yield out
        if steps < self.steps_per_epoch:
            if last is None or steps != self.steps_per_epoch - 1:  # shards differ by at most one row
                raise RuntimeError(f"rank {self.rank} ran {steps} of {self.steps_per_epoch} steps")
            last[WEIGHT_KEY][:] = 0.0
            yield last

    def _take(self, buffer: _RowBuffer, count: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return buffer.take_random(count, rng) if self.shuffle else buffer.take_first(count)
