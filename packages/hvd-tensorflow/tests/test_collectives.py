"""Every collective and every training API of horovod.tensorflow, in eager mode, inside tf.function
and in tf.compat.v1 graphs, with 2 and 3 ranks as processes (horovod.run on Gloo).

All the calls of one rank count run in one job (launching TensorFlow ranks costs seconds each);
every call still is a test of its own, failing with the traceback of each rank where it failed.
"""

from __future__ import annotations

import pytest

import cases_collectives as collectives
import cases_training as training
from horovod.common.testing import batch
from tf_testutil import MODES, Call, Outcomes, run_batch

NP = [2, 3]

PER_MODE = [
    collectives.case_allreduce,
    collectives.case_grouped_and_sparse,
    collectives.case_allgather_broadcast,
    collectives.case_alltoall_reducescatter,
    collectives.case_variables_and_queries,
    collectives.case_mismatches,
    collectives.case_adasum,
    collectives.case_mpi_ops,
    training.case_gradients,
]
EAGER_AND_FUNCTION = [
    collectives.case_join,
    training.case_tape_training,
    training.case_keras_model_training,
    training.case_sparse_gradients,
    training.case_sync_batch_norm,
]
CALLS: list[Call] = [
    *[(f"{case.__name__.removeprefix('case_')}-{mode}", case, (mode,)) for case in PER_MODE for mode in MODES],
    *[
        (f"{case.__name__.removeprefix('case_')}-{mode}", case, (mode,))
        for case in EAGER_AND_FUNCTION
        for mode in ("eager", "function")
    ],
    # Eagerly collectives run one at a time, in program order (Horovod's rule): graphs only.
    *[(f"any_order-{mode}", collectives.case_any_order, (mode,)) for mode in ("function", "graph")],
    ("process_sets", collectives.case_process_sets, ()),
    ("objects", collectives.case_objects, ()),
    ("basics_and_timeline", collectives.case_basics_and_timeline, ()),
    ("partial_tape_and_options", training.case_partial_tape_and_options, ()),
    ("v1_optimizer", training.case_v1_optimizer, (1,)),
    ("v1_optimizer-backward_passes_2", training.case_v1_optimizer, (2,)),
    ("v1_optimizer_local_variables", training.case_v1_optimizer_local_variables, ()),
    ("mismatched_gradients", training.case_mismatched_gradients, ()),
    ("kernels_follow_shutdown_and_init", collectives.case_kernels_follow_shutdown_and_init, ()),
]


@pytest.fixture(scope="module", params=NP, ids=lambda n: f"np{n}")
def outcomes(request: pytest.FixtureRequest) -> Outcomes:
    # Only the calls whose tests were selected (pytest -k), in their order here.
    selected = batch.selected(request)
    return run_batch([call for call in CALLS if call[0] in selected], request.param)


@pytest.mark.parametrize("key", [key for key, _, _ in CALLS])
def test_call(outcomes: Outcomes, key: str) -> None:
    results = outcomes.check(key)
    if key.startswith("join-"):  # the last rank to join is the one that kept reducing
        assert results == [len(results) - 1] * len(results), results


def test_horovods_util_names_are_reachable_from_the_module() -> None:
    import horovod.tensorflow as hvd

    assert hvd.check_num_rank_power_of_2(4) and not hvd.check_num_rank_power_of_2(6)
    assert not hvd.check_num_rank_power_of_2(0)
    assert callable(hvd.vars_to_refs) and callable(hvd.refs_to_vars)
