"""The plugin API: everything a backend, launcher or framework plugin package needs from hvd-core.

Plugin packages import hvd-core's contract from this module only; the modules behind it may move
between releases, this module's names may not (they only gain members). A plugin is a light
``hooks.py`` named by an entry point in the ``horovod`` group, implementing hooks of
:mod:`horovod.common.hookspecs` with :data:`hookimpl`::

    from horovod.common.plugin_api import BackendSpec, find_backend_library, hookimpl

    @hookimpl
    def hvd_register_backends(register):
        register(BackendSpec(name="mine", library=lambda: find_backend_library(...)))

Importing this module loads no native code and nothing heavy: plugins' ``hooks.py`` import it.

.. versionadded:: 0.2
"""

from __future__ import annotations

from horovod.common import job_report, timelines
from horovod.common.backend_library import find_backend_library
from horovod.common.config import failure_report_key, timeline_steps
from horovod.common.elastic import protocol as elastic_protocol
from horovod.common.hookspecs import hookimpl
from horovod.common.lazy_module import declared_exports, lazy_exports
from horovod.common.plugins import PluginError, PluginInfo, get_plugin_manager
from horovod.common.registry import BackendSpec, FrameworkSpec, LibraryLocator, RendezvousStore
from horovod.common.world import ExternalWorld, Topology

#: The version of this API: the major changes when a name is removed or changes meaning (never
#: within hvd-core 0.x releases that share a minor), the minor when names are added (1.1:
#: ``lazy_exports``, for framework packages whose ``__init__`` must not import the framework;
#: 1.2: ``elastic_protocol``, the contract between an elastic job's driver and its workers; 1.3:
#: ``declared_exports``, a framework package's exports read from its ``TYPE_CHECKING`` imports;
#: 1.4: ``job_report``, the job-end report a launcher gathers from its ranks, and ``timelines``,
#: the merge of the ranks' timelines; 1.5: ``timeline_steps``, how HOROVOD_TIMELINE_STEPS is read).
API_VERSION = (1, 5)

__all__ = [
    "API_VERSION",
    "BackendSpec",
    "ExternalWorld",
    "FrameworkSpec",
    "LibraryLocator",
    "PluginError",
    "PluginInfo",
    "RendezvousStore",
    "Topology",
    "declared_exports",
    "elastic_protocol",
    "failure_report_key",
    "find_backend_library",
    "get_plugin_manager",
    "hookimpl",
    "job_report",
    "lazy_exports",
    "timeline_steps",
    "timelines",
]
