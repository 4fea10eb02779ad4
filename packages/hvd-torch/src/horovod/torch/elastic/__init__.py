"""``horovod.torch.elastic``: elastic training for PyTorch (Horovod's API).

``run`` (the decorator), ``TorchState``, ``ElasticSampler``, and hvd-core's ``State`` and
``ObjectState``. Run the script with ``horovodrun --min-np/--max-np/--host-discovery-script``.
"""

from __future__ import annotations

# hvd-core's run loop: horovod.torch's init() and shutdown() are hvd-core's.
from horovod.common.elastic import ObjectState, State, run, run_fn
from horovod.torch.elastic.sampler import ElasticSampler
from horovod.torch.elastic.state import (
    ModelStateHandler,
    OptimizerStateHandler,
    SamplerStateHandler,
    StateHandler,
    TorchState,
    get_handler_registry,
    set_handler_registry,
)

__all__ = [
    "ElasticSampler",
    "ModelStateHandler",
    "ObjectState",
    "OptimizerStateHandler",
    "SamplerStateHandler",
    "State",
    "StateHandler",
    "TorchState",
    "get_handler_registry",
    "run",
    "run_fn",
    "set_handler_registry",
]
