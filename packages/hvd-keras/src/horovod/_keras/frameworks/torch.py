"""Keras on torch: gradients and tensors through hvd-torch, found through hvd-core's framework
registry (hvd-keras does not depend on hvd-torch; it is needed only when Keras runs on torch).

A step's gradients are submitted together (asynchronously, groups as engine groups) and waited for
together, so the engine fuses them.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from horovod._keras.compression import backend_compressor
from horovod._keras.frameworks import GradientSettings
from horovod.common.framework_api import Sum, gradient_groups, set_size
from horovod.common.plugin_api import get_plugin_manager


def _hvd_torch() -> Any:
    spec = get_plugin_manager().frameworks().get("torch")
    if spec is None:
        raise ImportError(
            "Keras runs on torch (KERAS_BACKEND=torch): hvd's gradients then need hvd-torch (pip install hvd-torch)"
        )
    return importlib.import_module(spec.module)


class TorchGradientReducer:
    def __init__(self, hvd: Any, settings: GradientSettings) -> None:
        self.hvd = hvd
        self.settings = settings
        self.compression = backend_compressor(settings.compression, hvd.Compression)

    def reduce(self, gradients: Sequence[Any], variables: Sequence[Any] | None = None) -> list[Any]:
        s, hvd = self.settings, self.hvd
        results = list(gradients)
        size = set_size(s.process_set)
        op, pre, post = s.op, 1.0, 1.0
        if s.gradient_predivide_factor != 1.0:  # split the average: 1/f before the sum, f/size after it
            op, pre, post = Sum, 1.0 / s.gradient_predivide_factor, s.gradient_predivide_factor / size
        if size == 1 and pre == 1.0 and post == 1.0:
            return results
        dense = [i for i, g in enumerate(gradients) if g is not None]
        compressed = [self.compression.compress(gradients[i].contiguous()) for i in dense]
        tensors = [c[0] for c in compressed]
        scales = {"op": op, "prescale_factor": pre, "postscale_factor": post, "process_set": s.process_set}
        # Every gradient submitted before any is waited for: the engine fuses what is in flight.
        pending: list[tuple[list[int], Any]] = []  # (positions into dense, handle)
        dense_variables = [variables[i] for i in dense] if variables is not None else [None] * len(dense)
        grouped = gradient_groups(dense_variables, s.num_groups, s.groups)
        for g, positions in enumerate(grouped):
            handle = hvd.grouped_allreduce_async([tensors[p] for p in positions], name=f"{s.prefix}.group{g}", **scales)
            pending.append((positions, handle))
        in_group = {p for positions in grouped for p in positions}
        for p, tensor in enumerate(tensors):
            if p not in in_group:
                pending.append(([p], hvd.allreduce_async(tensor, name=f"{s.prefix}.{dense[p]}", **scales)))
        for positions, handle in pending:
            reduced = hvd.synchronize(handle)
            for p, value in zip(positions, reduced if isinstance(reduced, list) else [reduced], strict=True):
                results[dense[p]] = self.compression.decompress(value, compressed[p][1])
        return results


class TorchFramework:
    name = "torch"

    def __init__(self) -> None:
        self.hvd = _hvd_torch()

    def gradient_reducer(self, settings: GradientSettings) -> TorchGradientReducer:
        return TorchGradientReducer(self.hvd, settings)

    def allreduce(
        self, value: Any, name: str | None, op: int, prescale: float, postscale: float, compression: Any
    ) -> Any:
        return self.hvd.allreduce(
            _tensor(value),
            name=name,
            op=op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            compression=backend_compressor(compression, self.hvd.Compression),
        )

    def allgather(self, value: Any, name: str | None) -> Any:
        return self.hvd.allgather(_tensor(value), name=name)

    def broadcast(self, value: Any, root_rank: int, name: str | None) -> Any:
        return self.hvd.broadcast(_tensor(value), root_rank, name=name)

    def reducescatter(self, value: Any, name: str | None, op: int) -> Any:
        return self.hvd.reducescatter(_tensor(value), name=name, op=op)


def _tensor(value: Any) -> Any:
    import keras

    return keras.ops.convert_to_tensor(value)
