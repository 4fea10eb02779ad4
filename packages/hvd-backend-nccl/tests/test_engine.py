"""The engine driving this backend: device tensors' collectives through ``hvd.init()`` go to NCCL
(the fake, on hvd-core's simulated device), queued on the engine's stream after the tensors' ready
events, and complete with an event the caller's stream waits on.

Ranks are threads of this process (hvd-core's test cluster, its in-memory CPU backend beside NCCL);
each keeps its tensors in simulated device memory, written on a stream of its own after other work,
so an engine that skipped a wait reads them unwritten, and the device reports every access not
ordered by an event as a race.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common.testing import run_cluster
from horovod.common.testing.cases import np_dtype
from horovod.common.testing.device import DeviceTensors, simulated_device_races
from horovod.common.testing.probes import engine_stats, running_gpu_backend

ON_NCCL = {"HOROVOD_DEVICE": "simulated", "HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_GLOO_TIMEOUT_SECONDS": "10"}
NCCL_REMOTE_ERROR = 6


@pytest.fixture(autouse=True)
def on_the_fake(loaded: Any) -> Iterator[None]:
    """Every test here runs on the fake NCCL (loaded once per process), and leaves no race."""
    simulated_device_races()
    yield
    races = simulated_device_races()
    assert not races, races


def run(
    case: Callable[[DeviceTensors], Any], size: int, env: dict[str, str] | None = None, hosts: list[str] | None = None
) -> list[Any]:
    """``case(tensors)`` on `size` ranks after ``hvd.init()``, with this rank's device tensors."""

    def rank_main() -> Any:
        hvd.init()
        tensors = DeviceTensors("simulated")
        try:
            return case(tensors)
        finally:
            tensors.close()

    return run_cluster(rank_main, size, env={**ON_NCCL, **(env or {})}, timeout=120, hosts=hosts)


def test_nccl_is_the_gpu_backend_of_the_job() -> None:
    def case(t: DeviceTensors) -> str | None:
        return running_gpu_backend()

    assert run(case, 2) == ["nccl", "nccl"]
    # Installed and not asked for, it is the default one too.
    assert run(case, 2, env={"HOROVOD_GPU_OPERATIONS": ""}) == ["nccl", "nccl"]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "int64", "uint8", "float64"])
def test_every_collective_on_nccl(fake: Any, dtype: str) -> None:
    def case(t: DeviceTensors) -> dict[str, int]:
        n, me = hvd.size(), hvd.rank()
        kind = np_dtype(dtype)
        # Allreduce: summed, in place and into another buffer.
        x = (np.arange(24) % 7 + me).astype(kind).reshape(4, 6)
        src = t.put(x)
        out = t.empty(x.nbytes)
        t.submit("allreduce", "sum", src, x, op=hvd.Sum, output=(out, x.nbytes)).wait()
        expected = sum((np.arange(24) % 7 + r).astype(np.float64) for r in range(n)).astype(kind).reshape(4, 6)
        np.testing.assert_array_equal(t.get(out, x), expected)
        # Allgather of ragged first dimensions: the result lands on the device.
        g = np.full((me + 1, 3), me, kind)
        h = t.submit("allgather", "gather", t.put(g), g)
        h.wait()
        total = n * (n + 1) // 2
        got = t.get(h.output_device_address, np.empty((total, 3), kind))
        np.testing.assert_array_equal(got, np.concatenate([np.full((r + 1, 3), r, kind) for r in range(n)]))
        assert list(h.output_shape) == [total, 3]
        # Broadcast from the last rank, in place.
        b = np.full((5,), me * 3, kind)
        bs = t.put(b)
        t.submit("broadcast", "bcast", bs, b, root=n - 1, inplace=True).wait()
        np.testing.assert_array_equal(t.get(bs, b), np.full_like(b, (n - 1) * 3))
        # Alltoall with uneven splits: member j gets j + 1 rows from everyone.
        splits = [j + 1 for j in range(n)]
        a = np.repeat(np.arange(n, dtype=kind), splits).reshape(-1, 1) + kind.type(10 * me)
        h = t.submit("alltoall", "a2a", t.put(a), a, splits=splits)
        h.wait()
        rows = (me + 1) * n
        got = t.get(h.output_device_address, np.empty((rows, 1), kind)).ravel()
        np.testing.assert_array_equal(got, np.repeat([me + 10 * r for r in range(n)], me + 1).astype(kind))
        assert list(h.received_splits) == [me + 1] * n
        # Reducescatter of an uneven first dimension.
        rs = np.full((n + 1, 2), me + 1, kind)
        h = t.submit("reducescatter", "rs", t.put(rs), rs, op=hvd.Sum)
        h.wait()
        mine = 2 if me == 0 else 1
        got = t.get(h.output_device_address, np.empty((mine, 2), kind))
        np.testing.assert_array_equal(got, np.full((mine, 2), sum(range(1, n + 1)), kind))
        return engine_stats()

    for s in run(case, 3):
        assert s["device_backend_calls"] == 5, s
    calls = " ".join(fake.log())
    for call in ("ncclAllReduce", "ncclBroadcast", "ncclSend", "ncclRecv", "ncclReduce"):
        assert call in calls, calls


