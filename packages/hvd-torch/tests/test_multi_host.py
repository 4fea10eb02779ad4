"""Torch training across hosts: the digits example through ``horovodrun -H`` on a cluster of network
namespaces with real sshd (hvd-runner's test kit), three ranks on two hosts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from horovod.runner.testing.netns_cluster import NetnsCluster, cluster_for_tests

ROOT = Path(os.environ.get("HVD_REPO_ROOT", Path(__file__).resolve().parents[3]))


@pytest.fixture(scope="module")
def cluster() -> Iterator[NetnsCluster]:
    # Its own prefix and subnet: hvd-runner's tests may run their cluster at the same time.
    yield from cluster_for_tests(hosts=2, prefix="hvdq", subnet=4)


@pytest.mark.timeout(300)
def test_digits_across_two_hosts_gives_identical_weights(cluster: NetnsCluster) -> None:
    script = ROOT / "examples" / "pytorch" / "pytorch_digits.py"
    if not script.is_file():
        pytest.fail(f"example not found at {script}")
    hosts = ",".join(f"{h}:{slots}" for h, slots in zip(cluster.hosts, (2, 1), strict=True))
    argv = [sys.executable, "-m", "horovod.runner.launch", "-H", hosts, sys.executable, str(script), "--epochs", "10"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run(cluster.command(cluster.hosts[0], argv), capture_output=True, text=True, timeout=280, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    final = re.search(r"final test accuracy ([0-9.]+) \(3 ranks.*identical weights on every rank: True\)", done.stdout)
    assert final and float(final.group(1)) >= 0.95, done.stdout[-2000:]
