"""Two Ray nodes (``ray start`` twice on this machine): ranks by node, local ranks per node, and an
elastic job that loses a worker actor and gets it replaced."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from horovod.ray import ElasticRayExecutor, RayExecutor

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("two_ray_nodes")]


def placement_of_rank() -> dict:
    import ray

    import horovod.common as hvd

    hvd.init()
    total = hvd.allreduce(np.array([hvd.rank() + 1.0]), op=hvd.Sum, name="sum")
    return {
        "rank": hvd.rank(),
        "local": (hvd.local_rank(), hvd.local_size()),
        "cross": (hvd.cross_rank(), hvd.cross_size()),
        "node": ray.get_runtime_context().get_node_id(),
        "sum": float(total[0]),
    }


def test_two_hosts_two_workers_each_have_horovods_local_ranks() -> None:
    executor = RayExecutor(num_hosts=2, num_workers_per_host=2, cpus_per_worker=1)  # STRICT_SPREAD bundles
    executor.start()
    try:
        results = executor.run(placement_of_rank)
    finally:
        executor.shutdown()
    nodes = [r["node"] for r in results]
    assert len(set(nodes)) == 2 and nodes[0] == nodes[1] and nodes[2] == nodes[3], nodes  # ranks grouped by node
    assert [r["local"] for r in results] == [(0, 2), (1, 2), (0, 2), (1, 2)]
    assert [r["cross"] for r in results] == [(0, 2), (0, 2), (1, 2), (1, 2)]
    assert all(r["sum"] == 10.0 for r in results)


def elastic_worker(marker: str) -> tuple[int, int, bool]:
    import horovod.common as hvd
    from horovod.common import elastic

    hvd.init()
    state = elastic.ObjectState(step=0, log=[])

    @elastic.run
    def train(state: elastic.ObjectState) -> None:
        while state.step < 150:
            if state.step == 30 and os.environ["HOROVOD_ELASTIC_WORKER_ID"] == "1" and not os.path.exists(marker):
                Path(marker).touch()
                os.kill(os.getpid(), signal.SIGKILL)  # this worker's actor dies
            hvd.allreduce(np.ones(1), name="x")
            state.log.append(state.step)
            state.step += 1
            time.sleep(0.03)
            state.commit()

    train(state)
    return hvd.rank(), hvd.size(), state.log == list(range(150))


def test_elastic_executor_replaces_a_killed_worker_actor(tmp_path: Path) -> None:
    settings = ElasticRayExecutor.create_settings(min_np=2, max_np=4, elastic_timeout=60)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    marker = str(tmp_path / "killed")
    results = executor.run(lambda: elastic_worker(marker))
    assert os.path.exists(marker)
    assert results == [(r, 4, True) for r in range(4)], results  # every step once, on every worker
