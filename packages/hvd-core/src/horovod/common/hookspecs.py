"""The hooks hvd plugins implement (pluggy project ``"horovod"``, entry-point group ``horovod``).

A plugin is a light ``hooks.py`` module named by an entry point in the ``horovod`` group; it
implements some of the hooks below with ``@hookimpl`` and imports nothing heavy at import time.

Contract rule: hooks only gain arguments; never rename one (or one of its arguments) in place.
pluggy passes each implementation only the arguments it names, so a plugin written against an
older hvd-core keeps working when a hook gains an argument. A rename would break every plugin that
exists, so a changed meaning gets a new hook (with its own ``versionadded``) instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pluggy

from horovod.common.registry import BackendSpec, FrameworkSpec, RendezvousStore
from horovod.common.world import ExternalWorld, Topology

hookspec = pluggy.HookspecMarker("horovod")
hookimpl = pluggy.HookimplMarker("horovod")


# --- Registration: called once when plugins are loaded (lazily, on first use). --------------------


@hookspec
def hvd_register_backends(register: Callable[[BackendSpec], None]) -> None:
    """Register the collective backends this plugin provides, by calling ``register(spec)``.

    Only describe the backend here; its shared library is opened by the engine when it is chosen.

    .. versionadded:: 0.1
    """


@hookspec
def hvd_register_frameworks(register: Callable[[FrameworkSpec], None]) -> None:
    """Register the framework bindings this plugin provides, by calling ``register(spec)``.

    .. versionadded:: 0.1
    """


# --- Connection: how a process launched by a plugin's launcher reaches its peers. --------------------


@hookspec(firstresult=True)
def hvd_rendezvous_store(env: Mapping[str, str]) -> RendezvousStore | None:
    """A key-value store for connecting this process to its job, or None if ``env`` does not
    describe a job started by this plugin's launcher (the first non-None answer wins).

    The store is used while communicators are created (backends exchange addresses through it).

    .. versionadded:: 0.1
    """


# --- Discovery: jobs and worlds that horovodrun did not describe. ------------------------------------


@hookspec(firstresult=True)
def hvd_external_launch(env: Mapping[str, str]) -> ExternalWorld | None:
    """Describe this process's job if a launcher other than horovodrun started it, else None.

    Asked when the environment has no ``HOROVOD_RANK`` (horovodrun always sets it), e.g. for
    ``mpirun -np 4 python train.py``: the answer is this process's place in the job and the backend
    that connects its ranks without a rendezvous server (the first non-None answer wins). Answer
    only for a launcher you recognise: a plain ``python train.py`` must stay a job of one rank.

    .. versionadded:: 0.2
    """


@hookspec(firstresult=True)
def hvd_init_world(comm: Any, job: Topology, backend: str, env: Mapping[str, str]) -> ExternalWorld | None:
    """Prepare the world ``init(comm=...)`` creates; describe it when it is not a list of ranks.

    Called by every ``init()`` once a backend is chosen, with ``job`` (this process's place in
    its job), ``backend`` (the chosen backend's name) and ``comm``, which is None (the whole job),
    a sorted list of job ranks, or any other object that was passed to ``init(comm=...)``.

    - An object hvd-core does not understand (an mpi4py communicator): the plugin that understands
      it prepares its backend to use it as the world and returns the world's description, which
      names the backend that must serve it (the first non-None answer wins).
    - None or a list of ranks: hvd-core forms the world itself. A plugin whose backend is
      ``backend`` may prepare that backend for this world here; it returns None.

    .. versionadded:: 0.2
    """


@hookspec(firstresult=True)
def hvd_process_set_ranks(comm: Any, world: Any, backend: str) -> list[int] | None:
    """The ranks, in the world ``init(comm=world)`` forms, of the members of ``comm``: an object given
    to ``ProcessSet(...)`` that a plugin understands (an mpi4py communicator), or None when the plugin
    does not understand it (the first non-None answer wins).

    ``world`` is what ``init()`` was given (None: the whole job; a sorted list of job ranks; or a
    communicator) and ``backend`` the backend serving it. Called by every member of the world during
    ``init()``, for each such process set this process was given; raise ValueError for a ``comm``
    that cannot be a process set of this world (this process not a member, another world's).

    .. versionadded:: 0.2
    """


# --- Lifecycle: around the engine's life in this process. ------------------------------------------


@hookspec
def hvd_after_init(rank: int, size: int, backend: str) -> None:
    """Called after the engine started: this process is ``rank`` of ``size``, using ``backend``.

    .. versionadded:: 0.1
    """


@hookspec
def hvd_before_shutdown() -> None:
    """Called before the engine shuts down, while collectives still work.

    .. versionadded:: 0.1
    """
