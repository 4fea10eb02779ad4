"""The TensorFlow examples of the repository run under horovodrun (two ranks) and reach their targets."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest
from hvd_devtools import examples

ROOT = pathlib.Path(os.environ.get("HVD_REPO_ROOT", pathlib.Path(__file__).resolve().parents[3]))
EXAMPLES = ROOT / "examples" / "tensorflow"
pytestmark = pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"no examples directory at {EXAMPLES}")


def horovodrun(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs an example on two local ranks, as a user would."""
    return examples.horovodrun(EXAMPLES / script, *args)


def test_digits_reaches_95_percent_with_identical_weights() -> None:
    done = horovodrun("tensorflow2_digits.py")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    final = re.search(r"final test accuracy ([0-9.]+) \(2 ranks, weights identical", done.stdout)
    assert final, output
    assert float(final.group(1)) >= 0.95, done.stdout
    # Rank 0 alone reports, once per epoch.
    assert len(re.findall(r"<stdout>:epoch +\d+/\d+ +loss [0-9.]+ +test accuracy", done.stdout)) >= 1, done.stdout
    assert "[1]<stdout>:epoch" not in done.stdout, done.stdout


def test_synthetic_benchmark_small_model() -> None:
    done = horovodrun(
        "tensorflow2_synthetic_benchmark.py",
        "--model",
        "MobileNetV2",
        "--image-size",
        "32",
        "--batch-size",
        "4",
        "--num-warmup-batches",
        "1",
        "--num-batches-per-iter",
        "1",
        "--num-iters",
        "2",
        "--fp16-allreduce",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    per_cpu = re.search(r"Img/sec per CPU: ([0-9.]+) \+-[0-9.]+", done.stdout)
    assert per_cpu and float(per_cpu.group(1)) > 0, done.stdout
    assert re.search(r"Total img/sec on 2 CPU\(s\): [0-9.]+", done.stdout), done.stdout


@pytest.mark.timeout(300)
@pytest.mark.parametrize("side", ["compute", "training"])
def test_data_service_example_trains_from_a_compute_job(tmp_path: pathlib.Path, side: str) -> None:
    """tensorflow2_data_service.py reads its augmented batches from a compute job (2 ranks each),
    reaches 90% with identical weights, and ends the compute job."""
    import sys

    config = tmp_path / "compute.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2")
    launcher = pathlib.Path(sys.executable).parent / "horovodrun"
    worker = ["-m", "horovod.tensorflow.data.compute_worker", str(config), "--dispatcher-side", side]
    log = (tmp_path / "compute.log").open("w")  # a file, not a pipe nobody reads until the end
    compute = subprocess.Popen(
        [str(launcher), "-np", "2", "-H", "localhost:2", sys.executable, *worker],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        done = horovodrun("tensorflow2_data_service.py", str(config), "--epochs", "8")
        output = done.stdout + done.stderr
        assert done.returncode == 0, output
        found = re.search(
            r"test accuracy ([0-9.]+) \(2 ranks, input pipeline on the compute job.*identical: True", output
        )
        assert found and float(found.group(1)) >= 0.9, output
        assert compute.wait(timeout=60) == 0, (tmp_path / "compute.log").read_text()[-3000:]
    finally:
        if compute.poll() is None:  # the launcher and its ranks: a launcher killed alone leaves them running
            import psutil

            for child in psutil.Process(compute.pid).children(recursive=True):
                child.kill()
            compute.kill()
        compute.wait()
        log.close()
