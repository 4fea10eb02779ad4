"""The text of parameters that many functions of hvd's API share, written once.

A docstring field whose text is ``|shared|`` takes the shared text of its parameter when its
function or class is decorated with :func:`shared_parameters`::

    @shared_parameters
    def allreduce(tensor, name=None, process_set=global_process_set):
        '''Reduces ``tensor`` over the ranks of ``process_set``.

        :param tensor: the tensor to reduce.
        :param name: |shared|
        :param process_set: |shared|
        '''

``|shared:KEY|`` takes the text of another entry (``:param name: |shared:group_name|``). A framework
adds entries of its own with :func:`document_parameters`. A key with no text fails at import; a
marker left unfilled fails the documentation's build, where ``|shared|`` is an undefined reST
substitution.

.. versionadded:: 0.2
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

#: The shared texts, by key (the parameter's name, or a name for a variant).
PARAMETER_TEXTS: Mapping[str, str] = {
    "process_set": (
        "the process set the operation runs on (every member must call it; default: ``global_process_set``, all "
        "ranks). A set must be registered first, with ``init(process_sets=...)`` or ``add_process_set``."
    ),
    "name": (
        "a name for the operation, the same on every rank; by default one is generated from the order of the calls "
        "(every rank must then submit its collectives in the same order)."
    ),
    "group_name": (
        "a base name for the group, the same on every rank (member ``i`` is named ``<name>.<i>``); by default one is "
        "generated from the order of the calls."
    ),
    "average": (
        "deprecated, use ``op``: ``True`` is ``op=Average``, ``False`` is ``op=Sum``; giving both ``average`` and "
        "``op`` raises ``ValueError``."
    ),
    "op": (
        "the reduction: ``Average`` (the default, when ``None``), ``Sum``, ``Adasum`` (floating-point tensors: "
        "docs/guides/adasum.md), ``Min``, ``Max`` or ``Product``."
    ),
    "reducescatter_op": (
        "the reduction: ``Average`` (the default) or ``Sum``; any other raises ``UnsupportedOperationError``."
    ),
    "gradient_op": (
        "the reduction of the gradients: ``Average`` (the default), ``Sum`` or ``Adasum`` (each gradient combined by "
        "Adasum: docs/guides/adasum.md)."
    ),
    "prescale_factor": "a factor every rank's input is multiplied by before the reduction (default 1.0).",
    "postscale_factor": "a factor the reduced result is multiplied by (default 1.0).",
    "root_rank": (
        "the rank whose value is sent to every other rank (a global rank, also on a process set; it must be a member)."
    ),
    "compression": (
        "compresses the tensor for the wire and decompresses the result, e.g. ``Compression.fp16`` (default "
        "``Compression.none``)."
    ),
    "gradient_compression": (
        "how gradients are compressed for the allreduce, e.g. ``Compression.fp16`` (default ``Compression.none``)."
    ),
    "gradient_predivide_factor": (
        "with ``op=Average``, gradients are scaled by ``1/f`` before the sum and by ``f/size`` after it (default "
        "1.0); other than 1.0 with another ``op``, ``ValueError``."
    ),
}

# `:param NAME: |shared|` or `:param NAME: |shared:KEY|`, alone on its line.
_MARKER = re.compile(r"^(?P<indent>[ \t]*):param (?P<name>\w+): \|shared(?::(?P<key>\w+))?\|[ \t]*$", re.M)
UNFILLED = "|shared"  # what remains of a marker no decorator filled
_WIDTH = 108  # as the sources wrap their docstrings


def _filled(doc: str, texts: Mapping[str, str], owner: str) -> str:
    def field(match: re.Match[str]) -> str:
        name, indent = match.group("name"), match.group("indent")
        key = match.group("key") or name
        if key not in texts:
            raise LookupError(f"{owner}: no shared text for parameter {name!r} (key {key!r})")
        line = f":param {name}: {texts[key]}"
        return textwrap.fill(line, _WIDTH, initial_indent=indent, subsequent_indent=indent + "    ")

    return _MARKER.sub(field, doc)


def _fill(obj: Any, texts: Mapping[str, str], owner: str) -> None:
    target = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
    target = target.fget if isinstance(target, property) else target
    doc = getattr(target, "__doc__", None)
    if doc and UNFILLED in doc:  # only where there is a marker: some docstrings cannot be set
        target.__doc__ = _filled(doc, texts, owner)


def document_parameters(texts: Mapping[str, str]) -> Callable[[T], T]:
    """A decorator that fills the ``|shared|`` markers of a function's or class's docstring (and of
    a class's own methods) from ``texts``.

    :param texts: the texts by key; a framework passes ``{**PARAMETER_TEXTS, ...}`` to add its own.
    """

    def fill(obj: T) -> T:
        """Fills the ``|shared|`` markers of ``obj``'s docstring, and of its own methods' for a class.

        :param obj: a function or class; returned as it is, its docstrings filled.
        """
        owner = getattr(obj, "__qualname__", repr(obj))
        _fill(obj, texts, owner)
        if isinstance(obj, type):
            for name, member in vars(obj).items():
                if callable(member) or isinstance(member, (staticmethod, classmethod, property)):
                    _fill(member, texts, f"{owner}.{name}")
        return obj

    return fill


#: Fills the ``|shared|`` markers from :data:`PARAMETER_TEXTS`.
shared_parameters: Callable[[T], T] = document_parameters(PARAMETER_TEXTS)
