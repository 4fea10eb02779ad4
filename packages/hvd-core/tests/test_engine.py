"""Engine behaviour observed from outside: fusion, the response cache, timeline, stalls, lifecycle."""

from __future__ import annotations

import json
import os
import threading
import time
import warnings

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common import _core, state
from horovod.common.testing import ClusterError, run_cluster


def _stats() -> dict:
    return state.context().engine.stats()


def _many_allreduces(count: int) -> dict:
    hvd.init()
    handles = [hvd.allreduce_async(np.full(16, i, np.float32), name=f"t{i}", op=hvd.Sum) for i in range(count)]
    for i, h in enumerate(handles):
        assert hvd.synchronize(h).tolist() == [i * hvd.size()] * 16
    return _stats()


@pytest.mark.parametrize("np_", [2, 3])
def test_fusion_makes_fewer_backend_calls_than_tensors(np_: int) -> None:
    fused = run_cluster(_many_allreduces, np_, args=(60,))
    unfused = run_cluster(_many_allreduces, np_, args=(60,), env={"HOROVOD_FUSION_THRESHOLD": "0"})
    for stats in fused:
        assert stats["backend_calls"]["allreduce"] < 60 and stats["fused_batches"] >= 1, stats
    for stats in unfused:
        assert stats["backend_calls"]["allreduce"] == 60 and stats["fused_batches"] == 0, stats


def _burst_then_wait(count: int) -> tuple[dict, dict]:
    hvd.init()
    before = _stats()
    handles = [hvd.allreduce_async(np.full(16, i, np.float32), name=f"b{i}", op=hvd.Sum) for i in range(count)]
    for i, h in enumerate(handles):
        assert hvd.synchronize(h).tolist() == [i * hvd.size()] * 16
    return before, _stats()


def test_a_burst_is_negotiated_once_its_caller_waits() -> None:
    # The cycle time is longer than the test's own timeout: the engine must start the cycle when
    # the caller blocks in synchronize, and by then it has the whole burst, reduced in one call.
    for before, after in run_cluster(_burst_then_wait, 2, args=(50,), env={"HOROVOD_CYCLE_TIME": "3600000"}):
        assert after["backend_calls"]["allreduce"] - before["backend_calls"]["allreduce"] == 1, (before, after)
        assert after["fused_batches"] - before["fused_batches"] == 1, (before, after)


def _cached_steps_in_lockstep(steps: int, submitted: threading.Barrier) -> tuple[dict, dict]:
    hvd.init()
    hvd.broadcast(np.zeros(4), root_rank=0, name="w")  # negotiated by the coordinator, then cached
    before = _stats()
    # The first cached step also takes whatever followed the coordinator's round (a cycle that a
    # member still waiting for its result may start at once, and the others only with the next op).
    for step in range(steps + 1):
        handle = hvd.broadcast_async(np.full(4, float(hvd.rank() + step)), root_rank=0, name="w")
        submitted.wait()  # every rank has it before any waits for it: it is ready in its first cycle
        assert hvd.synchronize(handle).tolist() == [float(step)] * 4
        if step == 0:
            before = _stats()
    return before, _stats()


def test_a_cycle_whose_ops_all_ran_leaves_every_member_idle() -> None:
    # Every member's work was cache hits that ran, so no member is busy after the cycle, and none
    # cycles again before the next op (the cycle time is longer than the test: only a member that
    # believed some rank still busy would). A quick cycle after each op could be under way on one
    # member and not another when the next op comes, which then took two cycles.
    submitted = threading.Barrier(2)
    results = run_cluster(_cached_steps_in_lockstep, 2, args=(5, submitted), env={"HOROVOD_CYCLE_TIME": "3600000"})
    for before, after in results:
        assert after["cycles"] - before["cycles"] == 5, (before, after)
        assert after["busy_cycles"] == before["busy_cycles"], (before, after)


def test_a_caller_about_to_wait_runs_the_cycle_itself() -> None:
    # The engine's loop is between cycles when each step's caller synchronizes (the cycle time is
    # longer than the test, and the caller never rings the loop before it offers its thread), so
    # the caller runs the step's cycle: no thread hand-off to the loop and back.
    submitted = threading.Barrier(2)
    results = run_cluster(_cached_steps_in_lockstep, 2, args=(5, submitted), env={"HOROVOD_CYCLE_TIME": "3600000"})
    for before, after in results:
        assert after["helped_cycles"] - before["helped_cycles"] == 5, (before, after)
        assert after["cycles"] - before["cycles"] == 5, (before, after)


def _grouped_calls(count: int, elements: int) -> tuple[dict, dict]:
    hvd.init()
    before = _stats()
    tensors = [np.full(elements, i, np.float32) for i in range(count)]
    results = hvd.grouped_allreduce(tensors, name="group", op=hvd.Sum)  # negotiated in one cycle
    assert all(np.array_equal(r, t * hvd.size()) for r, t in zip(results, tensors, strict=True))
    return before, _stats()


