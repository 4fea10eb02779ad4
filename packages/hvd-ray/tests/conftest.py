"""Ray clusters for the tests, on this machine, in the tests' own network namespace.

Ray registers and listens on the machine's non-loopback address whatever it is told, so these tests
must run where only loopback exists: nox runs them under ``unshare --net`` (the package's
``tests-in-private-network``). Run by hand elsewhere, they fail at once, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from horovod.runner.testing.private_network import require_private_network

#: Seconds a Ray cluster may take to come up.
START_TIMEOUT_S = 120


def pytest_configure(config: pytest.Config) -> None:
    require_private_network("hvd-ray", "Ray clusters")


@pytest.fixture(autouse=True)
def _ship_test_functions_by_value(request: pytest.FixtureRequest) -> None:
    """The workers cannot import the test modules (Ray starts them elsewhere, without this
    directory on their path): the functions the tests define are sent by value, as a script's are."""
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(request.module)


def _ray_cli() -> str:
    return shutil.which("ray", path=os.path.dirname(sys.executable)) or "ray"


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One Ray node with 4 CPUs (the tests' workers take 1 each)."""
    import ray

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=True)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def two_ray_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Two Ray nodes of 2 CPUs each, started with ``ray start`` (a head and a worker node); yields the
    address ``ray.init`` joins them at."""
    import ray

    temp = tmp_path_factory.mktemp("ray-nodes")
    port = "6391"
    head = [_ray_cli(), "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
            f"--temp-dir={temp}", "--disable-usage-stats"]  # fmt: skip
    worker = [_ray_cli(), "start", f"--address=127.0.0.1:{port}", "--num-cpus=2", "--disable-usage-stats"]
    try:
        subprocess.run(head, check=True, capture_output=True, text=True, timeout=START_TIMEOUT_S)
        subprocess.run(worker, check=True, capture_output=True, text=True, timeout=START_TIMEOUT_S)
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            assert time.monotonic() < deadline, f"the second Ray node did not join: {ray.nodes()}"
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        ray.shutdown()
        subprocess.run([_ray_cli(), "stop", "--force"], capture_output=True, timeout=START_TIMEOUT_S)


def examples_dir() -> Path:
    root = Path(os.environ.get("HVD_REPO_ROOT", Path(__file__).resolve().parents[3]))
    return root / "examples" / "ray"
