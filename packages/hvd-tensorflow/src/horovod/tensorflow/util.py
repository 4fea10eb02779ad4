"""Horovod's small helpers of ``horovod.tensorflow.util``, kept under their names for code that
imports them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any

import tensorflow as tf


def _executing_eagerly() -> bool:
    """True outside graph construction (TensorFlow 2's default)."""
    return bool(tf.executing_eagerly())


def _make_subgraph(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` as a ``tf.function`` (one graph, traced once per input signature)."""
    subgraph: Callable[..., Any] = tf.function(f)
    return subgraph


def _cache(f: Callable[..., Any]) -> Callable[..., Any]:
    """Memoises ``f`` on its arguments, per graph when building one (Horovod's helper for
    functions that make ops)."""
    cache: dict[Any, Any] = {}

    @wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # Per graph when building one: ops of one graph cannot be used in another.
        graph = None if _executing_eagerly() else tf.compat.v1.get_default_graph()
        key = (graph, args, frozenset(kwargs.items()))
        if key not in cache:
            cache[key] = f(*args, **kwargs)
        return cache[key]

    return wrapper


def vars_to_refs(variables: Iterable[Any]) -> list[Any]:
    """Hashable references of variables (``var.ref()``), as sets and dicts need them.

    :param variables: TensorFlow variables.
    """
    return [v.ref() for v in variables]


def refs_to_vars(refs: Iterable[Any]) -> list[Any]:
    """The variables behind references made by :func:`vars_to_refs`.

    :param refs: references from :func:`vars_to_refs`.
    """
    return [r.deref() for r in refs]


def check_num_rank_power_of_2(num_rank: int) -> bool:
    """Whether ``num_rank`` is a power of two (Horovod's Adasum asked it of the ranks).

    :param num_rank: a number of ranks.
    """
    return num_rank > 0 and num_rank & (num_rank - 1) == 0
