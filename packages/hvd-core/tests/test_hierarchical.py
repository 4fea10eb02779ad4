"""HOROVOD_HIERARCHICAL_ALLREDUCE and _ALLGATHER with ranks placed on hosts (the test cluster's
``hosts``): the global set's allreduces go host by host, in blocks where every host has as many
ranks and through each host's local rank 0 otherwise; its allgathers gather inside each host,
cross between hosts from local rank 0, and are broadcast inside each host. Both equal the flat
result, whichever ranks share a host."""

from __future__ import annotations

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common.testing import run_cluster
from horovod.common.testing.probes import engine_stats

HIERARCHICAL = {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1"}


def case() -> dict[str, int]:
    hvd.init()
    n, me = hvd.size(), hvd.rank()
    x = (np.arange(11) + me).astype(np.float64)
    np.testing.assert_allclose(hvd.allreduce(x, op=hvd.Average, name="avg"), np.arange(11) + (n - 1) / 2)
    i = np.full((5, 3), me + 1, np.int32)
    np.testing.assert_array_equal(hvd.allreduce(i, op=hvd.Sum, name="ints"), np.full_like(i, n * (n + 1) // 2))
    parts = [np.full((2 + k,), float(me + k), np.float32) for k in range(4)]
    summed = hvd.grouped_allreduce(parts, op=hvd.Sum, name="group")
    for k, got in enumerate(summed):
        np.testing.assert_allclose(got, np.full_like(parts[k], sum(r + k for r in range(n))))
    return engine_stats()


@pytest.mark.parametrize(
    "hosts", [["a", "a", "b", "b"], ["a", "a", "b"], ["a", "b", "a"]], ids=["alike", "unlike", "interleaved"]
)
def test_allreduces_go_host_by_host(hosts: list[str]) -> None:
    for stats in run_cluster(case, len(hosts), env=HIERARCHICAL, hosts=hosts):
        assert stats["hierarchical_allreduces"] >= 3, stats


def test_one_host_reduces_flat() -> None:
    for stats in run_cluster(case, 2, env=HIERARCHICAL):
        assert stats["hierarchical_allreduces"] == 0, stats


HIERARCHICAL_ALLGATHER = {"HOROVOD_HIERARCHICAL_ALLGATHER": "1"}


def gather_case() -> dict[str, int]:
    hvd.init()
    n, me = hvd.size(), hvd.rank()
    for step in range(2):  # the second time from the response cache
        rows = [(r + step) % 3 * 50 for r in range(n)]  # ragged, some ranks with none
        mine = np.full((rows[me], 2), me * 10 + step, np.int32)
        got = hvd.allgather(mine, name="ragged")
        expected = np.concatenate([np.full((rows[r], 2), r * 10 + step, np.int32) for r in range(n)])
        np.testing.assert_array_equal(got, expected)
    x = (np.arange(6) + me).astype(np.float64)
    np.testing.assert_allclose(hvd.allreduce(x, op=hvd.Sum, name="flat"), n * np.arange(6) + sum(range(n)))
    return engine_stats()


@pytest.mark.parametrize(
    "hosts", [["a", "a", "b", "b"], ["a", "b", "a"], ["a", "b", "b", "a"]], ids=["alike", "interleaved", "nested"]
)
def test_allgathers_go_host_by_host(hosts: list[str]) -> None:
    for stats in run_cluster(gather_case, len(hosts), env=HIERARCHICAL_ALLGATHER, hosts=hosts):
        # The second call is a cache hit small enough to travel with negotiation itself.
        assert stats["hierarchical_allgathers"] >= 1 and stats["hierarchical_allreduces"] == 0, stats
