"""The tf.data service across hosts: the compute job on one network-namespace host, the training job
on another (hvd-runner's cluster of namespaces with real sshd; root), each through horovodrun with
the cluster's interface, the addresses in the config those of that interface."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from horovod.runner.testing.netns_cluster import NetnsCluster, cluster_for_tests

TRAINING = Path(__file__).resolve().with_name("data_service_training.py")


@pytest.fixture(scope="module")
def cluster() -> Iterator[NetnsCluster]:
    yield from cluster_for_tests(hosts=2, prefix="hvdf", subnet=7)


def job(cluster: NetnsCluster, host: str, argv: list[str], log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2")
    launcher = [sys.executable, "-m", "horovod.runner.launch", "-H", f"{host}:2"]
    launcher += ["--network-interface", cluster.interface]
    with log.open("w") as out:
        return subprocess.Popen(
            cluster.command(host, [*launcher, sys.executable, *argv]), env=env, stdout=out, stderr=subprocess.STDOUT
        )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("side", ["compute", "training"])
def test_a_compute_job_on_one_host_feeds_training_on_another(cluster: NetnsCluster, tmp_path: Path, side: str) -> None:
    compute_host, training_host = cluster.hosts
    config = tmp_path / "compute.json"
    compute = job(
        cluster,
        compute_host,
        ["-m", "horovod.tensorflow.data.compute_worker", str(config), "--dispatcher-side", side],
        tmp_path / "compute.log",
    )
    try:
        training = job(cluster, training_host, [str(TRAINING), str(config)], tmp_path / "training.log")
        try:
            assert training.wait(timeout=240) == 0, (tmp_path / "training.log").read_text()[-3000:]
        finally:
            if training.poll() is None:
                training.kill()
                training.wait()
        assert "checked" in (tmp_path / "training.log").read_text()
        written = config.read_text()
        assert cluster.address(compute_host) in written and "127.0.0.1" not in written, written
        assert compute.wait(timeout=60) == 0, (tmp_path / "compute.log").read_text()[-3000:]
    finally:
        if compute.poll() is None:
            compute.kill()
            compute.wait()
