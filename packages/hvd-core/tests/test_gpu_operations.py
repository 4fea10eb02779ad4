"""Which backend takes GPU tensors' collectives: HOROVOD_GPU_OPERATIONS and its per-op variants,
chosen among the backends plugins register (a registry stands in for the installed plugins)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from horovod.common import _core, gpu_operations
from horovod.common.plugins import PluginError
from horovod.common.registry import BackendSpec

GLOO = BackendSpec(name="gloo", library="/nonexistent/libgloo.so")
NCCL = BackendSpec(name="nccl", library="/nonexistent/libnccl_backend.so", device_kinds=("cuda",), priority=100)
OTHER_GPU = BackendSpec(name="rccl", library="/nonexistent/librccl.so", device_kinds=("cuda",))


class Installed:
    """The plugin manager's two questions, over a fixed set of backends."""

    def __init__(self, *specs: BackendSpec) -> None:
        self.specs = {s.name: s for s in specs}

    def backends(self) -> dict[str, BackendSpec]:
        return dict(self.specs)

    def default_backend(self, device_kind: str) -> BackendSpec:
        serving = [s for s in self.specs.values() if device_kind in s.device_kinds]
        if not serving:
            raise PluginError(f"no backend serves {device_kind}")
        return max(serving, key=lambda s: s.priority)


def ops(choice: gpu_operations.GpuOperations) -> set[str]:
    return set(choice.operations) if choice.spec is not None else set()


def test_an_installed_gpu_backend_takes_everything_unasked() -> None:
    choice = gpu_operations.choose(Installed(GLOO, NCCL), {})
    assert choice.spec is NCCL and ops(choice) == set(gpu_operations.PER_OPERATION) and not choice.requested
    assert choice.op_mask(_core) == sum(1 << getattr(_core, f"OP_{n.upper()}") for n in gpu_operations.PER_OPERATION)


def test_without_a_gpu_backend_everything_is_staged() -> None:
    choice = gpu_operations.choose(Installed(GLOO), {})
    assert choice.spec is None and choice.op_mask(_core) == 0


def test_per_operation_variables_override_the_whole() -> None:
    env = {"HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_GPU_ALLGATHER": "GLOO", "HOROVOD_GPU_ALLTOALL": "gloo"}
    choice = gpu_operations.choose(Installed(GLOO, NCCL), env)
    assert choice.spec is NCCL and choice.requested
    assert ops(choice) == {"allreduce", "broadcast", "reducescatter"}
    assert choice.op_mask(_core) == (1 << _core.OP_ALLREDUCE) | (1 << _core.OP_BROADCAST) | (
        1 << _core.OP_REDUCESCATTER
    )


def test_one_operation_alone_on_nccl() -> None:
    choice = gpu_operations.choose(Installed(GLOO, NCCL), {"HOROVOD_GPU_ALLREDUCE": "NCCL"})
    assert ops(choice) == {"allreduce"}


def test_a_cpu_backend_for_everything_stages_everything() -> None:
    choice = gpu_operations.choose(Installed(GLOO, NCCL), {"HOROVOD_GPU_OPERATIONS": "GLOO"})
    assert choice.spec is None and choice.requested


def test_a_backend_not_installed_is_named() -> None:
    with pytest.raises(
        ValueError, match=r"HOROVOD_GPU_OPERATIONS=NCCL names no installed backend.*GLOO.*hvd-backend-nccl"
    ):
        gpu_operations.choose(Installed(GLOO), {"HOROVOD_GPU_OPERATIONS": "nccl"})
    with pytest.raises(ValueError, match=r"HOROVOD_GPU_BROADCAST=DDL names no installed backend"):
        gpu_operations.choose(Installed(GLOO, NCCL), {"HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_GPU_BROADCAST": "DDL"})


def test_two_gpu_backends_at_once_are_refused() -> None:
    env = {"HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_GPU_ALLGATHER": "RCCL"}
    with pytest.raises(ValueError, match=r"one GPU backend serves a job.*NCCL.*RCCL"):
        gpu_operations.choose(Installed(GLOO, NCCL, OTHER_GPU), env)


def test_a_default_backend_that_cannot_load_is_skipped_with_a_warning(caplog: Any) -> None:
    choice = gpu_operations.choose(Installed(GLOO, NCCL), {})
    with caplog.at_level(logging.WARNING, logger="horovod"):
        assert gpu_operations.load(_core, choice, rank=0) is None
    assert "the nccl backend is installed but cannot be used" in caplog.text
    assert "staged through host memory" in caplog.text


def test_a_requested_backend_that_cannot_load_is_an_error() -> None:
    choice = gpu_operations.choose(Installed(GLOO, NCCL), {"HOROVOD_GPU_OPERATIONS": "NCCL"})
    with pytest.raises(ValueError, match=r"HOROVOD_GPU_OPERATIONS: the nccl backend cannot be used: .*libnccl_backend"):
        gpu_operations.load(_core, choice, rank=1)
