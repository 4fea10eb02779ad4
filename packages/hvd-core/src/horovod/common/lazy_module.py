"""Package attributes loaded on first use, for framework packages whose framework is heavy.

hvd-core's plugin manager imports every plugin's ``hooks.py``, and with it the plugin's package
``__init__``: that must not import torch or TensorFlow. A framework package's ``__init__`` names
where each public attribute lives (``declared_exports`` reads that from its ``if TYPE_CHECKING:``
block) and lets this module import it when it is first asked for.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def declared_exports(init_file: str) -> dict[str, str]:
    """The names a package's ``if TYPE_CHECKING:`` block imports, by module, in ``lazy_exports``'s
    form: the package's one list of exports.

    A framework package loads its names lazily, so type checkers learn them from lines such as
    ``from horovod.torch.mpi_ops import allreduce as allreduce`` under ``if TYPE_CHECKING:``. Reading
    those same lines here (the source is parsed, nothing is imported) makes them the list the package
    loads from too, instead of a second list kept alike by hand.

    :param init_file: the package's ``__init__.py`` (its ``__file__``).
    """
    exports: dict[str, list[str]] = {}
    for node in ast.parse(pathlib.Path(init_file).read_text(), init_file).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    names = [alias.asname or alias.name for alias in statement.names]
                    exports.setdefault(statement.module, []).extend(names)
    if not exports:
        raise LookupError(f"{init_file}: no 'from ... import' lines under 'if TYPE_CHECKING:'")
    return {module: " ".join(names) for module, names in exports.items()}


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
