"""The engine's fused batches on Gloo, 2 ranks in separate processes: reduced through the
multi-buffer allreduce (hvd_backend_ext_v1) where each tensor lies, over shared memory and over TCP,
and negotiated whole once their caller waits."""

from __future__ import annotations

import numpy as np
import pytest

import horovod

ELEMENTS = 230_000  # 0.88 MiB of float32: under the 1 MiB above which tensors are not fused


def _same_tensor_twice_in_a_large_group() -> list:
    import horovod.common as hvd

    hvd.init()
    shared = np.full(ELEMENTS, hvd.rank() + 1, np.float32)
    fillers = [np.full(ELEMENTS, 10 * (i + 1), np.float32) for i in range(5)]
    # More than one 4 MiB slot: the second use of `shared` is read after the first one's results
    # were written, unless the engine sees the overlap and copies the batch as a fusion buffer.
    group = [shared, *fillers, shared]
    for handle in hvd.grouped_allreduce_async(group, op=hvd.Sum, name="twice", inplace=True):
        hvd.synchronize(handle)
    averaged = hvd.grouped_allreduce([f.copy() for f in fillers], op=hvd.Average, name="average")
    hvd.shutdown()
    return [float(shared[0]), float(shared[-1]), [float(f[0]) for f in fillers], [float(a[7]) for a in averaged]]


@pytest.mark.parametrize("shared_memory", ["1", "0"])
def test_a_tensor_given_twice_in_one_fused_batch_is_reduced_once(shared_memory: str) -> None:
    env = {"HOROVOD_CPU_OPERATIONS": "gloo", "OMP_NUM_THREADS": "1", "HOROVOD_GLOO_SHARED_MEMORY": shared_memory}
    for shared_first, shared_last, fillers, averaged in horovod.run(
        _same_tensor_twice_in_a_large_group, np=2, env=env, start_timeout=120
    ):
        assert shared_first == shared_last == 3.0  # 1 + 2, not reduced a second time
        assert fillers == [20.0 * (i + 1) for i in range(5)]
        assert averaged == [20.0 * (i + 1) for i in range(5)]  # (20 + 20) / 2 from the doubled fillers


def _one_rank_gives_a_tensor_twice_in_an_average() -> list:
    import horovod.common as hvd

    hvd.init()
    fillers = [np.full(ELEMENTS, 10 * (i + 1), np.float32) for i in range(5)]
    if hvd.rank() == 0:  # the same tensor first and last; rank 1 gives two tensors there
        shared = np.full(ELEMENTS, 1, np.float32)
        ends = [shared, shared]
    else:
        ends = [np.full(ELEMENTS, 3, np.float32), np.full(ELEMENTS, 3, np.float32)]
    group = [ends[0], *fillers, ends[1]]
    for handle in hvd.grouped_allreduce_async(group, op=hvd.Average, name="uneven", inplace=True):
        hvd.synchronize(handle)
    hvd.shutdown()
    return [sorted({float(x) for x in ends[0]} | {float(x) for x in ends[1]}), [float(f.max()) for f in fillers]]


@pytest.mark.parametrize("shared_memory", ["1", "0"])
def test_a_tensor_given_twice_on_one_rank_only_is_averaged_like_the_others(shared_memory: str) -> None:
    # Only rank 0's batch has tensors sharing memory: every rank must still call the backend alike
    # (the scale included), and every result is (1 + 3) / 2 or a filler's own value.
    env = {"HOROVOD_CPU_OPERATIONS": "gloo", "OMP_NUM_THREADS": "1", "HOROVOD_GLOO_SHARED_MEMORY": shared_memory}
    results = horovod.run(_one_rank_gives_a_tensor_twice_in_an_average, np=2, env=env, start_timeout=120)
    assert results == [[[2.0], [10.0 * (i + 1) for i in range(5)]]] * 2, results


