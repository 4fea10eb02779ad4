"""Starting and stopping Horovod on this rank: ``init()`` and ``shutdown()``.

This is the top of hvd-core's Python API: it chooses a backend through the plugins, forms the
world, starts the engine and records the new instance in :mod:`horovod.common.state`, below
everything else.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import os
import threading
from collections.abc import Sequence
from typing import Any

from horovod.common import config, gpu_operations, state
from horovod.common.context import Context
from horovod.common.elastic import protocol as elastic_protocol
from horovod.common.exceptions import HorovodInternalError
from horovod.common.plugins import PluginError, get_plugin_manager
from horovod.common.world import Launch, Topology

_init_lock = threading.Lock()


def launch_from_environment() -> Launch:
    """This process's job: horovodrun's ``HOROVOD_*`` variables, else what a plugin recognises
    (a job started by another launcher, e.g. mpirun), else a lone process (rank 0 of 1)."""
    env = dict(os.environ)
    if elastic_protocol.is_elastic(env):  # an elastic job's driver assigns the place in each new world
        from horovod.common.elastic import assignment

        store = get_plugin_manager().rendezvous_store(env)
        if store is None:
            raise HorovodInternalError(
                f"{elastic_protocol.ELASTIC}=1, but no rendezvous server is named: elastic workers are started by "
                "horovodrun --min-np/--host-discovery-script (pip install hvd-runner)"
            )
        return assignment.launch(store, env)
    launch = Launch(topology=config.topology_from_env(env), env=env, job_key=env.get("HOROVOD_JOB_KEY", "job"))
    if "HOROVOD_RANK" in env:  # horovodrun describes every job it starts; no plugin is asked
        return launch
    external = get_plugin_manager().external_launch(env)
    if external is None:
        return launch
    return dataclasses.replace(launch, topology=external.topology, backend=external.backend)


def init(comm: Sequence[int] | Any | None = None, process_sets: Sequence[Any] | str | None = None) -> None:
    """Starts Horovod on this rank (collective: every rank of the job calls it).

    Calling ``init()`` again while running does nothing; after ``shutdown()`` (or a failure) it
    starts a new engine.

    :param comm: the ranks to form the world from: by default every rank of the job; a list of job
        ranks (each listed rank must pass the same list, and gets its rank within it); or an mpi4py
        communicator, whose members form the world (it needs the MPI backend, hvd-backend-mpi).
    :param process_sets: :class:`ProcessSet` objects to register now (every rank must pass the same
        ones, in the same order), or ``"dynamic"`` to allow ``add_process_set`` and
        ``remove_process_set`` later (as ``HOROVOD_DYNAMIC_PROCESS_SETS=1`` does).
    """
    from horovod.common import _core

    slot = state.slot()
    # The process-wide slot is guarded against concurrent init() calls; test-kit threads must not
    # share a lock, since starting an engine waits for every rank to connect.
    with _init_lock if slot is state.process_slot else contextlib.nullcontext():
        if slot.context is not None and slot.context.engine.running:
            return
        if slot.context is not None:  # stopped after a failure: release it before starting again
            _end(slot, slot.context)
        launch = slot.launch or launch_from_environment()
        env = dict(launch.env)
        if process_sets == "dynamic":
            env["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
            process_sets = None
        static_sets = list(process_sets or [])
        from_comms = [ps for ps in static_sets if ps.mpi_comm is not None]
        static_sets = [ps for ps in static_sets if ps.mpi_comm is None]
        if from_comms:  # registered once the engine runs (comm_process_sets), as dynamic sets are
            env["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
        job = launch.topology
        plugins = get_plugin_manager()
        world_size = len(set(comm)) if isinstance(comm, (list, tuple, range)) else job.size
        spec = _choose_backend(plugins, env, world_size, in_process=launch.store is not None, preferred=launch.backend)
        topology, world_key, world_backend = _world(plugins, job, comm, spec.name, env)
        if world_backend is not None and world_backend != spec.name:
            spec = _backend_for_world(plugins, env, world_backend, comm)
        count = next(slot.init_count)
        key_prefix = f"{launch.job_key}/{world_key}/" + (f"init{count}" if launch.generation is None else "world")
        settings = config.engine_config(
            _core,
            env,
            rank=topology.rank,
            size=topology.size,
            key_prefix=key_prefix,
            local_rank=topology.local_rank if comm is None else None,
        )
        settings.process_sets = [ps.ranks for ps in static_sets]
        gpu = gpu_operations.choose(plugins, env)
        settings.device_ops = gpu.op_mask(_core)

        backend = _core.Backend.load(spec.library_path())
        device_backend = gpu_operations.load(_core, gpu, rank=topology.rank)
        if launch.store is not None:
            store = launch.store
        else:  # a backend a plugin named for an external job or world connects its ranks by itself
            store = _store_for(_core, plugins, env, topology, spec.name in (launch.backend, world_backend))
        engine = _core.Engine(settings, backend, store, device_backend)
        engine.start()
        for ps_id, ps in enumerate(static_sets, start=1):
            ps.process_set_id = ps_id
        slot.context = Context(engine, topology, spec.name, job)
        if settings.autotune and topology.rank == 0:
            slot.context.tuner = _start_tuner(engine, env, settings, topology)
        if comm is not None and world_backend is None:  # a sub-world's hosts are known by asking its members
            slot.context.topology = _gathered_topology(env, topology)
        if slot is state.process_slot:
            _core.publish_engine(engine)  # native framework kernels submit to the process's engine
            _shutdown_at_exit()
        if from_comms:  # every rank has them (its own communicators), as Horovod requires
            _register_comm_sets(slot, plugins, engine, from_comms, comm, spec.name, static_sets)
        if settings.timeline_all_ranks and settings.timeline_path:  # every rank's on one clock
            from horovod.common import timelines

            timelines.note_clock(f"{settings.timeline_path}.rank{topology.rank}")
    plugins.after_init(topology.rank, topology.size, spec.name)


def _start_tuner(engine: Any, env: Any, settings: Any, topology: Any) -> Any:
    """Rank 0's autotuner (horovod.common.autotune), which every rank follows through negotiation."""
    from horovod.common.autotune import AutotuneOptions, Autotuner, Settings

    start = Settings(
        settings.fusion_threshold,
        settings.cycle_time_ms,
        settings.hierarchical_allreduce,
        settings.hierarchical_allgather,
    )
    tuner = Autotuner.create(engine, env, AutotuneOptions.from_env(env), start, topology.local_size < topology.size)
    tuner.start()
    return tuner