def test_tensors_of_a_mebibyte_or_more_are_reduced_alone_in_place() -> None:
    # Copying them through the fusion buffer would cost more than the calls fusing them saves.
    for before, after in run_cluster(_grouped_calls, 2, args=(4, 1 << 18)):  # 4 x 1 MiB
        assert after["backend_calls"]["allreduce"] - before["backend_calls"]["allreduce"] == 4, (before, after)
        assert after["fused_batches"] == before["fused_batches"], (before, after)
    for before, after in run_cluster(_grouped_calls, 2, args=(4, (1 << 18) - 1)):  # just under: fused
        assert after["backend_calls"]["allreduce"] - before["backend_calls"]["allreduce"] == 1, (before, after)
        assert after["fused_batches"] == before["fused_batches"] + 1, (before, after)


def _rounds(rounds: int) -> list[dict]:
    hvd.init()
    seen = []
    for _ in range(rounds):
        handles = [hvd.allreduce_async(np.ones(4, np.float32), name=f"w{i}", op=hvd.Sum) for i in range(10)]
        for h in handles:
            hvd.synchronize(h)
        seen.append(_stats())
    return seen


def test_repeated_tensors_skip_the_coordinator() -> None:
    for per_round in run_cluster(_rounds, 3, args=(5,)):
        first = per_round[0]
        for later in per_round[1:]:
            # Rounds after the first are negotiated by the cache bit-vector alone.
            assert later["coordinator_rounds"] == first["coordinator_rounds"], per_round
        assert per_round[-1]["cache_hits"] - first["cache_hits"] == 40, per_round


def test_cache_disabled_always_uses_the_coordinator() -> None:
    for per_round in run_cluster(_rounds, 2, args=(3,), env={"HOROVOD_CACHE_CAPACITY": "0"}):
        assert per_round[-1]["cache_hits"] == 0
        assert per_round[-1]["coordinator_rounds"] > per_round[0]["coordinator_rounds"]


def test_changed_shape_invalidates_the_cached_entry() -> None:
    def case() -> list:
        hvd.init()
        first = hvd.allreduce(np.ones(2, np.float32), name="x", op=hvd.Sum)
        second = hvd.allreduce(np.ones(3, np.float32), name="x", op=hvd.Sum)  # same name, new shape
        third = hvd.allreduce(np.ones(3, np.float32), name="x", op=hvd.Sum)
        return [first.tolist(), second.tolist(), third.tolist()]

    for result in run_cluster(case, 3):
        assert result == [[3.0] * 2, [3.0] * 3, [3.0] * 3]


def _check_trace(path: str) -> list[dict]:
    with open(path) as f:
        events = json.load(f)  # a complete JSON array: what Perfetto and chrome://tracing load
    depth: dict[int, int] = {}
    for event in events:
        assert "ph" in event and "pid" in event
        if event["ph"] == "B":
            depth[event["pid"]] = depth.get(event["pid"], 0) + 1
        elif event["ph"] == "E":
            depth[event["pid"]] -= 1
            assert depth[event["pid"]] >= 0, "an end event without a begin"
    assert all(d == 0 for d in depth.values()), "unbalanced begin/end events"
    return events


def test_timeline_from_environment(tmp_path) -> None:
    path = tmp_path / "timeline.json"

    def case() -> None:
        hvd.init()
        for _ in range(2):
            hvd.allreduce(np.ones(4), name="grad.w", op=hvd.Sum)
        hvd.allgather(np.ones((1, 2)), name="gathered")

    run_cluster(case, 2, env={"HOROVOD_TIMELINE": str(path)})
    events = _check_trace(str(path))
    names = {e.get("name") for e in events}
    assert {"NEGOTIATE_ALLREDUCE", "ALLREDUCE", "NEGOTIATE_ALLGATHER", "ALLGATHER"} <= names, names
    rows = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert {"grad.w", "gathered"} <= rows


def test_timeline_started_and_stopped_at_run_time(tmp_path) -> None:
    path = tmp_path / "dynamic.json"

    def case() -> None:
        hvd.init()
        hvd.allreduce(np.ones(2), name="before")
        hvd.start_timeline(str(path), mark_cycles=True)
        for _ in range(3):
            handles = [hvd.allreduce_async(np.ones(8), name=f"fused.{k}") for k in range(5)]
            for h in handles:
                hvd.synchronize(h)
        hvd.barrier()
        hvd.stop_timeline()
        hvd.allreduce(np.ones(2), name="after")

    run_cluster(case, 2, env={"HOROVOD_TIMELINE": "DYNAMIC"})
    events = _check_trace(str(path))
    rows = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert "before" not in rows and "after" not in rows and "fused.0" in rows
    assert any(e.get("name") == "CYCLE_START" for e in events)


def test_timeline_restarted_while_operations_run(tmp_path) -> None:
    """Start and stop race the engine thread's events and cycle marks (operations are in flight
    each time); under ThreadSanitizer (the sanitize session) an unguarded read of the timeline's
    state is a report. Every file written is a closed, balanced trace."""
    paths = [tmp_path / f"restart.{k}.json" for k in range(4)]

    def case() -> None:
        hvd.init()
        for path in paths:
            handles = [hvd.allreduce_async(np.ones(16), name=f"busy.{k}") for k in range(3)]
            hvd.start_timeline(str(path), mark_cycles=True)
            for h in handles:
                hvd.synchronize(h)
            hvd.allreduce(np.ones(16), name="inside")
        hvd.stop_timeline()

    run_cluster(case, 2, env={"HOROVOD_TIMELINE": "DYNAMIC"})
    for path in paths:
        _check_trace(str(path))


