"""hvd-core's wheels in dist/ serve every Python of the package matrix (devtools/matrix.toml): for
each, a fresh virtual environment of that Python installs hvd-core, hvd-backend-gloo and hvd-runner
from dist/ alone (their third-party dependencies from the index), and a 2-rank job through
``horovodrun`` allreduces on Gloo with the engine of the wheel chosen for that Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename
from repo_packages import ROOT, Package

from conftest import distribution_files

sys.path.insert(0, str(ROOT / "devtools"))
import package_matrix  # devtools/: the matrix and its interpreters

DEFAULT_PYTHON, CELLS = package_matrix.load()
PYTHONS = sorted({DEFAULT_PYTHON, *(cell.python for cell in CELLS)}, key=lambda v: tuple(map(int, v.split("."))))
JOB = Path(__file__).with_name("dist_core_job.py")
THIRD_PARTY = ["numpy>=1.23", "pluggy>=1.5,<2", "cloudpickle>=2", "PyYAML>=5.1", "psutil>=5.9"]
JOB_TIMEOUT_S = 180


def _run(command: list[str], *, offline: bool = False, timeout: float = 900) -> str:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if offline:  # nothing but the --find-links given
        env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(command)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_matrix_spans_python_3_10_to_3_13() -> None:
    assert PYTHONS == ["3.10", "3.11", "3.12", "3.13"]


@pytest.mark.parametrize("python", PYTHONS)
def test_a_job_on_the_wheel_for_each_python(
    python: str, dist_dir: Path, repo_packages: dict[str, Package], tmp_path: Path
) -> None:
    environment = tmp_path / "venv"
    _run([package_matrix.interpreter(python), "-m", "venv", str(environment)])
    bin_dir = environment / "bin"
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, *THIRD_PARTY])
    _run(
        [*pip, "--no-index", "--find-links", str(dist_dir), "hvd-core", "hvd-backend-gloo", "hvd-runner"], offline=True
    )

    # The wheel pip chose is the one for this Python: cp3XX before 3.12, the stable ABI's from 3.12 on.
    chosen = _run([str(bin_dir / "python"), "-c", "import horovod.common._native._core as c; print(c.__file__)"])
    wheels = distribution_files(dist_dir, repo_packages["hvd-core"])[0]
    tags = {str(tag) for wheel in wheels for tag in parse_wheel_filename(wheel.name)[3]}
    if python in ("3.10", "3.11"):
        tag = "cp" + python.replace(".", "")
        assert any(t.startswith(f"{tag}-{tag}-") for t in tags), (python, sorted(tags))
        assert chosen.strip().endswith(f".cpython-{tag[2:]}-x86_64-linux-gnu.so"), chosen
    else:
        assert any(t.startswith("cp312-abi3-") for t in tags), sorted(tags)
        assert chosen.strip().endswith("_core.abi3.so"), chosen

    out = _run(
        [str(bin_dir / "horovodrun"), "-np", "2", "-H", "localhost:2", str(bin_dir / "python"), str(JOB)],
        timeout=JOB_TIMEOUT_S,
    )
    reports = [json.loads(line.split("DIST_CORE_JOB ", 1)[1]) for line in out.splitlines() if "DIST_CORE_JOB " in line]
    assert sorted(r["rank"] for r in reports) == [0, 1], out
    for report in reports:
        assert report["python"] == python and report["size"] == 2 and report["gloo_enabled"], report
        assert report["sum"] == [3.0] * 4, report
