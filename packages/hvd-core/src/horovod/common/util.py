"""``horovod.common.util``: the helpers of Horovod's module of that name that scripts and tools use.

Horovod answered "was it built with X?" by loading its compiled framework extensions in a child
process. hvd compiles nothing per framework: a backend (Gloo, MPI, NCCL...) or a framework binding
is there when its plugin package is installed and registers it, so every answer here comes from the
plugin registry (:mod:`horovod.common.plugins`). With ``verbose=True`` each answer also prints why,
naming the package to install when something is missing.

Also here: :data:`horovod_api_version`, the Horovod release whose API hvd matches.
"""

from __future__ import annotations

import importlib.util
import os
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from horovod.common.plugins import PluginError, get_plugin_manager
from horovod.common.registry import BackendSpec
from horovod.common.version import HOROVOD_API_VERSION
from horovod.common.version_check import HorovodVersionMismatchError, get_version_mismatch_message

__all__ = [
    "EXTENSIONS",
    "HorovodVersionMismatchError",
    "ccl_built",
    "check_extension",
    "check_installed_version",
    "cuda_built",
    "ddl_built",
    "env",
    "extension_available",
    "get_average_backwards_compatibility_fun",
    "get_ext_suffix",
    "get_extension_full_path",
    "get_version_mismatch_message",
    "gloo_built",
    "gpu_available",
    "horovod_api_version",
    "is_iterable",
    "is_version_greater_equal_than",
    "mpi_built",
    "nccl_built",
    "num_rank_is_power_2",
    "rocm_built",
    "split_list",
]

#: The Horovod release whose documented API this hvd matches (``"0.28.1"``): compare against this,
#: not ``horovod.__version__``, to ask which Horovod features to expect.
horovod_api_version: str = HOROVOD_API_VERSION

#: The framework bindings Horovod probes (``extension_available(name)``).
EXTENSIONS = ["tensorflow", "torch", "mxnet"]

# The framework each binding needs importable, by the binding's registered name.
_FRAMEWORK_MODULES = {"tensorflow": "tensorflow", "torch": "torch", "mxnet": "mxnet", "keras": "keras"}
# Backends Horovod could be built with that no hvd package provides (the registry still decides:
# a third-party package registering one of these names is found like any other backend).
_NOT_PROVIDED = {
    "ddl": "hvd has no DDL backend (IBM DDL is not supported)",
    "ccl": "hvd has no oneCCL backend",
}


def _report(verbose: bool, what: str, answer: bool, reason: str) -> bool:
    if verbose:
        print(f"{what}: {'yes' if answer else 'no'} ({reason})", flush=True)
    return answer


def _origin(spec: BackendSpec) -> str:
    return f"backend {spec.name!r}" + (f" {spec.version}" if spec.version else "")


def _backend_built(name: str) -> tuple[bool, str]:
    """Whether a backend named ``name`` that can run a job of several processes is installed, and why."""
    manager = get_plugin_manager()
    try:
        if name not in manager.backends() and name in _NOT_PROVIDED:
            return False, _NOT_PROVIDED[name]
        spec = manager.backend(name)  # raises, saying what to install or why the plugin failed
    except PluginError as error:
        return False, str(error)
    if spec.in_process_only:
        return False, f"{_origin(spec)} connects ranks inside one process only"
    return True, f"{_origin(spec)} is installed"


def _device_served(kind: str, label: str) -> tuple[bool, str]:
    """Whether an installed backend serves tensors of device kind ``kind``, and why."""
    try:
        backends = get_plugin_manager().backends()
    except PluginError as error:
        return False, str(error)
    serving = sorted(s.name for s in backends.values() if kind in s.device_kinds and not s.in_process_only)
    if serving:
        return True, f"served by backend {', '.join(map(repr, serving))}"
    if kind != "cuda":
        return False, f"no installed hvd backend serves {label} tensors"
    # The engine stages CUDA tensors through the CPU backend wherever the CUDA runtime works.
    from horovod.common import _core

    try:
        _core.Device("cuda")
    except ValueError as error:
        return False, f"no installed hvd backend serves CUDA tensors, and none can be staged: {error}"
    return True, "staged through the CPU backend (the CUDA runtime works)"


