"""``horovod.torch.elastic``: elastic training for PyTorch (Horovod's API).

``run`` (the decorator), ``TorchState``, ``ElasticSampler``, and hvd-core's ``State`` and
``ObjectState``. Run the script with ``horovodrun --min-np/--max-np/--host-discovery-script``.
"""

from __future__ import annotations

from horovod.common.elastic import ObjectState, State, run_fn
from horovod.torch.elastic.sampler import ElasticSampler
from horovod.torch.elastic.state import TorchState

__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "run", "run_fn"]


def _reset() -> None:
    from horovod.torch.mpi_ops import init, shutdown

    shutdown()
    init()


def run(func):  # type: ignore[no-untyped-def]
    """Decorator: runs ``func(state, *args, **kwargs)`` so that it survives workers coming and going.

    Before each try the state is synchronised from rank 0; a lost peer (``HorovodInternalError``)
    restores the last commit, a change of hosts (``HostsUpdatedInterrupt``) keeps the state; then
    Horovod is re-initialised for the new world, in this same process, and ``func`` runs again.
    Collectives must not be the call to ``func`` itself (new workers would run them while the
    others synchronise).
    """
    return run_fn(func, _reset)
