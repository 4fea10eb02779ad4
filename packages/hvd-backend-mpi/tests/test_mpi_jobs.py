"""Jobs started by mpiexec without horovodrun: MPI's life in the process, mpi4py interop, init(comm=...).

Each case runs on fresh processes (MPI is initialised once per process, and these tests are about
who initialises and finalises it); the processes must also exit cleanly.
"""

from __future__ import annotations

import numpy as np
import pytest

import _mpirun
import horovod.common as hvd
from horovod.backends.mpi import comms, launcher
from horovod.backends.mpi import runtime as mpi_runtime


def init_and_shutdown_twenty_times() -> tuple:
    sums = []
    for round_ in range(20):
        hvd.init()
        sums.append(float(hvd.allreduce(np.full(1, round_ + hvd.rank(), np.float32), op=hvd.Sum, name=f"r{round_}")[0]))
        hvd.shutdown()
    hvd.init()
    threads = hvd.mpi_threads_supported()
    hvd.shutdown()
    return sums, mpi_runtime.initialized_here(), mpi_runtime.thread_level(), threads


def test_init_after_shutdown_twenty_times_on_one_mpi() -> None:
    results = _mpirun.run_once(init_and_shutdown_twenty_times, 2)
    # hvd initialised MPI (with MPI_THREAD_MULTIPLE) and finalised it at exit: run_once checks the exit.
    assert results == [([2.0 * r + 1 for r in range(20)], True, mpi_runtime.THREAD_MULTIPLE, True)] * 2


def mpi4py_first() -> tuple:
    from mpi4py import MPI  # initialises MPI, with MPI_THREAD_MULTIPLE (mpi4py's default)

    hvd.init()
    world = MPI.COMM_WORLD
    assert (hvd.rank(), hvd.size()) == (world.Get_rank(), world.Get_size())
    assert hvd.mpi_enabled() and hvd.mpi_built() and hvd.mpi_threads_supported()
    # mpi4py's collective on the main thread while hvd's engine thread runs its own.
    pending = hvd.allreduce_async(np.ones(4), op=hvd.Sum, name="beside")
    total = world.allreduce(world.Get_rank(), op=MPI.SUM)
    beside = hvd.synchronize(pending).tolist()
    hvd.shutdown()
    still_usable = world.allreduce(1, op=MPI.SUM) == world.Get_size()  # hvd did not finalise mpi4py's MPI
    hvd.init()
    hvd.shutdown()
    return mpi_runtime.initialized_here(), MPI.Is_finalized(), total, beside, still_usable


