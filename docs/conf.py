"""Sphinx configuration of hvd's documentation site.

Built by ``./dev docs`` (the ``docs`` nox session) into ``docs/_build/html``, with warnings as errors
and every cross-reference checked (``sphinx-build -W --keep-going -n``). The API reference
(``docs/api/``) is generated from the docstrings of the installed packages; the guides and the other
pages are Markdown (MyST).
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import re
import sys
from collections.abc import Callable
from typing import Any

from docutils import nodes
from sphinx.ext.autodoc.mock import MockFinder, _MockObject
from sphinx.ext.autodoc.preserve_defaults import update_defvalue
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.docutils import SphinxDirective
from sphinx.util.inspect import signature as sphinx_signature
from sphinx.util.inspect import stringify_signature

ROOT = pathlib.Path(__file__).resolve().parent.parent

project = "hvd"
author = "the hvd authors"
copyright = "the hvd authors"
# hvd-core's version (each package has its own; the site documents them together).
_CORE_VERSION = ROOT / "packages" / "hvd-core" / "src" / "horovod" / "common" / "version.py"
release = version = re.search(r'^__version__ = "(.*)"', _CORE_VERSION.read_text(), re.M).group(1)

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",  # the API reference, from the docstrings (reST fields: no napoleon needed)
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# Not pages: the build's output, the docs' own tests and the snippets' helper files.
exclude_patterns = ["_build", "tests", "snippets", "**/README.md"]

html_theme = "furo"
html_title = "hvd"
html_static_path: list[str] = []

# --- MyST ---------------------------------------------------------------------------------------
# Anchors for headings down to ###, so that Markdown links such as [x](elastic.md#timings) resolve
# (and are checked: a broken one is a warning, so an error).
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# --- autodoc ------------------------------------------------------------------------------------
autodoc_member_order = "bysource"  # a module's __all__ order: the packages group their names there
autodoc_typehints = "signature"
# Every public name is listed, with or without a docstring of its own (a marker object such as
# ``hookimpl``, a class attribute): the reference is the list of the API, not of what is described.
autodoc_default_options = {"undoc-members": True}
autodoc_typehints_format = "short"  # ``ProcessSet``, not ``horovod.common.process_sets.ProcessSet``
autodoc_preserve_defaults = True  # ``compression=Compression.none``, not the object's repr
# Frameworks that cannot be imported here. MXNet 1.9.1 needs numpy 1.23.5, which no other stack
# shares (TensorFlow 2.21 and pyspark 4 need numpy 2); TensorFlow and Keras are mocked too, to keep
# CI's docs environment small (a minute and 1 GiB less): autodoc documents our signatures and
# docstrings, which do not come from them. docs/tests/test_api_reference.py checks that the pages
# of the mocked packages still list every name.
autodoc_mock_imports = ["mxnet", "tensorflow", "keras", "tf_keras"]
# ... for the whole build, not only while autodoc imports the module a directive names: the
# framework packages load their names lazily (horovod.tensorflow.allreduce imports
# horovod.tensorflow.collectives, which imports TensorFlow, on first access), after autodoc's own
# mock is gone, and a name whose import fails is left out of the page without a warning.
sys.meta_path.insert(0, MockFinder(autodoc_mock_imports))

# --- cross-references ---------------------------------------------------------------------------
# Every reference must resolve (-n). No intersphinx: CI has no network, so references to other
# projects' objects (torch.Tensor, numpy.ndarray in signatures...) cannot resolve and are not
# checked; references to hvd's own objects are.
nitpicky = True
_THIRD_PARTY = [
    "torch",
    "numpy",
    "np",
    "tensorflow",
    "tf",
    "keras",
    "mxnet",
    "mx",
    "pyspark",
    "ray",
    "pyarrow",
    "pa",
    "pandas",
    "pd",
    "pluggy",
    "cloudpickle",
    "yaml",
    "mpi4py",
    "ml_dtypes",
]
nitpick_ignore_regex = [
    # Other projects' objects, the standard library's included (collections.abc.Callable in a
    # signature): without intersphinx there is nothing to link them to.
    ("py:.*", rf"({'|'.join([*_THIRD_PARTY, *sorted(sys.stdlib_module_names)])})(\..*)?"),
    # Type variables (``_R`` in ``run(func: Callable[..., _R]) -> _R``) have no page of their own.
    ("py:class", r"horovod(\.\w+)*\._?[A-Z]"),
]
# Implementation types that signatures name but that have no entry of their own: the compressors
# behind ``Compression.none`` and ``Compression.fp16`` (Horovod's, documented as those two), the
# protocol ``compression=`` accepts, the handle types the ``*_async`` functions return (to pass to
# ``synchronize`` and ``poll``, as their docstrings say) and the elastic driver's listener protocol.
# A new undocumented type in a signature still fails the build: add it here only when it has no
# place in the reference either.
nitpick_ignore = [
    ("py:class", f"horovod.{name}")
    for name in (
        "torch.compression.CompressorLike",
        "torch.compression.NoneCompressor",
        "torch.compression.FP16Compressor",
        "mxnet.compression.CompressorLike",
        "mxnet.compression.NoneCompressor",
        "mxnet.compression.FP16Compressor",
        "_keras.compression.NoneCompressor",
        "_keras.compression.FP16Compressor",
        "tensorflow.compression.NoneCompressor",
        "tensorflow.compression.FP16Compressor",
        "torch.handles.CallableHandle",
        # what DistributedGradientTape() returns: a tf.GradientTape (documented as that function)
        "tensorflow.gradient_tape._DistributedGradientTape",
        "common.elastic.notifications.HostsListener",
    )
]
nitpick_ignore.append(("py:class", "Handle"))  # horovod.common._core.Handle, as the engine's stub names it


def _note_object_once(original: Callable[..., None]) -> Callable[..., None]:
    """The Python domain's ``note_object``, taking a second *alias* of an object silently.

    A class that several modules re-export (``horovod.torch.ProcessSet``, ``horovod.tensorflow.ProcessSet``,
    ... are all ``horovod.common.process_sets.ProcessSet``) is documented on each module's page, and
    autodoc gives each entry the class's defining name as ``:canonical:`` alias. Sphinx reports the
    second alias as a duplicate object description (a warning without a type, which
    ``suppress_warnings`` cannot name). The first page that documents the class keeps the alias, so
    references to the defining name (signatures' annotations) link there; a real duplicate (two
    entries with the same documented name) is still reported.
    """

    def note_object(
        self: Any, name: str, objtype: str, node_id: str, aliased: bool = False, location: Any = None
    ) -> None:
        other = self.objects.get(name)
        if aliased and other is not None and other.aliased:
            return
        original(self, name, objtype, node_id, aliased=aliased, location=location)

    return note_object


def _attribute_doc(module_name: str, name: str, value: Any) -> list[str]:
    """The ``#:`` doc comment of ``name``: in ``module_name``, else in the hvd module it is
    re-exported from (the first loaded ``horovod.*`` module that defines the same value under that
    name and comments it)."""
    candidates = [module_name]
    for other, module in list(sys.modules.items()):
        if other.startswith("horovod.") and other != module_name and getattr(module, "__dict__", {}).get(name) is value:
            candidates.append(other)
    for candidate in candidates:
        try:
            docs = ModuleAnalyzer.for_module(candidate).find_attr_docs()
        except Exception:  # no source (a native module): no comment to find
            continue
        if ("", name) in docs:
            return list(docs["", name])
    return []


class DataMembers(SphinxDirective):
    """``.. hvd-data-members:: horovod.torch``: an entry for each name of the module's ``__all__``
    that ``automodule :members:`` leaves out, whatever is not a class or a function: re-exported
    constants (``Average``, ``Sum``...), objects (``global_process_set``), ``__version__``, type
    aliases and modules. autodoc documents module data only with a ``#:`` comment beside it in
    that very module, and for an autodata entry without one it shows the docstring of the value's
    type (``int([x]) -> integer``); here the comment is looked for where the name comes from too.
    Names this page already documents are skipped."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        module_name = self.arguments[0]
        module = importlib.import_module(module_name)
        documented = self.env.get_domain("py").objects
        text = []
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isroutine(value) or f"{module_name}.{name}" in documented:
                continue
            text += [f".. py:data:: {name}", f"   :module: {module_name}"]
            if isinstance(value, (int, float, str, tuple, frozenset)):
                text.append(f"   :value: {value!r}")
            text.append("")
            if inspect.ismodule(value):
                doc = [f"The module :mod:`{value.__name__}`."]
            elif type(value).__module__.startswith("horovod."):  # an object of ours: its class says what it is
                doc = (inspect.getdoc(value) or "").splitlines()
            elif hasattr(value, "__origin__") or type(value).__name__ == "UnionType":  # a type alias
                doc = _attribute_doc(module_name, name, value) or [f"Type alias: ``{value}``."]
            else:
                doc = _attribute_doc(module_name, name, value)
            text += ["   " + line if line else "" for line in doc] + [""]
        return self.parse_text_to_nodes("\n".join(text))


def _signature_on_mocked_base(
    app: Any, what: str, name: str, obj: Any, options: Any, signature: str | None, return_annotation: str | None
) -> tuple[str, str | None] | None:
    """The signature of a class of ours whose base is a mocked framework class (a Keras callback,
    an MXNet Gluon Trainer): its own ``__init__``'s, where autodoc would show the mock's
    ``(*args, **kwargs)``."""
    if what not in {"class", "exception"} or not (isinstance(obj, type) and issubclass(obj, _MockObject)):
        return None
    for klass in obj.__mro__:
        if klass.__module__.startswith("horovod.") and "__init__" in vars(klass):
            update_defvalue(app, klass.__init__, False)  # autodoc_preserve_defaults, as autodoc does
            init = sphinx_signature(klass.__init__, bound_method=True, type_aliases=app.config.autodoc_type_aliases)
            return stringify_signature(init, show_return_annotation=False), None
    return None


def setup(app: Any) -> None:
    from sphinx.domains.python import PythonDomain

    PythonDomain.note_object = _note_object_once(PythonDomain.note_object)
    app.add_directive("hvd-data-members", DataMembers)
    app.connect("autodoc-process-signature", _signature_on_mocked_base)
