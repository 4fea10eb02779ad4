"""The PyTorch examples of the repository run (two ranks as threads) and reach their targets."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(os.environ.get("HVD_REPO_ROOT", pathlib.Path(__file__).resolve().parents[3]))
EXAMPLES = ROOT / "examples" / "pytorch"
pytestmark = pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"no examples directory at {EXAMPLES}")


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=280, env=env
    )


QUICK_BENCHMARK = ("--num-warmup-batches", "1", "--num-batches-per-iter", "2", "--num-iters", "2")


def assert_digits_reach_95_percent(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    final = re.search(r"final test accuracy ([0-9.]+) \(2 ranks.*identical weights on every rank: True\)", done.stdout)
    assert final, done.stdout
    assert float(final.group(1)) >= 0.95, done.stdout


def test_digits_reaches_95_percent_with_identical_weights() -> None:
    assert_digits_reach_95_percent(run("pytorch_digits.py"))


def test_digits_with_adasum_reaches_95_percent_with_identical_weights() -> None:
    """The delta optimizer (op=hvd.Adasum): each rank's SGD step, combined by Adasum."""
    assert_digits_reach_95_percent(run("pytorch_digits.py", "--use-adasum"))


def test_adasum_small_model_fits_the_coefficients() -> None:
    """Horovod's small Adasum problem: the quadratic's coefficients found, the same on every rank."""
    done = run("pytorch_adasum_small_model.py", "--op", "adasum")
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"largest error ([0-9.e+-]+), identical on every rank: True", done.stdout)
    assert found and float(found.group(1)) < 1e-4, done.stdout


@pytest.mark.parametrize("option", ["--fp16-allreduce", "--use-adasum"])
def test_synthetic_benchmark(option: str) -> None:
    done = run("pytorch_synthetic_benchmark.py", *QUICK_BENCHMARK, "--batch-size", "8", "--image-size", "32", option)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"Img/sec per CPU: [0-9.]+", done.stdout) and "Total img/sec on 2 CPU(s)" in done.stdout, (
        done.stdout
    )


def test_elastic_digits_survives_a_lost_worker(tmp_path: pathlib.Path) -> None:
    """examples/elastic through horovodrun with its discovery script: worker 1 kills itself in epoch 3;
    the job goes on with the other two from their last commit and still reaches its target."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    hosts = ROOT / "examples" / "elastic"
    (tmp_path / "hosts").write_text("localhost:3\n")
    done = subprocess.run(
        [sys.executable, "-m", "horovod.runner.launch", "-np", "3", "--min-np", "2", "--max-np", "3",
         "--host-discovery-script", str(hosts / "discover_hosts.sh"),
         sys.executable, str(hosts / "pytorch_digits_elastic.py"), "--epochs", "12", "--fail-worker", "1"],
        env={**env, "HOSTS_FILE": str(tmp_path / "hosts")},
        capture_output=True, text=True, timeout=280, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "worker 1 (rank 1): killing itself in epoch 3" in done.stdout
    assert re.search(r"world 1 formed in .*: 2 worker\(s\)", done.stderr), done.stderr
    pattern = r"final test accuracy ([0-9.]+) \(\d workers at the end, identical weights on every worker: True\)"
    final = re.search(pattern, done.stdout)
    assert final, done.stdout
    assert float(final.group(1)) >= 0.95, done.stdout
