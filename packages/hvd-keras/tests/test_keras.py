"""horovod.keras with 2 and 3 ranks as processes (horovod.run on Gloo), with Keras on TensorFlow,
and the same cases with Keras on torch (2 ranks).

All the calls of one job run in one launch (a Keras rank takes seconds to start); every call is
still a test of its own, failing with the traceback of each rank where it failed.
"""

from __future__ import annotations

import pathlib

import pytest

import cases_keras as cases
from horovod.common.testing import batch
from keras_testutil import Call, Outcomes, backend, run_batch

JOBS = [backend("tensorflow", 2), backend("tensorflow", 3), backend("torch", 2)]


def calls(directory: str) -> list[Call]:
    return [
        ("fit_matches_single_process", cases.case_fit_matches_single_process, (1,)),
        ("fit_matches_single_process-backward_passes_2", cases.case_fit_matches_single_process, (2,)),
        ("optimizer_options", cases.case_optimizer_options, ()),
        ("broadcast_callback", cases.case_broadcast_callback, ()),
        ("partial_optimizer", cases.case_partial_optimizer, ()),
        ("best_model_checkpoint", cases.case_best_model_checkpoint, (directory,)),
        ("metric_average", cases.case_metric_average, ()),
        ("learning_rate_callbacks", cases.case_learning_rate_callbacks, ()),
        ("load_model_round_trip", cases.case_load_model_round_trip, (directory,)),
        ("misuse", cases.case_misuse, (directory,)),
    ]


KEYS = [key for key, _, _ in calls("")]


@pytest.fixture(scope="module", params=JOBS, ids=lambda job: f"{job[0]}-np{job[1]}")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Outcomes:
    backend, np_ = request.param
    directory = str(tmp_path_factory.mktemp(f"{backend}{np_}"))
    selected = batch.selected(request)
    return run_batch([c for c in calls(directory) if c[0] in selected], np_, backend)


@pytest.mark.parametrize("key", KEYS)
def test_call(outcomes: Outcomes, key: str) -> None:
    outcomes.check(key)


def test_both_import_paths_are_one_implementation() -> None:
    import horovod.keras
    import horovod.tensorflow.keras

    for name in ("DistributedOptimizer", "load_model", "allreduce", "Compression", "init", "rank"):
        assert getattr(horovod.keras, name) is getattr(horovod.tensorflow.keras, name), name
    assert horovod.keras.callbacks.MetricAverageCallback is horovod.tensorflow.keras.callbacks.MetricAverageCallback
    assert pathlib.Path(horovod.keras.__file__).read_text().count("\n") < 30  # thin, on purpose
