"""A user's install from dist/ alone: a fresh virtual environment gets torch and the third-party
packages hvd needs from the index, then

    pip install --no-index --find-links dist hvd-torch hvd-backend-gloo hvd-runner

which must pull in hvd-core by itself. A 2-rank job through ``horovodrun`` then trains and
communicates with the libgloo bundled in hvd-backend-gloo's wheel: the system's libgloo (this
machine has Debian's) is hidden from the job (bound over by an empty file in a mount namespace of its
own) and every rank reports which libgloo it loaded. Then hvd-backend-mpi from dist/ beside the mpich
wheel: ``horovodrun --mpi`` runs the same job on the MPI the user installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from conftest import wheel_metadata

JOB = Path(__file__).with_name("dist_job.py")
#: The CPU build of torch this repository tests (an unpinned torch resolves to a CUDA build), and the
#: MPICH the MPI backend's wheel is built against (hvd-backend-mpi's build-variants).
TORCH = "torch==2.13.0"
MPICH = "mpich==5.0.2"
#: Where Debian and most distributions put a system libgloo.
SYSTEM_LIBRARY_DIRS = ("/usr/lib", "/usr/lib64", "/usr/local/lib", "/usr/lib/x86_64-linux-gnu")
JOB_TIMEOUT_S = 180


def _third_party(wheels: dict[str, Path], names: list[str]) -> list[str]:
    """The requirements (not extras) of these wheels that name no hvd package."""
    needed: list[str] = []
    for name in names:
        metadata, _ = wheel_metadata(wheels[name])
        for text in metadata.get_all("Requires-Dist") or []:
            requirement = Requirement(text)
            if requirement.marker is None and requirement.name not in wheels and text not in needed:
                needed.append(text)
    return needed


def _pip(environment: Path, *args: str, offline: bool = False) -> str:
    env = dict(os.environ)
    if offline:
        # Nothing but the --find-links given: no configured index or extra find-links either.
        env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull
    done = subprocess.run(
        [str(environment / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _system_libgloo() -> Path | None:
    for directory in SYSTEM_LIBRARY_DIRS:
        for candidate in sorted(Path(directory).glob("libgloo.so*")):
            return candidate.resolve()
    return None


def _hidden(command: list[str], library: Path | None) -> list[str]:
    """``command`` in a mount namespace of its own where ``library`` reads as an empty file (root and
    unshare needed: without them the test still proves which copy was loaded, from the maps)."""
    if library is None or os.geteuid() != 0 or not shutil.which("unshare"):
        return command
    script = 'mount --bind /dev/null "$1" && shift && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", str(library), *command]


def _run_job(environment: Path, launcher_args: list[str], hidden: Path | None) -> list[dict]:
    command = [
        str(environment / "bin" / "horovodrun"),
        *launcher_args,
        "-np",
        "2",
        "-H",
        "localhost:2",
        str(environment / "bin" / "python"),
        str(JOB),
    ]
    env = {
        **os.environ,
        "PATH": f"{environment / 'bin'}{os.pathsep}{os.environ['PATH']}",  # the environment's mpirun
        "OMP_NUM_THREADS": "1",
        "HVD_HIDDEN_LIBRARY": str(hidden or ""),
    }
    env.pop("PYTHONPATH", None)
    done = subprocess.run(_hidden(command, hidden), capture_output=True, text=True, env=env, timeout=JOB_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    # under mpirun the ranks' lines may meet on one line of the output: each report is read where it starts
    decoder = json.JSONDecoder()
    reports = [decoder.raw_decode(done.stdout, m.end())[0] for m in re.finditer(r"DIST_JOB ", done.stdout)]
    assert sorted(r["rank"] for r in reports) == [0, 1], done.stdout + done.stderr
    return reports


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Path:
    """A fresh virtual environment with torch and hvd's third-party dependencies, and nothing of hvd."""
    path = tmp_path_factory.mktemp("user") / "venv"
    venv.EnvBuilder(with_pip=True).create(path)
    _pip(path, "--quiet", TORCH, *_third_party(wheels, ["hvd-core", "hvd-torch", "hvd-backend-gloo", "hvd-runner"]))
    return path


def _installed(environment: Path, distribution: str) -> tuple[str, str]:
    """(version, directory) of a distribution in the environment."""
    code = (
        "import importlib.metadata as m, sys; d = m.distribution(sys.argv[1]);"
        "print(d.version); print(d.locate_file(''))"
    )
    out = subprocess.run(
        [str(environment / "bin" / "python"), "-c", code, distribution], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    return out[0], out[1]


def test_torch_job_on_the_bundled_gloo(environment: Path, dist_dir: Path) -> None:
    out = _pip(
        environment,
        "--no-index",
        "--find-links",
        str(dist_dir),
        "hvd-torch",
        "hvd-backend-gloo",
        "hvd-runner",
        offline=True,
    )
    installed = next(line for line in out.splitlines() if line.startswith("Successfully installed"))
    assert "hvd-core-" in installed, f"hvd-core was not pulled in as a dependency: {installed}"
    site_packages = Path(_installed(environment, "hvd-core")[1])
    assert site_packages.is_relative_to(environment)

    hidden = _system_libgloo()
    reports = _run_job(environment, [], hidden)
    bundled = site_packages / "hvd_backend_gloo.libs"
    for report in reports:
        assert report["size"] == 2 and report["gloo_enabled"] and report["rank_sum"] == 3.0
        assert report["weights_identical"], report
        (libgloo,) = report["libgloo"]
        assert Path(libgloo).parent == bundled.resolve(), (
            f"rank {report['rank']} loaded {libgloo}, not the wheel's copy"
        )
        if hidden is not None and os.geteuid() == 0:
            assert report["hidden_library_loads"] is False, f"{hidden} was not hidden from rank {report['rank']}"


def test_mpi_job_on_the_users_mpich(environment: Path, dist_dir: Path) -> None:
    _pip(environment, "--quiet", MPICH)
    _pip(
        environment,
        "--no-index",
        "--find-links",
        str(dist_dir),
        "hvd-backend-mpi",
        "hvd-torch",
        "hvd-runner",
        offline=True,
    )
    reports = _run_job(environment, ["--mpi"], None)
    for report in reports:
        assert report["size"] == 2 and report["mpi_enabled"] and report["rank_sum"] == 3.0
        assert report["weights_identical"], report
        (libmpi,) = report["libmpi"]
        assert Path(libmpi).parent == (environment / "lib").resolve(), (
            f"rank {report['rank']} loaded {libmpi}, not the mpich wheel's"
        )
