"""The shared parameter texts (horovod.common.api_text): filled where marked, and written only there."""

from __future__ import annotations

import ast
import os
import pathlib
import re
import sys
import types

import pytest
from hvd_devtools.docstrings import undocumented_parameters

from horovod.common.api_text import PARAMETER_TEXTS, document_parameters, shared_parameters

ROOT = pathlib.Path(os.environ.get("HVD_REPO_ROOT", pathlib.Path(__file__).resolve().parents[3]))


def test_a_marker_takes_its_parameters_text() -> None:
    @shared_parameters
    def submit(name: str, process_set: object) -> None:
        """Submits.

        :param name: |shared:group_name|
        :param process_set: |shared|
        """

    doc = submit.__doc__ or ""
    assert "|shared" not in doc
    assert ":param name: a base name for the group" in doc
    joined = " ".join(line.strip() for line in doc.splitlines())
    assert ":param process_set: " + PARAMETER_TEXTS["process_set"] in joined


def test_a_class_and_its_methods_are_filled() -> None:
    @shared_parameters
    class Ops:
        """Ops.

        :param op: |shared|
        """

        def __init__(self, op: int) -> None:
            self.op = op

        @staticmethod
        def scaled(prescale_factor: float) -> None:
            """Scales.

            :param prescale_factor: |shared|
            """

    assert "|shared" not in (Ops.__doc__ or "") + (Ops.scaled.__doc__ or "")


def test_a_framework_adds_its_own_texts() -> None:
    document = document_parameters({**PARAMETER_TEXTS, "priority": "the priority in the engine."})

    @document
    def push(priority: int) -> None:
        """Pushes.

        :param priority: |shared|
        """

    assert ":param priority: the priority in the engine." in (push.__doc__ or "")


def test_an_unknown_key_fails_at_once() -> None:
    with pytest.raises(LookupError, match="no shared text for parameter 'colour'"):

        @shared_parameters
        def paint(colour: str) -> None:
            """Paints.

            :param colour: |shared|
            """


def test_the_docstring_check_counts_an_unfilled_marker_as_undocumented(monkeypatch: pytest.MonkeyPatch) -> None:
    def forgotten(name: str) -> None:
        """Has a marker and no @shared_parameters.

        :param name: |shared|
        """

    probe = types.ModuleType("horovod.unfilled_probe")
    forgotten.__module__ = probe.__name__
    probe.forgotten = forgotten  # type: ignore[attr-defined]  # (a module made here)
    probe.__all__ = ["forgotten"]
    monkeypatch.setitem(sys.modules, probe.__name__, probe)
    assert undocumented_parameters([probe.__name__]) == ["horovod.unfilled_probe.forgotten(name)"]


def _field_texts(path: pathlib.Path) -> list[tuple[int, str, str]]:
    """(line, parameter, text) of every ``:param`` field in the docstrings of ``path``."""
    fields = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        doc = ast.get_docstring(node)
        for match in re.finditer(r"^:param (\w+): (.*(?:\n    .*)*)", doc or "", re.M):
            fields.append((node.lineno, match.group(1), " ".join(match.group(2).split())))
    return fields


def test_no_package_writes_a_shared_text_again() -> None:
    # The texts live in api_text only; a copy elsewhere drifts from it. Write `|shared|` instead.
    shared = {" ".join(text.split()): key for key, text in PARAMETER_TEXTS.items()}
    copies = [
        f"{path.relative_to(ROOT)}:{line}: :param {name}: is PARAMETER_TEXTS[{shared[text]!r}]"
        for path in sorted((ROOT / "packages").glob("*/src/**/*.py"))
        if path.name != "api_text.py"
        for line, name, text in _field_texts(path)
        if text in shared
    ]
    assert not copies, "write these as ':param NAME: |shared|' (or |shared:KEY|):\n" + "\n".join(copies)
