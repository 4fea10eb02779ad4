"""examples/keras/keras_digits.py under horovodrun (two ranks), with Keras on TensorFlow and on
torch: it reaches 95% test accuracy after hvd.load_model restores rank 0's checkpoint, with
identical weights on both ranks, and only rank 0 prints."""

from __future__ import annotations

import os
import pathlib
import re

import pytest
from hvd_devtools import examples

from keras_testutil import BACKENDS

ROOT = pathlib.Path(os.environ.get("HVD_REPO_ROOT", pathlib.Path(__file__).resolve().parents[3]))
SCRIPT = ROOT / "examples" / "keras" / "keras_digits.py"


@pytest.mark.parametrize("backend", BACKENDS)
def test_digits_example_reaches_95_percent(backend: str) -> None:
    done = examples.horovodrun(SCRIPT, env={"KERAS_BACKEND": backend})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    accuracy = re.search(rf"test accuracy ([0-9.]+) \(restored from .*, Keras on {backend}\)", done.stdout)
    assert accuracy and float(accuracy.group(1)) >= 0.95, output
    assert "weights identical on all 2 ranks: True" in done.stdout, output
    assert re.search(r"\[0\]<stdout>:Epoch 15/15", done.stdout), output  # rank 0 reports every epoch...
    assert "[1]<stdout>:Epoch" not in done.stdout, output  # ...and rank 1 nothing


@pytest.mark.parametrize("backend", BACKENDS)
def test_digits_example_with_adasum_reaches_95_percent(backend: str) -> None:
    """--use-adasum: DistributedOptimizer(op=hvd.Adasum) combines the ranks' gradients by Adasum."""
    done = examples.horovodrun(SCRIPT, "--use-adasum", env={"KERAS_BACKEND": backend})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    accuracy = re.search(rf"test accuracy ([0-9.]+) \(restored from .*, Keras on {backend}\)", done.stdout)
    assert accuracy and float(accuracy.group(1)) >= 0.95, output
    assert "weights identical on all 2 ranks: True" in done.stdout, output
