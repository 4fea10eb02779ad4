"""Averaging gradients over ranks: what DistributedGradientTape and DistributedOptimizer share.

One reducer call hands every gradient of a step to the engine in one submit (one op inside a
graph), so the engine fuses them and no two ranks can wait on different gradients first.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from horovod.common import framework_api as api
from horovod.common.framework_api import Average, ProcessSet, Sum
from horovod.common.plugin_api import elastic_protocol
from horovod.tensorflow import bridge, collectives, mpi_ops
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.variables import is_variable, variable_key


class GradientReducer:
    """Reduces a step's gradients with Horovod's options (validated once, when it is made)."""

    def __init__(
        self,
        prefix: str,
        compression: Any = Compression.none,
        sparse_as_dense: bool = False,
        op: int = Average,
        gradient_predivide_factor: float = 1.0,
        num_groups: int = 0,
        groups: Any = None,
        process_set: ProcessSet | None = None,
    ) -> None:
        num_groups, groups = api.check_gradient_options(
            op, gradient_predivide_factor, num_groups, groups, "DistributedOptimizer / DistributedGradientTape"
        )
        self.prefix = prefix
        self.compression = compression
        self.sparse_as_dense = sparse_as_dense
        self.op = op
        self.predivide = float(gradient_predivide_factor)
        self.num_groups = num_groups
        self.variable_groups: list[list[Any]] | None = groups
        self.process_set = process_set if process_set is not None else api.global_process_set

    def _names(self, count: int) -> list[str]:
        base = mpi_ops.step_name(self.prefix)
        return [f"{base}.{i}" for i in range(count)]

    def _index_groups(self, dense: list[int], variables: Sequence[Any] | None) -> list[list[int]]:
        """Positions (into ``dense``) of the gradients that go together as one engine group."""
        dense_variables = [variables[i] for i in dense] if variables is not None else [None] * len(dense)
        return api.gradient_groups(dense_variables, self.num_groups, self.variable_groups, variable_key)

    @staticmethod
    def _size_is_fixed() -> bool:
        """Whether the set's size now is its size whenever this runs. Not in a graph of an elastic
        worker: a tf.function traced in a world of one rank runs on in the worlds that grow from
        it, where skipping the reduction would let the ranks' weights drift apart."""
        return not (bridge.in_graph() and elastic_protocol.is_elastic(os.environ))

    def reduce(self, gradients: Sequence[Any], variables: Sequence[Any] | None = None) -> list[Any]:
        """Every gradient reduced over the process set (None stays None)."""
        gradients = list(gradients)
        if api.set_size(self.process_set) == 1 and self.predivide == 1.0 and self._size_is_fixed():
            return gradients
        names = self._names(len(gradients))
        op, pre, post = self.op, 1.0, 1.0
        if self.predivide != 1.0:  # split the average: 1/f before the sum, f/size after it
            op, pre, post = Sum, 1.0 / self.predivide, self.predivide / api.set_size(self.process_set)
        results: list[Any] = list(gradients)
        dense: list[int] = []
        compressed, contexts = [], []
        for i, grad in enumerate(gradients):
            if grad is None:
                continue
            if isinstance(grad, tf.IndexedSlices):
                if not self.sparse_as_dense:
                    results[i] = collectives.sparse_allreduce(grad, names[i], self.op, self.process_set)
                    continue
                grad = tf.convert_to_tensor(grad)
            tensor, ctx = self.compression.compress(tf.convert_to_tensor(grad))
            dense.append(i)
            compressed.append(tensor)
            contexts.append(ctx)
        if dense:
            reduced = mpi_ops.raw_allreduce(
                compressed,
                [names[i] for i in dense],
                op,
                pre,
                post,
                self.process_set,
                groups=self._index_groups(dense, variables),
            )
            for i, r, ctx in zip(dense, reduced, contexts, strict=True):
                results[i] = self.compression.decompress(r, ctx)
        return results

    def reduce_keeping_local(
        self, gradients: Sequence[Any], variables: Sequence[Any], local: set[Any], scale_local: bool
    ) -> list[Any]:
        """Every gradient reduced over the process set, but those of the ``local`` variables (their
        ``variable_key``s), which stay this rank's: divided by the set's size when ``scale_local``,
        as averaged ones are, so that a learning rate tuned for the shared weights suits them too
        (Horovod's default)."""
        is_local = [bool(local) and is_variable(v) and variable_key(v) in local for v in variables]
        shared = [i for i, mine in enumerate(is_local) if not mine]
        results = list(gradients)
        reduced = self.reduce([gradients[i] for i in shared], [variables[i] for i in shared])
        for i, r in zip(shared, reduced, strict=True):
            results[i] = r
        if scale_local and any(is_local):
            factor = 1.0 / api.set_size(self.process_set)
            for i, mine in enumerate(is_local):
                if mine and results[i] is not None:
                    results[i] = _scaled(results[i], factor)
        return results


def _scaled(gradient: Any, factor: float) -> Any:
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values * factor, gradient.indices, gradient.dense_shape)
    return gradient * tf.cast(factor, gradient.dtype)
