"""Jobs and worlds that horovodrun did not describe: the hooks hvd_external_launch and hvd_init_world.

A job started by another launcher (mpirun) is described by the plugin that recognises it; an object
given to init(comm=...) that is not a list of ranks (an mpi4py communicator) is understood by the
plugin that knows it. Here test plugins registered in this process play those parts, with the
in-memory backend standing in for MPI.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common import lifecycle, state
from horovod.common.plugin_api import ExternalWorld, PluginError, Topology, get_plugin_manager, hookimpl
from horovod.common.plugins import reset_plugin_manager
from horovod.common.testing import run_cluster
from horovod.common.testing.cases import expect_error


@pytest.fixture(autouse=True)
def _fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Any:
    for key in ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_CPU_OPERATIONS", "HOROVOD_CONTROLLER"):
        monkeypatch.delenv(key, raising=False)
    reset_plugin_manager()
    yield
    hvd.shutdown()
    reset_plugin_manager()


class Launcher:
    """Recognises a job by FAKE_LAUNCHER_RANK, as an MPI plugin recognises mpirun's variables."""

    def __init__(self, backend: str = "inmemory") -> None:
        self.backend = backend
        self.asked = 0

    @hookimpl
    def hvd_external_launch(self, env: Mapping[str, str]) -> ExternalWorld | None:
        self.asked += 1
        if "FAKE_LAUNCHER_RANK" not in env:
            return None
        return ExternalWorld(Topology(rank=int(env["FAKE_LAUNCHER_RANK"]), size=1), backend=self.backend)


@dataclasses.dataclass
class FakeComm:
    """A communicator object hvd-core does not know: members of one color of a 4-rank job."""

    color: int
    members: list


class CommPlugin:
    """Understands FakeComm, and records every world init() asked it to prepare."""

    def __init__(self, backend: str = "inmemory") -> None:
        self.backend = backend
        self.prepared: list = []

    @hookimpl
    def hvd_init_world(self, comm: Any, job: Topology, backend: str, env: Mapping[str, str]) -> ExternalWorld | None:
        if not isinstance(comm, FakeComm):
            self.prepared.append((comm, job.rank, job.size, backend))
            return None
        me = comm.members.index(job.rank)
        topology = Topology(rank=me, size=len(comm.members), local_rank=me, local_size=len(comm.members))
        return ExternalWorld(topology, backend=self.backend, name=f"color{comm.color}")


def test_a_recognised_launcher_describes_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    launcher = Launcher()
    get_plugin_manager().register(launcher, name="fake-launcher")
    monkeypatch.setenv("FAKE_LAUNCHER_RANK", "0")
    launch = lifecycle.launch_from_environment()
    assert launch.topology == Topology(rank=0, size=1) and launch.backend == "inmemory"
    monkeypatch.delenv("FAKE_LAUNCHER_RANK")
    assert lifecycle.launch_from_environment().backend is None and launcher.asked == 2


def test_horovodrun_variables_win_and_no_plugin_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    launcher = Launcher()
    get_plugin_manager().register(launcher, name="fake-launcher")
    monkeypatch.setenv("FAKE_LAUNCHER_RANK", "0")
    monkeypatch.setenv("HOROVOD_RANK", "0")
    monkeypatch.setenv("HOROVOD_SIZE", "1")
    launch = lifecycle.launch_from_environment()
    assert launch.backend is None and launcher.asked == 0


def test_init_uses_the_backend_the_launcher_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    get_plugin_manager().register(Launcher(), name="fake-launcher")
    monkeypatch.setenv("FAKE_LAUNCHER_RANK", "0")
    hvd.init()
    assert hvd.rank() == 0 and hvd.size() == 1 and state.context().backend_name == "inmemory"
    assert hvd.allreduce(np.ones(2), op=hvd.Sum, name="x").tolist() == [1.0, 1.0]


def test_an_answer_that_is_not_an_external_world_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        @hookimpl
        def hvd_external_launch(self, env: Mapping[str, str]) -> Any:
            return (0, 1)

    get_plugin_manager().register(Broken(), name="broken-launcher")
    with pytest.raises(PluginError, match=r"answered hvd_external_launch with \(0, 1\), which is not an ExternalWorld"):
        lifecycle.launch_from_environment()


def test_a_comm_object_forms_independent_worlds() -> None:
    plugin = CommPlugin()
    get_plugin_manager().register(plugin, name="fake-comms")

    def case() -> tuple:
        job_rank = state.slot().launch.topology.rank
        color = job_rank % 2
        hvd.init(comm=FakeComm(color, [r for r in range(4) if r % 2 == color]))
        total = hvd.allreduce(np.full(1, job_rank, np.float32), name="world", op=hvd.Sum)
        return hvd.rank(), hvd.size(), hvd.local_size(), float(total[0])

    # Ranks 0 and 2 sum to 2, ranks 1 and 3 to 4: each half reduces among its members only.
    assert run_cluster(case, 4) == [(0, 2, 2, 2.0), (0, 2, 2, 4.0), (1, 2, 2, 2.0), (1, 2, 2, 4.0)]
    assert plugin.prepared == []  # asked about objects only: no world of ranks was formed


