"""PyTorch training through RayExecutor: examples/ray trains scikit-learn's digits; every worker
ends with identical weights and the target accuracy."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import examples_dir

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("local_ray")]


def test_digits_example_through_ray_executor() -> None:
    spec = importlib.util.spec_from_file_location("ray_digits", examples_dir() / "pytorch_digits_ray.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules["ray_digits"] = example  # cloudpickle ships a module by value only when it is registered
    spec.loader.exec_module(example)
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(example)  # the workers cannot import it by its path
    results = example.train_on_ray(num_workers=2, epochs=12)
    assert [r["rank"] for r in results] == [0, 1]
    assert len({r["checksum"] for r in results}) == 1, results  # identical weights on every worker
    assert results[0]["accuracy"] >= 0.95, results