def test_stall_warning_names_the_missing_rank_and_tensor(capfd) -> None:
    def case() -> float:
        hvd.init()
        if hvd.rank() == 1:
            time.sleep(3.5)  # rank 1 is late: rank 0 has been waiting on 'late.tensor'
        return float(hvd.allreduce(np.ones(1), name="late.tensor", op=hvd.Sum)[0])

    results = run_cluster(case, 3, env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "1"})
    assert results == [3.0] * 3
    err = capfd.readouterr().err
    assert "Stall detected" in err and "Rank 1 has not submitted: 'late.tensor'" in err, err


def test_stall_shutdown_raises_on_every_rank() -> None:
    def case() -> str:
        hvd.init()
        name = "only.rank0" if hvd.rank() == 0 else "only.rank1"
        try:
            hvd.allreduce(np.ones(1), name=name)
        except hvd.HorovodInternalError as error:
            return str(error)
        return "no error"

    messages = run_cluster(
        case,
        2,
        env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "1", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "2"},
        timeout=60,
    )
    for message in messages:
        assert "Stall detected" in message and "'only.rank0'" in message and "'only.rank1'" in message, message
        assert "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS" in message


def test_stall_check_can_be_disabled(capfd) -> None:
    def case() -> None:
        hvd.init()
        if hvd.rank() == 1:
            time.sleep(2.5)
        hvd.allreduce(np.ones(1), name="late")

    run_cluster(case, 2, env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "1", "HOROVOD_STALL_CHECK_DISABLE": "1"})
    assert "Stall detected" not in capfd.readouterr().err


def test_init_is_idempotent_and_works_again_after_shutdown() -> None:
    def case() -> int:
        for attempt in range(20):
            hvd.init()
            hvd.init()  # a second init while running does nothing
            assert hvd.is_initialized()
            total = hvd.allreduce(np.full(1, attempt, np.float32), name="again", op=hvd.Sum)
            assert total.tolist() == [attempt * hvd.size()]
            hvd.barrier()
            hvd.shutdown()
            assert not hvd.is_initialized()
        return attempt

    assert run_cluster(case, 3) == [19] * 3


def test_shutdown_fails_pending_operations_on_every_rank() -> None:
    submitted = threading.Barrier(3)  # the others' op is pending before rank 0 shuts down

    def case(submitted: threading.Barrier) -> str:
        hvd.init()
        if hvd.rank() == 0:
            submitted.wait()
            hvd.shutdown()  # Horovod's semantics: one rank's shutdown stops every engine
            return "shut down"
        try:
            handle = hvd.allreduce_async(np.ones(1), name="never")
            submitted.wait()
            hvd.synchronize(handle)
        except hvd.HorovodInternalError as error:
            return str(error)
        return "no error"

    results = run_cluster(case, 3, args=(submitted,))
    assert results[0] == "shut down"
    for message in results[1:]:  # who stopped it, and what this rank was waiting for
        assert message.startswith("rank 0 shut Horovod down"), message
        assert "this rank was waiting for 'never'" in message, message


def test_a_stall_shutdown_in_a_process_set_reaches_every_rank_with_its_report() -> None:
    """Ranks outside the stalled set raise the members' stall error, not a bare shutdown."""

    def case() -> str:
        pair = hvd.ProcessSet([0, 1])
        hvd.init(process_sets=[pair])
        try:
            if hvd.rank() == 0:
                hvd.allreduce(np.ones(1), name="pair.only", process_set=pair)
            else:  # rank 1 never takes part; rank 2 is not in the set
                time.sleep(8)  # well past the stall shutdown (2 s), so the set's stall comes first
                hvd.allreduce(np.ones(1), name="everyone")
        except hvd.HorovodInternalError as error:
            return str(error)
        return "no error"

    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "2"}
    for message in run_cluster(case, 3, env=env, timeout=60):
        assert "Stall detected in process set 1" in message, message
        assert "Rank 1 has not submitted: 'pair.only'" in message, message


def test_queries_before_init_raise() -> None:
    def case() -> None:
        with pytest.raises(ValueError, match="not been initialized"):
            hvd.rank()

    run_cluster(case, 1)


def test_topology_queries() -> None:
    def case() -> tuple:
        hvd.init()
        return (
            hvd.rank(),
            hvd.size(),
            hvd.local_rank(),
            hvd.local_size(),
            hvd.cross_rank(),
            hvd.cross_size(),
            hvd.is_homogeneous(),
        )

    assert run_cluster(case, 3) == [(r, 3, r, 3, 0, 1, True) for r in range(3)]


