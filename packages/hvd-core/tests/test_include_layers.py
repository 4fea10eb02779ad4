"""The native engine's directories form layers, as ``csrc/README.md`` states: a directory includes
from itself and the directories above it in that table, and from the public headers
(``horovod/...`` under ``src/horovod/common/include``), never from below. This reads the sources'
``#include "dir/file.h"`` lines, as ``test_package_boundaries.py`` reads Python imports.

The device layer (``csrc/device/``: CUDA, and the simulated device of tests) stands beside ``backend/``: it
includes only ``core/`` and the public headers, and only ``execution/``, ``engine/`` and
``binding/`` include it.
"""

from __future__ import annotations

import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(os.environ.get("HVD_REPO_ROOT", pathlib.Path(__file__).resolve().parents[3]))
CSRC = ROOT / "packages" / "hvd-core" / "csrc"
PUBLIC_HEADERS = ROOT / "packages" / "hvd-core" / "src" / "horovod" / "common" / "include" / "horovod"
PUBLIC = "horovod"  # the prefix of the public headers' includes

# Top to bottom, as in csrc/README.md's table: each may include those before it.
LAYERS = ["core", "backend", "diagnostics", "negotiation", "execution", "engine", "binding"]
# Layers outside that order: what each may include, and who may include it.
SIDE_LAYERS = {"device": {"includes": {"core"}, "included_by": {"execution", "engine", "binding"}}}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_SUFFIXES = {".h", ".hpp", ".cc", ".cpp", ".cu"}


def may_include(directory: str, target: str) -> bool:
    """Whether a source in ``directory`` may include a header of ``target`` (both csrc directories,
    or ``target`` the public headers' prefix)."""
    if target in (directory, PUBLIC):
        return True
    if directory in SIDE_LAYERS:
        return target in SIDE_LAYERS[directory]["includes"]
    if target in SIDE_LAYERS:
        return directory in SIDE_LAYERS[target]["included_by"]
    if directory not in LAYERS or target not in LAYERS:
        return False  # a directory no rule places: csrc/README.md and this test must say where it stands
    return LAYERS.index(target) < LAYERS.index(directory)


def includes(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, first path component) of each quoted include of ``path``."""
    text = path.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1).split("/")[0]) for m in INCLUDE.finditer(text)]


def layer_violations(csrc: pathlib.Path) -> list[str]:
    problems = []
    for path in sorted(csrc.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        directory = path.relative_to(csrc).parts[0]
        for line, target in includes(path):
            if not may_include(directory, target):
                problems.append(f"{path.relative_to(csrc)}:{line}: includes {target}/")
    return problems


def test_every_directory_is_a_known_layer() -> None:
    known = set(LAYERS) | set(SIDE_LAYERS)
    directories = {p.name for p in CSRC.iterdir() if p.is_dir()}
    assert directories - known == set(), "place the new directory in csrc/README.md's table and in LAYERS here"


def test_readme_table_lists_the_layers_in_order() -> None:
    # The README is what a reader trusts; this test is what holds the code to it.
    rows = re.findall(r"^\| `(\w+)/` \|", (CSRC / "README.md").read_text(), re.M)
    assert [row for row in rows if row not in SIDE_LAYERS] == LAYERS


def test_sources_include_only_their_own_layer_and_those_above() -> None:
    problems = layer_violations(CSRC)
    assert not problems, "includes against csrc/README.md's layers:\n" + "\n".join(problems)


def test_public_headers_include_only_each_other() -> None:
    # Backends build against these alone (get_include()): an engine header here would not be found.
    problems = [
        f"{path.name}:{line}: includes {target}/"
        for path in sorted(PUBLIC_HEADERS.iterdir())
        for line, target in includes(path)
        if target != PUBLIC and not (PUBLIC_HEADERS / target).is_file()
    ]
    assert not problems, problems


@pytest.mark.parametrize(
    "directory, header, allowed",
    [
        ("engine", "negotiation/controller.h", True),
        ("negotiation", "execution/executor.h", False),  # upwards
        ("core", "backend/backend_loader.h", False),
        ("device", "core/common.h", True),
        ("device", "backend/backend_loader.h", False),  # beside backend, not below it
        ("execution", "device/stream.h", True),
        ("negotiation", "device/stream.h", False),
        ("binding", "horovod/hvd_backend.h", True),
        ("newdir", "core/common.h", False),
    ],
)
def test_the_rule(tmp_path: pathlib.Path, directory: str, header: str, allowed: bool) -> None:
    # The checker itself, on a tree that does each thing once.
    source = tmp_path / directory / "part.cc"
    source.parent.mkdir()
    source.write_text(f'#include <vector>\n\n#include "{header}"\n')
    assert (layer_violations(tmp_path) == []) == allowed
