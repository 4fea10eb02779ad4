"""Each framework package exports its names from one list, and that list agrees with its modules.

A framework package's ``__init__`` must not import its framework (hvd-core's plugin manager imports
it to reach ``hooks.py``), so it names where each public attribute lives and loads it on first use
(``lazy_exports``). That list is the package's ``if TYPE_CHECKING:`` imports, which type checkers
read and ``declared_exports`` reads for the loading (horovod.torch, horovod.mxnet), or a literal
``_EXPORTS``/``EXPORTS`` mapping in packages without type information (horovod.tensorflow,
horovod.keras). Read from the sources, without importing any framework, this checks that every
name the list gives is defined and exported (its ``__all__``) by the module it names. (A module
may export more than its package does: names for the package's other modules.)
"""

from __future__ import annotations

import ast
import os
import pathlib

import pytest

from horovod.common.plugin_api import declared_exports

ROOT = pathlib.Path(os.environ.get("HVD_REPO_ROOT", pathlib.Path(__file__).resolve().parents[3]))
# Each framework package and the __init__ that holds its list (horovod.keras's lives in horovod._keras,
# shared with horovod.tensorflow.keras).
LISTS = {
    "horovod.torch": "hvd-torch/src/horovod/torch/__init__.py",
    "horovod.mxnet": "hvd-mxnet/src/horovod/mxnet/__init__.py",
    "horovod.tensorflow": "hvd-tensorflow/src/horovod/tensorflow/__init__.py",
    "horovod.keras": "hvd-keras/src/horovod/_keras/__init__.py",
}


def _source(module: str) -> pathlib.Path:
    """The file defining ``module``, found among the packages' sources."""
    relative = pathlib.Path(*module.split("."))
    for src in sorted(ROOT.glob("packages/*/src")):
        for candidate in (src / relative.with_suffix(".py"), src / relative / "__init__.py"):
            if candidate.is_file():
                return candidate
    raise LookupError(f"no source for {module}")


def _export_list(package: str) -> dict[str, list[str]]:
    """Module -> names, from the package's one list."""
    init = ROOT / "packages" / LISTS[package]
    tree = ast.parse(init.read_text())
    literal = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id in ("_EXPORTS", "EXPORTS") for t in node.targets)
    ]
    exports = ast.literal_eval(literal[0]) if literal else declared_exports(str(init))
    return {(module if "." in module else f"{package}.{module}"): names.split() for module, names in exports.items()}


def _module_names(path: pathlib.Path) -> tuple[set[str], list[str] | None]:
    """The names ``path`` binds at its top level, and its ``__all__`` (None without one)."""
    bound: set[str] = set()
    exported = None
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        bound.add(name.id)
                        if name.id == "__all__" and node.value is not None:
                            exported = list(ast.literal_eval(node.value))
    return bound, exported


@pytest.mark.parametrize("package", sorted(LISTS))
def test_every_listed_name_is_defined_and_exported_where_the_list_says(package: str) -> None:
    problems = []
    for module, names in _export_list(package).items():
        bound, exported = _module_names(_source(module))
        for name in names:
            if name not in bound:
                problems.append(f"{module} has no {name}")
            elif exported is not None and name not in exported:
                problems.append(f"{module}.__all__ lacks {name}")
    assert not problems, f"{package}'s export list names what its modules do not export:\n" + "\n".join(problems)


def test_the_check_reads_a_type_checking_block(tmp_path: pathlib.Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from horovod.x.ops import allreduce as allreduce\n"
        "    from horovod.x.ops import join as join\n"
        "    from horovod.common.framework_api import init as init\n"
    )
    assert declared_exports(str(init)) == {"horovod.x.ops": "allreduce join", "horovod.common.framework_api": "init"}
    init.write_text("X = 1\n")
    with pytest.raises(LookupError, match="TYPE_CHECKING"):
        declared_exports(str(init))
