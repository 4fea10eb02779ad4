"""What differs between Keras backends: how a backend's tensors and gradients reach hvd's engine.

Keras 3 runs on several backends; ``current()`` gives the adapter for the one Keras runs on:
TensorFlow through hvd-tensorflow (a dependency of hvd-keras), torch through hvd-torch, which is
found through hvd-core's framework registry (hvd-keras does not depend on it, and imports it only
when Keras runs on torch). Everything else of horovod._keras is written once, on ``keras.ops`` and
the numpy collectives of horovod.common.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol

import keras

from horovod.common.framework_api import ProcessSet


@dataclass(frozen=True)
class GradientSettings:
    """How DistributedOptimizer reduces gradients (Horovod's options, validated once)."""

    prefix: str
    compression: Any
    sparse_as_dense: bool
    op: int
    gradient_predivide_factor: float
    num_groups: int
    groups: list[list[Any]] | None
    process_set: ProcessSet


class Framework(Protocol):
    """One Keras backend's way to hvd's engine."""

    name: str

    def gradient_reducer(self, settings: GradientSettings) -> Any:
        """An object whose ``reduce(gradients, variables)`` returns the gradients reduced over the
        ranks (None stays None), every gradient of a step in one submission to the engine."""

    def allreduce(
        self, value: Any, name: str | None, op: int, prescale: float, postscale: float, compression: Any
    ) -> Any:
        """``value`` reduced over every rank, as a tensor of the backend."""

    def allgather(self, value: Any, name: str | None) -> Any: ...

    def broadcast(self, value: Any, root_rank: int, name: str | None) -> Any: ...

    def reducescatter(self, value: Any, name: str | None, op: int) -> Any: ...


@functools.cache
def _for_backend(backend: str) -> Framework:
    if backend == "tensorflow":
        from horovod._keras.frameworks.tensorflow import TensorFlowFramework

        return TensorFlowFramework()
    if backend == "torch":
        from horovod._keras.frameworks.torch import TorchFramework

        return TorchFramework()
    raise NotImplementedError(
        f"hvd's Keras support runs on the 'tensorflow' and 'torch' backends; Keras runs on {backend!r} "
        "(set KERAS_BACKEND=tensorflow or KERAS_BACKEND=torch)"
    )


def current() -> Framework:
    """The adapter of the backend Keras runs on."""
    return _for_backend(keras.backend.backend())