def _register_comm_sets(
    slot: state.Slot, plugins: Any, engine: Any, sets: list[Any], world: Any, backend: str, listed: list[Any]
) -> None:
    """Process sets made from communicators; when that fails (on any rank) Horovod is stopped here
    too, as every rank raises."""
    from horovod.common import comm_process_sets

    try:
        comm_process_sets.register(plugins, engine, sets, world, backend, listed)
    except BaseException:
        if slot.context is not None:
            _end(slot, slot.context)
        raise


_exit_hook_installed = False


def _shutdown_at_exit() -> None:
    """Stops the engine before the interpreter finalizes (as Horovod does): its thread must not
    be inside a callback into Python while the interpreter tears down."""
    global _exit_hook_installed
    if not _exit_hook_installed:
        atexit.register(shutdown)
        _exit_hook_installed = True


def _gathered_topology(env: dict[str, str], world: Topology) -> Topology:
    """Local and cross ranks of a world made with init(comm=[...]), from every member's host.

    Horovod's definitions: local ranks count the members on the same host; the cross
    communicator holds the members with the same local rank, ordered by rank.
    """
    import numpy as np

    from horovod.common.ops import allgather

    host = config.host_key(env)
    key = int.from_bytes(hashlib.sha256(host.encode()).digest()[:8], "little", signed=True)
    hosts = allgather(np.array([key], np.int64), name="__hvd.topology.hosts").tolist()
    me = world.rank
    same_host = [r for r in range(world.size) if hosts[r] == hosts[me]]
    local_rank = same_host.index(me)
    local_ranks = [sum(1 for q in range(r) if hosts[q] == hosts[r]) for r in range(world.size)]
    cross = [r for r in range(world.size) if local_ranks[r] == local_rank]
    return Topology(me, world.size, local_rank, len(same_host), cross.index(me), len(cross))