def test_fused_average_and_scaling_are_one_nccl_group(fake: Any) -> None:
    def case(t: DeviceTensors) -> dict[str, int]:
        xs = [np.full((5 + k,), float(hvd.rank() + k), np.float32) for k in range(6)]
        addresses = [t.put(x, busy_first=0.005) for x in xs]
        handles = [
            t.submit("allreduce", f"fused.{k}", s, x, op=hvd.Average, inplace=True, prescale=3.0, postscale=0.5)
            for k, (s, x) in enumerate(zip(addresses, xs, strict=True))
        ]
        for h in handles:
            h.wait()
        for k, (s, x) in enumerate(zip(addresses, xs, strict=True)):
            np.testing.assert_allclose(t.get(s, x), np.full_like(x, 1.5 * np.mean([r + k for r in range(hvd.size())])))
        return engine_stats()

    for s in run(case, 2):
        assert s["device_backend_calls"] >= 1 and s["fused_batches"] >= 1, s
    log = fake.log()
    assert any("ncclRedOpCreatePreMulSum" in line for line in log), log  # 3 x 0.5 / size, inside NCCL


def test_what_nccl_cannot_do_is_staged_through_the_cpu_backend() -> None:
    """int16 has no NCCL type, and the ABI's reducescatter does not scale: both are staged, on every
    rank alike, with the right result."""

    def case(t: DeviceTensors) -> dict[str, int]:
        n, me = hvd.size(), hvd.rank()
        x = np.full((8,), me + 1, np.int16)
        xs = t.put(x)
        t.submit("allreduce", "short", xs, x, op=hvd.Sum, inplace=True).wait()
        np.testing.assert_array_equal(t.get(xs, x), np.full_like(x, sum(range(1, n + 1))))
        rs = np.full((n, 3), float(me), np.float32)
        h = t.submit("reducescatter", "averaged", t.put(rs), rs, op=hvd.Average)
        h.wait()
        np.testing.assert_allclose(t.get(h.output_device_address, np.empty((1, 3), np.float32)), (n - 1) / 2)
        return engine_stats()

    for s in run(case, 2):
        assert s["device_backend_calls"] == 0, s


def test_a_cpu_backend_named_for_one_collective_stages_it() -> None:
    def case(t: DeviceTensors) -> dict[str, int]:
        x = np.ones((4,), np.float32)
        xs = t.put(x)
        t.submit("allreduce", "staged", xs, x, op=hvd.Sum, inplace=True).wait()
        b = np.full((4,), hvd.rank(), np.float32)
        bs = t.put(b)
        t.submit("broadcast", "on_nccl", bs, b, root=0, inplace=True).wait()
        np.testing.assert_array_equal(t.get(xs, x), np.full_like(x, hvd.size()))
        np.testing.assert_array_equal(t.get(bs, b), np.zeros_like(b))
        return engine_stats()

    for s in run(case, 2, env={"HOROVOD_GPU_ALLREDUCE": "inmemory"}):
        assert s["device_backend_calls"] == 1, s  # the broadcast


