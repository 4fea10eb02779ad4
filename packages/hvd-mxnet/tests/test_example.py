"""examples/mxnet/mxnet_digits.py under horovodrun (two ranks): it reaches 95% test accuracy with
identical weights on both ranks, and only rank 0 prints."""

from __future__ import annotations

import os
import pathlib
import re

import pytest
from hvd_devtools import examples

ROOT = pathlib.Path(os.environ.get("HVD_REPO_ROOT", pathlib.Path(__file__).resolve().parents[3]))
SCRIPT = ROOT / "examples" / "mxnet" / "mxnet_digits.py"


@pytest.mark.timeout(300)
def test_digits_example_reaches_95_percent() -> None:
    if not SCRIPT.is_file():
        pytest.fail(f"example not found at {SCRIPT}")
    done = examples.horovodrun(SCRIPT, np=2, env={"HOROVOD_CPU_OPERATIONS": "gloo"}, timeout=240)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    pattern = r"final test accuracy ([0-9.]+) \(2 ranks, .* identical weights on every rank: True\)"
    final = re.search(pattern, done.stdout)
    assert final and float(final.group(1)) >= 0.95, output[-4000:]
    assert re.search(r"\[0\]<stdout>:epoch 15/15", done.stdout), output[-4000:]  # rank 0 reports...
    assert "[1]<stdout>:" not in done.stdout, output[-4000:]  # ...rank 1 prints nothing
