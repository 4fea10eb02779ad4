"""A check that the docstrings of a package's public API say what each argument does.

Every public function of a module (the names of its ``__all__``; without one, the public names it
defines), every public method of its public classes and the constructor of each class must document
each of its parameters as a reST field, ``:param name:`` (or ``:param type name:``), the style
hvd's docstrings use and Sphinx renders; a field whose shared text was never filled in
(``:param name: |shared|`` without ``@shared_parameters``) does not count. A class's constructor
parameters may be documented in the class docstring or in ``__init__``'s. ``self`` and ``cls`` need
none; ``*args`` and ``**kwargs`` need one too, written ``:param args:`` or ``:param \\*args:``.

Each package's tests call it for that package's modules, in that package's own environment::

    from hvd_devtools.docstrings import assert_parameters_documented

    def test_docstrings_document_every_parameter():
        assert_parameters_documented(["horovod.torch", "horovod.torch.elastic"])

Only code defined in hvd (a module under ``horovod.``) is checked: a method inherited from the
framework (``torch.optim.Optimizer.step``) is the framework's to document.
"""

from __future__ import annotations

import importlib
import inspect
import re
import types
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["assert_parameters_documented", "documented_parameters", "undocumented_parameters"]

# ``:param name:``, ``:param type name:``, ``:param \*args:``, ``:param **kwargs:``.
_PARAM_FIELD = re.compile(r"^\s*:param\s+(?:[^:]*?\s)?\\?\*{0,2}\\?\*?(?P<name>\w+)\s*:", re.MULTILINE)
_UNFILLED_FIELD = re.compile(r":param (\w+): \|shared")
_EXEMPT = frozenset({"self", "cls"})


def documented_parameters(doc: str | None) -> set[str]:
    """The parameter names a docstring documents with ``:param ...:`` fields.

    :param doc: the docstring (``None`` for an object without one).
    """
    return {m.group("name") for m in _PARAM_FIELD.finditer(doc or "")}


def _is_hvd(obj: Any) -> bool:
    return (getattr(obj, "__module__", None) or "").startswith("horovod.")


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a text signature: nothing to check against
        return None


def _missing(fn: Callable[..., Any], doc: str | None) -> list[str]:
    sig = _signature(fn)
    if sig is None:
        return []
    # A field still reading |shared| was never filled (its function lacks @shared_parameters).
    documented = documented_parameters(doc) - set(_UNFILLED_FIELD.findall(doc or ""))
    return [name for name in sig.parameters if name not in _EXEMPT and name not in documented]


def _public_names(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return [n for n in names if not n.startswith("_")]
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isclass(value))
        and getattr(value, "__module__", None) == module.__name__
    ]


def _own_function(cls: type, name: str) -> Callable[..., Any] | None:
    """The function behind attribute ``name`` of ``cls``, found in the first class of its MRO that
    defines it, when that class is hvd's; None for properties, attributes and framework methods."""
    for klass in cls.__mro__:
        if name in vars(klass):
            if not _is_hvd(klass):
                return None
            value = vars(klass)[name]
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            # typing.Protocol's stand-in __init__ is not hvd's, nor is a function merely assigned
            return value if inspect.isfunction(value) and _is_hvd(value) else None
    return None


def _class_problems(qualname: str, cls: type, checked: set[int]) -> list[str]:
    """The undocumented parameters of ``cls``'s constructor and public methods, each function
    reported once (under the first public class that reaches it) however many classes inherit it."""
    problems = []
    init = _own_function(cls, "__init__")
    if init is not None:
        doc = (cls.__doc__ or "") + "\n" + (init.__doc__ or "")
        problems += [f"{qualname}({p})" for p in _missing(init, doc)]
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not _is_hvd(klass):
            continue
        for name in vars(klass):
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            fn = _own_function(cls, name)
            if fn is not None and id(fn) not in checked:
                checked.add(id(fn))
                problems += [f"{qualname}.{name}({p})" for p in _missing(fn, inspect.getdoc(fn))]
    return problems


def undocumented_parameters(modules: Iterable[str], *, skip: Iterable[str] = ()) -> list[str]:
    """Every parameter of the public API of ``modules`` that its docstring does not document, as
    ``module.function(param)``, ``module.Class(param)`` (a constructor parameter) or
    ``module.Class.method(param)``.

    :param modules: the dotted names of the modules whose public API is checked; each is imported.
    :param skip: public names (``module.name``) to leave out, e.g. names another package owns and
        checks in its own tests.
    """
    skipped = set(skip)
    problems: list[str] = []
    seen: set[int] = set()
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in _public_names(module):
            qualname = f"{module_name}.{name}"
            if qualname in skipped:
                continue
            value = getattr(module, name)
            if not _is_hvd(value) or id(value) in seen:
                continue  # constants, submodules, third-party names; each object checked once
            seen.add(id(value))
            if inspect.isclass(value):
                problems += _class_problems(qualname, value, seen)
            elif callable(value):
                problems += [f"{qualname}({p})" for p in _missing(value, inspect.getdoc(value))]
    return problems


def assert_parameters_documented(modules: Iterable[str], *, skip: Iterable[str] = ()) -> None:
    """Fails (AssertionError) naming every parameter of the public API of ``modules`` that is not
    documented with a ``:param name:`` field; see :func:`undocumented_parameters`.

    :param modules: the dotted names of the modules whose public API is checked.
    :param skip: public names (``module.name``) to leave out.
    """
    problems = undocumented_parameters(modules, skip=skip)
    assert not problems, f"{len(problems)} parameters without a ':param name:' in their docstring:\n  " + "\n  ".join(
        problems
    )
