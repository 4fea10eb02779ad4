"""The package matrix's reading and checks (devtools/package_matrix.py)."""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import package_matrix
from package_matrix import Cell


def _name(requirement: str) -> str:
    return requirement.split("=")[0].split(">")[0].split("<")[0].strip()


def test_the_repository_matrix_loads_with_corners_at_both_ends() -> None:
    default, cells = package_matrix.load()
    corners = {(cell.package, cell.python) for cell in cells if cell.corner}
    for package in ("hvd-core", "hvd-backend-gloo", "hvd-runner", "hvd-tensorflow"):
        assert {(package, "3.10"), (package, "3.13")} <= corners
    assert default == "3.11"


def test_a_cell_replaces_pins_and_drops_what_it_goes_without() -> None:
    cell = Cell("hvd-keras", "3.10", pins=("tensorflow-cpu==2.16.2",), without=("torch",))
    wanted = ["tensorflow-cpu==2.21.0", "torch==2.13.0", "h5py", "Torch>=2.3"]
    assert package_matrix.requirements_for(cell, wanted, _name) == ["h5py", "tensorflow-cpu==2.16.2"]


def test_two_cells_of_one_name_are_refused(tmp_path: pathlib.Path) -> None:
    matrix = tmp_path / "matrix.toml"
    matrix.write_text('default-python = "3.11"\n' + '[[cell]]\npackage = "a"\npython = "3.12"\n' * 2)
    with pytest.raises(ValueError, match="more than one cell is"):
        package_matrix.load(matrix)


def test_an_unknown_key_is_refused(tmp_path: pathlib.Path) -> None:
    matrix = tmp_path / "matrix.toml"
    matrix.write_text('default-python = "3.11"\n[[cell]]\npackage = "a"\npython = "3.12"\nlanes = 1\n')
    with pytest.raises(ValueError, match="unknown keys"):
        package_matrix.load(matrix)


def _project(pythons: list[str], floor: str, requirements: list[str]) -> dict[str, Any]:
    return {
        "requires-python": floor,
        "classifiers": [f"Programming Language :: Python :: {version}" for version in pythons],
        "optional-dependencies": {"tensorflow-cpu": requirements, "test": ["tensorflow-cpu==2.21.0"]},
    }


def test_metadata_that_agrees_with_the_cells_passes() -> None:
    cells = [Cell("p", "3.10", pins=("tensorflow-cpu==2.16.2",)), Cell("p", "3.13")]
    project = _project(["3.10", "3.11", "3.13"], ">=3.10", ["tensorflow-cpu>=2.16"])
    assert package_matrix.metadata_problems("3.11", cells, {"p": project}) == []


def test_metadata_that_claims_more_or_less_than_the_cells_is_named() -> None:
    cells = [Cell("p", "3.10", pins=("tensorflow-cpu==2.17.1",)), Cell("p", "3.13")]
    project = _project(["3.11", "3.12"], ">=3.9", ["tensorflow-cpu>=2.16"])
    problems = package_matrix.metadata_problems("3.11", cells, {"p": project})
    assert len(problems) == 3
    assert "classifiers ['3.11', '3.12'], but it is tested on ['3.10', '3.11', '3.13']" in problems[0]
    assert "requires-python is '>=3.9'" in problems[1]
    assert "the oldest tensorflow-cpu a cell tests is 2.17.1" in problems[2]


def test_the_interpreter_is_pyenvs_newest_build_of_the_version(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for build in ("3.12.1", "3.12.10", "3.13.0"):
        python = tmp_path / "versions" / build / "bin" / f"python{build.rsplit('.', 1)[0]}"
        python.parent.mkdir(parents=True)
        python.touch()
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    assert package_matrix.interpreter("3.12") == str(tmp_path / "versions" / "3.12.10" / "bin" / "python3.12")
    assert package_matrix.interpreter("3.10") == "python3.10"
