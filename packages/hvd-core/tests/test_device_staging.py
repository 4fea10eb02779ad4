"""Device tensors through a host-memory backend, on the simulated device (HOROVOD_DEVICE=simulated),
or on a real GPU with HVD_TEST_DEVICE=cuda (./dev gpu-check).

Each rank (a thread; the in-memory backend) keeps its tensors in simulated device memory, which
host code cannot read, and fills them on a stream of its own that is kept busy first: the engine
must wait for that stream's ready event before staging the data, and the caller's stream must wait
for the engine's completion event before reading the result. The simulated device records any
access not ordered by an event as a race, whatever the timing; every test checks that none was.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common import _core, dtypes, state
from horovod.common.testing import device as testing_device
from horovod.common.testing import run_cluster

DEVICE_KIND = os.environ.get("HVD_TEST_DEVICE", "simulated")
# Staged through the cluster's CPU backend even where a GPU backend is installed (./dev gpu-check
# installs hvd-backend-nccl beside these tests).
DEVICE_ENV = {
    "HOROVOD_DEVICE": DEVICE_KIND,
    "HOROVOD_SIMULATED_DEVICE_DELAY_US": "200",
    "HOROVOD_GPU_OPERATIONS": "inmemory",
}
simulated_only = pytest.mark.skipif(DEVICE_KIND != "simulated", reason="the simulated device's race report")

DTYPES = {
    "uint8": (np.uint8, _core.DTYPE_UINT8),
    "int8": (np.int8, _core.DTYPE_INT8),
    "int16": (np.int16, _core.DTYPE_INT16),
    "int32": (np.int32, _core.DTYPE_INT32),
    "int64": (np.int64, _core.DTYPE_INT64),
    "float16": (np.float16, _core.DTYPE_FLOAT16),
    "float32": (np.float32, _core.DTYPE_FLOAT32),
    "float64": (np.float64, _core.DTYPE_FLOAT64),
}


@pytest.fixture(autouse=True)
def no_races():
    if DEVICE_KIND != "simulated":
        yield
        return
    _core.simulated_device_clear_races()
    yield
    races = _core.simulated_device_state()["races"]
    _core.simulated_device_clear_races()
    assert not races, races


def DeviceTensors(device_id: int = 0) -> testing_device.DeviceTensors:
    return testing_device.DeviceTensors(DEVICE_KIND, device_id)


def enqueue(
    tensors: testing_device.DeviceTensors, op_type: int, name: str, address: int, array: np.ndarray, dtype: int, **kw
):
    assert dtypes.code_of(array.dtype) == dtype
    return tensors.submit(op_type, name, address, array, **kw)


@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "separate-output"])
def test_allreduce_of_device_tensors(dtype_name: str, inplace: bool) -> None:
    np_dtype, code = DTYPES[dtype_name]

    def case() -> bool:
        hvd.init()
        t = DeviceTensors()
        try:
            x = (np.arange(12) % 5 + hvd.rank()).astype(np_dtype).reshape(3, 4)
            src = t.put(x)
            out = src if inplace else t.empty(x.nbytes)
            output = None if inplace else (out, x.nbytes)
            h = enqueue(t, _core.OP_ALLREDUCE, "grad", src, x, code, op=hvd.Sum, inplace=inplace, output=output)
            h.wait()
            expected = sum((np.arange(12) % 5 + r).astype(np_dtype) for r in range(hvd.size())).astype(np_dtype)
            np.testing.assert_array_equal(t.get(out, x).ravel(), expected)
            return True
        finally:
            t.close()

    assert run_cluster(case, 2, env=DEVICE_ENV) == [True, True]


def test_fused_async_allreduces_with_average_and_scaling() -> None:
    def case() -> bool:
        hvd.init()
        t = DeviceTensors()
        try:
            xs = [np.full((5 + k,), float(hvd.rank() + k), np.float32) for k in range(6)]
            srcs = [t.put(x, busy_first=0.005) for x in xs]
            handles = [
                enqueue(
                    t,
                    _core.OP_ALLREDUCE,
                    f"fused.{k}",
                    s,
                    x,
                    _core.DTYPE_FLOAT32,
                    op=0,
                    inplace=True,
                    prescale=2.0,
                    postscale=0.5,
                )
                for k, (s, x) in enumerate(zip(srcs, xs, strict=True))
            ]
            for h in handles:
                h.wait()
            for k, (s, x) in enumerate(zip(srcs, xs, strict=True)):
                mean = np.mean([float(r + k) for r in range(hvd.size())])
                np.testing.assert_allclose(t.get(s, x), np.full_like(x, mean))
            return True
        finally:
            t.close()

    assert run_cluster(case, 3, env=DEVICE_ENV) == [True] * 3


def test_repeated_operations_hit_the_cache_and_never_travel_inline() -> None:
    """From the second step on, these are response-cache hits, whose small host tensors would travel
    with negotiation (inline, or sent ahead): device tensors must not, their data being on the device."""

    def case() -> int:
        hvd.init()
        me = hvd.rank()
        t = DeviceTensors()
        try:
            for step in range(4):
                w = np.full((8,), float(me + step), np.float32)
                ws = t.put(w, busy_first=0.002)
                enqueue(t, _core.OP_ALLREDUCE, "w", ws, w, _core.DTYPE_FLOAT32, op=hvd.Sum, inplace=True).wait()
                expected = sum(float(r + step) for r in range(hvd.size()))
                np.testing.assert_array_equal(t.get(ws, w), np.full_like(w, expected))
                b = np.full((16,), me * 10 + step, np.int32)
                bs = t.put(b, busy_first=0.002)
                enqueue(t, _core.OP_BROADCAST, "b", bs, b, _core.DTYPE_INT32, root=0, inplace=True).wait()
                np.testing.assert_array_equal(t.get(bs, b), np.full_like(b, step))
                g = np.full((1, 2), me + step, np.int64)
                h = enqueue(t, _core.OP_ALLGATHER, "g", t.put(g, busy_first=0.002), g, _core.DTYPE_INT64)
                h.wait()
                got = t.get(h.output_device_address, np.empty((hvd.size(), 2), np.int64))
                np.testing.assert_array_equal(got[:, 0], [r + step for r in range(hvd.size())])
            stats = state.context().engine.stats()
            inline = stats["inline_reductions"] + stats["inline_broadcasts"] + stats["inline_allgathers"]
            assert inline == 0 and stats["eager_sends"] == 0, stats
            return int(stats["cache_hits"])
        finally:
            t.close()

    assert all(hits > 0 for hits in run_cluster(case, 2, env=DEVICE_ENV))


def test_allgather_result_lands_on_the_device() -> None:
    def case() -> bool:
        hvd.init()
        t = DeviceTensors()
        try:
            rows = hvd.rank() + 1
            x = np.full((rows, 3), hvd.rank(), np.int32)
            h = enqueue(t, _core.OP_ALLGATHER, "gathered", t.put(x), x, _core.DTYPE_INT32)
            h.wait()
            assert h.output(raw=False) is not None
            address = h.output_device_address
            assert address is not None
            total = sum(r + 1 for r in range(hvd.size()))
            like = np.empty((total, 3), np.int32)
            got = t.get(address, like)
            expected = np.concatenate([np.full((r + 1, 3), r, np.int32) for r in range(hvd.size())])
            np.testing.assert_array_equal(got, expected)
            assert list(h.output_shape) == [total, 3]
            return True
        finally:
            t.close()

    assert run_cluster(case, 3, env=DEVICE_ENV) == [True] * 3


def test_broadcast_alltoall_and_reducescatter_on_the_device() -> None:
    def case() -> bool:
        hvd.init()
        n, me = hvd.size(), hvd.rank()
        t = DeviceTensors()
        try:
            b = np.full((4,), 10.0 * (me + 1), np.float64)
            bs = t.put(b)
            enqueue(t, _core.OP_BROADCAST, "bcast", bs, b, _core.DTYPE_FLOAT64, root=1, inplace=True).wait()
            np.testing.assert_array_equal(t.get(bs, b), np.full((4,), 20.0))

            a = np.arange(2 * n, dtype=np.int64) + 100 * me  # two rows for each member
            h = enqueue(t, _core.OP_ALLTOALL, "a2a", t.put(a), a, _core.DTYPE_INT64)
            h.wait()
            got = t.get(h.output_device_address, np.empty((2 * n,), np.int64))
            expected = np.concatenate([np.arange(2 * me, 2 * me + 2) + 100 * r for r in range(n)])
            np.testing.assert_array_equal(got, expected)

            r = np.arange(2 * n * 3, dtype=np.float32).reshape(2 * n, 3) * (me + 1)
            h = enqueue(t, _core.OP_REDUCESCATTER, "rs", t.put(r), r, _core.DTYPE_FLOAT32, op=1)
            h.wait()
            total = np.arange(2 * n * 3, dtype=np.float32).reshape(2 * n, 3) * sum(k + 1 for k in range(n))
            got = t.get(h.output_device_address, np.empty((2, 3), np.float32))
            np.testing.assert_array_equal(got, total[2 * me : 2 * me + 2])
            return True
        finally:
            t.close()

    assert run_cluster(case, 2, env=DEVICE_ENV) == [True, True]


@simulated_only
def test_a_cpu_only_engine_names_the_missing_device() -> None:
    def case() -> str:
        hvd.init()
        x = np.zeros(4, np.float32)
        try:
            state.context().engine.enqueue(
                _core.OP_ALLREDUCE,
                "on.gpu",
                (1 << 20, x.nbytes),
                _core.DTYPE_FLOAT32,
                [4],
                device_kind=_core.DEVICE_CUDA,
                inplace=True,
            )
        except ValueError as e:
            return str(e)
        return "accepted"

    # Without HOROVOD_DEVICE=simulated, the CUDA device is asked for; this machine has no GPU driver.
    for message in run_cluster(case, 2, env={"HOROVOD_DEVICE": "cuda"}):
        assert "tensor 'on.gpu'" in message and "CUDA device" in message, message


@simulated_only
def test_reading_a_result_without_the_handles_stream_wait_is_caught() -> None:
    """The handle's wait() orders the caller's stream after the engine's copies back; a caller that
    only polls for completion and reads at once races them. The simulated device finds it every
    time, whatever the timing."""

    def case() -> str:
        hvd.init()
        t = DeviceTensors()
        try:
            x = np.ones(256, np.float32)
            src = t.put(x, busy_first=0.0)
            h = enqueue(t, _core.OP_ALLREDUCE, "unordered", src, x, _core.DTYPE_FLOAT32, op=hvd.Sum, inplace=True)
            while not h.poll():
                pass
            try:
                # On the caller's stream, which never waited for the completion event: this read and
                # the engine's copy back race, and whichever runs second finds it; every device call
                # after that fails with it.
                t.get(src, x)
                h.wait()
                t.device.synchronize(t.stream)  # through the completion event: the copy back has run
            except hvd.HorovodInternalError as e:
                return str(e)
            return "no race seen"
        finally:
            t.close(synchronize=False)

    messages = run_cluster(case, 2, env=DEVICE_ENV)
    races = _core.simulated_device_state()["races"]  # the ranks share the device (one process)
    _core.simulated_device_clear_races()
    assert races and all("device-to-host copy" in race for race in races), races
    for message in messages:
        assert "with no event wait between them" in message, message
