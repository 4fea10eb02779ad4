"""horovod.common.util: Horovod's helpers, answered from the plugin registry, and its version error."""

from __future__ import annotations

import importlib.metadata
import os
import sys
import types
from collections.abc import Callable, Iterator

import pytest

from horovod.common import hookspecs, util
from horovod.common.plugins import get_plugin_manager, reset_plugin_manager
from horovod.common.registry import BackendSpec, FrameworkSpec
from horovod.common.testing import cuda_runtime_works
from horovod.common.version_check import HorovodVersionMismatchError, get_version_mismatch_message

# What Horovod's users and tools import from horovod.common.util.
HOROVODS_NAMES = [
    "gloo_built",
    "mpi_built",
    "nccl_built",
    "ddl_built",
    "ccl_built",
    "cuda_built",
    "rocm_built",
    "extension_available",
    "check_extension",
    "gpu_available",
    "env",
    "get_average_backwards_compatibility_fun",
    "num_rank_is_power_2",
    "split_list",
    "is_iterable",
    "is_version_greater_equal_than",
    "check_installed_version",
    "EXTENSIONS",
    "HorovodVersionMismatchError",
    "get_version_mismatch_message",
]


@pytest.fixture(autouse=True)
def _only_test_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A registry holding hvd-core's in-memory backend and what each test registers, nothing installed:
    every other plugin installed beside hvd-core (hvd-torch's, hvd-backend-gloo's...) is disabled, or
    a test's framework or backend would clash with the real one of its name."""
    installed = {entry.name for entry in importlib.metadata.entry_points(group="horovod")} - {"core"}
    monkeypatch.setenv("HOROVOD_PLUGINS_DISABLE", ",".join(sorted(installed)))
    monkeypatch.delenv("HOROVOD_PLUGINS_TRACE", raising=False)
    reset_plugin_manager()
    yield
    reset_plugin_manager()


def register(*specs: BackendSpec | FrameworkSpec) -> None:
    class Plugin:
        @hookspecs.hookimpl
        def hvd_register_backends(self, register: Callable[[BackendSpec], None]) -> None:
            for spec in specs:
                if isinstance(spec, BackendSpec):
                    register(spec)

        @hookspecs.hookimpl
        def hvd_register_frameworks(self, register: Callable[[FrameworkSpec], None]) -> None:
            for spec in specs:
                if isinstance(spec, FrameworkSpec):
                    register(spec)

    get_plugin_manager().register(Plugin(), name=f"test-{id(specs)}")


def test_horovods_names_are_there() -> None:
    missing = [name for name in HOROVODS_NAMES if not hasattr(util, name)]
    assert not missing
    assert util.EXTENSIONS == ["tensorflow", "torch", "mxnet"]


