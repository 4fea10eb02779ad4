"""What the dist tests look at: the distributions ``./dev dist`` put in ``dist/`` (``HVD_DIST``
names another directory), and the repository's packages they were built from."""

from __future__ import annotations

import email.parser
import email.policy
import os
import sys
import zipfile
from email.message import Message
from pathlib import Path

import pytest
from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # release/: the rule and the package list

from repo_packages import ROOT, Package, packages


@pytest.fixture(scope="session")
def dist_dir() -> Path:
    path = Path(os.environ.get("HVD_DIST", ROOT / "dist"))
    if not path.is_dir() or not any(path.iterdir()):
        pytest.fail(f"no distributions in {path}: build them first with ./dev dist")
    return path


@pytest.fixture(scope="session")
def repo_packages() -> dict[str, Package]:
    return packages()


def distribution_files(dist_dir: Path, package: Package) -> tuple[list[Path], list[Path]]:
    """(wheels, sdists) of ``package`` in ``dist_dir``, any version."""
    stem = package.name.replace("-", "_") + "-"
    return sorted(dist_dir.glob(stem + "*.whl")), sorted(dist_dir.glob(stem + "*.tar.gz"))


def installable_here(wheel: Path) -> bool:
    """Whether the Python running the tests installs the wheel."""
    return bool(set(parse_wheel_filename(wheel.name)[3]) & set(sys_tags()))


@pytest.fixture(scope="session")
def wheels(dist_dir: Path, repo_packages: dict[str, Package]) -> dict[str, Path]:
    """Each package's one wheel in the directory that this Python installs (hvd-core has one per
    Python, test_every_python.py looks at the others)."""
    found = {}
    for name, package in repo_packages.items():
        wheel_files = [wheel for wheel in distribution_files(dist_dir, package)[0] if installable_here(wheel)]
        if len(wheel_files) != 1:
            pytest.fail(f"{name}: expected one wheel in {dist_dir}, found {[p.name for p in wheel_files]}")
        found[name] = wheel_files[0]
    return found


def wheel_metadata(wheel: Path) -> tuple[Message, dict[str, str]]:
    """The wheel's METADATA, and its other .dist-info files by name."""
    with zipfile.ZipFile(wheel) as archive:
        info = {
            n.split("/", 1)[1]: archive.read(n).decode()
            for n in archive.namelist()
            if n.split("/")[0].endswith(".dist-info")
        }
    return email.parser.Parser(policy=email.policy.compat32).parsestr(info["METADATA"]), info
