"""Horovod's elastic Keras API (horovod._keras.elastic): KerasState, the callbacks, run."""

from horovod._keras.elastic import (
    CommitStateCallback,
    KerasState,
    ObjectState,
    State,
    UpdateBatchStateCallback,
    UpdateEpochStateCallback,
    run,
    run_fn,
)

__all__ = [
    "CommitStateCallback",
    "KerasState",
    "ObjectState",
    "State",
    "UpdateBatchStateCallback",
    "UpdateEpochStateCallback",
    "run",
    "run_fn",
]
