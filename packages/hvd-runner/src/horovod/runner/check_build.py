"""``horovodrun --check-build`` and ``--list-plugins``: what the installed plugins provide.

Nothing is compiled into hvd: a framework, controller or tensor operation is available when a
plugin registers it (see ``horovod.common.plugins``).
"""

from __future__ import annotations

from collections.abc import Iterable

# Horovod's lines, in Horovod's order: (display name, plugin name).
_FRAMEWORKS = (("TensorFlow", "tensorflow"), ("PyTorch", "torch"), ("MXNet", "mxnet"))
_CONTROLLERS = (("MPI", "mpi"), ("Gloo", "gloo"))
_TENSOR_OPS = (("NCCL", "nccl"), ("DDL", "ddl"), ("CCL", "ccl"), ("MPI", "mpi"), ("Gloo", "gloo"))


def _lines(
    known: Iterable[tuple[str, str]], available: set[str], extra: Iterable[str], versions: dict[str, str] | None = None
) -> list[str]:
    """Horovod's check-box lines; ``versions`` adds what a GPU backend runs on (NCCL's release)."""
    versions = versions or {}

    def line(display: str, name: str, present: bool) -> str:
        detail = f" ({versions[name]})" if present and versions.get(name) else ""
        return f"    [{'X' if present else ' '}] {display}{detail}"

    lines = [line(display, name, name in available) for display, name in known]
    lines += [line(name, name, True) for name in sorted(extra)]
    return lines


def check_build_text() -> str:
    import horovod
    from horovod.common.plugin_api import get_plugin_manager

    manager = get_plugin_manager()
    frameworks = set(manager.frameworks())
    # In-process test backends (hvd-core's in-memory one) cannot run a job: not listed.
    backends = {name: spec for name, spec in manager.backends().items() if not spec.in_process_only}
    known_frameworks = {name for _, name in _FRAMEWORKS}
    known_ops = {name for _, name in _TENSOR_OPS}
    # Every hvd backend negotiates over its own collectives, so each is a controller too; NCCL
    # serves GPU tensors only and needs a CPU controller beside it.
    controllers = {name for name, spec in backends.items() if "cpu" in spec.device_kinds}
    lines = [f"Horovod v{horovod.__version__}:", "", "Available Frameworks:"]
    lines += _lines(_FRAMEWORKS, frameworks, frameworks - known_frameworks)
    lines += ["", "Available Controllers:"]
    lines += _lines(_CONTROLLERS, controllers, controllers - {name for _, name in _CONTROLLERS})
    lines += ["", "Available Tensor Operations:"]
    # A GPU backend's version names the library it would load (hvd-backend-nccl: NCCL's release).
    gpu_versions = {name: spec.version for name, spec in backends.items() if "cpu" not in spec.device_kinds}
    lines += _lines(_TENSOR_OPS, set(backends), set(backends) - known_ops, gpu_versions)
    return "\n".join(lines) + "\n"


def list_plugins_text() -> str:
    from horovod.common.plugin_api import get_plugin_manager

    rows = [("NAME", "DISTRIBUTION", "VERSION", "STATUS", "REASON")]
    for info in get_plugin_manager().plugin_infos():
        rows.append((info.name, info.distribution or "-", info.version or "-", info.status, info.reason))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    out = []
    for row in rows:
        out.append("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4])
    return "\n".join(line.rstrip() for line in out) + "\n"
