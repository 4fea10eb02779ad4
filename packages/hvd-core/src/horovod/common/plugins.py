"""The plugin manager: finds hvd plugins through entry points and asks them what they provide.

Plugins are separately installed packages (``hvd-backend-gloo``, ``hvd-torch``...), each naming a
light ``hooks.py`` in the ``horovod`` entry-point group. Loading is lazy (first use), and forgiving
for what is optional but loud for what is asked for: a plugin that fails to import is skipped with a
logged reason, and only becomes an error when the user explicitly requests what it would provide.

Switches (read when the manager is created):

- ``HOROVOD_PLUGINS_DISABLE=a,b``: entry-point names not to load.
- ``HOROVOD_PLUGINS_TRACE=1``: trace every hook call to stderr, prefixed ``[horovod.plugins]``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any, Literal, TypeVar

import pluggy

from horovod.common import hookspecs
from horovod.common.registry import BackendSpec, FrameworkSpec, RendezvousStore
from horovod.common.world import ExternalWorld, Topology

__all__ = [
    "PluginError",
    "PluginInfo",
    "PluginManager",
    "get_plugin_manager",
    "reset_plugin_manager",
]

ENTRY_POINT_GROUP = "horovod"
_log = logging.getLogger("horovod.plugins")
_TRACE_PREFIX = "[horovod.plugins] "
# Suggested package when no backend serves a device kind at all.
_DEFAULT_BACKEND_PACKAGE = {"cpu": "hvd-backend-gloo", "cuda": "hvd-backend-nccl"}

PluginStatus = Literal["loaded", "failed", "disabled", "duplicate"]
_Spec = TypeVar("_Spec", BackendSpec, FrameworkSpec)


class PluginError(RuntimeError):
    """A plugin, or something a plugin should provide, is missing, broken or conflicting."""


@dataclasses.dataclass(frozen=True)
class PluginInfo:
    """One plugin as seen by the manager, for ``horovodrun --list-plugins`` and error messages.

    :param name: the entry-point name (or the name given to
        :meth:`~horovod.common.plugins.PluginManager.register`).
    :param module: the module (or ``module:attr``) the entry point points to; for an in-process
        plugin, the module (or the class's module) of the object registered.
    :param distribution: the name of the distribution declaring the entry point; None for in-process
        plugins.
    :param version: that distribution's version; None for in-process plugins.
    :param status: ``"loaded"``; ``"failed"`` (it failed to import or register, or one of its hooks
        raised); ``"disabled"`` (named by ``HOROVOD_PLUGINS_DISABLE``); or ``"duplicate"`` (a plugin
        of the same name was found first, and this one is ignored).
    :param reason: why it is not loaded (empty when loaded).
    """

    #: Entry-point name (or the name given to :meth:`~horovod.common.plugins.PluginManager.register`).
    name: str
    #: The module (or ``module:attr``) the entry point points to.
    module: str
    #: Name of the distribution declaring it (its version is ``version``); None for in-process plugins.
    distribution: str | None
    version: str | None
    status: PluginStatus
    #: Why it is not loaded (empty when loaded).
    reason: str = ""


def _env_disabled() -> frozenset[str]:
    return frozenset(n.strip() for n in os.environ.get("HOROVOD_PLUGINS_DISABLE", "").split(",") if n.strip())


def _env_trace() -> bool:
    return os.environ.get("HOROVOD_PLUGINS_TRACE", "").strip().lower() in ("1", "true", "yes", "on")


def _trace_writer(message: str) -> None:
    # Look sys.stderr up at each call, so redirection (and pytest capture) after creation is honoured.
    sys.stderr.write("".join(_TRACE_PREFIX + line for line in message.splitlines(keepends=True)))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class PluginManager:
    """hvd's plugin manager: a ``pluggy.PluginManager("horovod")`` with typed, fault-isolating calls.

    Hooks are called one plugin at a time (not as one pluggy call), so that one plugin raising does
    not hide every other plugin's answer, and so that what is registered can be attributed to the
    plugin that registered it (for conflict and error messages).
    """

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager("horovod")
        self._pm.add_hookspecs(hookspecs)
        self._disabled = _env_disabled()
        if _env_trace():
            self._pm.trace.root.setwriter(_trace_writer)
            self._pm.enable_tracing()
        self._lock = threading.RLock()
        self._loaded = False
        self._infos: list[PluginInfo] = []
        self._plugins: dict[str, object] = {}  # registered (status "loaded"), in load order
        self._backends: dict[str, tuple[BackendSpec, str]] = {}  # name -> (spec, plugin name)
        self._frameworks: dict[str, tuple[FrameworkSpec, str]] = {}
        self._conflicts: dict[str, list[str]] = {}  # kind -> same name from two plugins; raised on access

    # --- loading -----------------------------------------------------------------------------

    def load(self) -> None:
        """Load every entry point of the ``horovod`` group once; later calls do nothing.

        We iterate the entry points ourselves rather than use pluggy's
        ``load_setuptools_entrypoints``, which stops at the first plugin that fails to import.
        """
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
                self._load_entry_point(ep)

    def _load_entry_point(self, ep: metadata.EntryPoint) -> None:
        dist = getattr(ep, "dist", None)
        dist_name = getattr(dist, "name", None) if dist is not None else None
        version = getattr(dist, "version", None) if dist is not None else None

        def record(status: PluginStatus, reason: str = "") -> None:
            self._infos.append(PluginInfo(ep.name, ep.value, dist_name, version, status, reason))

        first = self._info(ep.name)
        if first is not None:
            where = f"{first.distribution} {first.version}" if first.distribution else first.module
            record("duplicate", f"a plugin named {ep.name!r} was already found in {where}; this one is ignored")
            _log.warning("Skipping horovod plugin %r from %s: duplicate name", ep.name, dist_name)
            return
        if ep.name in self._disabled:
            record("disabled", "disabled by HOROVOD_PLUGINS_DISABLE")
            return
        try:
            plugin = ep.load()
        except Exception as exc:  # any import-time failure makes the plugin optional-and-absent
            record("failed", _describe(exc))
            _log.warning("Skipping horovod plugin %r (%s): %s", ep.name, dist_name, _describe(exc))
            _log.debug("Traceback of horovod plugin %r", ep.name, exc_info=True)
            return
        record("loaded")
        self._add(ep.name, plugin)

    def register(self, plugin: object, name: str) -> None:
        """Register an in-process plugin object (a module or instance with ``@hookimpl`` methods).

        For tests and embedding, where there is no installed distribution. Unlike entry points,
        a failure here is raised: the caller asked for this plugin explicitly.
        """
        with self._lock:
            self.load()
            if self._info(name) is not None:
                raise ValueError(f"a horovod plugin named {name!r} is already known")
            module = getattr(plugin, "__name__", type(plugin).__module__)
            self._infos.append(PluginInfo(name, module, None, None, "loaded"))
            self._add(name, plugin)
            info = self._info(name)
            if info is not None and info.status == "failed":
                raise PluginError(f"horovod plugin {name!r} failed: {info.reason}")

    def _add(self, name: str, plugin: object) -> None:
        """Register ``plugin`` with pluggy and collect its registrations; on failure, mark it failed."""
        try:
            self._pm.register(plugin, name=name)
        except Exception as exc:  # e.g. a hookimpl whose arguments don't match the spec
            if self._pm.get_plugin(name) is plugin:  # pluggy leaves a half-registered plugin behind
                self._pm.unregister(name=name)
            self._fail(name, _describe(exc))
            return
        self._plugins[name] = plugin
        for caller in self._pm.get_hookcallers(plugin) or []:
            if caller.spec is None and caller.name.startswith("hvd_"):
                # Not an error: the plugin may target a newer hvd-core. But a typo would be silent.
                _log.warning("horovod plugin %r implements unknown hook %s (newer hvd-core?)", name, caller.name)
        # Collect both kinds first, merge after: a plugin that fails half-way contributes nothing.
        backends: list[BackendSpec] = []
        frameworks: list[FrameworkSpec] = []
        if not self._call_one(name, "hvd_register_backends", register=self._collector(name, BackendSpec, backends)):
            return
        if not self._call_one(
            name, "hvd_register_frameworks", register=self._collector(name, FrameworkSpec, frameworks)
        ):
            return
        self._merge(name, backends, self._backends, "backend")
        self._merge(name, frameworks, self._frameworks, "framework")

    @staticmethod
    def _collector(plugin: str, kind: type[_Spec], into: list[_Spec]) -> Callable[[_Spec], None]:
        def register(spec: _Spec) -> None:
            if not isinstance(spec, kind):
                raise TypeError(f"horovod plugin {plugin!r} registered {spec!r}, which is not a {kind.__name__}")
            if any(s.name == spec.name for s in into):
                raise PluginError(f"horovod plugin {plugin!r} registered {kind.__name__} {spec.name!r} twice")
            into.append(spec)

        return register

    def _merge(self, plugin: str, specs: list[_Spec], into: dict[str, tuple[_Spec, str]], what: str) -> None:
        for spec in specs:
            if spec.name in into:
                other = into[spec.name][1]
                self._conflicts.setdefault(what, []).append(
                    f"{what} {spec.name!r} is registered by two plugins, {other!r} and {plugin!r}; "
                    f"uninstall one, or disable one with HOROVOD_PLUGINS_DISABLE={plugin}"
                )
            else:
                into[spec.name] = (spec, plugin)

    def _call_one(self, name: str, hook: str, **kwargs: Any) -> bool:
        """Call ``hook`` on plugin ``name`` alone. If it raises, skip that plugin from now on.

        Returns False if the plugin failed (or is not registered), True otherwise.
        """
        plugin = self._plugins.get(name)
        if plugin is None:
            return False
        if not any(impl.plugin is plugin for impl in getattr(self._pm.hook, hook).get_hookimpls()):
            return True  # doesn't implement it: nothing to call, nothing to trace
        # A subset caller still goes through pluggy's hook execution, so tracing sees the call.
        others = [p for p in self._pm.get_plugins() if p is not plugin]
        try:
            self._pm.subset_hook_caller(hook, remove_plugins=others)(**kwargs)
        except Exception as exc:
            self._fail(name, f"{hook} raised {_describe(exc)}")
            _log.debug("Traceback of horovod plugin %r", name, exc_info=True)
            return False
        return True

    def _fail(self, name: str, reason: str) -> None:
        _log.warning("Skipping horovod plugin %r: %s", name, reason)
        plugin = self._plugins.pop(name, None)
        if plugin is not None:
            self._pm.unregister(plugin)
        self._infos = [
            (dataclasses.replace(i, status="failed", reason=reason) if i.name == name and i.status == "loaded" else i)
            for i in self._infos
        ]

    def _info(self, name: str) -> PluginInfo | None:
        """The first (winning) plugin recorded under ``name``."""
        return next((i for i in self._infos if i.name == name), None)

    # --- queries -----------------------------------------------------------------------------

    def plugin_infos(self) -> list[PluginInfo]:
        """Every plugin found, with its status, in load order (duplicates included)."""
        self.load()
        with self._lock:
            return list(self._infos)

    def backends(self) -> dict[str, BackendSpec]:
        """All registered backends by name; raises :class:`PluginError` if two plugins claim one name."""
        self._check_conflicts("backend")
        return {n: spec for n, (spec, _) in self._backends.items()}

    def frameworks(self) -> dict[str, FrameworkSpec]:
        """All registered framework bindings by name; raises :class:`PluginError` on a name conflict."""
        self._check_conflicts("framework")
        return {n: spec for n, (spec, _) in self._frameworks.items()}

    def _check_conflicts(self, what: str) -> None:
        self.load()
        if self._conflicts.get(what):
            raise PluginError("; ".join(self._conflicts[what]))

    def backend(self, name: str) -> BackendSpec:
        """The backend the user asked for by name. Fails loudly, saying why and how to fix it."""
        backends = self.backends()
        if name in backends:
            return backends[name]
        installed = ", ".join(sorted(backends)) or "none"
        msg = f"horovod backend {name!r} is not available (installed backends: {installed})."
        info = self._info(name)
        if info is not None and info.status == "disabled":
            msg += f" Its plugin {name!r} is disabled by HOROVOD_PLUGINS_DISABLE; remove it there to use it."
        elif info is not None and info.status == "failed":
            dist = info.distribution or f"hvd-backend-{name}"
            where = f"{dist} {info.version}" if info.version else dist
            msg += (
                f" Its plugin {name!r} ({where}) is installed but failed to load: {info.reason}."
                f" Fix or reinstall it: pip install --force-reinstall {dist}"
            )
        else:
            msg += f" Install it with: pip install hvd-backend-{name}"
            failed = [f"{i.name!r} ({i.reason})" for i in self._infos if i.status == "failed"]
            if failed:  # it may come from a plugin with another name
                msg += ". Plugins that failed to load: " + "; ".join(failed)
        raise PluginError(msg)

    def default_backend(self, device_kind: str = "cpu", *, allow_in_process_only: bool = False) -> BackendSpec:
        """The highest-priority backend serving ``device_kind`` (ties: by name, for reproducibility).

        In-process-only backends (the in-memory test backend) are excluded unless allowed, so that a
        real job never silently runs on a backend that cannot reach other processes.
        """
        serving = [b for b in self.backends().values() if device_kind in b.device_kinds]
        usable = [b for b in serving if allow_in_process_only or not b.in_process_only]
        if usable:
            return min(usable, key=lambda b: (-b.priority, b.name))
        package = _DEFAULT_BACKEND_PACKAGE.get(device_kind, "hvd-backend-<name>")
        msg = f"no horovod backend serving device kind {device_kind!r} is installed."
        msg += f" Install one, e.g.: pip install {package}"
        if serving:
            names = ", ".join(sorted(b.name for b in serving))
            msg += f" (only in-process test backends serve it: {names})"
        raise PluginError(msg)

    # --- connection ------------------------------------------------------------------------

    def rendezvous_store(self, env: Mapping[str, str]) -> RendezvousStore | None:
        """The first store a plugin offers for the job ``env`` describes (a launcher's), or None."""
        self.load()
        store: RendezvousStore | None = self._pm.hook.hvd_rendezvous_store(env=env)  # a firstresult hook
        return store

    # --- discovery -------------------------------------------------------------------------

    def external_launch(self, env: Mapping[str, str]) -> ExternalWorld | None:
        """The job ``env`` describes if a plugin recognises its launcher (not horovodrun), or None."""
        self.load()
        return _checked_world("hvd_external_launch", self._pm.hook.hvd_external_launch(env=env))

    def init_world(self, comm: Any, job: Topology, backend: str, env: Mapping[str, str]) -> ExternalWorld | None:
        """Lets plugins prepare the world ``init(comm)`` creates; the description of a ``comm`` that
        is neither None nor a list of ranks, from the plugin that understands it (else None)."""
        self.load()
        return _checked_world(
            "hvd_init_world", self._pm.hook.hvd_init_world(comm=comm, job=job, backend=backend, env=env)
        )

    def process_set_ranks(self, comm: Any, world: Any, backend: str) -> list[int] | None:
        """The world ranks of the members of ``comm`` (a ``ProcessSet`` made from a communicator),
        from the plugin that understands it; None when none does."""
        self.load()
        ranks = self._pm.hook.hvd_process_set_ranks(comm=comm, world=world, backend=backend)  # a firstresult hook
        return None if ranks is None else [int(r) for r in ranks]

    # --- lifecycle ---------------------------------------------------------------------------

    def after_init(self, rank: int, size: int, backend: str) -> None:
        """Tell plugins the engine started. A plugin whose hook raises is logged and skipped."""
        self._call_each("hvd_after_init", rank=rank, size=size, backend=backend)

    def before_shutdown(self) -> None:
        """Tell plugins the engine is about to shut down. A raising hook is logged and skipped."""
        self._call_each("hvd_before_shutdown")

    def _call_each(self, hook: str, **kwargs: Any) -> None:
        self.load()
        with self._lock:
            for name in list(self._plugins):
                self._call_one(name, hook, **kwargs)


def _checked_world(hook: str, answer: object) -> ExternalWorld | None:
    if answer is None or isinstance(answer, ExternalWorld):
        return answer
    raise PluginError(f"a horovod plugin answered {hook} with {answer!r}, which is not an ExternalWorld")


_manager: PluginManager | None = None
_manager_lock = threading.Lock()


def get_plugin_manager() -> PluginManager:
    """The process's plugin manager, created on first call (plugins load on its first use)."""
    global _manager
    with _manager_lock:
        if _manager is None:
            _manager = PluginManager()
        return _manager


def reset_plugin_manager() -> None:
    """Forget the process's plugin manager, so the next one re-reads entry points and environment.

    For tests; an engine already running keeps the backend it loaded.
    """
    global _manager
    with _manager_lock:
        _manager = None