def test_init_with_a_list_of_ranks_makes_independent_worlds() -> None:
    def case() -> tuple:
        job_rank = state.slot().launch.topology.rank
        members = [0, 2] if job_rank % 2 == 0 else [1, 3]
        hvd.init(comm=members)
        total = hvd.allreduce(np.full(1, job_rank, np.float32), name="world", op=hvd.Sum)
        return hvd.rank(), hvd.size(), float(total[0])

    assert run_cluster(case, 4) == [(0, 2, 2.0), (0, 2, 4.0), (1, 2, 2.0), (1, 2, 4.0)]


def test_built_and_enabled_answer_from_plugins() -> None:
    def case() -> tuple:
        hvd.init()
        return hvd.gloo_enabled(), hvd.mpi_enabled(), hvd.mpi_threads_supported(), hvd.ddl_built()

    assert run_cluster(case, 1) == [(False, False, False, False)]


def test_a_failing_rank_is_reported_with_its_traceback() -> None:
    def case() -> None:
        hvd.init()
        if hvd.rank() == 1:
            raise KeyError("broken on purpose")
        hvd.allreduce(np.ones(1), name="x")

    with pytest.raises(ClusterError) as info:
        run_cluster(case, 2, timeout=60)
    assert "rank 1" in str(info.value) and "broken on purpose" in str(info.value)


def test_deprecated_average_argument_still_works() -> None:
    def case() -> list:
        hvd.init()
        averaged = hvd.allreduce(np.full(2, hvd.rank(), np.float32), average=True, name="avg")
        summed = hvd.allreduce(np.full(2, hvd.rank(), np.float32), average=False, name="sum")
        with pytest.raises(ValueError, match="op and average"):
            hvd.allreduce(np.ones(1), average=True, op=hvd.Sum)
        return [averaged.tolist(), summed.tolist()]

    # Warning filters are process-wide, so they are recorded around the whole cluster run.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = run_cluster(case, 2)
    assert results == [[[0.5, 0.5], [1.0, 1.0]]] * 2
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning) and "average" in str(w.message)]
    assert len(deprecations) == 4, [str(w.message) for w in caught]


def _resident_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def _engine_allocated_outputs() -> dict:
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    mib = 1 << 18  # float32 elements in 1 MiB
    outputs = {
        "allgather": hvd.allgather(np.full(16 * mib, rank + 1, np.float32), name="big.ag"),  # n x 16 MiB
        "alltoall": hvd.alltoall(np.full(32 * mib, rank + 1, np.float32), name="big.a2a")[0],  # 32 MiB
        "reducescatter": hvd.reducescatter(np.ones(32 * n * mib, np.float32), op=hvd.Sum, name="big.rs"),  # 32 MiB
        "small": hvd.allgather(np.full(4, rank + 1, np.float32), name="small.ag"),
        "middling": hvd.allgather(np.full(mib, rank + 1, np.float32), name="middling.ag"),  # n x 1 MiB: heap
    }
    starts = {op: out.__array_interface__["data"][0] for op, out in outputs.items()}
    sums = {op: float(out.sum(dtype=np.float64)) for op, out in outputs.items()}
    # Outputs dropped at once give their memory back: 20 rounds of 12 MiB leave no trace. One input
    # serves every round, so only the outputs are measured: under AddressSanitizer a freed input
    # stays resident in its quarantine, and 20 of them alone would exceed the bound.
    source = np.full(3 * mib, 1, np.float32)
    before = _resident_bytes()
    for i in range(20):
        hvd.allgather(source, name=f"dropped.{i}")
    grown = _resident_bytes() - before
    return {"starts": starts, "sums": sums, "grown": grown}


def test_large_engine_allocated_outputs_start_on_a_huge_page_and_are_given_back() -> None:
    """Outputs of 32 MiB and more are mapped for huge pages (their start aligned to 2 MiB); smaller
    ones come from the heap. The values are right either way, and dropped outputs are given back."""
    n, mib = 2, 1 << 18
    for result in run_cluster(_engine_allocated_outputs, n):
        huge = 2 << 20
        for op in ("allgather", "alltoall", "reducescatter"):
            assert result["starts"][op] % huge == 0, (op, hex(result["starts"][op]))
        assert result["sums"] == {
            "allgather": 16 * mib * sum(range(1, n + 1)),
            "alltoall": 32 * mib * sum(range(1, n + 1)) / n,
            "reducescatter": 32 * mib * n,
            "small": 4 * sum(range(1, n + 1)),
            "middling": mib * sum(range(1, n + 1)),
        }
        assert result["grown"] < 64 << 20, result["grown"]


def _outputs_of_one_size_in_rounds(rounds: int) -> list[dict]:
    """Each round: a 2 x 16 MiB allgather (a mapped output) of values new to the round, checked, then
    dropped; the pool's counters after each."""
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    mib = 1 << 18  # float32 elements in 1 MiB
    seen = []
    for i in range(rounds):
        out = hvd.allgather(np.full(16 * mib, rank + 10 * i, np.float32), name="pooled.ag")
        # Every row is written by this round, whatever the reused mapping held from the last.
        expected = np.repeat(np.arange(n, dtype=np.float32) + 10 * i, 16 * mib)
        seen.append({"right": bool(np.array_equal(out, expected)), "start": out.__array_interface__["data"][0]})
        del out
        stats = _stats()
        seen[-1].update(reused=stats["output_pool_reused"], kept=stats["output_pool_bytes"])
    return seen


