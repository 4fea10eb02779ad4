"""The framework API: what a framework package (hvd-torch, hvd-tensorflow, ...) builds on.

A framework package gives a :class:`TensorAdapter` saying how its tensors reach the engine, and
gets every collective from :class:`Collectives`; the rest of its API (init, rank, process sets,
errors, handles) is re-exported from here. Framework packages import hvd-core only through this
module (and :mod:`horovod.common.plugin_api` for their ``hooks.py``): the modules behind it may move
between releases, these names may not (they only gain members).

Importing this module loads hvd-core's native engine (the dtype codes come from it).

.. versionadded:: 0.2
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from horovod.common import _core, state
from horovod.common.api_text import PARAMETER_TEXTS, document_parameters, shared_parameters
from horovod.common.basics import (
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from horovod.common.collectives import (
    Adasum,
    Average,
    Collectives,
    Max,
    Min,
    Product,
    Sum,
    TensorAdapter,
    barrier,
    group_names,
    handle_average_backwards_compatibility,
    integer_splits,
    join,
    non_integer_splits_error,
    poll,
    synchronize,
)
from horovod.common.dtypes import CODES as DTYPE_CODES
from horovod.common.exceptions import (
    CollectiveMismatchError,
    HorovodInternalError,
    HostsUpdatedInterrupt,
    UnsupportedOperationError,
)
from horovod.common.objects import allgather_object, broadcast_object
from horovod.common.ops import ALLREDUCE_OPS, REDUCESCATTER_OPS, NumpyAdapter, check_reduce_op
from horovod.common.process_sets import (
    ProcessSet,
    add_process_set,
    global_process_set,
    process_set_id,
    remove_process_set,
)

T = TypeVar("T")

#: The version of this API: the major changes when a name is removed or changes meaning, the minor
#: when names are added (1.1: ``NumpyAdapter``, for frameworks whose tensors cross as numpy arrays;
#: ``broadcast_object`` and ``allgather_object``, written once for every framework. 1.2:
#: ``native_entry`` and ``group_names``, for framework kernels that submit from native code;
#: ``split_groups``, ``gradient_groups`` and ``check_gradient_options``, for distributed
#: optimizers; ``position_in_set``. 1.3: ``UnsupportedOperationError``, ``check_reduce_op``,
#: ``ALLREDUCE_OPS`` and ``REDUCESCATTER_OPS``, to refuse a reduction hvd does not run before
#: submitting it. 1.4: ``shared_parameters``, ``document_parameters`` and ``PARAMETER_TEXTS``, the
#: text of parameters many functions share, written once. 1.5: ``integer_splits`` and
#: ``non_integer_splits_error``, which refuse alltoall splits that are not integers).
API_VERSION = (1, 5)

#: Device kinds a tensor adapter reports in ``describe`` (``DTYPE_CODES`` maps dtype names, such as
#: ``"float32"`` or ``"bfloat16"``, to the engine's dtype codes).
DEVICE_CPU: int = _core.DEVICE_CPU
DEVICE_CUDA: int = _core.DEVICE_CUDA


def native_entry() -> Any:
    """The C entry point for native framework code (``horovod/hvd_framework.h`` under
    ``horovod.common.get_include()``): a capsule named ``horovod.hvd_framework_v1`` holding the
    address of a static ``hvd_framework_v1`` table. Its calls reach the engine of this process's
    ``init()``, whichever that is at the time of the call.

    .. versionadded:: 0.2
    """
    return _core.framework_entry()


def split_groups(items: Sequence[T], parts: int) -> list[list[T]]:
    """``items`` in ``parts`` consecutive pieces of nearly equal length, the longer ones first, empty
    ones left out: how Horovod's ``num_groups`` divides a step's gradients into groups.

    .. versionadded:: 0.2

    :param items: the sequence to divide.
    :param parts: the number of pieces (a positive integer).
    """
    size, extra = divmod(len(items), parts)
    pieces = [list(items[i * size + min(i, extra) : (i + 1) * size + min(i + 1, extra)]) for i in range(parts)]
    return [piece for piece in pieces if piece]


def gradient_groups(
    variables: Sequence[Any], num_groups: int, groups: list[list[Any]] | None, key: Callable[[Any], Any] = id
) -> list[list[int]]:
    """Which of a step's gradients go to the engine together as one group, as positions into
    ``variables`` (the gradients' variables, in order; None for one without): ``num_groups``
    consecutive pieces, or the members of each list of ``groups``, variables matched by ``key``.
    Gradients in no group are reduced on their own (and fused by the engine as usual).

    .. versionadded:: 0.2

    :param variables: the variables of a step's gradients, in order (``None`` for a gradient without one).
    :param num_groups: split the gradients into this many consecutive groups (0: use ``groups``).
    :param groups: lists of variables, each list one group (used when ``num_groups`` is 0); ``None`` for no groups.
    :param key: what identifies a variable when matching it with ``groups`` (default ``id``).
    """
    if num_groups:
        return split_groups(list(range(len(variables))), num_groups)
    if groups is None:
        return []
    group_of = {key(v): g for g, members in enumerate(groups) for v in members}
    by_group: dict[int, list[int]] = {}
    for position, variable in enumerate(variables):
        group = group_of.get(key(variable)) if variable is not None else None
        if group is not None:
            by_group.setdefault(group, []).append(position)
    return list(by_group.values())


def check_gradient_options(
    op: int, gradient_predivide_factor: float, num_groups: int, groups: Any, what: str
) -> tuple[int, list[list[Any]] | None]:
    """Horovod's checks of a distributed optimizer's options (``what`` names it in the errors),
    alike in every framework: the op is one allreduce runs, a predivide factor needs op=Average,
    and ``groups`` is a count or lists of variables. Returns ``(num_groups, groups)``, an integer
    ``groups`` read as the count.

    .. versionadded:: 0.2

    :param op: the optimizer's reduction (``Average``, ``Sum``...).
    :param gradient_predivide_factor: the optimizer's ``gradient_predivide_factor``; other than 1.0 it needs
        ``op=Average``.
    :param num_groups: the optimizer's ``num_groups`` (a non-negative integer).
    :param groups: the optimizer's ``groups``: ``None``, a non-negative integer (read as ``num_groups``), or a list of
        lists of variables; not together with ``num_groups``.
    :param what: the optimizer's name, for the error messages.
    :raises ValueError: for an invalid combination.
    :raises UnsupportedOperationError: for a reduction allreduce does not run.
    """
    check_reduce_op(op, what)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor is only supported with op=hvd.Average")
    if groups is not None:
        if num_groups:
            raise ValueError("give either num_groups or groups, not both")
        if isinstance(groups, int):
            num_groups, groups = groups, None
        elif not (isinstance(groups, list) and all(isinstance(g, list) for g in groups)):
            raise ValueError("groups must be a non-negative integer or a list of lists of variables")
    if num_groups < 0:
        raise ValueError(f"num_groups must be a non-negative integer, got {num_groups}")
    return num_groups, groups


def require_initialized() -> None:
    """Raises ValueError (as Horovod does) unless ``init()`` has run on this rank."""
    state.context()


def auto_name(kind: str) -> str:
    """A name for an unnamed operation of ``kind``: numbered per kind in program order, so every
    rank that calls the same operations in the same order gets the same names.

    :param kind: the kind of operation (``allreduce``, ``broadcast``...), which prefixes the name.
    """
    return state.context().auto_name(kind)


def current_instance() -> object:
    """An object standing for the running Horovod instance (``init()`` to ``shutdown()``), for
    caches that must not outlive it (e.g. weak-keyed per-layer names); ValueError before ``init()``."""
    return state.context()


def combine(handles: Sequence[int], finish: Callable[[list[Any]], Any]) -> int:
    """One handle for several operations: :func:`synchronize` waits for all of them and returns
    ``finish(results)``.

    :param handles: the handles of the operations (from the ``*_async`` functions).
    :param finish: called with the operations' results, in the order of ``handles``; what it returns is the combined
        handle's result.
    """
    return state.context().combine(list(handles), finish)


def set_rank(process_set: ProcessSet) -> int:
    """This process's rank within ``process_set`` (the global rank for the global set);
    ValueError when this process is not a member or the set is not registered.

    :param process_set: a registered process set.
    """
    if not process_set.process_set_id:
        return rank()
    set_rank = process_set.rank()
    if set_rank is None:
        process_set_id(process_set)  # says so if the set is not registered
        raise ValueError(f"rank {rank()} is not a member of {process_set!r}")
    return set_rank


def position_in_set(process_set: ProcessSet, global_rank: int) -> int:
    """Where ``global_rank`` stands in ``process_set`` (results of a collective over the set are in
    this order); ValueError when it is not a member. Horovod's ``root_rank`` is a global rank on
    process sets too: this is how a framework finds the root's entry among the members'.

    .. versionadded:: 0.2

    :param process_set: a registered process set.
    :param global_rank: a global rank, a member of the set.
    """
    if not process_set.process_set_id:
        return global_rank
    ranks = list(process_set.ranks)
    if global_rank not in ranks:
        raise ValueError(f"rank {global_rank} is not a member of {process_set!r}")
    return ranks.index(global_rank)


def set_size(process_set: ProcessSet) -> int:
    """The number of ranks in ``process_set`` (the world's size for the global set); ValueError
    when the set is not registered.

    :param process_set: a registered process set.
    """
    if not process_set.process_set_id:
        return size()
    set_size = process_set.size()
    if set_size is None:
        process_set_id(process_set)
        raise ValueError(f"{process_set!r} is not known to the running instance")
    return set_size


__all__ = [
    "ALLREDUCE_OPS",
    "API_VERSION",
    "DEVICE_CPU",
    "DEVICE_CUDA",
    "DTYPE_CODES",
    "PARAMETER_TEXTS",
    "REDUCESCATTER_OPS",
    "Adasum",
    "Average",
    "CollectiveMismatchError",
    "Collectives",
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
    "Max",
    "Min",
    "NumpyAdapter",
    "ProcessSet",
    "Product",
    "Sum",
    "TensorAdapter",
    "UnsupportedOperationError",
    "add_process_set",
    "allgather_object",
    "auto_name",
    "barrier",
    "broadcast_object",
    "ccl_built",
    "check_gradient_options",
    "check_reduce_op",
    "combine",
    "cross_rank",
    "cross_size",
    "cuda_built",
    "current_instance",
    "ddl_built",
    "document_parameters",
    "global_process_set",
    "gloo_built",
    "gloo_enabled",
    "gradient_groups",
    "group_names",
    "handle_average_backwards_compatibility",
    "init",
    "integer_splits",
    "is_homogeneous",
    "is_initialized",
    "join",
    "local_rank",
    "local_size",
    "mpi_built",
    "mpi_enabled",
    "mpi_threads_supported",
    "native_entry",
    "nccl_built",
    "non_integer_splits_error",
    "poll",
    "position_in_set",
    "process_set_id",
    "rank",
    "remove_process_set",
    "require_initialized",
    "rocm_built",
    "set_rank",
    "set_size",
    "shared_parameters",
    "shutdown",
    "size",
    "split_groups",
    "start_timeline",
    "stop_timeline",
    "synchronize",
]
