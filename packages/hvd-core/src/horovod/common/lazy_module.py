"""Package attributes loaded on first use, for framework packages whose framework is heavy.

hvd-core's plugin manager imports every plugin's ``hooks.py``, and with it the plugin's package
``__init__``: that must not import torch or TensorFlow. A framework package's ``__init__`` names
where each public attribute lives and lets this module import it when it is first asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(
    package: str,
    namespace: dict[str, Any],
    exports: Mapping[str, str],
    submodules: Iterable[str],
    framework: str,
    install_hint: str,
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, names)`` for ``package``, whose module ``namespace`` is given.

    ``exports`` maps a submodule (or, with a dot in its name, any module: a framework package
    re-exports hvd-core's names from ``horovod.common.framework_api``) to the space-separated names
    it defines; ``submodules`` may be imported as attributes. When an import fails because the module
    ``framework`` is missing, the error says so and how to install it (``install_hint``).

    :param package: the dotted name of the package, e.g. ``"horovod.torch"``; submodules named
        without a dot are imported relative to it.
    :param namespace: the package's module namespace (its ``globals()``): names already in it are
        listed by ``__dir__``, and each name of ``exports`` is stored there when first loaded, so it is
        looked up only once.
    :param exports: maps a module (a submodule of ``package``, or any module when the name has a dot)
        to the space-separated public names it defines.
    :param submodules: the names of the submodules (relative to ``package``, e.g. ``"elastic"``) that
        ``__getattr__`` imports when they are asked for as attributes.
    :param framework: the name of the framework's top-level module (``"torch"``): a
        ``ModuleNotFoundError`` for it becomes an ``ImportError`` that names it.
    :param install_hint: how to install the framework, appended to that error.
    """
    where = {name: module for module, names in exports.items() for name in names.split()}
    modules = set(submodules)

    def load(module: str) -> Any:
        try:
            return importlib.import_module(module if "." in module else f"{package}.{module}")
        except ModuleNotFoundError as error:
            if error.name == framework:
                raise ImportError(f"{package} needs {framework}, which is not installed: {install_hint}") from error
            raise

    def getattr_(name: str) -> Any:
        if name in modules:
            return load(name)
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(load(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *where, *modules})

    return getattr_, dir_, list(where)