def test_a_freed_large_output_is_reused_for_the_next_of_its_size() -> None:
    """A dropped 32 MiB output's mapping is kept (HOROVOD_OUTPUT_POOL_BYTES) and the next output of
    its size takes it over, already faulted in; its values are the new round's throughout."""
    for rounds in run_cluster(_outputs_of_one_size_in_rounds, 2, args=(3,)):
        assert all(r["right"] for r in rounds), rounds
        assert [r["reused"] for r in rounds] == [0, 1, 2], rounds
        assert all(r["kept"] >= 32 << 20 for r in rounds), rounds  # the mapping, and its spare huge page
        assert len({r["start"] for r in rounds}) == 1, rounds  # the same memory every round


def test_the_output_pool_keeps_nothing_when_its_bound_is_zero() -> None:
    for rounds in run_cluster(_outputs_of_one_size_in_rounds, 2, args=(2,), env={"HOROVOD_OUTPUT_POOL_BYTES": "0"}):
        assert all(r["right"] for r in rounds), rounds
        assert [(r["reused"], r["kept"]) for r in rounds] == [(0, 0), (0, 0)], rounds


def _vm_flags(address: int) -> list[str]:
    """The VmFlags of the mapping holding ``address`` (/proc/self/smaps); "hg": huge pages advised."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= address < end
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


_HUGE_PAGE = 2 << 20


def _fresh_array(mappings: list, nbytes: int) -> np.ndarray:
    """float32 in a private anonymous mapping of its own, as malloc gives a large block (small
    pages unless advised), placed so that neither end falls on a huge-page boundary."""
    import mmap

    page = mmap.PAGESIZE
    region = mmap.mmap(-1, nbytes + 4 * page, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mappings.append(region)
    base = np.frombuffer(region, np.uint8).ctypes.data
    offset = next(
        k * page for k in (1, 2, 3) if (base + k * page) % _HUGE_PAGE and (base + k * page + nbytes) % _HUGE_PAGE
    )
    return np.frombuffer(region, np.float32, count=nbytes // 4, offset=offset)


def _first_whole_huge_page(array: np.ndarray) -> int:
    return (array.ctypes.data + _HUGE_PAGE - 1) // _HUGE_PAGE * _HUGE_PAGE


def _separate_outputs_in_fresh_memory() -> dict:
    hvd.init()
    engine = state.context().engine
    mappings: list = []
    flags = {}
    large, below = (32 << 20) + (1 << 20), 8 << 20  # at and below the size where the advice starts
    for name, inplace, nbytes in (("separate", False, large), ("in_place", True, large), ("below", False, below)):
        source, output = _fresh_array(mappings, nbytes), _fresh_array(mappings, nbytes)
        source[:] = hvd.rank() + 1
        handle = engine.enqueue(
            _core.OP_ALLREDUCE,
            name,
            (source.ctypes.data, source.nbytes),
            _core.DTYPE_FLOAT32,
            [source.size],
            None if inplace else (output.ctypes.data, output.nbytes),
            op=hvd.Sum,
            inplace=inplace,
        )
        handle.wait()
        result = source if inplace else output
        assert result.min() == result.max() == sum(range(1, hvd.size() + 1)), name
        end = output.ctypes.data + output.nbytes
        flags[name] = {
            "input": _vm_flags(_first_whole_huge_page(source)),
            "output": _vm_flags(_first_whole_huge_page(output)),
            "output_head": _vm_flags(output.ctypes.data),  # the partial huge pages at both ends
            "output_tail": _vm_flags(end - 1),
        }
    del source, output, result
    for region in mappings:
        region.close()
    return flags


_NO_THP = not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled")


@pytest.mark.skipif(_NO_THP, reason="this kernel has no transparent huge pages")
def test_large_separate_outputs_are_advised_into_huge_pages() -> None:
    """A separate output is memory the framework has just allocated for the result, which the
    collective writes first: from 32 MiB on (where malloc maps each block afresh), the engine
    advises huge pages under its whole huge pages. Its partial pages at both ends, inputs,
    in-place buffers and smaller outputs are left as they are."""
    for flags in run_cluster(_separate_outputs_in_fresh_memory, 2):
        assert "hg" in flags["separate"]["output"], flags
        kept = [flags["separate"][k] for k in ("input", "output_head", "output_tail")]
        kept += [flags["in_place"]["input"], flags["below"]["output"]]
        for vm_flags in kept:
            assert "hg" not in vm_flags, flags


def test_in_place_allreduce_and_broadcast_write_into_the_input() -> None:
    from horovod.common.ops import _numpy

    def case() -> list:
        hvd.init()
        contiguous = np.full(3, hvd.rank() + 1, np.float32)
        strided = np.full((3, 2), hvd.rank() + 1, np.float64)[:, 0]  # not contiguous: copied back
        results = []
        for array in (contiguous, strided):
            out = hvd.synchronize(_numpy.allreduce_async(array, op=hvd.Sum, inplace=True))
            assert out is array and array.tolist() == [3.0] * 3, array
        root = np.arange(4.0) + hvd.rank()
        assert hvd.synchronize(_numpy.broadcast_async(root, 1, inplace=True)) is root
        results.append(root.tolist())
        return results

    assert run_cluster(case, 2) == [[[1.0, 2.0, 3.0, 4.0]]] * 2


def test_host_spans_cross_as_address_and_byte_count_and_are_checked() -> None:
    # Framework adapters may hand host memory over as (address, byte count) instead of DLPack.
    from horovod.common import _core

    def case() -> list:
        hvd.init()
        engine = state.context().engine
        data = np.full(3, hvd.rank() + 1, np.float32)

        def enqueue(name: str, buffer: object) -> object:
            return engine.enqueue(_core.OP_ALLREDUCE, name, buffer, _core.DTYPE_FLOAT32, [3], None, inplace=True)

        enqueue("span", (data.ctypes.data, data.nbytes)).wait()
        with pytest.raises(
            ValueError, match=r"'short': the input buffer holds 8 bytes, but shape \[3\] of float32 needs 12"
        ):
            enqueue("short", (data.ctypes.data, 8))
        # Only a tuple is a span: a 2-element array is an array (here of 16 bytes, so refused).
        with pytest.raises(ValueError, match="holds 16 bytes"):
            enqueue("pair", np.array([data.ctypes.data, data.nbytes], np.int64))
        # A span is memory on the operation's device; where no CUDA device can be used (no driver
        # here), a CUDA operation is refused, saying why.
        with pytest.raises(ValueError, match="'gpu': the tensor is on a CUDA device, but no CUDA device can be used"):
            engine.enqueue(
                _core.OP_ALLREDUCE,
                "gpu",
                (data.ctypes.data, data.nbytes),
                _core.DTYPE_FLOAT32,
                [3],
                None,
                inplace=True,
                device_kind=_core.DEVICE_CUDA,
            )
        return data.tolist()

    assert run_cluster(case, 2) == [[3.0] * 3] * 2


# The negotiation records' inline space without its growth (HOROVOD_NEGOTIATION_INLINE_BYTES alone),
# for tests of what fits in it and what does not.
BASE_INLINE_SPACE_ONLY = {"HOROVOD_NEGOTIATION_INLINE_MAX_BYTES": "0"}


def test_small_repeated_allreduces_complete_inside_negotiation() -> None:
    def case() -> dict:
        hvd.init()
        rank, n = hvd.rank(), hvd.size()
        for step in range(5):
            small = hvd.allreduce(
                np.full(4, rank + step, np.float32),
                name="small",
                op=hvd.Average,
                prescale_factor=2.0,
                postscale_factor=3.0,
            )
            expected = 3.0 * sum(2.0 * (r + step) for r in range(n)) / n
            assert np.allclose(small, expected), (step, small, expected)
            big = hvd.allreduce(np.ones(4096, np.float32), name="big", op=hvd.Sum)  # 16 KiB: too big to inline
            assert big[0] == n
        return _stats()

    # The base inline space alone (growth is tested below).
    for stats in run_cluster(case, 3, env=BASE_INLINE_SPACE_ONLY):
        # The first round of each name goes through the coordinator; the other four of "small" inline.
        assert stats["inline_reductions"] == 4, stats
        assert stats["backend_calls"]["allreduce"] == 5 + 1, stats  # "big" every time, "small" once


def test_inline_negotiation_can_be_disabled() -> None:
    def case() -> int:
        hvd.init()
        for _ in range(3):
            hvd.allreduce(np.ones(2), name="small")
        return _stats()["inline_reductions"]

    assert run_cluster(case, 2, env={"HOROVOD_NEGOTIATION_INLINE_BYTES": "0"}) == [0, 0]


def test_small_repeated_broadcasts_complete_inside_negotiation() -> None:
    """A cached broadcast whose root's data fits the inline budget costs the negotiation alone: the
    root's new data each step, from a root that is not rank 0, in the global set and in a process
    set whose root is its member 1 (global rank 2)."""

    def case() -> dict:
        upper = hvd.ProcessSet([1, 2])
        hvd.init(process_sets=[upper])
        rank = hvd.rank()
        for step in range(5):
            got = hvd.broadcast(np.arange(6, dtype=np.float64) * (rank + 1) + step, root_rank=1, name="b")
            assert got.tolist() == (np.arange(6) * 2.0 + step).tolist(), (step, got)
            ints = hvd.broadcast(np.full(3, rank * 100 + step, np.int32), root_rank=2, name="i")
            assert ints.tolist() == [200 + step] * 3, (step, ints)
            big = hvd.broadcast(np.full(4096, float(rank), np.float32), root_rank=0, name="big")  # 16 KiB
            assert not big.any()
            if rank in (1, 2):
                pair = hvd.broadcast(np.full(2, rank + step, np.int64), root_rank=2, name="p", process_set=upper)
                assert pair.tolist() == [2 + step] * 2, (step, pair)
        return _stats()

    stats = run_cluster(case, 3, env=BASE_INLINE_SPACE_ONLY)
    for rank, s in enumerate(stats):
        # The first round of each name goes through the coordinator; later ones of "b", "i" and "p" inline.
        assert s["inline_broadcasts"] == 4 * 2 + (4 if rank else 0), (rank, s)
        # "big" once: its later calls go ahead of negotiation (test_eager.py).
        assert s["backend_calls"]["broadcast"] == 1 + 2 + (1 if rank else 0), (rank, s)


def test_inline_broadcasts_and_allreduces_of_one_cycle_share_the_records() -> None:
    """Allreduces and broadcasts submitted together ride one cycle's records, packed one after the
    other in each member's inline area: each op must find its own bytes, whichever rank is the root."""

    def case() -> list:
        hvd.init()
        rank, n = hvd.rank(), hvd.size()
        seen = []
        for step in range(6):
            handles = [
                hvd.allreduce_async(np.full(5, rank + step, np.float32), name="a", op=hvd.Sum),
                hvd.broadcast_async(np.full(7, rank * 10 + step, np.int16), root_rank=1, name="b1"),
                hvd.allreduce_async(np.full(3, 2 * rank, np.int64), name="c", op=hvd.Sum),
                hvd.broadcast_async(np.full(2, rank * 10 + step, np.float64), root_rank=2, name="b2"),
            ]
            a, b1, c, b2 = (hvd.synchronize(h) for h in handles)
            assert a.tolist() == [float(sum(r + step for r in range(n)))] * 5, (step, a)
            assert b1.tolist() == [10 + step] * 7, (step, b1)
            assert c.tolist() == [2 * sum(range(n))] * 3, (step, c)
            assert b2.tolist() == [20.0 + step] * 2, (step, b2)
            seen.append(step)
        return [seen, _stats()["inline_broadcasts"] > 0, _stats()["inline_reductions"] > 0]

    assert run_cluster(case, 3) == [[list(range(6)), True, True]] * 3


