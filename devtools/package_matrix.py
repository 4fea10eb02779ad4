"""The package matrix of devtools/matrix.toml: its cells, and where the packages' metadata disagrees
with them.

The noxfile makes a test session of each cell (``tests-<package>-py<python>[-<label>]``); the lint
session reports :func:`metadata_problems`. Nothing here imports nox: the checks are tested alone
(devtools/tests/test_package_matrix.py).
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # the tooling runs on 3.11 and later; mypy checks it as Python 3.10 code
    import tomli as tomllib

MATRIX = pathlib.Path(__file__).with_name("matrix.toml")
PYTHON_CLASSIFIER = re.compile(r"^Programming Language :: Python :: (3\.\d+)$")
LOWER_BOUND = re.compile(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)")
PIN = re.compile(r"^([A-Za-z0-9_.-]+)\s*==\s*([0-9][0-9.]*)$")
CELL_KEYS = {"package", "python", "label", "pins", "without", "variant", "lane", "on-demand"}


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell: a package's tests on ``python`` with ``pins`` in place of its test extra's
    requirements of those names, without the requirements named in ``without``."""

    package: str
    python: str
    label: str = ""
    pins: tuple[str, ...] = ()
    without: tuple[str, ...] = ()
    variant: str = ""  # the build variant ([tool.hvd.build-variants]); "" for the package's first
    lane: int = 0  # a corner's lane in ./dev test; 0 for a cell only --matrix runs
    on_demand: bool = False

    @property
    def session(self) -> str:
        return f"tests-{self.package}-py{self.python}" + (f"-{self.label}" if self.label else "")

    @property
    def corner(self) -> bool:
        return self.lane > 0


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def load(path: pathlib.Path = MATRIX) -> tuple[str, list[Cell]]:
    """(the default sessions' Python, the cells), checked: known keys, one session name per cell."""
    table = tomllib.loads(path.read_text())
    cells = []
    for raw in table.get("cell", []):
        unknown = set(raw) - CELL_KEYS
        if unknown:
            raise ValueError(f"{path.name}: cell {raw} has unknown keys {sorted(unknown)}")
        fields = {key.replace("-", "_"): value for key, value in raw.items()}
        for key in ("pins", "without"):
            fields[key] = tuple(fields.get(key, ()))
        cells.append(Cell(**fields))
    names = [cell.session for cell in cells]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{path.name}: more than one cell is {repeated}")
    for cell in cells:
        if cell.corner and cell.on_demand:
            raise ValueError(f"{path.name}: {cell.session} is a corner (lane) and on demand")
    return table["default-python"], cells


def requirements_for(cell: Cell, requirements: Iterable[str], name_of: Callable[[str], str]) -> list[str]:
    """``requirements`` (a package's, with its test extra) as ``cell`` tests them: those the cell
    pins or leaves out replaced or dropped, and its pins added. ``name_of`` gives a requirement's
    distribution name."""
    replaced = {_canonical(name_of(pin)) for pin in cell.pins} | {_canonical(name) for name in cell.without}
    kept = [r for r in requirements if _canonical(name_of(r)) not in replaced]
    return [*kept, *cell.pins]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def metadata_problems(default_python: str, cells: list[Cell], projects: Mapping[str, dict[str, Any]]) -> list[str]:
    """Where a package's metadata (``projects``: name -> its pyproject's [project]) disagrees with
    the matrix: its Python classifiers must be exactly the Pythons it is tested on (its default
    session's and its cells'), requires-python's lower bound the oldest of
    them, and the lower bound of a framework it declares (a dependency or an extra, ``name>=X``)
    the oldest release a cell pins."""
    problems = []
    by_package: dict[str, list[Cell]] = {}
    for cell in cells:
        by_package.setdefault(cell.package, []).append(cell)
    for name, project in projects.items():
        own = by_package.get(name, [])
        pythons = sorted({default_python, *(cell.python for cell in own)}, key=_version_key)
        classified = sorted(
            (m.group(1) for c in project.get("classifiers", []) if (m := PYTHON_CLASSIFIER.match(c))), key=_version_key
        )
        if classified != pythons:
            problems.append(f"{name}: Python classifiers {classified}, but it is tested on {pythons}")
        floor = project.get("requires-python", "")
        if floor != f">={pythons[0]}":
            problems.append(f"{name}: requires-python is {floor!r}, but the oldest Python tested is {pythons[0]}")
        declared = [*project.get("dependencies", [])]
        for extra, requirements in project.get("optional-dependencies", {}).items():
            if extra != "test":
                declared += requirements
        for requirement in declared:
            bound = LOWER_BOUND.match(requirement)
            if not bound:
                continue
            framework, floor_version = _canonical(bound.group(1)), bound.group(2)
            pinned = [
                m.group(2)
                for cell in by_package.get(name, [])
                for pin in cell.pins
                if (m := PIN.match(pin)) and _canonical(m.group(1)) == framework
            ]
            if pinned:
                oldest = min(pinned, key=_version_key)
                if _version_key(floor_version) != _version_key(oldest)[: len(_version_key(floor_version))]:
                    problems.append(
                        f"{name}: declares {requirement!r}, but the oldest {framework} a cell tests is {oldest}"
                    )
    return problems


def interpreter(version: str) -> str:
    """The Python ``version`` ("3.10") as nox should find it: pyenv's build of it where pyenv has
    one (its shims answer only for the versions pyenv was told to make current), else
    ``python<version>`` from the PATH."""
    import os

    root = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))
    builds = sorted(
        (root / "versions").glob(f"{version}.*/bin/python{version}"),
        key=lambda path: _version_key(path.parts[-3]) if re.fullmatch(r"[0-9.]+", path.parts[-3]) else (),
    )
    return str(builds[-1]) if builds else f"python{version}"