def mpi_built(verbose: bool = False) -> bool:
    """Whether the MPI backend (hvd-backend-mpi) is installed."""
    return _report(verbose, "MPI", *_backend_built("mpi"))


def gloo_built(verbose: bool = False) -> bool:
    """Whether the Gloo backend (hvd-backend-gloo) is installed."""
    return _report(verbose, "Gloo", *_backend_built("gloo"))


def nccl_built(verbose: bool = False) -> bool:
    """Whether an NCCL backend is installed (Horovod returned NCCL's version code; a bool compares
    the same way in ``if hvd.nccl_built():``)."""
    return _report(verbose, "NCCL", *_backend_built("nccl"))


def ddl_built(verbose: bool = False) -> bool:
    return _report(verbose, "DDL", *_backend_built("ddl"))


def ccl_built(verbose: bool = False) -> bool:
    return _report(verbose, "CCL", *_backend_built("ccl"))


def cuda_built(verbose: bool = False) -> bool:
    """Whether an installed backend serves CUDA tensors."""
    return _report(verbose, "CUDA", *_device_served("cuda", "CUDA"))


def rocm_built(verbose: bool = False) -> bool:
    """Whether an installed backend serves ROCm tensors."""
    return _report(verbose, "ROCm", *_device_served("rocm", "ROCm"))


def _framework(ext_base_name: str) -> tuple[bool, str]:
    """Whether the binding ``horovod.<ext_base_name>`` is registered and its framework importable."""
    try:
        frameworks = get_plugin_manager().frameworks()
    except PluginError as error:
        return False, str(error)
    module = f"horovod.{ext_base_name}"
    spec = next((s for s in frameworks.values() if ext_base_name == s.name or s.module == module), None)
    if spec is None:
        return False, f"{module} is not installed: pip install hvd-{ext_base_name.split('.')[0]}"
    framework = _FRAMEWORK_MODULES.get(spec.name)
    # find_spec imports nothing (Horovod loaded the framework in a child process to be safe from it).
    if framework is not None and importlib.util.find_spec(framework) is None:
        return False, f"{spec.module} is installed, but {framework} is not"
    return True, f"{spec.module}" + (f" {spec.version}" if spec.version else "") + " is installed"


def extension_available(ext_base_name: str, verbose: bool = False) -> bool:
    """Whether ``horovod.<ext_base_name>`` (``"torch"``, ``"tensorflow"``, ``"mxnet"``, ``"keras"``)
    can be used: its hvd package is installed and so is the framework."""
    return _report(verbose, f"horovod.{ext_base_name}", *_framework(ext_base_name))


def gpu_available(ext_base_name: str, verbose: bool = False) -> bool:
    """Whether ``horovod.<ext_base_name>`` can run collectives on GPU tensors."""
    available, reason = _framework(ext_base_name)
    if available:
        reasons = []
        for kind, label in (("cuda", "CUDA"), ("rocm", "ROCm")):
            available, reason = _device_served(kind, label)
            if available:
                break
            reasons.append(reason)
        else:
            reason = "; ".join(reasons)
    return _report(verbose, f"horovod.{ext_base_name} on GPU", available, reason)


def check_extension(ext_name: str, ext_env_var: str, pkg_path: str, *args: str) -> None:
    """Raises ImportError when the framework binding ``ext_name`` (e.g. ``"horovod.torch"``) is not
    usable, saying what to install.

    ``ext_env_var``, ``pkg_path`` and ``args`` named Horovod's build switch and compiled extension
    file; hvd builds no extension per framework, so they are accepted and not used.
    """
    available, reason = _framework(ext_name.removeprefix("horovod."))
    if not available:
        raise ImportError(f"Extension {ext_name} has not been built: {reason}")


def check_installed_version(name: str, version: str, exception: BaseException | None = None) -> None:
    """Horovod compared a framework's version with the one its extension was compiled against,
    warning (or raising :class:`HorovodVersionMismatchError` from ``exception``) on a difference.
    hvd's framework packages are compiled against no framework version, so there is nothing to
    compare: this never warns or raises, and a caller re-raising ``exception`` behaves as in Horovod
    when the versions match."""


