"""The examples in examples/spark run as a user runs them, and learn digits."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples" / "spark"


@pytest.mark.parametrize("script", ["torch_digits_estimator.py", "keras_digits_estimator.py"])
def test_example_learns_digits(script: str, tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--epochs", "8", "--store", str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = re.search(r"test accuracy: ([0-9.]+) on (\d+) rows", done.stdout)
    assert found, done.stdout[-3000:]
    assert float(found.group(1)) >= 0.9
    assert "[0]<stdout>:epoch 8/8" in done.stdout or "Epoch 8/8" in done.stdout
