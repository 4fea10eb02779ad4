"""The wheels holding compiled code are manylinux wheels: ``auditwheel show`` gives each a manylinux
tag, the Gloo backend carries its own libgloo (and what libgloo links), the MPI backend links the
MPI the user installs and carries none, and no library names a directory of the build machine."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from repo_packages import Package, packages

NATIVE = sorted(name for name, package in packages().items() if package.native)


def shared_libraries(wheel: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Each shared library in the wheel: (its NEEDED entries, its RUNPATH/RPATH entries)."""
    found = {}
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if re.search(r"\.so(\.|$)", name.rsplit("/", 1)[-1]):
                elf = ELFFile(io.BytesIO(archive.read(name)))
                needed: list[str] = []
                paths: list[str] = []
                for section in elf.iter_sections():
                    if isinstance(section, DynamicSection):
                        for tag in section.iter_tags():
                            if tag.entry.d_tag == "DT_NEEDED":
                                needed.append(tag.needed)
                            elif tag.entry.d_tag in ("DT_RUNPATH", "DT_RPATH"):
                                paths += (tag.runpath if tag.entry.d_tag == "DT_RUNPATH" else tag.rpath).split(":")
                found[name] = (needed, paths)
    return found


def test_every_package_with_compiled_code_is_one_of_these() -> None:
    assert NATIVE == ["hvd-backend-gloo", "hvd-backend-mpi", "hvd-backend-nccl", "hvd-core", "hvd-tensorflow"]


@pytest.mark.parametrize("name", NATIVE)
def test_auditwheel_gives_a_manylinux_tag(name: str, wheels: dict[str, Path]) -> None:
    """``auditwheel show`` finds nothing outside the manylinux baseline that the wheel does not carry,
    and the tag it gives is the wheel's."""
    wheel = wheels[name]
    assert re.search(r"-manylinux_\d+_\d+_x86_64\.whl$", wheel.name), wheel.name
    shown = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", "--json", str(wheel)], capture_output=True, text=True, check=True
    ).stdout
    report = json.loads(shown)
    assert report["external_libs"] == {}, report["external_libs"]
    assert report["overall_tag"].startswith("manylinux_") and report["overall_tag"] in wheel.name, (report, wheel.name)


@pytest.mark.parametrize("name", NATIVE)
def test_no_library_names_a_directory_of_the_build_machine(name: str, wheels: dict[str, Path]) -> None:
    for library, (_, paths) in shared_libraries(wheels[name]).items():
        assert all(p.startswith("$ORIGIN") for p in paths if p), f"{library}: RUNPATH {paths}"


def test_the_gloo_backend_carries_its_libgloo(wheels: dict[str, Path]) -> None:
    libraries = shared_libraries(wheels["hvd-backend-gloo"])
    backend_needed, backend_paths = libraries["horovod/backends/gloo/_native/libhvd_backend_gloo.so"]
    bundled = {name.rsplit("/", 1)[-1] for name in libraries if name.startswith("hvd_backend_gloo.libs/")}
    (gloo,) = [n for n in backend_needed if n.startswith("libgloo")]
    assert gloo in bundled, f"the backend links {gloo}, which the wheel does not carry ({sorted(bundled)})"
    assert backend_paths == ["$ORIGIN/../../../../hvd_backend_gloo.libs"]
    # what libgloo itself links beyond the manylinux baseline comes along too
    (gloo_needed, _) = libraries[f"hvd_backend_gloo.libs/{gloo}"]
    assert any(n.startswith("libhiredis") for n in gloo_needed) and all(
        n in bundled for n in gloo_needed if n.startswith(("libhiredis", "libibverbs"))
    ), gloo_needed


def test_the_mpi_backend_loads_the_users_mpi(wheels: dict[str, Path]) -> None:
    """No libmpi in the wheel and none linked: the backend records the soname it was compiled against
    (the MPICH ABI) and horovod.backends.mpi loads the user's copy of it before the backend."""
    libraries = shared_libraries(wheels["hvd-backend-mpi"])
    assert not [name for name in libraries if ".libs/" in name], "nothing is bundled: the MPI stays the user's"
    needed, paths = libraries["horovod/backends/mpi/_native/libhvd_backend_mpi.so"]
    assert not [n for n in needed if "mpi" in n] and paths == [], (needed, paths)
    with zipfile.ZipFile(wheels["hvd-backend-mpi"]) as archive:
        description = archive.read("horovod/backends/mpi/_native/mpi_library.txt").decode()
    # no directory of the build machine: the user's environment and system are searched
    assert description.splitlines() == ["soname=libmpi.so.12", "build_dir="], description


def test_the_nccl_backend_links_neither_cuda_nor_nccl(wheels: dict[str, Path]) -> None:
    """NCCL is loaded at run time (the user's wheel, or the copy a framework loaded): nothing of CUDA or
    NCCL is bundled or linked, so the wheel runs with whichever CUDA the user's NCCL was built for."""
    libraries = shared_libraries(wheels["hvd-backend-nccl"])
    assert not [name for name in libraries if ".libs/" in name], "nothing is bundled"
    needed, paths = libraries["horovod/backends/nccl/_native/libhvd_backend_nccl.so"]
    assert not [n for n in needed if "nccl" in n or "cuda" in n] and paths == [], (needed, paths)


def test_packages_without_compiled_code_are_pure(wheels: dict[str, Path], repo_packages: dict[str, Package]) -> None:
    for name, package in repo_packages.items():
        if not package.native:
            assert wheels[name].name.endswith("-py3-none-any.whl"), wheels[name].name


def test_every_bundled_library_has_its_license_notice(
    wheels: dict[str, Path], repo_packages: dict[str, Package]
) -> None:
    """A library copied into a wheel is redistributed: the wheel carries its copyright and license
    (the package's LICENSE-THIRD-PARTY, one of its license files)."""
    for name in NATIVE:
        bundled = [lib.rsplit("/", 1)[-1] for lib in shared_libraries(wheels[name]) if ".libs/" in lib]
        if not bundled:
            continue
        notice = (repo_packages[name].path / "LICENSE-THIRD-PARTY").read_text()
        listed = [lib.strip() for lib in notice.split("Libraries:", 1)[1].split("\n", 1)[0].split(",")]
        # auditwheel renames a copy libgloo-<hash>.so.0.5.0: the name before the hash is the library's
        uncovered = [lib for lib in bundled if lib.rsplit("-", 1)[0] not in listed]
        assert not uncovered, f"{name}: {uncovered} bundled without a notice in LICENSE-THIRD-PARTY"