@pytest.mark.parametrize(
    "hosts", [["a", "a", "b", "b"], ["a", "a", "b"]], ids=["two-hosts-of-two", "hosts-of-two-and-one"]
)
def test_hierarchical_allreduce_reduces_on_nccl_inside_hosts_and_on_the_cpu_across(fake: Any, hosts: list[str]) -> None:
    """HOROVOD_HIERARCHICAL_ALLREDUCE: NCCL among a host's ranks, the CPU backend between hosts (in
    blocks where hosts are alike, through each host's local rank 0 otherwise); sums, averages,
    scale factors on integer tensors, and fused batches all equal the flat result."""

    def case(t: DeviceTensors) -> dict[str, int]:
        n, me = hvd.size(), hvd.rank()
        x = (np.arange(10) + me).astype(np.float32)
        xs = t.put(x)
        t.submit("allreduce", "flat", xs, x, op=hvd.Average, inplace=True).wait()
        np.testing.assert_allclose(t.get(xs, x), np.arange(10) + (n - 1) / 2)
        i = np.full((7,), me + 1, np.int32)
        out = t.empty(i.nbytes)
        t.submit("allreduce", "ints", t.put(i), i, op=hvd.Sum, postscale=2.0, output=(out, i.nbytes)).wait()
        np.testing.assert_array_equal(t.get(out, i), np.full_like(i, 2 * n * (n + 1) // 2))
        parts = [np.full((3 + k,), float(me * k), np.float32) for k in range(5)]
        addresses = [t.put(p, busy_first=0.002) for p in parts]
        handles = [
            t.submit("allreduce", f"part.{k}", a, p, op=hvd.Sum, inplace=True, prescale=0.5)
            for k, (a, p) in enumerate(zip(addresses, parts, strict=True))
        ]
        for h in handles:
            h.wait()
        for k, (a, p) in enumerate(zip(addresses, parts, strict=True)):
            np.testing.assert_allclose(t.get(a, p), np.full_like(p, 0.5 * k * sum(range(n))))
        return engine_stats()

    env = {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1"}
    for s in run(case, len(hosts), env=env, hosts=hosts):
        assert s["hierarchical_allreduces"] >= 3 and s["device_backend_calls"] >= 3, s
    inits = [line for line in fake.log() if line.startswith("ncclCommInitRank")]
    assert all(f"nranks={hosts.count('a')}" in line or "nranks=1" in line for line in inits), inits


def test_a_process_set_has_its_own_nccl_communicator(fake: Any) -> None:
    def rank_main() -> list[float]:
        edges = hvd.ProcessSet([0, 2])
        hvd.init(process_sets=[edges])
        t = DeviceTensors("simulated")
        try:
            results = []
            x = np.full((4,), float(hvd.rank() + 1), np.float32)
            xs = t.put(x)
            t.submit("allreduce", "all", xs, x, op=hvd.Sum, inplace=True).wait()
            results.append(float(t.get(xs, x)[0]))
            if edges.included():
                y = np.full((4,), float(hvd.rank() + 1), np.float32)
                ys = t.put(y)
                t.submit("allreduce", "edges", ys, y, op=hvd.Sum, inplace=True, process_set=edges.process_set_id).wait()
                results.append(float(t.get(ys, y)[0]))
            return results
        finally:
            t.close()

    assert run_cluster(rank_main, 3, env=ON_NCCL, timeout=120) == [[6.0, 4.0], [6.0], [6.0, 4.0]]
    sizes = sorted(line.split("nranks=")[1].split()[0] for line in fake.log() if line.startswith("ncclCommInitRank"))
    assert sizes == ["2", "2", "3", "3", "3"], sizes


def test_a_joined_rank_takes_part_with_neutral_data_on_its_device() -> None:
    def case(t: DeviceTensors) -> float:
        if hvd.rank() == 0:
            x = np.full((6,), 4.0, np.float32)
            xs = t.put(x)
            t.submit("allreduce", "late", xs, x, op=hvd.Sum, inplace=True).wait()
            hvd.join()
            return float(t.get(xs, x)[0])
        hvd.join()
        return -1.0

    assert run(case, 2) == [4.0, -1.0]


def _steps_until_an_error(fake: Any, t: DeviceTensors, fails_here: bool) -> str:
    """Allreduces until the engine fails; NCCL reports an error on this rank if `fails_here`."""
    x = np.ones((16,), np.float32)
    xs = t.put(x)
    t.submit("allreduce", "warmup", xs, x, op=hvd.Sum, inplace=True).wait()
    if fails_here:
        fake.set_async_error(hvd.rank(), NCCL_REMOTE_ERROR)
    try:
        for step in range(1000):
            t.submit("allreduce", f"grad.{step}", xs, x, op=hvd.Sum, inplace=True).wait()
    except hvd.HorovodInternalError as error:
        return str(error)
    return "no error"


def test_an_asynchronous_nccl_error_fails_every_rank_naming_the_rank(fake: Any) -> None:
    """NCCL reports an error after the collective was queued, or while idle (a peer's network
    failed): the engine, polling the backend, aborts the communicator and stops; every rank raises
    it, naming the rank that found it; none hangs."""
    for message in run(lambda t: _steps_until_an_error(fake, t, fails_here=True), 2):
        assert "remote process exited or there was a network error" in message, message
        assert re.search(r"\(rank [01] of 2, NCCL", message), message


def test_an_nccl_error_on_one_rank_reaches_the_others_at_once(fake: Any) -> None:
    """Only rank 1 finds the error: it stops at the next cycle, which carries its error to rank 0,
    instead of leaving rank 0 waiting on its negotiation until the timeout."""
    messages = run(lambda t: _steps_until_an_error(fake, t, fails_here=hvd.rank() == 1), 2)
    for message in messages:
        assert "(rank 1 of 2, NCCL" in message, message
        assert "remote process exited or there was a network error" in message, message
        assert "timed out" not in message, message