def _burst_beside_a_parked_thread(count: int) -> tuple[int, int]:
    import threading
    import time

    import horovod.common as hvd
    from horovod.common.testing.probes import engine_stats

    hvd.init()
    # Rank 0 has a thread blocked on an operation that rank 1 submits only after its burst: the
    # blocked thread must not make rank 0 negotiate its own burst piece by piece as it arrives.
    if hvd.rank() == 0:
        late = hvd.allreduce_async(np.ones(2, np.float32), name="late", op=hvd.Sum)
        parked = threading.Thread(target=hvd.synchronize, args=(late,))
        parked.start()
        while engine_stats()["blocked_callers"] == 0:  # until it waits in the engine
            time.sleep(0.01)

    def calls() -> int:
        return int(engine_stats()["backend_calls"]["allreduce"])

    before = calls()
    handles = [hvd.allreduce_async(np.full(16, i, np.float32), name=f"p{i}", op=hvd.Sum) for i in range(count)]
    for i, h in enumerate(handles):
        assert hvd.synchronize(h).tolist() == [i * hvd.size()] * 16
    after = calls()
    if hvd.rank() == 0:
        parked.join()
    else:
        hvd.allreduce(np.ones(2, np.float32), name="late", op=hvd.Sum)
    hvd.shutdown()
    return before, after


def test_a_burst_is_negotiated_whole_beside_a_thread_blocked_on_earlier_work() -> None:
    # An engine negotiates a burst once its caller waits, or one cycle time after the burst began:
    # the cycle time must outlast a submitting rank that the machine deschedules mid-burst (200 ms
    # did not, once, on two busy cores). It adds no wait here: every rank's caller waits at once.
    env = {"HOROVOD_CPU_OPERATIONS": "gloo", "OMP_NUM_THREADS": "1", "HOROVOD_CYCLE_TIME": "2000"}
    for before, after in horovod.run(_burst_beside_a_parked_thread, args=(50,), np=2, env=env, start_timeout=120):
        # Piece by piece would be 50 calls. Whole is 1; 2 when the peer was still submitting its part
        # as this rank's caller began to wait, and the round took what both had (seen once in CI
        # with the 2 s cycle, on two busy cores): what the test guards against is the 50.
        assert 1 <= after - before <= 2, (before, after)


def _fused_batch_beside_a_joined_rank() -> list:
    import horovod.common as hvd

    hvd.init()
    results = []
    if hvd.rank() == 0:
        # Rank 1 has joined: it contributes the identity of each op for every tensor of the batch
        # (neutral buffers in the multi-buffer allreduce), and an Average still divides by 2.
        group = [np.full(1000, 3.0, np.float32), np.arange(70_000, dtype=np.float32), np.full(5, -2.0, np.float32)]
        results.append([r.tolist()[:3] for r in hvd.grouped_allreduce(group, op=hvd.Sum, name="j.sum")])
        results.append([r.tolist()[:3] for r in hvd.grouped_allreduce(group, op=hvd.Max, name="j.max")])
        results.append([r.tolist()[:3] for r in hvd.grouped_allreduce(group, op=hvd.Average, name="j.avg")])
    last = hvd.join()
    hvd.shutdown()
    return [last, results]


@pytest.mark.parametrize("shared_memory", ["1", "0"])
def test_a_fused_batch_beside_a_joined_rank_counts_it_as_the_identity(shared_memory: str) -> None:
    env = {"HOROVOD_CPU_OPERATIONS": "gloo", "OMP_NUM_THREADS": "1", "HOROVOD_GLOO_SHARED_MEMORY": shared_memory}
    (last0, results), (last1, none) = horovod.run(_fused_batch_beside_a_joined_rank, np=2, env=env, start_timeout=120)
    assert last0 == last1 == 0 and none == []
    assert results == [
        [[3.0, 3.0, 3.0], [0.0, 1.0, 2.0], [-2.0, -2.0, -2.0]],  # sum with zeros
        [[3.0, 3.0, 3.0], [0.0, 1.0, 2.0], [-2.0, -2.0, -2.0]],  # max with the lowest float
        [[1.5, 1.5, 1.5], [0.0, 0.5, 1.0], [-1.0, -1.0, -1.0]],  # (x + 0) / 2
    ]
