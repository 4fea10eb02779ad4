"""broadcast_parameters: every rank starts from the root's parameters (Horovod's MXNet API)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mxnet as mx

from horovod.common.framework_api import ProcessSet, global_process_set
from horovod.mxnet.mpi_ops import broadcast_

__all__ = ["broadcast_parameters"]


def broadcast_parameters(
    params: Any, root_rank: int = 0, prefix: str | None = None, *, process_set: ProcessSet = global_process_set
) -> None:
    """Overwrites every rank's parameters with ``root_rank``'s, in place; returns when they are.

    ``params``: a dict of NDArrays (``Module.get_params()``'s), broadcast in sorted key order and
    named by ``prefix`` + key; or a Gluon ``ParameterDict`` (``Block.collect_params()``), broadcast in
    its order and named by ``prefix`` + position: its keys carry per-process name counters
    (``dense3_weight`` on one rank can be ``dense0_weight`` on another), positions do not. A
    Parameter whose initialisation is deferred (shape known only at the first forward) is broadcast
    right after that initialisation. Give each call its own ``prefix`` when several run.

    :param params: a dict of NDArrays (``Module.get_params()``'s) or a Gluon ``ParameterDict``
        (``Block.collect_params()``); ``ValueError`` for anything else.
    :param root_rank: the rank whose parameters every rank gets (default 0).
    :param prefix: a prefix of the broadcasts' names; give each call its own when several run.
    :param process_set: the ranks taking part (keyword only; default ``global_process_set``, every rank).
    """
    if prefix is not None and not isinstance(prefix, str):
        raise ValueError(f"broadcast_parameters: prefix must be a string or None, got {type(prefix).__name__}")
    prefix = prefix or ""
    if isinstance(params, mx.gluon.ParameterDict):
        items = [(f"{prefix}{i}", p) for i, p in enumerate(params.values())]
    elif isinstance(params, dict):
        items = [(f"{prefix}{key}", params[key]) for key in sorted(params, key=str)]
    else:
        raise ValueError(f"invalid params of type: {type(params).__name__} (a dict or a ParameterDict)")

    ready = []
    for name, value in items:
        if isinstance(value, mx.gluon.Parameter):
            if value._deferred_init:  # (shape unknown until the first forward: no data yet)
                _broadcast_after_init(value, root_rank, name, process_set)
                continue
            value = value.list_data()[0]
        if not isinstance(value, mx.nd.NDArray):
            raise ValueError(f"broadcast_parameters: {name!r} is a {type(value).__name__}, not an NDArray")
        broadcast_(value, root_rank=root_rank, name=name, process_set=process_set)
        ready.append(value)
    # Waiting here (Horovod does not) keeps a later call's tensors, which may have the same names
    # (positions), from being in flight together with these; and errors surface in this call.
    for value in ready:
        value.wait_to_read()
    for _, value in items:
        if isinstance(value, mx.gluon.Parameter) and not value._deferred_init:
            _copy_to_other_contexts(value)


def _copy_to_other_contexts(param: Any) -> None:
    """A Parameter on several devices holds one copy per device: give them all the broadcast value."""
    first, *others = param.list_data()
    for other in others:
        first.copyto(other)


def _broadcast_after_init(param: Any, root_rank: int, name: str, process_set: ProcessSet) -> None:
    """Makes ``param``'s deferred initialisation end with the broadcast: every rank reaches it at
    the same point of its first forward pass. One-shot: a later re-initialisation on one rank alone
    must not start a collective."""
    had_own = "_init_impl" in vars(param)  # another wrapper (an earlier call) is chained, not lost
    previous: Callable[..., None] = param._init_impl

    def init_then_broadcast(data: Any, ctx_list: Any) -> None:
        # Unwrap first, so that a chained wrapper restores its own predecessor, not this one.
        if had_own:
            param._init_impl = previous
        else:
            del param._init_impl  # the class's method again
        previous(data, ctx_list)
        with mx.autograd.pause():  # (the first forward may be recording: this is no part of the graph)
            array = param.list_data()[0]
            broadcast_(array, root_rank=root_rank, name=name, process_set=process_set)
            array.wait_to_read()
            _copy_to_other_contexts(param)

    param._init_impl = init_then_broadcast