def test_mpi4py_imported_first_is_reused_and_left_to_mpi4py() -> None:
    n = 3
    # mpi4py finalises MPI at exit; hvd must not (run_once checks that the ranks exit cleanly).
    assert _mpirun.run_once(mpi4py_first, n) == [(False, False, n * (n - 1) // 2, [float(n)] * 4, True)] * n


def hvd_first_then_mpi4py() -> tuple:
    hvd.init()
    assert hvd.mpi_threads_supported()  # the seed's first mpi4py example
    from mpi4py import MPI  # MPI is initialised already: mpi4py uses it and leaves finalising to hvd

    assert hvd.size() == MPI.COMM_WORLD.Get_size()
    return mpi_runtime.initialized_here(), MPI.COMM_WORLD.allreduce(hvd.rank(), op=MPI.SUM)


def test_mpi4py_imported_after_init_uses_horovods_mpi() -> None:
    # run_once checks that the ranks exit cleanly: hvd finalises MPI, after mpi4py's exit handler.
    assert _mpirun.run_once(hvd_first_then_mpi4py, 2) == [(True, 1)] * 2


def thread_support() -> tuple:
    hvd.init()
    summed = hvd.allreduce(np.ones(2), op=hvd.Sum, name="x").tolist()
    return hvd.mpi_threads_supported(), mpi_runtime.THREAD_LEVELS[mpi_runtime.thread_level()], summed


def test_threads_disabled_is_reported_honestly() -> None:
    results = _mpirun.run_once(thread_support, 2, env={"HOROVOD_MPI_THREADS_DISABLE": "1"})
    assert results == [(False, "MPI_THREAD_SERIALIZED", [2.0, 2.0])] * 2


def split_comm_world() -> tuple:
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    sub = world.Split(color=world.rank % 2, key=world.rank)  # the seed's example
    singles = [hvd.ProcessSet([0]), hvd.ProcessSet([1])]  # process sets inside the sub-world
    hvd.init(comm=sub, process_sets=singles)
    # The same tensor names in both halves: two independent Horovod jobs.
    total = float(hvd.allreduce(np.full(1, world.rank, np.float32), op=hvd.Sum, name="half")[0])
    members = hvd.allgather(np.array([world.rank]), name="members").tolist()
    mine = singles[hvd.rank()]
    by_itself = float(hvd.allreduce(np.full(1, world.rank, np.float32), op=hvd.Sum, name="self", process_set=mine)[0])
    place = (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_size(), hvd.mpi_enabled())
    hvd.barrier()  # shutdown stops the peers' engines too: not before they are done with theirs
    hvd.shutdown()
    hvd.init()  # the whole job again: the world is MPI_COMM_WORLD once more
    whole = (hvd.size(), float(hvd.allreduce(np.ones(1), op=hvd.Sum, name="whole")[0]))
    hvd.shutdown()
    sub.Free()
    return place, total, members, by_itself, whole


def test_comm_world_split_into_two_independent_jobs() -> None:
    results = _mpirun.run_once(split_comm_world, 4)
    for world_rank, (place, total, members, by_itself, whole) in enumerate(results):
        color = world_rank % 2
        assert place == (world_rank // 2, 2, world_rank // 2, 2, 1, True), (world_rank, place)
        assert total == sum(r for r in range(4) if r % 2 == color), (world_rank, total)
        assert members == [r for r in range(4) if r % 2 == color]
        assert by_itself == world_rank and whole == (4, 4.0)


def rank_lists() -> tuple:
    from horovod.common.testing.probes import job_topology

    job_rank = job_topology().rank
    hvd.init(comm=[2, 0] if job_rank != 1 else [1])
    total = float(hvd.allreduce(np.full(1, job_rank, np.float32), op=hvd.Sum, name="listed")[0])
    listed = (hvd.rank(), hvd.size(), total)
    hvd.shutdown()
    hvd.init()
    whole = hvd.size()
    hvd.shutdown()
    return listed, whole


def test_init_with_a_list_of_ranks() -> None:
    assert _mpirun.run_once(rank_lists, 3) == [((0, 2, 2.0), 3), ((0, 1, 1.0), 3), ((1, 2, 2.0), 3)]


def refused_comms() -> tuple:
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    alone = world.Split(color=world.rank, key=0)
    inter = alone.Create_intercomm(0, world, 1 - world.rank, tag=7)
    messages = []
    for comm in (object(), MPI.COMM_NULL, inter):
        try:
            hvd.init(comm=comm)
        except ValueError as error:
            messages.append(str(error))
        else:
            raise AssertionError(f"init(comm={comm!r}) was accepted")
    inter.Free()
    alone.Free()
    hvd.init(comm=world)  # nothing was left half-made
    size = hvd.size()
    hvd.shutdown()
    return messages, size


def test_communicators_it_cannot_use_are_refused_clearly() -> None:
    for messages, size in _mpirun.run_once(refused_comms, 2):
        assert "a communicator that an installed plugin understands" in messages[0] and "got object" in messages[0]
        assert "init(comm=MPI.COMM_NULL): this process is not a member" in messages[1]
        assert "must be an intracommunicator" in messages[2]
        assert size == 2


def test_two_mpi_libraries_in_one_process_are_refused() -> None:
    with pytest.raises(
        ValueError,
        match=r"mpi4py runs on 'MPICH Version: 5.0.2', but hvd-backend-mpi was built for "
        r"'Open MPI v5.0.11, package: y'",
    ):
        comms._check_same_mpi("MPICH Version: 5.0.2\nMPICH Release date: x\n", "Open MPI v5.0.11, package: y\n")
    comms._check_same_mpi("Open MPI v5.0.11\n", "Open MPI v5.0.11")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OMPI_COMM_WORLD_SIZE": "2"}, True),
        ({"PMI_SIZE": "4", "PMI_RANK": "1"}, True),
        ({"PMIX_RANK": "0"}, True),
        ({"MPI_LOCALNRANKS": "2"}, True),
        ({"HOROVOD_SIZE": "2", "SLURM_PROCID": "1"}, False),
        ({"PMI_SIZE": " "}, False),
    ],
)
def test_mpi_launchers_are_recognised_by_their_variables(env: dict, expected: bool) -> None:
    assert launcher.started_by_mpi_launcher(env) is expected


def process_sets_from_split() -> tuple:
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    sub = world.Split(color=world.rank % 2, key=world.rank)  # Horovod's example: each rank its half
    mine = hvd.ProcessSet(sub)
    hvd.init(process_sets=[mine])
    total = float(hvd.allreduce(np.full(1, world.rank, np.float32), op=hvd.Sum, name="half", process_set=mine)[0])
    root = max(mine.ranks)  # a global rank, as Horovod's root_rank is
    got = float(hvd.broadcast(np.array([world.rank * 10.0]), root_rank=root, name="b", process_set=mine)[0])
    result = (mine.ranks, mine.process_set_id, mine.size(), mine.rank(), total, got, mine.mpi_comm is sub)
    hvd.barrier()
    hvd.shutdown()
    sub.Free()
    return result


def test_process_sets_from_communicators() -> None:
    results = _mpirun.run_once(process_sets_from_split, 3)
    assert results == [
        ([0, 2], 1, 2, 0, 2.0, 20.0, True),
        ([1], 2, 1, 0, 1.0, 10.0, True),
        ([0, 2], 1, 2, 1, 2.0, 20.0, True),
    ]