# --- built: from the registry ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gloo", "mpi", "nccl"])
def test_a_backend_is_built_when_its_plugin_registers_it(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    built = getattr(util, f"{name}_built")
    if name in get_plugin_manager().backends():
        pytest.skip(f"a {name} backend is installed here")
    assert built(verbose=True) is False
    why = capsys.readouterr().out
    # Not installed: how to install it. Installed beside hvd-core but disabled for these tests
    # (conftest.py disables the installed plugins): how to enable it.
    assert f"pip install hvd-backend-{name}" in why or "HOROVOD_PLUGINS_DISABLE" in why, why
    register(BackendSpec(name=name, library="x", version="9.9"))
    assert built() is True
    assert built(verbose=True) is True
    assert f"backend {name!r} 9.9 is installed" in capsys.readouterr().out


@pytest.mark.parametrize(("name", "reason"), [("ddl", "IBM DDL is not supported"), ("ccl", "no oneCCL backend")])
def test_backends_hvd_does_not_provide(name: str, reason: str, capsys: pytest.CaptureFixture[str]) -> None:
    built = getattr(util, f"{name}_built")
    assert built(verbose=True) is False
    out = capsys.readouterr().out
    assert reason in out and "pip install" not in out  # no package to point at
    register(BackendSpec(name=name, library="x"))  # a third party may publish one
    assert built() is True


def test_an_in_process_backend_does_not_count(capsys: pytest.CaptureFixture[str]) -> None:
    register(BackendSpec(name="gloo", library="x", in_process_only=True))
    assert util.gloo_built(verbose=True) is False
    assert "inside one process only" in capsys.readouterr().out


def test_cuda_is_built_where_tensors_can_be_staged(capsys: pytest.CaptureFixture[str]) -> None:
    # The engine stages CUDA tensors through the CPU backend wherever the CUDA runtime works.
    works = cuda_runtime_works()
    assert util.cuda_built(verbose=True) is works
    assert ("staged through the CPU backend" if works else "none can be staged") in capsys.readouterr().out


@pytest.mark.skipif(cuda_runtime_works(), reason="CUDA tensors can be staged here, whatever the backends")
def test_cuda_and_rocm_are_built_when_a_backend_serves_them() -> None:
    assert util.cuda_built() is False and util.rocm_built() is False
    register(BackendSpec(name="tgpu", library="x", device_kinds=("cuda",)))
    assert util.cuda_built() is True and util.rocm_built() is False


def test_basics_answer_the_same() -> None:
    from horovod.common import basics

    for name in ("mpi", "gloo", "nccl", "ddl", "ccl", "cuda", "rocm"):
        assert getattr(basics, f"{name}_built")() == getattr(util, f"{name}_built")()
    register(BackendSpec(name="nccl", library="x", device_kinds=("cuda",)))
    assert basics.nccl_built() and basics.cuda_built()


# --- frameworks ------------------------------------------------------------------------------------


def test_extension_available_needs_the_binding_and_its_framework(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(util._FRAMEWORK_MODULES, "torch", "hvd_no_such_framework")
    assert util.extension_available("torch", verbose=True) is False
    assert "horovod.torch is not installed: pip install hvd-torch" in capsys.readouterr().out
    register(FrameworkSpec(name="torch", module="horovod.torch", version="0.3"))
    assert util.extension_available("torch", verbose=True) is False
    assert "horovod.torch is installed, but hvd_no_such_framework is not" in capsys.readouterr().out
    monkeypatch.setitem(util._FRAMEWORK_MODULES, "torch", "json")  # a module that is surely importable
    assert util.extension_available("torch") is True


def test_check_extension_raises_import_error_naming_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ImportError, match=r"Extension horovod.mxnet has not been built: .*pip install hvd-mxnet"):
        util.check_extension("horovod.mxnet", "HOROVOD_WITH_MXNET", __file__, "mpi_lib")
    monkeypatch.setitem(util._FRAMEWORK_MODULES, "mxnet", "json")
    register(FrameworkSpec(name="mxnet", module="horovod.mxnet"))
    assert util.check_extension("horovod.mxnet", "HOROVOD_WITH_MXNET", __file__, "mpi_lib") is None


def test_gpu_available_says_why_not(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(util._FRAMEWORK_MODULES, "torch", "json")
    register(FrameworkSpec(name="torch", module="horovod.torch"))
    if not cuda_runtime_works():
        assert util.gpu_available("torch", verbose=True) is False
        out = capsys.readouterr().out
        assert "no installed hvd backend serves CUDA tensors, and none can be staged" in out
        assert "no installed hvd backend serves ROCm tensors" in out
    register(BackendSpec(name="tgpu", library="x", device_kinds=("cpu", "cuda")))
    assert util.gpu_available("torch") is True
    assert util.gpu_available("tensorflow") is False  # its binding is not installed


# --- helpers ----------------------------------------------------------------------------------------


def test_env_sets_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HVD_T_KEPT", "before")
    monkeypatch.delenv("HVD_T_NEW", raising=False)
    monkeypatch.delenv("HVD_T_NONE", raising=False)
    with util.env(HVD_T_KEPT="during", HVD_T_NEW="new", HVD_T_NONE=None):
        assert (os.environ["HVD_T_KEPT"], os.environ["HVD_T_NEW"]) == ("during", "new")
        assert "HVD_T_NONE" not in os.environ
    assert os.environ["HVD_T_KEPT"] == "before" and "HVD_T_NEW" not in os.environ
    with pytest.raises(RuntimeError), util.env(HVD_T_KEPT="again"):
        raise RuntimeError
    assert os.environ["HVD_T_KEPT"] == "before"


def test_average_backwards_compatibility() -> None:
    ops = types.SimpleNamespace(Average="avg", Sum="sum", Adasum="adasum")
    impl = util.get_average_backwards_compatibility_fun(ops)
    assert impl(None, None) == "avg" and impl("adasum", None) == "adasum"
    with pytest.warns(DeprecationWarning, match="average"):
        assert impl(None, False) == "sum"
    with pytest.warns(DeprecationWarning):
        assert impl(None, True) == "avg"
    with pytest.raises(ValueError, match="op parameter supersedes average"):
        impl("sum", True)


def test_small_helpers() -> None:
    assert [n for n in range(-2, 20) if util.num_rank_is_power_2(n)] == [1, 2, 4, 8, 16]
    assert util.split_list(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert util.split_list([1, 2], 4) == [[1], [2], [], []]
    assert util.split_list("abcd", 2) == ["ab", "cd"]
    assert util.is_iterable([1]) and util.is_iterable("s") and util.is_iterable(iter(()))
    assert not util.is_iterable(3) and not util.is_iterable(None)


@pytest.mark.parametrize(
    ("ver", "target", "expected"),
    [
        ("2.13.0+cpu", "2.3.0", True),
        ("2.3.0", "2.13.0", False),
        ("1.9.1", "1.9.1", True),
        ("2.16.0rc0", "2.16.0", False),  # a pre-release comes before its release
        ("0.28.1+hvd.0.1.0", "0.21.0", True),
    ],
)
def test_is_version_greater_equal_than(ver: str, target: str, expected: bool) -> None:
    assert util.is_version_greater_equal_than(ver, target) is expected


def test_is_version_greater_equal_than_without_packaging(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "packaging.version", None)  # import fails: the release numbers decide
    assert util.is_version_greater_equal_than("2.13.0+cpu", "2.3.0")
    assert not util.is_version_greater_equal_than("1.12", "1.13.0")


def test_is_version_greater_equal_than_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="only accepts strings"):
        util.is_version_greater_equal_than(2.1, "2.0.0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"major\.minor\.patch"):
        util.is_version_greater_equal_than("2.1.0", "2.0")


def test_check_installed_version_never_complains() -> None:
    # hvd's bindings are compiled against no framework version: nothing to compare (warnings are errors here).
    assert util.check_installed_version("pytorch", "2.13.0") is None
    assert util.check_installed_version("pytorch", "2.13.0", ImportError("x")) is None


def test_version_mismatch_error() -> None:
    error = HorovodVersionMismatchError("tensorflow", "2.21.0", "2.15.0")
    assert isinstance(error, ImportError)
    assert (error.name, error.version, error.installed_version) == ("tensorflow", "2.21.0", "2.15.0")
    assert str(error) == get_version_mismatch_message("tensorflow", "2.21.0", "2.15.0")
    assert "tensorflow installed with version 2.15.0 but found version 2.21.0" in str(error)
    assert util.HorovodVersionMismatchError is HorovodVersionMismatchError