def test_an_inline_broadcast_reaches_a_rank_that_joined_after_submitting_it() -> None:
    def case() -> list:
        hvd.init()
        rank = hvd.rank()
        hvd.broadcast(np.zeros(4, np.float32), root_rank=0, name="b")  # cached from here on
        if rank == 1:
            handle = hvd.broadcast_async(np.zeros(4, np.float32), root_rank=0, name="b")
            hvd.join()
            return hvd.synchronize(handle).tolist()
        time.sleep(0.3)  # rank 1 has submitted it and joined
        got = hvd.broadcast(np.full(4, 5.0, np.float32), root_rank=0, name="b").tolist()
        hvd.join()
        return got

    assert run_cluster(case, 2, timeout=60) == [[5.0] * 4, [5.0] * 4]


def test_broadcasts_without_inline_data_are_unchanged() -> None:
    def case() -> list:
        hvd.init()
        got = [hvd.broadcast(np.full(2, hvd.rank() + s, np.int32), root_rank=1, name="b").tolist() for s in range(3)]
        return [got, _stats()["inline_broadcasts"]]

    assert run_cluster(case, 2, env={"HOROVOD_NEGOTIATION_INLINE_BYTES": "0"}) == [[[[1, 1], [2, 2], [3, 3]], 0]] * 2


