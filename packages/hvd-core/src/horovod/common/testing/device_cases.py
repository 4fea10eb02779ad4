"""Device tensors staged through a backend: the conformance suite's case on hvd-core's simulated
device (``HOROVOD_DEVICE=simulated``).

Each rank keeps its tensors in simulated device memory, written on a stream of its own after other
work, and submits every collective from that stream; the engine stages them through pinned host
memory and the backend under test, and the rank reads the results back on its stream after the
handles' completion events. Results are checked against what every rank can compute itself, and the
device must have seen no access unordered by an event.
"""

from __future__ import annotations

import numpy as np

import horovod.common as hvd
from horovod.common.testing.cases import _assert_close, contribution, np_dtype, ops_for, reference
from horovod.common.testing.device import DeviceTensors, simulated_device_races

#: What the suite sets for it: the simulated device, device tensors staged through the backend under
#: test (named by the caller), and random delays that shuffle the streams' work.
ENV = {"HOROVOD_DEVICE": "simulated", "HOROVOD_SIMULATED_DEVICE_DELAY_US": "50"}


def _reduced(t: DeviceTensors, dtype: str, n: int, rank: int) -> None:
    shape = (3, 4)
    for op in ops_for(dtype):
        inputs = [contribution(r, shape, dtype, small=op == hvd.Product) for r in range(n)]
        x = t.put(inputs[rank], busy_first=0.001)
        t.submit("allreduce", f"dev.ar.{dtype}.{op}", x, inputs[rank], op=op, inplace=True).wait()
        _assert_close(t.get(x, inputs[rank]), reference(op, inputs, dtype), dtype, f"allreduce {dtype} op={op}")
    if dtype == "bool":
        return
    # A fused batch, asynchronous, scaled.
    batch = [[contribution(r + k, (2 + k,), dtype) for r in range(n)] for k in range(4)]
    addresses = [t.put(inputs[rank], busy_first=0.001) for inputs in batch]
    handles = [
        t.submit("allreduce", f"dev.fused.{dtype}.{k}", a, inputs[rank], op=hvd.Sum, inplace=True, prescale=2.0)
        for k, (a, inputs) in enumerate(zip(addresses, batch, strict=True))
    ]
    for h in handles:
        h.wait()
    for k, (a, inputs) in enumerate(zip(addresses, batch, strict=True)):
        expected = reference(hvd.Sum, inputs, dtype, prescale=2.0)
        _assert_close(t.get(a, inputs[rank]), expected, dtype, f"fused allreduce {dtype} #{k}")
    # Reducescatter of an uneven first dimension.
    inputs = [contribution(r, (n + 1, 2), dtype) for r in range(n)]
    h = t.submit("reducescatter", f"dev.rs.{dtype}", t.put(inputs[rank]), inputs[rank], op=hvd.Sum)
    h.wait()
    rows = 2 if rank == 0 else 1
    start = 0 if rank == 0 else rank + 1
    like = np.empty((rows, 2), np_dtype(dtype))
    expected = reference(hvd.Sum, inputs, dtype)[start : start + rows]
    _assert_close(t.get(h.output_device_address, like), expected, dtype, f"reducescatter {dtype}")


def _moved(t: DeviceTensors, dtype: str, n: int, rank: int) -> None:
    inputs = [contribution(r, (r + 1, 3), dtype) for r in range(n)]
    h = t.submit("allgather", f"dev.ag.{dtype}", t.put(inputs[rank]), inputs[rank])
    h.wait()
    gathered = np.concatenate(inputs)
    _assert_close(t.get(h.output_device_address, np.empty_like(gathered)), gathered, dtype, f"allgather {dtype}")
    mine = contribution(rank + 7, (5,), dtype)
    x = t.put(mine)
    t.submit("broadcast", f"dev.bc.{dtype}", x, mine, root=n - 1, inplace=True).wait()
    _assert_close(t.get(x, mine), contribution(n - 1 + 7, (5,), dtype), dtype, f"broadcast {dtype}")
    splits = [(rank + j) % 2 + 1 for j in range(n)]
    block = contribution(rank, (sum(splits), 2), dtype)
    h = t.submit("alltoall", f"dev.a2a.{dtype}", t.put(block), block, splits=splits)
    h.wait()
    received = [(j + rank) % 2 + 1 for j in range(n)]  # member j sends me (j + me) % 2 + 1 rows
    assert list(h.received_splits) == received, (list(h.received_splits), received)
    pieces = []
    for j in range(n):
        theirs = contribution(j, (sum((j + i) % 2 + 1 for i in range(n)), 2), dtype)
        first = sum((j + i) % 2 + 1 for i in range(rank))
        pieces.append(theirs[first : first + received[j]])
    expected = np.concatenate(pieces)
    _assert_close(t.get(h.output_device_address, np.empty_like(expected)), expected, dtype, f"alltoall {dtype}")


def case_device_tensors(reduce_dtypes: tuple[str, ...], move_dtypes: tuple[str, ...]) -> None:
    """Every collective on device tensors: reductions of ``reduce_dtypes`` (every op, a fused
    asynchronous scaled batch, a reducescatter), data movement of ``move_dtypes``."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    t = DeviceTensors("simulated")
    try:
        for dtype in reduce_dtypes:
            _reduced(t, dtype, n, rank)
        for dtype in move_dtypes:
            _moved(t, dtype, n, rank)
    finally:
        t.close()
    races = simulated_device_races(clear=False)
    assert not races, races