def _world(
    plugins: Any, job: Topology, comm: Any, backend: str, env: dict[str, str]
) -> tuple[Topology, str, str | None]:
    """The topology of the world init() creates, a key naming it in the store, and the backend that
    must serve it when a plugin described it (None: hvd-core formed it, any backend serves it)."""
    if comm is not None and not isinstance(comm, (list, tuple, range)):
        described = plugins.init_world(comm, job, backend, env)
        if described is None:
            raise ValueError(
                f"init(comm=...) takes a list of ranks or a communicator that an installed plugin understands "
                f"(an mpi4py communicator needs the MPI backend: pip install hvd-backend-mpi); "
                f"got {type(comm).__name__}"
            )
        return (
            described.topology,
            "-".join(filter(None, ("comm", described.backend, described.name))),
            described.backend,
        )
    ranks = None if comm is None else _member_ranks(job, comm)
    plugins.init_world(ranks, job, backend, env)  # the chosen backend may prepare for this world
    if ranks is None:
        return job, "world", None
    # Local and cross ranks are filled in once the members can be asked for their hosts.
    return Topology(rank=ranks.index(job.rank), size=len(ranks)), "comm" + "-".join(map(str, ranks)), None


def _member_ranks(job: Topology, comm: Sequence[int]) -> list[int]:
    ranks = sorted({int(r) for r in comm})
    if not ranks or ranks[0] < 0 or ranks[-1] >= job.size:
        raise ValueError(f"init(comm={list(comm)}): ranks must lie in [0, {job.size})")
    if job.rank not in ranks:
        raise ValueError(f"init(comm={list(comm)}): this process (rank {job.rank}) is not in the list")
    return ranks


def _choose_backend(
    plugins: Any, env: dict[str, str], size: int, in_process: bool, preferred: str | None = None
) -> Any:
    """The backend asked for (HOROVOD_CPU_OPERATIONS...), else the one the job's launcher needs
    (``preferred``), else the default CPU backend."""
    requested = config.requested_backend(env) or preferred
    if requested:
        spec = plugins.backend(requested)
    else:
        try:
            spec = plugins.default_backend("cpu")
        except PluginError:
            if size > 1:
                raise
            spec = plugins.backend("inmemory")  # a lone process needs no transport
    if spec.in_process_only and size > 1 and not in_process:
        raise ValueError(
            f"backend {spec.name!r} connects ranks inside one process only; it cannot run a job of {size} processes"
        )
    return spec


def _backend_for_world(plugins: Any, env: dict[str, str], needed: str, comm: Any) -> Any:
    """The backend a plugin's world needs, unless the user asked for another one."""
    requested = config.requested_backend(env)
    if requested and requested != needed:
        raise ValueError(
            f"init(comm=<{type(comm).__name__}>) needs the {needed!r} backend, but {requested!r} was asked for "
            "(HOROVOD_CPU_OPERATIONS / HOROVOD_CONTROLLER)"
        )
    return plugins.backend(needed)


def _store_for(core: Any, plugins: Any, env: dict[str, str], topology: Topology, connects_itself: bool) -> Any:
    """The store connecting this process to its job: the launcher's, or an unused in-memory one for
    one rank or a backend that connects its ranks by itself (an external launcher's, e.g. MPI's)."""
    store = plugins.rendezvous_store(env)
    if store is not None and elastic_protocol.is_elastic(env):
        from horovod.common.elastic.assignment import WorldStore

        store = WorldStore(store, env)
    if store is not None:
        return core.CallbackStore(store.set, store.get)
    if topology.size == 1 or connects_itself:
        return core.InMemoryStore()
    raise HorovodInternalError(
        f"this process is rank {topology.rank} of {topology.size}, but no rendezvous server was given; "
        "start the job with horovodrun (pip install hvd-runner)"
    )


def shutdown() -> None:
    """Stops Horovod on this rank (and, as in Horovod, every peer's engine). Idempotent."""
    slot = state.slot()
    ctx = slot.context
    if ctx is None:
        return
    get_plugin_manager().before_shutdown()
    _end(slot, ctx)


def _end(slot: state.Slot, ctx: Context) -> None:
    """Stops ``ctx``'s engine and forgets the instance; native framework kernels are told first, so
    that they submit to no engine (and say Horovod is not running) rather than to a stopped one."""
    from horovod.common import _core

    if slot is state.process_slot:
        _core.publish_engine(None)
    slot.context = None
    ctx.shutdown()
