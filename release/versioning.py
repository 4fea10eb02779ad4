"""The rule for version ranges between hvd packages (written out in docs/guides/versioning.md), as
code the dist tests apply to what ``./dev dist`` built.

- Versions are SemVer read as pip and Cargo read 0.x: the first non-zero part of a version is its
  compatibility line. 0.2.0 and 0.2.5 are one line; 0.3.0 may break what 0.2 gave; 1.x would be one
  line up to 2.0.
- A package that needs another hvd package asks for exactly one line: ``>=L,<B`` where L is the first
  release with everything it uses and B is where L's line ends (``breaking_boundary(L)``).
- hvd-core's line is tied to its contracts: every release of one line keeps the same major version of
  the plugin API, the framework API and both C ABIs (``CONTRACT_MAJORS``). A release that raises one
  of those majors, or removes or changes a name of theirs, starts a new line. Within a line the
  contracts only gain names (their minor versions rise), so a backend or framework package built for
  0.2.0 keeps working with every later 0.2.z.
"""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

#: hvd-core's compatibility lines and the contract majors each one keeps. A new line adds a row here
#: (and raises the ranges of every package built on hvd-core); a contract major raised without a new
#: line fails the dist tests.
CONTRACT_MAJORS: dict[str, dict[str, int]] = {
    "0.2": {"plugin API": 1, "framework API": 1, "backend C ABI": 1, "framework C API": 1},
}


def compatibility_line(version: Version) -> str:
    """The line a version belongs to: ``0.2`` for 0.2.x, ``1`` for 1.x.y (``0.0.z``: each its own)."""
    major, minor, patch = (*version.release, 0, 0)[:3]
    if major:
        return str(major)
    if minor:
        return f"0.{minor}"
    return f"0.0.{patch}"


def breaking_boundary(version: Version) -> Version:
    """The first version outside ``version``'s line: 0.2.1 -> 0.3, 1.4 -> 2, 0.0.3 -> 0.0.4."""
    major, minor, patch = (*version.release, 0, 0)[:3]
    if major:
        return Version(f"{major + 1}")
    if minor:
        return Version(f"0.{minor + 1}")
    return Version(f"0.0.{patch + 1}")


def range_problems(requirement: Requirement, available: Version) -> list[str]:
    """What is wrong with ``requirement`` (on an hvd package whose version ``./dev dist`` built is
    ``available``) under the rule: empty when nothing is."""
    specifiers = {spec.operator: Version(spec.version) for spec in requirement.specifier}
    if set(specifiers) != {">=", "<"} or len(requirement.specifier) != 2:
        return [
            f"{requirement}: must be '>=L,<B' (one compatibility line), not {str(requirement.specifier) or 'unbounded'}"
        ]
    lower, upper = specifiers[">="], specifiers["<"]
    problems = []
    if upper != breaking_boundary(lower):
        problems.append(f"{requirement}: the line of {lower} ends at {breaking_boundary(lower)}, not {upper}")
    if available not in SpecifierSet(str(requirement.specifier)):
        problems.append(f"{requirement}: excludes {requirement.name} {available}, the version built beside it")
    return problems


def contract_majors(core: Path) -> dict[str, int]:
    """The major versions of hvd-core's contracts, read from its sources (``core``: packages/hvd-core)."""
    common = core / "src" / "horovod" / "common"
    include = common / "include" / "horovod"

    def read(path: Path, pattern: str) -> int:
        match = re.search(pattern, path.read_text(), re.MULTILINE)
        if not match:
            raise ValueError(f"{path}: no match for {pattern!r}")
        return int(match.group(1))

    return {
        "plugin API": read(common / "plugin_api.py", r"^API_VERSION = \((\d+), \d+\)"),
        "framework API": read(common / "framework_api.py", r"^API_VERSION = \((\d+), \d+\)"),
        "backend C ABI": read(include / "hvd_backend.h", r"^#define HVD_BACKEND_ABI_VERSION (\d+)"),
        "framework C API": read(include / "hvd_framework.h", r"^#define HVD_FRAMEWORK_API_VERSION (\d+)"),
    }
