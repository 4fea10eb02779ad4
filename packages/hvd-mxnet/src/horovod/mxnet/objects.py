"""Arbitrary Python objects between ranks: broadcast_object and allgather_object.

hvd-core implements them once for every framework (cloudpickle over its numpy collectives); they
carry no NDArrays, so this module only gives them their place in horovod.mxnet.
"""

from __future__ import annotations

from horovod.common.framework_api import allgather_object, broadcast_object

__all__ = ["allgather_object", "broadcast_object"]
