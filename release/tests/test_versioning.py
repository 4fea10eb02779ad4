"""The version ranges between hvd packages, as published in dist/, follow the rule of
docs/guides/versioning.md (release/versioning.py), and hvd-core's version line agrees with the
major versions of its contracts."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version
from repo_packages import Package, packages
from versioning import CONTRACT_MAJORS, breaking_boundary, compatibility_line, contract_majors, range_problems

from conftest import distribution_files, wheel_metadata

NAMES = sorted(packages())


@pytest.mark.parametrize(
    ("version", "boundary", "line"),
    [
        ("0.2.0", "0.3", "0.2"),
        ("0.2.7", "0.3", "0.2"),
        ("1.4.2", "2", "1"),
        ("0.0.3", "0.0.4", "0.0.3"),
        ("0.10", "0.11", "0.10"),
    ],
)
def test_a_versions_line_and_where_it_ends(version: str, boundary: str, line: str) -> None:
    assert breaking_boundary(Version(version)) == Version(boundary)
    assert compatibility_line(Version(version)) == line


@pytest.mark.parametrize(
    ("requirement", "available", "problem"),
    [
        ("hvd-core>=0.2,<0.3", "0.2.4", None),
        ("hvd-core>=0.2.3,<0.3", "0.2.4", None),
        ("hvd-core>=0.2,<0.4", "0.2.0", "ends at 0.3"),  # two lines: 0.3 may break what 0.2 gave
        ("hvd-core>=0.2", "0.2.0", "one compatibility line"),
        ("hvd-core", "0.2.0", "unbounded"),
        ("hvd-core==0.2.0", "0.2.0", "one compatibility line"),
        ("hvd-core>=0.1,<0.2", "0.2.0", "excludes hvd-core 0.2.0"),  # not installable beside what was built
    ],
)
def test_the_rule_names_what_is_wrong(requirement: str, available: str, problem: str | None) -> None:
    problems = range_problems(Requirement(requirement), Version(available))
    assert (problems == []) if problem is None else any(problem in p for p in problems), problems


def _hvd_requirements(requirements: list[str], names: set[str]) -> list[Requirement]:
    parsed = [Requirement(r) for r in requirements]
    return [r for r in parsed if r.name in names]


@pytest.mark.parametrize("name", NAMES)
def test_published_ranges_follow_the_rule(
    name: str, dist_dir: Path, wheels: dict[str, Path], repo_packages: dict[str, Package]
) -> None:
    """Every hvd requirement the wheel publishes (dependencies and extras), and every hvd build
    requirement of its sdist, asks for one compatibility line that holds the version built beside it."""
    versions = {n: Version(p.version()) for n, p in repo_packages.items()}
    metadata, _ = wheel_metadata(wheels[name])
    published = _hvd_requirements(metadata.get_all("Requires-Dist") or [], set(versions))
    _, (sdist,) = distribution_files(dist_dir, repo_packages[name])
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"{sdist.name.removesuffix('.tar.gz')}/pyproject.toml")
        assert member is not None
        build_requires = tomllib.loads(member.read().decode())["build-system"]["requires"]
    problems = []
    for requirement in [*published, *_hvd_requirements(build_requires, set(versions))]:
        problems += range_problems(requirement, versions[requirement.name])
    assert not problems, problems
    if name != "hvd-core":
        assert any(r.name == "hvd-core" for r in published), "every hvd package is built on hvd-core"


def test_hvd_cores_line_keeps_its_contracts_majors(repo_packages: dict[str, Package]) -> None:
    """A contract major raised without a new hvd-core line (or the reverse) would make the ranges lie:
    packages built for the line would meet a contract they were not built for."""
    core = repo_packages["hvd-core"]
    line = compatibility_line(Version(core.version()))
    assert line in CONTRACT_MAJORS, (
        f"hvd-core {core.version()} starts line {line}: add its contract majors to release/versioning.py"
    )
    assert contract_majors(core.path) == CONTRACT_MAJORS[line]
