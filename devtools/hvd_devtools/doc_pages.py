"""For the packages' tests of the docs' pages: the repository's ``docs/snippets.py`` (which runs
the code blocks of a page), loaded by path, since the docs are not a package."""

from __future__ import annotations

import os
import pathlib
import sys
import types
from importlib import util


def repo_root(test_file: str) -> pathlib.Path:
    """The checkout a package's test file is in (``HVD_REPO_ROOT`` overrides it)."""
    return pathlib.Path(os.environ.get("HVD_REPO_ROOT", pathlib.Path(test_file).resolve().parents[3]))


def load_snippets(root: pathlib.Path) -> types.ModuleType:
    """``docs/snippets.py`` of the checkout at ``root``, as a module."""
    spec = util.spec_from_file_location("hvd_doc_snippets", root / "docs" / "snippets.py")
    assert spec is not None and spec.loader is not None
    module = util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module
