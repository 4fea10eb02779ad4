"""Each package's wheel and sdist in dist/ carry what a package index shows and pip needs: its own
version, a summary, the README as long description, the license and its files, classifiers that
exist, ``Requires-Python``, project URLs and the entry points of its pyproject.toml."""

from __future__ import annotations

import configparser
import tarfile
from pathlib import Path

import pytest
import trove_classifiers
from repo_packages import Package, packages

from conftest import distribution_files, wheel_metadata

NAMES = sorted(packages())
#: The project URLs every package lists (a package index shows them as its links).
URL_LABELS = {"Homepage", "Documentation", "Source", "Changelog", "Issues"}


@pytest.mark.parametrize("name", NAMES)
def test_one_wheel_and_one_sdist_at_the_packages_version(
    name: str, dist_dir: Path, repo_packages: dict[str, Package]
) -> None:
    package = repo_packages[name]
    wheels, sdists = distribution_files(dist_dir, package)
    stem = f"{name.replace('-', '_')}-{package.version()}"
    assert [p.name for p in sdists] == [f"{stem}.tar.gz"]
    # One wheel, or one per Python for a package built per Python (test_every_python.py)
    assert len(wheels) == 1 or (package.interpreter_specific and len(wheels) > 1), wheels
    for wheel in wheels:
        assert wheel.name.startswith(stem + "-"), wheels
        metadata, _ = wheel_metadata(wheel)
        assert (metadata["Name"], metadata["Version"]) == (name, package.version())


@pytest.mark.parametrize("name", NAMES)
def test_the_metadata_is_complete(name: str, wheels: dict[str, Path], repo_packages: dict[str, Package]) -> None:
    package = repo_packages[name]
    metadata, info = wheel_metadata(wheels[name])
    assert metadata["Summary"] == package.project["description"] and len(metadata["Summary"]) > 20
    assert metadata["Description-Content-Type"] == "text/markdown"
    readme = (package.path / "README.md").read_text()
    assert metadata.get_payload().strip() == readme.strip(), "the long description is not the package's README"
    assert metadata["License-Expression"] == "Apache-2.0"
    # hatchling's default license files: the package's LICENSE, NOTICE (and hvd-core's notices of the
    # code it vendors, LICENSE-THIRD-PARTY)
    license_files = sorted(p.name for pattern in ("LICEN[CS]E*", "NOTICE*") for p in package.path.glob(pattern))
    assert {"LICENSE", "NOTICE"} <= set(license_files)
    assert sorted(metadata.get_all("License-File") or []) == license_files
    for license_file in license_files:
        assert info[f"licenses/{license_file}"] == (package.path / license_file).read_text()
    assert metadata["Requires-Python"] == package.project["requires-python"]
    classifiers = metadata.get_all("Classifier") or []
    unknown = [c for c in classifiers if c not in trove_classifiers.classifiers]
    assert classifiers and not unknown, f"not classifiers a package index accepts: {unknown}"
    assert "Typing :: Typed" in classifiers and any(
        c.startswith("Programming Language :: Python :: 3.") for c in classifiers
    )
    urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL") or [])
    assert set(urls) == URL_LABELS and all(url.startswith("https://") for url in urls.values()), urls
    assert name in urls["Source"] and name in urls["Changelog"]
    assert metadata["Author"] == "The hvd developers"


@pytest.mark.parametrize("name", NAMES)
def test_the_entry_points_are_the_pyprojects(
    name: str, wheels: dict[str, Path], repo_packages: dict[str, Package]
) -> None:
    project = repo_packages[name].project
    expected = {group: dict(entries) for group, entries in project.get("entry-points", {}).items()}
    if project.get("scripts"):
        expected["console_scripts"] = dict(project["scripts"])
    _, info = wheel_metadata(wheels[name])
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # entry point names are case-sensitive
    parser.read_string(info.get("entry_points.txt", ""))
    found = {group: {key: value.strip() for key, value in parser[group].items()} for group in parser.sections()}
    assert found == expected
    if project.get("entry-points", {}).get("horovod"):
        assert found["horovod"], "the plugin entry point through which hvd-core finds the package"


@pytest.mark.parametrize("name", NAMES)
def test_the_sdist_builds_on_its_own(name: str, dist_dir: Path, repo_packages: dict[str, Package]) -> None:
    """The sdist holds the sources the wheel is built from (./dev dist built the wheel from it) and
    the files a redistributor needs."""
    package = repo_packages[name]
    _, (sdist,) = distribution_files(dist_dir, package)
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "LICENSE", "NOTICE", "CHANGELOG.md", "PKG-INFO"} <= members
    assert any(m.startswith("src/horovod/") and m.endswith(".py") for m in members)
    if package.native:
        assert "CMakeLists.txt" in members and any(m.startswith("csrc/") for m in members)
