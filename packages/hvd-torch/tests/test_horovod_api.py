"""Horovod 0.28.1's public API, walked: every name a torch user meets exists in hvd, compatibly.

The API is data (horovod_0_28_1_api.py, taken from Horovod 0.28.1's sources, never from hvd). For a
callable, hvd must have Horovod's parameters in Horovod's positional order, with the same names,
kinds and defaults; it may add parameters only after Horovod's (keyword-only preferably), never
required ones, and none at all that would take positional arguments Horovod's ``*args`` takes.
So every call that works with Horovod works with hvd: positionally, by keyword, with or without
defaults. horovodrun: hvd's parser accepts each of Horovod's flags with a plausible value (parsing
only; nothing runs).

What hvd does not have yet, on purpose, is listed in EXPECTED_MISSING: those entries are strict
xfails, so the test says so (XPASS fails) once they land.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import inspect
import io
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import torch

from horovod_0_28_1_api import (
    ATTRIBUTES,
    CLASSES,
    FUNCTIONS,
    HOROVODRUN_FLAGS,
    KW,
    METHOD,
    METHODS,
    POS,
    REEXPORTS,
    STATIC,
    VALUES,
    VAR,
    VARKW,
    Ref,
)
from hvdtorch_testutil import cluster

Parameter = inspect.Parameter

# Deliberate absences, by module (every entry of it) or by (module, name): strict xfails.
EXPECTED_MISSING: dict[str | tuple[str, str], str] = {}


def _expected_missing(module: str, name: str) -> str | None:
    top = name.split(".")[0]
    return EXPECTED_MISSING.get((module, top)) or EXPECTED_MISSING.get(module)


def _cases(entries: Iterable[tuple[Any, ...]]) -> list[Any]:
    cases = []
    for entry in entries:
        module, name = entry[0], entry[1]
        reason = _expected_missing(module, name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        cases.append(pytest.param(*entry, id=f"{module}:{name}", marks=marks))
    return cases


# --- looking things up in hvd -----------------------------------------------------------------------


def resolve(path: str) -> Any:
    """The object at a dotted path: the longest importable module, then attributes."""
    parts = path.split(".")
    if parts[0] == "builtins":
        return getattr(builtins, parts[1])
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError as error:
            # Only "this prefix is not a module" moves on to a shorter one; a module that fails
            # to import for another reason (or imports a missing module) is an error.
            if error.name is None or not ".".join(parts[:split]).startswith(error.name):
                raise
            continue
        for attribute in parts[split:]:
            obj = getattr(obj, attribute)
        return obj
    raise ModuleNotFoundError(path)


def _make_distributed_optimizer() -> Any:
    def build() -> Any:
        import horovod.torch as hvd

        hvd.init()
        model = torch.nn.Linear(2, 1)
        return hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
        )

    # Horovod's optimizer needs init() (it asks size()); built on a rank of the test kit.
    return cluster(build, 1)[0]


# Instances for the methods and attributes that live on an instance: the object Horovod users get.
INSTANCES: dict[str, Callable[[], Any]] = {
    "horovod.torch.DistributedOptimizer": _make_distributed_optimizer,
    "horovod.torch.ProcessSet": lambda: resolve("horovod.torch.ProcessSet")([0]),
    "horovod.common.process_sets.ProcessSet": lambda: resolve("horovod.common.process_sets.ProcessSet")([0]),
    # As Horovod's horovod.torch.mpi_ops makes its own.
    "horovod.common.basics.HorovodBasics": lambda: resolve("horovod.common.basics.HorovodBasics")(
        resolve("horovod.torch.mpi_ops").__file__, "mpi_lib_v2"
    ),
}


@functools.cache
def instance(path: str) -> Any:
    return INSTANCES[path]()


def owner_and_attribute(module: str, name: str) -> tuple[Any, str]:
    """For ``Class.attr``: the instance of INSTANCES, else the class; for a plain name, the module."""
    if "." not in name:
        return importlib.import_module(module), name
    owner_name, attribute = name.rsplit(".", 1)
    path = f"{module}.{owner_name}"
    return (instance(path) if path in INSTANCES else resolve(path)), attribute


# --- comparing signatures ---------------------------------------------------------------------------


def _same_value(actual: Any, expected: Any) -> bool:
    if isinstance(expected, Ref):
        target = resolve(expected.path)
        # Horovod's reduce ops are plain ints (op=Average): compared by value.
        return actual is target or (isinstance(target, int) and isinstance(actual, int) and actual == target)
    return actual is expected or (isinstance(actual, type(expected)) and actual == expected)


def _value(value: Any) -> str:
    return f"<{value.path}>" if isinstance(value, Ref) else repr(value)


def _describe(params: tuple[tuple[Any, ...], ...]) -> str:
    parts = []
    keyword_only_started = False
    for name, kind, *default in params:
        if kind == KW and not keyword_only_started:
            parts.append("*")
            keyword_only_started = True
        text = {VAR: f"*{name}", VARKW: f"**{name}"}.get(kind, name)
        if kind == VAR:
            keyword_only_started = True
        if default:
            text += f"={_value(default[0])}"
        parts.append(text)
    return f"({', '.join(parts)})"


def incompatibilities(expected: tuple[tuple[Any, ...], ...], signature: inspect.Signature) -> list[str]:
    """What in hvd's ``signature`` breaks a call that Horovod's parameters ``expected`` accept."""
    problems = []
    actual = list(signature.parameters.values())
    by_name = signature.parameters
    horovod_names = {p[0] for p in expected if p[1] in (POS, KW)}
    positional = [p.name for p in actual if p.kind in (Parameter.POSITIONAL_ONLY, Parameter.POSITIONAL_OR_KEYWORD)]
    horovod_positional = [p[0] for p in expected if p[1] == POS]
    if positional[: len(horovod_positional)] != horovod_positional:
        problems.append(f"positional parameters {horovod_positional} in Horovod, {positional} in hvd")
    for name, kind, *default in expected:
        if kind in (VAR, VARKW):
            wanted = Parameter.VAR_POSITIONAL if kind == VAR else Parameter.VAR_KEYWORD
            if not any(p.kind == wanted for p in actual):
                problems.append(f"Horovod takes {kind}, hvd does not")
            continue
        param = by_name.get(name)
        if param is None:
            problems.append(f"{name!r} is missing")
            continue
        if param.kind == Parameter.POSITIONAL_ONLY:
            problems.append(f"{name!r} is positional-only in hvd")
        elif kind == POS and param.kind != Parameter.POSITIONAL_OR_KEYWORD:
            problems.append(f"{name!r} is positional-or-keyword in Horovod, {param.kind.description} in hvd")
        elif kind == KW and param.kind not in (Parameter.KEYWORD_ONLY, Parameter.POSITIONAL_OR_KEYWORD):
            problems.append(f"{name!r} is keyword-only in Horovod, {param.kind.description} in hvd")
        if not default:
            pass  # required in Horovod: a default in hvd keeps every Horovod call working
        elif param.default is Parameter.empty:
            problems.append(f"{name!r} has a default in Horovod, is required in hvd")
        elif not _same_value(param.default, default[0]):
            problems.append(f"{name!r}: default {_value(default[0])} in Horovod, {param.default!r} in hvd")
    horovod_takes_args = any(p[1] == VAR for p in expected)
    for param in actual:
        if param.name in horovod_names or param.kind in (Parameter.VAR_POSITIONAL, Parameter.VAR_KEYWORD):
            continue
        if param.default is Parameter.empty:
            problems.append(f"hvd adds the required parameter {param.name!r}")
        elif horovod_takes_args and param.kind != Parameter.KEYWORD_ONLY:
            problems.append(f"hvd adds the positional parameter {param.name!r}, which takes what Horovod's *args took")
    return problems


def assert_compatible(what: str, expected: tuple[tuple[Any, ...], ...], obj: Any) -> None:
    signature = inspect.signature(obj)
    problems = incompatibilities(expected, signature)
    plain = signature.replace(
        parameters=[p.replace(annotation=Parameter.empty) for p in signature.parameters.values()],
        return_annotation=inspect.Signature.empty,
    )
    header = f"{what}: Horovod 0.28.1 {_describe(expected)}\n    hvd {plain}"
    assert not problems, "\n  - ".join([header, *problems])


# --- the checker, checked --------------------------------------------------------------------------

# A made-up Horovod signature: (tensor, name=None, op=Average, *args, **kwargs).
MADE_UP = (
    ("tensor", POS),
    ("name", POS, None),
    ("op", POS, Ref("horovod.torch.Average")),
    ("args", VAR),
    ("kwargs", VARKW),
)
COMPATIBLE = {
    "same": lambda tensor, name=None, op=0, *args, **kwargs: None,
    "keyword-only added": lambda tensor, name=None, op=0, *args, extra=1, **kwargs: None,
    "other names for *args and **kwargs": lambda tensor, name=None, op=0, *rest, **options: None,
    "default added": lambda tensor=None, name=None, op=0, *args, **kwargs: None,
}
INCOMPATIBLE = {
    "order": (lambda name, tensor=None, op=0, *args, **kwargs: None, "positional parameters"),
    "renamed": (lambda t, name=None, op=0, *args, **kwargs: None, "'tensor' is missing"),
    "default changed": (lambda tensor, name=None, op=1, *args, **kwargs: None, "'op': default"),
    "default removed": (lambda tensor, name, op=0, *args, **kwargs: None, "'name' has a default in Horovod"),
    "no *args": (lambda tensor, name=None, op=0, **kwargs: None, "Horovod takes *args"),
    "no **kwargs": (lambda tensor, name=None, op=0, *args: None, "Horovod takes **kwargs"),
    "keyword-only": (lambda tensor, *args, name=None, op=0, **kwargs: None, "'name' is positional-or-keyword"),
    "required added": (lambda tensor, name=None, op=0, *args, extra, **kwargs: None, "the required parameter 'extra'"),
    "positional before *args": (lambda tensor, name=None, op=0, extra=1, *args, **kwargs: None, "Horovod's *args"),
}


@pytest.mark.parametrize("case", COMPATIBLE)
def test_checker_accepts(case: str) -> None:
    assert incompatibilities(MADE_UP, inspect.signature(COMPATIBLE[case])) == []


@pytest.mark.parametrize("case", INCOMPATIBLE)
def test_checker_refuses(case: str) -> None:
    function, problem = INCOMPATIBLE[case]
    problems = incompatibilities(MADE_UP, inspect.signature(function))
    assert any(problem in p for p in problems), problems


# --- the walk ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("module", "name", "params"), _cases(FUNCTIONS))
def test_function(module: str, name: str, params: tuple[tuple[Any, ...], ...]) -> None:
    function = getattr(importlib.import_module(module), name)
    assert callable(function), f"{module}.{name} is not callable"
    assert_compatible(f"{module}.{name}", params, function)


@pytest.mark.parametrize(("module", "name", "bases", "params"), _cases(CLASSES))
def test_class(module: str, name: str, bases: tuple[str, ...], params: tuple[tuple[Any, ...], ...] | None) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type), f"{module}.{name} is not a class"
    for base in bases:
        assert issubclass(cls, resolve(base)), f"{module}.{name} is not a subclass of {base}, as in Horovod"
    if params is not None:
        assert_compatible(f"{module}.{name}()", params, cls)


def _method(owner: Any, name: str, how: str) -> Any:
    """What ``owner.name`` is called as, without self: bound on an instance, or from the class."""
    if not isinstance(owner, type):
        return getattr(owner, name)
    raw = inspect.getattr_static(owner, name)
    if how == STATIC:
        # Horovod's are called on the class (hvd.Compression.fp16.compress(t)): so must hvd's be.
        assert isinstance(raw, (staticmethod, classmethod)), f"{owner.__name__}.{name} is not a staticmethod"
        return getattr(owner, name)
    assert how == METHOD
    if isinstance(raw, (staticmethod, classmethod)):
        return getattr(owner, name)
    assert inspect.isfunction(raw), f"{owner.__name__}.{name} is a {type(raw).__name__}, not a method"
    return functools.partial(raw, None)  # without self


@pytest.mark.parametrize(("module", "name", "how", "params"), _cases(METHODS))
def test_method(module: str, name: str, how: str, params: tuple[tuple[Any, ...], ...]) -> None:
    owner, method = owner_and_attribute(module, name)
    assert hasattr(owner, method), f"{module}.{name} is missing"
    assert_compatible(f"{module}.{name}", params, _method(owner, method, how))


@pytest.mark.parametrize(("module", "name"), _cases(ATTRIBUTES))
def test_attribute(module: str, name: str) -> None:
    owner, attribute = owner_and_attribute(module, name)
    assert hasattr(owner, attribute), f"{module}.{name} is missing"


@pytest.mark.parametrize(("module", "name", "value"), _cases(VALUES))
def test_value(module: str, name: str, value: Any) -> None:
    owner, attribute = owner_and_attribute(module, name)
    actual = getattr(owner, attribute)
    assert _same_value(actual, value), f"{module}.{name} is {actual!r}; in Horovod 0.28.1: {value!r}"


@pytest.mark.parametrize(("module", "name", "defined_in"), _cases(REEXPORTS))
def test_import_path(module: str, name: str, defined_in: str) -> None:
    public = getattr(importlib.import_module(module), name)
    there = getattr(importlib.import_module(defined_in), name)
    assert there is public, f"{defined_in}.{name} is not {module}.{name}"


def test_public_names_listed() -> None:
    """Every horovod.torch name Horovod exports is in hvd's ``__all__`` (``from horovod.torch import *``)."""
    import horovod.torch as hvd

    exported = {name for module, name, _ in REEXPORTS if module == "horovod.torch"}
    assert exported - set(hvd.__all__) == set()


