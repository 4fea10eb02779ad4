"""Every collective of horovod.mxnet, for every dtype MXNet has on CPU, with 2 and 3 ranks as
processes (horovod.run on Gloo), against references computed locally.

All the calls of one rank count run in one job (each MXNet rank takes a second or two to start);
every call still is a test of its own, failing with the traceback of each rank where it failed.
"""

from __future__ import annotations

import pytest

import cases_collectives as cases
from horovod.common.testing import batch
from mx_testutil import Call, Outcomes, run_batch

NP = [2, 3]

CALLS: list[Call] = [
    (case.__name__.removeprefix("case_"), case, ())
    for case in (
        cases.case_allreduce,
        cases.case_grouped,
        cases.case_adasum,
        cases.case_broadcast,
        cases.case_allgather_alltoall,
        cases.case_reducescatter,
        cases.case_engine_order,
        cases.case_process_sets,
        cases.case_mismatches,
        cases.case_basics_and_objects,
        cases.case_benchmark,
        cases.case_join,
    )
]


@pytest.fixture(scope="module", params=NP, ids=lambda n: f"np{n}")
def outcomes(request: pytest.FixtureRequest) -> Outcomes:
    # Only the calls whose tests were selected (pytest -k), in their order here.
    selected = batch.selected(request)
    return run_batch([call for call in CALLS if call[0] in selected], request.param)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("key", [key for key, _, _ in CALLS])
def test_call(outcomes: Outcomes, key: str) -> None:
    results = outcomes.check(key)
    if key == "join":  # every rank learns which rank joined last: rank 0, which reduced once more
        assert results == [0] * len(results), results
    if key == "benchmark":
        print(f"per-op cost, {len(results)} ranks (ms, median): {results[0]}")


@pytest.mark.timeout(300)
def test_lost_peer_fails_every_rank() -> None:
    outcomes = run_batch(
        [("lost_peer", cases.case_lost_peer, ())],
        2,
        env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "2", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "5"},
    )
    outcomes.check("lost_peer")
