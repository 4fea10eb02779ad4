"""The hooks hvd plugins implement (pluggy project ``"horovod"``, entry-point group ``horovod``).

A plugin is a light ``hooks.py`` module named by an entry point in the ``horovod`` group; it
implements some of the hooks below with ``@hookimpl`` and imports nothing heavy at import time.

Contract rule: hooks only gain arguments; never rename one (or one of its arguments) in place.
pluggy passes each implementation only the arguments it names, so a plugin written against an
older hvd-core keeps working when a hook gains an argument. A rename would break every plugin that
exists, so a changed meaning gets a new hook (with its own ``versionadded``) instead.
"""

from __future__ import annotations

from typing import Callable, Mapping

import pluggy

from horovod.common.registry import BackendSpec, FrameworkSpec, RendezvousStore

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
