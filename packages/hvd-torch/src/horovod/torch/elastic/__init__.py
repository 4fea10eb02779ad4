"""``horovod.torch.elastic``: elastic training for PyTorch (Horovod's API).

``run`` (the decorator), ``TorchState``, ``ElasticSampler``, and hvd-core's ``State`` and
``ObjectState``. Run the script with ``horovodrun --min-np/--max-np/--host-discovery-script``.
"""

from __future__ import annotations

# hvd-core's run loop: horovod.torch's init() and shutdown() are hvd-core's.
from horovod.common.elastic import ObjectState, State, run, run_fn
from horovod.torch.elastic.sampler import ElasticSampler
from horovod.torch.elastic.state import TorchState

__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "run", "run_fn"]