# --- horovodrun's flags -----------------------------------------------------------------------------

# Plausible values for flags taking text (the others: by type; --log-level: each of its choices).
TEXT_VALUES = {
    "--network-interfaces": "eth0,eth1",
    "--network-interface": "eth0",
    "--output-filename": "logs",
    "--config-file": "hvd.yaml",
    "-i": "~/.ssh/id_ed25519",
    "--ssh-identity-file": "~/.ssh/id_ed25519",
    "--autotune-log-file": "autotune.csv",
    "--timeline-filename": "timeline.json",
    "--mpi-args": "--map-by ppr:6:node",
    "--binding-args": "--rankfile myrankfile",
    "-H": "host1:2,host2:2",
    "--hosts": "host1:2,host2:2",
    "-hostfile": "hosts.txt",
    "--hostfile": "hosts.txt",
    "--host-discovery-script": "./discover_hosts.sh",
}
TYPED_VALUES = {"int": "2", "float": "0.5"}


def _flag_cases() -> list[Any]:
    cases = []
    for flag, count, kind, choices in HOROVODRUN_FLAGS:
        if choices:
            values = [[choice] for choice in choices]
        elif count == 0:
            values = [[]]
        else:
            values = [[TEXT_VALUES[flag] if kind == "str" else TYPED_VALUES[kind]] * count]
        for given in values:
            # A value starting with "-" (--mpi-args) is given as --flag=value, as Horovod's help says.
            argv = [f"{flag}={given[0]}"] if given and given[0].startswith("-") else [flag, *given]
            cases.append(pytest.param(flag, argv, id=" ".join(argv)))
    return cases


def _parse(argv: list[str]) -> dict[str, Any]:
    from horovod.runner.cli import build_parser

    return vars(build_parser().parse_args([*argv, "python", "train.py"]))


@pytest.mark.parametrize(("flag", "argv"), _flag_cases())
def test_horovodrun_flag(flag: str, argv: list[str]) -> None:
    output, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(errors), warnings.catch_warnings():
        # Horovod's deprecated flags (--log-hide-timestamp...) warn; they must still be accepted.
        warnings.simplefilter("ignore", DeprecationWarning)
        if flag in ("-v", "--version"):
            with pytest.raises(SystemExit) as exited:
                _parse(argv)
            assert exited.value.code == 0, errors.getvalue()
            assert output.getvalue().strip(), "--version printed nothing"
            return
        try:
            parsed = _parse(argv)
        except SystemExit as error:
            pytest.fail(f"horovodrun {' '.join(argv)} python train.py: refused ({error.code}): {errors.getvalue()}")
        baseline = _parse([])
    assert parsed["command"] == ["python", "train.py"], parsed["command"]
    assert parsed != baseline, f"horovodrun {' '.join(argv)}: parsed, but nothing recorded it"