def test_the_inline_space_grows_to_fit_repeated_ops_a_little_larger() -> None:
    """16 KiB ops do not fit the 1 KiB base space: their first cached call moves its data over the
    backend, and from the next call on the records carry it (3 ranks: each record may grow by a
    third of 128 KiB). A 64 KiB op is over that bound and never rides inline. New data every step,
    a root that is not rank 0, pre- and postscaling: the inline results must be exact."""

    def case() -> dict:
        hvd.init()
        rank, n = hvd.rank(), hvd.size()
        spaces = []
        for step in range(6):
            reduced = hvd.allreduce(
                np.full(4096, rank + step, np.float32),
                name="r",
                op=hvd.Average,
                prescale_factor=2.0,
                postscale_factor=0.5,
            )
            assert np.allclose(reduced, sum(r + step for r in range(n)) / n), (step, reduced[:4])
            got = hvd.broadcast(np.full(2048, rank * 10 + step, np.int64), root_rank=2, name="b")
            assert (got == 20 + step).all(), (step, got[:4])
            large = hvd.broadcast(np.full(16384, float(rank + step), np.float32), root_rank=1, name="large")
            assert (large == 1.0 + step).all(), (step, large[:4])
            spaces.append(_stats()["inline_space"])
        stats = _stats()
        return {
            "inline_reductions": stats["inline_reductions"],
            "inline_broadcasts": stats["inline_broadcasts"],
            "allreduce_calls": stats["backend_calls"]["allreduce"],
            "broadcast_calls": stats["backend_calls"]["broadcast"],
            "grew": max(spaces) >= 16 * 1024,
            "within_bound": max(spaces) <= 1024 + 128 * 1024 // n + 8,
        }

    for s in run_cluster(case, 3):
        # "r": calls 1 (coordinator) and 2 (cache hit, too big for the base space) use the backend,
        # and the space grows to 16 KiB; calls 3 to 6 ride inline. "b", the same size, rides inline
        # from its call 2 (its first cache hit), in the space "r" made.
        assert s == {
            "inline_reductions": 4,
            "inline_broadcasts": 5,
            "allreduce_calls": 2,
            "broadcast_calls": 1 + 1,  # "large" once: its later calls go ahead of negotiation (test_eager.py)
            "grew": True,
            "within_bound": True,
        }, s