def test_every_init_lets_plugins_prepare_the_world_of_ranks() -> None:
    plugin = CommPlugin()
    get_plugin_manager().register(plugin, name="fake-comms")

    def case() -> None:
        hvd.init()
        hvd.shutdown()
        job_rank = state.slot().launch.topology.rank
        hvd.init(comm=[1, 0] if job_rank < 2 else [2])

    run_cluster(case, 3)
    assert sorted(plugin.prepared, key=repr) == sorted(
        [
            (None, 0, 3, "inmemory"),
            (None, 1, 3, "inmemory"),
            (None, 2, 3, "inmemory"),
            ([0, 1], 0, 3, "inmemory"),
            ([0, 1], 1, 3, "inmemory"),
            ([2], 2, 3, "inmemory"),
        ],
        key=repr,
    )


def test_a_comm_object_nobody_understands_is_a_clear_error() -> None:
    def case() -> str:
        return expect_error(
            ValueError,
            ("init(comm=...) takes a list of ranks", "hvd-backend-mpi", "got object"),
            lambda: hvd.init(comm=object()),
        )

    run_cluster(case, 1)


def test_a_world_needing_another_backend_than_requested_is_refused() -> None:
    get_plugin_manager().register(CommPlugin(backend="other"), name="fake-comms")

    def case() -> str:
        return expect_error(
            ValueError,
            ("init(comm=<FakeComm>) needs the 'other' backend", "'inmemory' was asked for"),
            lambda: hvd.init(comm=FakeComm(0, [0])),
        )

    run_cluster(case, 1)


class Group:
    def __init__(self, members: list[int]) -> None:
        self.members = members


class SplitComm:
    """A communicator of some of the world's ranks, as MPI.COMM_WORLD.Split makes them."""

    def __init__(self, members: list[int]) -> None:
        self.members = members

    def Get_group(self) -> Group:
        return Group(self.members)


class SetPlugin:
    """Translates SplitComm objects into world ranks, as the MPI plugin translates communicators."""

    @hookimpl
    def hvd_process_set_ranks(self, comm: Any, world: Any, backend: str) -> list[int] | None:
        if not isinstance(comm, SplitComm):
            return None
        if state.topology().rank not in comm.members:
            raise ValueError("this process is not a member of that communicator")
        return comm.members


def test_process_sets_from_communicators_differ_per_rank_and_all_get_registered() -> None:
    get_plugin_manager().register(SetPlugin(), name="fake-sets")

    def case() -> tuple:
        job_rank = state.slot().launch.topology.rank
        mine = hvd.ProcessSet(SplitComm([r for r in range(3) if r % 2 == job_rank % 2]))  # Horovod's Split example
        listed = hvd.ProcessSet([0, 1])
        hvd.init(process_sets=[mine, listed])
        total = hvd.allreduce(np.full(1, job_rank + 1, np.float32), op=hvd.Sum, name="mine", process_set=mine)
        return mine.ranks, mine.process_set_id, mine.size(), float(total[0]), listed.process_set_id

    # The list-based set is registered first (id 1); then the union of every rank's sets, sorted.
    assert run_cluster(case, 3) == [([0, 2], 2, 2, 4.0, 1), ([1], 3, 1, 2.0, 1), ([0, 2], 2, 2, 4.0, 1)]


def test_a_process_set_communicator_refused_on_one_rank_fails_on_every_rank() -> None:
    get_plugin_manager().register(SetPlugin(), name="fake-sets")

    def case() -> str:
        job_rank = state.slot().launch.topology.rank
        foreign = hvd.ProcessSet(SplitComm([0] if job_rank == 1 else [0, 1]))  # rank 1 is not a member of its own
        return expect_error(ValueError, (), lambda: hvd.init(process_sets=[foreign]))

    for message in run_cluster(case, 2):
        assert message == "rank 1: this process is not a member of that communicator", message
    assert not hvd.is_initialized()


def test_a_communicator_no_plugin_understands() -> None:
    def case() -> str:
        return expect_error(ValueError, (), lambda: hvd.init(process_sets=[hvd.ProcessSet(SplitComm([0]))]))

    (message,) = run_cluster(case, 1)
    assert "rank 0: ProcessSet(<SplitComm>): no installed plugin understands it" in message
    with pytest.raises(ValueError, match=r"registered by hvd\.init"):
        hvd.add_process_set(hvd.ProcessSet(SplitComm([0])))
