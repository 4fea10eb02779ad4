"""The API reference documents every public name of the modules it has a page for.

Run by the ``docs`` nox session right after it builds the site (``./dev docs``): the names the site
documents are read from the built site's inventory (``objects.inv``, what Sphinx records for every
object it documents), the public names from the modules themselves (``__all__``, and ``dir()``).
A name a module gains without a docstring-generated entry fails here, naming it.

The modules of frameworks the docs environment does not install (TensorFlow, Keras, MXNet: see
``autodoc_mock_imports`` in docs/conf.py) are imported under the same mocks as the build.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import posixpath
import re
import types
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sphinx.ext.autodoc.mock import mock
from sphinx.util.inventory import InventoryFile

DOCS = pathlib.Path(__file__).resolve().parent.parent
HTML = pathlib.Path(os.environ.get("HVD_DOCS_HTML", DOCS / "_build" / "html"))

# The modules with a page of the reference, each documented with ``automodule :members:``.
DOCUMENTED_MODULES = [
    "horovod.torch",
    "horovod.torch.elastic",
    "horovod.tensorflow",
    "horovod.tensorflow.elastic",
    "horovod.keras",
    "horovod.keras.callbacks",
    "horovod.keras.elastic",
    "horovod.tensorflow.keras",
    "horovod.tensorflow.keras.callbacks",
    "horovod.tensorflow.keras.elastic",
    "horovod.mxnet",
    "horovod.common",
    "horovod.common.elastic",
    "horovod.common.framework_api",
    "horovod.common.plugin_api",
    "horovod.runner",
    "horovod.ray",
    "horovod.spark",
    "horovod.spark.torch",
    "horovod.spark.keras",
    "horovod.backends.gloo",
    "horovod.backends.mpi",
]

# Submodules of horovod.torch that dir() lists but that are not pages of their own: each is the
# implementation of names horovod.torch re-exports (and documents), as in Horovod.
TORCH_IMPLEMENTATION_MODULES = {
    "version",  # __version__ (documented)
    "adapter",
    "adasum_optimizer",
    "async_ops",
    "autograd",
    "compression",
    "functions",
    "handles",
    "kept_compression",
    "mpi_ops",
    "objects",
    "optimizer",
    "sync_batch_norm",
}

# Names dir(horovod.torch) lists that the module imports for its own use.
TORCH_NOT_API = {
    "annotations",  # from __future__ import annotations
    "TYPE_CHECKING",  # typing's flag, for the imports type checkers see
    "lazy_exports",  # hvd-core's helper that makes the lazily loaded attributes
    "declared_exports",  # hvd-core's helper that reads which those are (the TYPE_CHECKING imports)
}


def _mocked_frameworks() -> list[str]:
    """autodoc_mock_imports of docs/conf.py (read, not imported: conf.py is Sphinx's, not a module)."""
    match = re.search(r"^autodoc_mock_imports = (\[.*?\])", (DOCS / "conf.py").read_text(), re.M | re.S)
    assert match, "docs/conf.py has no autodoc_mock_imports list"
    return list(eval(match.group(1)))  # a literal list of strings


@contextmanager
def _as_in_the_build() -> Iterator[None]:
    with mock(_mocked_frameworks()):
        yield


@pytest.fixture(scope="module")
def documented() -> dict[str, set[str]]:
    """Every documented Python object, by its role (``py:function``, ``py:class``...)."""
    inventory = HTML / "objects.inv"
    if not inventory.is_file():
        pytest.fail(f"{inventory} does not exist: build the site first (./dev docs)")
    with inventory.open("rb") as stream:
        data = InventoryFile.load(stream, "", posixpath.join)
    return {role: set(names) for role, names in data.items() if role.startswith("py:")}


def _all_documented(documented: dict[str, set[str]]) -> set[str]:
    return set().union(*documented.values())


def _import(name: str) -> types.ModuleType:
    with _as_in_the_build():
        return importlib.import_module(name)


@pytest.mark.parametrize("module_name", DOCUMENTED_MODULES)
def test_every_name_of_all_is_documented(documented: dict[str, set[str]], module_name: str) -> None:
    module = _import(module_name)
    assert hasattr(module, "__all__"), f"{module_name} has no __all__: its page cannot be checked"
    assert f"{module_name}" in documented.get("py:module", set()), f"{module_name} has no page"
    names = _all_documented(documented)
    missing = sorted(name for name in module.__all__ if f"{module_name}.{name}" not in names)
    assert not missing, f"the API reference lacks these public names of {module_name}: {', '.join(missing)}"


def test_every_public_name_of_horovod_torch_is_documented(documented: dict[str, set[str]]) -> None:
    """What ``dir(horovod.torch)`` offers, beyond ``__all__``: a new public name, or a submodule that
    is neither documented nor known as implementation, fails."""
    module = _import("horovod.torch")
    names = _all_documented(documented)
    modules = documented.get("py:module", set())
    problems = []
    for name in sorted(n for n in dir(module) if not n.startswith("_")):
        if name in TORCH_IMPLEMENTATION_MODULES or name in TORCH_NOT_API:
            continue
        qualified = f"horovod.torch.{name}"
        with _as_in_the_build():
            value = getattr(module, name)
        if isinstance(value, types.ModuleType):
            if qualified not in modules:
                problems.append(f"{qualified} (a submodule with no page)")
        elif qualified not in names:
            problems.append(qualified)
    assert not problems, f"the API reference lacks these public names: {', '.join(problems)}"


def test_mocked_frameworks_pages_have_signatures_and_docstrings() -> None:
    """The pages of packages whose framework is mocked list their functions with signatures and
    docstrings, as the others do (a mock in the wrong place documents a function as bare data)."""
    for page, module_name in [
        ("mxnet", "horovod.mxnet"),
        ("tensorflow", "horovod.tensorflow"),
        ("keras", "horovod.keras"),
    ]:
        html = (HTML / "api" / f"{page}.html").read_text()
        module = _import(module_name)
        for name in ("allreduce", "broadcast", "DistributedOptimizer"):
            anchor = f'id="{module_name}.{name}"'
            assert anchor in html, f"api/{page}.html does not document {module_name}.{name}"
            entry = html.split(anchor, 1)[1].split("</dd>", 1)[0]
            assert '<em class="sig-param">' in entry, f"{module_name}.{name} is shown without its parameters"
            with _as_in_the_build():
                doc = (getattr(module, name).__doc__ or "").strip()
            assert doc, f"{module_name}.{name} has no docstring"
            # Its first words, as rendered (markup and typographic quotes aside).
            first_words = re.findall(r"\w+", doc)[:4]
            text = re.sub(r"<[^>]+>", " ", entry)
            assert re.search(r"\W+".join(first_words), text), (
                f"api/{page}.html does not show {module_name}.{name}'s docstring ({' '.join(first_words)}...)"
            )