def test_the_inline_space_shrinks_back_once_idle() -> None:
    def case() -> list:
        hvd.init()
        for step in range(4):
            hvd.allreduce(np.full(8192, step, np.float32), name="r", op=hvd.Sum)  # 32 KiB
        grown = _stats()["inline_space"]
        deadline = time.monotonic() + 20  # idle cycles come every few milliseconds
        while _stats()["inline_space"] > 1024 and time.monotonic() < deadline:
            time.sleep(0.05)
        shrunk = _stats()["inline_space"]
        # And it grows again for the next burst, which is still exact.
        for step in range(4):
            got = hvd.allreduce(np.full(8192, step, np.float32), name="r", op=hvd.Sum)
            assert (got == step * hvd.size()).all()
        return [grown >= 32 * 1024, shrunk, _stats()["inline_reductions"]]

    # Inline: calls 3 and 4 of the first burst, 2 to 4 of the second (the cache still holds "r").
    assert run_cluster(case, 2, timeout=60) == [[True, 1024, 2 + 3]] * 2


# Regressions: joined ranks and process-set changes, broadcasts from a joined root, inline data of
# a joined rank, settings that must agree.


def test_process_set_change_while_a_rank_has_joined_is_an_error_on_every_rank() -> None:
    def case() -> str:
        hvd.init()
        if hvd.rank() == 2:
            hvd.join()
            return "joined"
        try:
            hvd.add_process_set([0, 1])
        except hvd.CollectiveMismatchError as error:
            message = str(error)
        else:
            message = "no error"
        hvd.join()
        return message

    results = run_cluster(case, 3, env={"HOROVOD_DYNAMIC_PROCESS_SETS": "1"}, timeout=60)
    assert results[2] == "joined"
    assert all("cannot run while ranks [2] have joined" in r for r in results[:2]), results


def test_cached_broadcast_from_a_joined_root_is_an_error_not_zeros() -> None:
    def case() -> object:
        hvd.init()
        rank = hvd.rank()
        first = hvd.broadcast(np.full(4, 7.0 if rank == 1 else 0.0, np.float32), root_rank=1, name="b")
        assert first.tolist() == [7.0] * 4
        if rank == 1:
            hvd.join()
            return "joined"
        try:
            hvd.broadcast(np.zeros(4, np.float32), root_rank=1, name="b")  # cached, but the root joined
        except hvd.CollectiveMismatchError as error:
            result = str(error)
        else:
            result = "no error"
        hvd.join()
        return result

    results = run_cluster(case, 2, timeout=60)
    assert "root rank 1, which has already joined" in results[0], results


def test_joined_rank_data_is_not_dropped_from_inline_reductions() -> None:
    def case() -> list:
        hvd.init()
        rank = hvd.rank()
        for name in ("y", "x"):  # cache both; 600 bytes each, so only one fits the 1 KiB inline budget
            hvd.allreduce(np.ones(150, np.float32), name=name, op=hvd.Sum)
        if rank == 1:
            hy = hvd.allreduce_async(np.ones(150, np.float32), name="y", op=hvd.Sum)
            hx = hvd.allreduce_async(np.full(150, 10.0, np.float32), name="x", op=hvd.Sum)
            hvd.join()
            return [float(hvd.synchronize(hx)[0]), float(hvd.synchronize(hy)[0])]
        time.sleep(0.3)  # rank 1 has submitted both and joined
        x = float(hvd.allreduce(np.full(150, 1.0, np.float32), name="x", op=hvd.Sum)[0])
        y = float(hvd.allreduce(np.ones(150, np.float32), name="y", op=hvd.Sum)[0])
        hvd.join()
        return [x, y]

    assert run_cluster(case, 2, env=BASE_INLINE_SPACE_ONLY, timeout=60) == [[11.0, 2.0], [11.0, 2.0]]


@pytest.mark.parametrize(
    ("attribute", "setting"),
    [("fusion_threshold", "HOROVOD_FUSION_THRESHOLD"), ("inline_max_bytes", "HOROVOD_NEGOTIATION_INLINE_MAX_BYTES")],
)
def test_settings_that_shape_the_protocol_must_agree(monkeypatch, attribute: str, setting: str) -> None:
    from horovod.common import config

    original = config.engine_config

    def rank_1_differs(core, env, **kwargs):
        c = original(core, env, **kwargs)
        rank = kwargs["rank"]
        if rank == 1:
            setattr(c, attribute, 0)
        return c

    monkeypatch.setattr(config, "engine_config", rank_1_differs)

    def case() -> str:
        try:
            hvd.init()
        except ValueError as error:
            return str(error)
        return "started"

    results = run_cluster(case, 2, timeout=60)
    assert all(f"{setting} differs between ranks" in r for r in results), results
