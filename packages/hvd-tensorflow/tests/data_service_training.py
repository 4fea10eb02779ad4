"""The training job of test_data_service.py: reads the compute job's config and receives datasets
from its tf.data service in every processing mode, with and without a shared job, and round robin;
checks every element arrived as often as the layout says; then ends the compute job.

    horovodrun -np 2 python data_service_training.py CONFIG

Rank 0 prints ``checked <n> pipelines`` when all is well, and raises naming the pipeline otherwise.
"""

from __future__ import annotations

import collections
import contextlib
import sys

import tensorflow as tf

import horovod.tensorflow as hvd
from horovod.tensorflow.data import TfDataServiceConfig, tf_data_service

ELEMENTS, BATCH = 24, 4


def received(dataset: tf.data.Dataset, limit: int | None = None) -> list[int]:
    """The elements of each batch, after checking every batch is well formed: int64, increasing, at
    most BATCH of them (in distributed_epoch the workers take splits of the range before batching
    it, so a batch may span splits, or end short)."""
    elements = []
    for i, batch in enumerate(dataset):
        values = batch.numpy().tolist()
        assert batch.dtype == tf.int64 and 1 <= len(values) <= BATCH, (values, batch.dtype)
        assert values == sorted(set(values)) and values[0] >= 0 and values[-1] < ELEMENTS, values
        elements += values
        if limit is not None and i + 1 >= limit:
            break
    return elements


def pipeline(address: str, mode: str, reuse: bool, rank: int, size: int, name: str, round_robin: bool = False):
    source = tf.data.Dataset.range(ELEMENTS).batch(BATCH)
    if round_robin:
        source = source.repeat()
    return source.apply(
        tf.data.experimental.service.distribute(
            processing_mode=mode,
            service=address,
            job_name=name if reuse else None,
            consumer_index=rank if round_robin else None,
            num_consumers=size if round_robin else None,
        )
    )


def main(config_path: str) -> None:
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    config = TfDataServiceConfig.read(config_path, wait_for_file_creation=True, timeout=120)
    dispatchers, workers = config.dispatchers, config.workers_per_dispatcher
    checked = 0
    with contextlib.ExitStack() as stack:
        if config.dispatcher_side == "compute":
            # Horovod's spelling, through the compute job's dispatchers.
            whole = tf.data.Dataset.range(ELEMENTS).batch(BATCH).send_to_data_service(config, rank, size)
            mine = received(whole)
            assert sorted(mine) == list(range(ELEMENTS)), ("send_to_data_service", mine)
            checked += 1
        address = stack.enter_context(tf_data_service(config, rank))
        for mode in ("distributed_epoch", "parallel_epochs"):
            for reuse in (False, True):
                name = f"{mode}.{reuse}"
                mine = received(pipeline(address, mode, reuse, rank, size, name))
                everyone = hvd.allgather_object(mine, name=f"got.{name}")
                copies = workers if mode == "parallel_epochs" else 1  # a whole epoch per worker, or one in all
                counts = collections.Counter(x for got in everyone for x in got)
                if reuse and dispatchers == 1:  # one job, its elements split among the training ranks
                    want = dict.fromkeys(range(ELEMENTS), copies)
                else:  # each rank's own job (its own dispatcher, or no shared job name)
                    want = dict.fromkeys(range(ELEMENTS), copies * size)
                assert dict(counts) == want, (name, dict(counts))
                checked += 1
        if dispatchers == 1:  # round robin: the ranks take one shared job's batches in turn
            batches = received(pipeline(address, "distributed_epoch", True, rank, size, "rr", round_robin=True), 6)
            assert len(batches) >= 6, batches
            checked += 1
        hvd.barrier()
    if rank == 0:
        config.compute_client(verbose=0).shutdown()
        print(f"checked {checked} pipelines", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