@contextmanager
def env(**kwargs: str | None) -> Iterator[None]:
    """Sets environment variables for the ``with`` block (``None`` values are skipped), then restores
    each to its previous value, or removes it if it was not set."""
    values = {key: value for key, value in kwargs.items() if value is not None}
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, previous in saved.items():
            if previous is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = previous


class _ReduceOps(Protocol):
    Average: Any
    Sum: Any


def get_average_backwards_compatibility_fun(reduce_ops: _ReduceOps) -> Callable[[Any, Any], Any]:
    """``impl(op, average)`` resolving the deprecated ``average=`` argument against ``op=``:
    ``op`` when given (giving both is a ValueError), else Average or Sum from ``average`` (with a
    DeprecationWarning), else Average. ``reduce_ops`` holds the framework's ``Average`` and ``Sum``."""

    def impl(op: Any, average: Any) -> Any:
        if op is not None:
            if average is not None:
                raise ValueError("The op parameter supersedes average. Please provide only one of them.")
            return op
        if average is not None:
            warnings.warn(
                "the 'average' argument is deprecated; use op=hvd.Average or op=hvd.Sum",
                DeprecationWarning,
                stacklevel=3,
            )
            return reduce_ops.Average if average else reduce_ops.Sum
        return reduce_ops.Average

    return impl


def num_rank_is_power_2(num_rank: int) -> bool:
    """Whether ``num_rank`` is a power of two (Horovod's Adasum needed one)."""
    return num_rank > 0 and num_rank & (num_rank - 1) == 0


_T = TypeVar("_T")


def split_list(l: Sequence[_T], n: int) -> list[Sequence[_T]]:  # noqa: E741 (Horovod's parameter name)
    """``l`` in ``n`` consecutive chunks whose lengths differ by at most one, longest first."""
    size, extra = divmod(len(l), n)
    bounds = [i * size + min(i, extra) for i in range(n + 1)]
    return [l[bounds[i] : bounds[i + 1]] for i in range(n)]


def get_ext_suffix() -> str:
    """The file name suffix of this interpreter's extension modules (``.cpython-311-x86_64-linux-gnu.so``)."""
    import sysconfig

    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    return suffix if isinstance(suffix, str) else ".so"


def get_extension_full_path(pkg_path: str, *args: str) -> str:
    """The path of an extension module ``args[-1]`` in the directories ``args[:-1]`` beside the
    module file ``pkg_path`` (Horovod's helper; hvd's frameworks ship no extension modules of their
    own, so it names a file that may not exist)."""
    import os

    directory = os.path.dirname(os.path.realpath(pkg_path))
    return os.path.join(directory, *args[:-1], args[-1] + get_ext_suffix())


def is_iterable(x: Any) -> bool:
    try:
        iter(x)
    except TypeError:
        return False
    return True


def _release(text: str) -> tuple[int, ...]:
    match = re.match(r"v?(\d+(?:\.\d+)*)", text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a version number")
    return tuple(int(part) for part in match.group(1).split("."))


def is_version_greater_equal_than(ver: str, target: str) -> bool:
    """Whether version ``ver`` (e.g. a framework's ``__version__``) is at least ``target``, which
    must be of the form major.minor.patch. Compared as PEP 440 versions when ``packaging`` is
    installed and both are PEP 440 (a pre-release comes before its release), else by their release
    numbers."""
    if not isinstance(ver, str) or not isinstance(target, str):
        raise ValueError(
            "is_version_greater_equal_than only accepts strings; got "
            f"ver={ver!r} ({type(ver).__name__}) and target={target!r} ({type(target).__name__})"
        )
    if len(target.split(".")) != 3:
        raise ValueError(f"target must be a version of the form major.minor.patch; got {target!r}")
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return _release(ver) >= _release(target)
    try:
        return Version(ver) >= Version(target)
    except InvalidVersion:  # not PEP 440 (a build's own spelling): its release numbers decide
        return _release(ver) >= _release(target)
