"""RayExecutor on a one-node Ray cluster: results by rank, collectives, failures, shutdown."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import psutil
import pytest

from horovod.ray import RayExecutor, WorkerError

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("local_ray")]


def topology_and_sums(scale: float = 1.0) -> dict:
    import horovod.common as hvd

    hvd.init()
    r = hvd.rank()
    total = hvd.allreduce(np.arange(4, dtype=np.float64) * (r + 1), op=hvd.Sum, name="sum")
    gathered = hvd.allgather(np.full(r + 1, r, dtype=np.int32), name="gather")
    root = hvd.broadcast(np.array([r * 10.0]), root_rank=hvd.size() - 1, name="bcast")
    return {
        "rank": r,
        "size": hvd.size(),
        "local": (hvd.local_rank(), hvd.local_size()),
        "sum": (total * scale).tolist(),
        "gathered": gathered.tolist(),
        "root": float(root[0]),
        "pid": os.getpid(),
    }


@pytest.mark.parametrize("workers", [2, 3])
def test_run_execute_and_run_remote(workers: int) -> None:
    import ray

    executor = RayExecutor(RayExecutor.create_settings(timeout_s=30), num_workers=workers, cpus_per_worker=1)
    executor.start()
    try:
        results = executor.run(topology_and_sums, kwargs={"scale": 2.0})
        expected_sum = [2.0 * i * sum(range(1, workers + 1)) for i in range(4)]
        gathered = [r for r in range(workers) for _ in range(r + 1)]
        assert [r["rank"] for r in results] == list(range(workers))
        for r in results:
            assert r["size"] == workers and r["local"] == (r["rank"], workers)  # one node: local = global
            assert r["sum"] == expected_sum and r["gathered"] == gathered and r["root"] == 10.0 * (workers - 1)
        refs = executor.run_remote(topology_and_sums)
        assert [ray.get(ref)["rank"] for ref in refs] == list(range(workers))
        assert executor.execute(lambda executable: executable) == [None] * workers
    finally:
        executor.shutdown()


class Counter:
    """An object each worker keeps between calls (``start(executable_cls=...)``)."""

    def __init__(self, start: int, step: int = 1) -> None:
        self.value, self.step = start, step

    def bump(self) -> int:
        import horovod.common as hvd

        hvd.init()
        self.value += self.step * (hvd.rank() + 1)
        return self.value


def test_executable_objects_and_execute_single() -> None:
    executor = RayExecutor(num_workers=2)
    executor.start(executable_cls=Counter, executable_args=[100], executable_kwargs={"step": 5})
    try:
        assert executor.execute(lambda c: c.bump()) == [105, 110]
        assert executor.execute(lambda c: c.bump()) == [110, 120]  # the same objects, kept
        assert executor.execute_single(lambda c: c.value) == 110
        seen: list[int] = []
        assert executor.execute(lambda c: c.value, callbacks=[seen.append]) == [110, 120]
        assert sorted(seen) == [110, 120]
    finally:
        executor.shutdown()


def test_a_failing_function_names_its_rank_and_the_others_are_told() -> None:
    def fails_on_rank_1() -> float:
        import horovod.common as hvd

        hvd.init()
        if hvd.rank() == 1:
            raise ValueError("injected failure on rank 1")
        try:
            return float(hvd.allreduce(np.ones(1), name="after")[0])
        except hvd.HorovodInternalError as error:
            return str(error)  # type: ignore[return-value]

    executor = RayExecutor(num_workers=3)
    executor.start()
    try:
        with pytest.raises(WorkerError, match="rank 1 failed: ValueError: injected failure on rank 1") as raised:
            executor.run(fails_on_rank_1)
        assert raised.value.rank == 1
        # The executor stays usable: Horovod starts again in every worker.
        assert [r["size"] for r in executor.run(topology_and_sums)] == [3, 3, 3]
    finally:
        executor.shutdown()


def test_a_killed_worker_actor_is_a_clear_error() -> None:
    def dies_on_rank_2() -> int:
        import horovod.common as hvd

        hvd.init()
        if hvd.rank() == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        hvd.allreduce(np.ones(1), name="x")  # the others' collective fails: rank 2 is gone
        return hvd.rank()

    executor = RayExecutor(num_workers=3)
    executor.start()
    try:
        with pytest.raises(WorkerError, match=r"rank 2's worker actor died \(its process was killed or crashed\)"):
            executor.run(dies_on_rank_2)
    finally:
        executor.shutdown()


def test_shutdown_leaves_no_actor_and_no_process() -> None:
    import ray

    # The GCS's actor table: Ray's public state API (ray.util.state) needs the dashboard, which these
    # clusters do not run (it needs ray[default]).
    from ray._private.state import actors

    executor = RayExecutor(num_workers=2)
    executor.start()
    pids = [r["pid"] for r in executor.run(topology_and_sums)]
    executor.shutdown()
    executor.shutdown()  # idempotent
    deadline = time.monotonic() + 30
    while True:
        alive_actors = [
            a for a in actors().values() if a["ActorClassName"] == "BaseHorovodWorker" and a["State"] != "DEAD"
        ]
        alive_pids = [p for p in pids if _running(p)]
        # Ray frees a removed placement group's CPUs a moment after remove_placement_group returns.
        reserved = ray.cluster_resources()["CPU"] - ray.available_resources().get("CPU", 0.0)
        if (not alive_actors and not alive_pids and not reserved) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not alive_actors and not alive_pids, (alive_actors, alive_pids)
    assert reserved == 0, f"{reserved} CPU(s) still reserved after shutdown"  # the placement group was freed


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # gone between the listing and the look
        return False


def test_placement_that_cannot_be_satisfied_times_out_naming_it() -> None:
    executor = RayExecutor(RayExecutor.create_settings(placement_group_timeout_s=2), num_workers=8)
    with pytest.raises(TimeoutError, match=r"Ray could not place 8 worker\(s\) .* within 2 s"):
        executor.start()
    executor.shutdown()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="give either num_workers, or num_hosts"):
        RayExecutor(num_workers=2, num_hosts=1)
    with pytest.raises(ValueError, match="ElasticRayExecutor"):
        RayExecutor(num_workers=2, min_workers=1)
    with pytest.raises(RuntimeError, match="call start\\(\\) first"):
        RayExecutor(num_workers=1).run(print)
    assert RayExecutor(num_slots=3).num_workers == 3  # Horovod's older spelling


def test_workers_with_their_own_working_directory_and_environment(tmp_path) -> None:
    """Ray starts the workers in another directory (the job's working_dir) and environment: hvd is
    found by import, and the job's variables reach the workers all the same."""
    import ray

    ray.shutdown()
    (tmp_path / "marker.txt").write_text("here")
    ray.init(
        num_cpus=4,
        include_dashboard=False,
        runtime_env={"working_dir": str(tmp_path), "env_vars": {"HVD_TEST_FROM_RAY": "1"}},
    )

    def where() -> tuple:
        import horovod.common as hvd

        hvd.init()
        return (
            os.getcwd() != str(tmp_path) and os.path.exists("marker.txt"),
            os.environ.get("HVD_TEST_FROM_RAY"),
            (
                os.environ.get("HVD_EXTRA"),
                hvd.size(),
            ),
        )

    executor = RayExecutor(num_workers=2)
    executor.start(extra_env_vars={"HVD_EXTRA": "yes"})
    try:
        assert executor.run(where) == [(True, "1", ("yes", 2))] * 2
    finally:
        executor.shutdown()


def test_workers_threads_are_their_cpus_unless_set(capsys) -> None:
    """Each worker's intra-op thread variables (horovodrun's rule) are its CPUs in Ray; a variable
    the user set stays."""
    from horovod.runner import threads

    def thread_variables() -> list[str]:
        return [os.environ.get(name, "-") for name in threads.VARIABLES]

    executor = RayExecutor(num_workers=2, cpus_per_worker=2)
    executor.start(extra_env_vars={"MKL_NUM_THREADS": "5"})
    try:
        assert executor.run(thread_variables) == [["2", "5", "2", "2"]] * 2
    finally:
        executor.shutdown()
    assert "each worker's CPUs in Ray" in capsys.readouterr().out


def straggling(late: float) -> int:
    import horovod.common as hvd

    hvd.init()
    for _ in range(4):
        if hvd.rank() == 1:
            time.sleep(late)
        hvd.allreduce(np.ones(8, np.float32), name="gradient")
    hvd.shutdown()  # each worker posts its part of the job-end report here
    return 0


def test_shutdown_prints_the_job_end_report_naming_the_straggler(capfd: pytest.CaptureFixture[str]) -> None:
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=30), num_workers=2, cpus_per_worker=1)
    executor.start()
    try:
        executor.run(straggling, args=[0.3])
    finally:
        executor.shutdown()
    err = capfd.readouterr().err
    assert "horovod.ray: job report: 2 of 2 ranks reported" in err, err[-3000:]
    assert "horovod.ray:   straggler: rank 1 arrived last at" in err, err[-3000:]
