"""Plugin discovery and the plugin manager, against real (fake-installed) distributions.

Each test writes distributions (``*.dist-info`` with METADATA and entry_points.txt) and their hook
modules into tmp_path and puts it on sys.path: importlib.metadata finds them exactly as it finds
installed packages, so nothing about discovery is mocked.

hvd-core's own "core" plugin may or may not be installed where these tests run; it is disabled by
default here so that its in-memory backend never changes what the tests observe.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from horovod.common import builtin_hooks, hookspecs
from horovod.common.plugins import PluginError, PluginManager, get_plugin_manager, reset_plugin_manager
from horovod.common.registry import BackendSpec

MakeDist = Callable[..., None]

HEADER = (
    "from horovod.common.hookspecs import hookimpl\nfrom horovod.common.registry import BackendSpec, FrameworkSpec\n"
)


def backend_module(*specs: str) -> str:
    """Source of a hook module registering ``BackendSpec(<spec>)`` for each spec given."""
    body = "".join(f"    register(BackendSpec({s}))\n" for s in specs)
    return HEADER + "@hookimpl\ndef hvd_register_backends(register):\n" + body


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("HOROVOD_PLUGINS_DISABLE", "core")
    monkeypatch.delenv("HOROVOD_PLUGINS_TRACE", raising=False)
    reset_plugin_manager()
    yield
    reset_plugin_manager()


@pytest.fixture
def make_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    """``make_dist(dist, {ep_name: module}, {module: source}, version="1.0")`` installs a fake dist.

    Each distribution gets its own sys.path entry, in call order, so "first found" is deterministic
    (within one directory it would follow the file system's listing order).
    """
    modules: list[str] = []
    entries: list[str] = []

    def make(dist: str, entry_points: dict[str, str], sources: dict[str, str], version: str = "1.0") -> None:
        root = tmp_path / dist
        info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        eps = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
        (info / "entry_points.txt").write_text("[horovod]\n" + eps)
        for module, source in sources.items():
            (root / f"{module}.py").write_text(textwrap.dedent(source))
            modules.append(module)
        if entries:  # after the previous one (sys.path is restored by monkeypatch)
            sys.path.insert(sys.path.index(entries[-1]) + 1, str(root))
        else:
            monkeypatch.syspath_prepend(str(root))
        entries.append(str(root))
        importlib.invalidate_caches()

    yield make
    for module in modules:  # the next test's modules of the same name live in another tmp_path
        sys.modules.pop(module, None)


def infos_by_name(pm: PluginManager) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for info in pm.plugin_infos():
        out.setdefault(info.name, []).append(info.status)
    return out


def test_good_plugin_registers_backend_and_framework(make_dist: MakeDist) -> None:
    source = backend_module("name='tgood', library='/opt/libtgood.so', version='1.2'") + textwrap.dedent("""
        @hookimpl
        def hvd_register_frameworks(register):
            register(FrameworkSpec(name="tfw", module="horovod.tfw"))
        """)
    make_dist("hvd-test-good", {"tgood": "tgood_hooks"}, {"tgood_hooks": source})
    pm = get_plugin_manager()
    assert "tgood_hooks" not in sys.modules  # loading is lazy
    spec = pm.backend("tgood")
    assert spec.library_path() == "/opt/libtgood.so" and spec.version == "1.2"
    assert "tgood" in pm.backends()
    assert pm.frameworks()["tfw"].module == "horovod.tfw"
    assert get_plugin_manager() is pm
    pm.load()  # idempotent
    assert infos_by_name(pm)["tgood"] == ["loaded"]


def test_broken_plugin_is_skipped_with_reason(make_dist: MakeDist, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="horovod.plugins")
    make_dist(
        "hvd-test-broken",
        {"tbroken": "tbroken_hooks"},
        {"tbroken_hooks": "raise ImportError('libfoo.so.3 missing')\n"},
    )
    make_dist(
        "hvd-test-good",
        {"tgood": "tgood_hooks"},
        {"tgood_hooks": backend_module("name='tgood', library='x'")},
    )
    pm = get_plugin_manager()
    assert "tgood" in pm.backends()  # the broken one doesn't hide the others
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("tbroken" in m and "libfoo.so.3 missing" in m for m in warnings), warnings
    with pytest.raises(PluginError, match="tbroken") as err:
        pm.backend("tbroken")
    assert "libfoo.so.3 missing" in str(err.value) and "hvd-test-broken" in str(err.value)


def test_disabled_plugin_is_not_loaded(
    make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="horovod.plugins")
    monkeypatch.setenv("HOROVOD_PLUGINS_DISABLE", " core , tbroken,,")
    make_dist(
        "hvd-test-broken",
        {"tbroken": "tbroken_hooks"},
        {"tbroken_hooks": backend_module("name='tbroken', library='x'")},
    )
    pm = get_plugin_manager()
    assert infos_by_name(pm)["tbroken"] == ["disabled"]
    assert "tbroken_hooks" not in sys.modules and not caplog.records
    with pytest.raises(PluginError, match="HOROVOD_PLUGINS_DISABLE"):
        pm.backend("tbroken")


def test_trace_writes_hook_calls_to_stderr(
    make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_dist(
        "hvd-test-good",
        {"tgood": "tgood_hooks"},
        {"tgood_hooks": backend_module("name='tgood', library='x'")},
    )
    get_plugin_manager().backends()
    assert "[horovod.plugins]" not in capsys.readouterr().err  # off by default

    monkeypatch.setenv("HOROVOD_PLUGINS_TRACE", "1")
    reset_plugin_manager()
    get_plugin_manager().backends()
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "hvd_register_backends" in line]
    assert lines and all(line.startswith("[horovod.plugins]") for line in lines), err


def test_same_backend_from_two_plugins_is_an_error(make_dist: MakeDist) -> None:
    make_dist("hvd-test-one", {"tdup1": "tdup1_hooks"}, {"tdup1_hooks": backend_module("name='tsame', library='a'")})
    make_dist("hvd-test-two", {"tdup2": "tdup2_hooks"}, {"tdup2_hooks": backend_module("name='tsame', library='b'")})
    pm = get_plugin_manager()
    with pytest.raises(PluginError, match="tsame") as err:
        pm.backends()
    assert "tdup1" in str(err.value) and "tdup2" in str(err.value)
    with pytest.raises(PluginError, match="tdup2"):
        pm.backend("tsame")
    pm.frameworks()  # unaffected


def test_duplicate_entry_point_name_keeps_first(make_dist: MakeDist) -> None:
    make_dist("hvd-test-one", {"tep": "tep1_hooks"}, {"tep1_hooks": backend_module("name='tb1', library='a'")})
    make_dist("hvd-test-two", {"tep": "tep2_hooks"}, {"tep2_hooks": backend_module("name='tb2', library='b'")})
    pm = get_plugin_manager()
    infos = [i for i in pm.plugin_infos() if i.name == "tep"]
    assert [i.status for i in infos] == ["loaded", "duplicate"]
    assert (infos[0].distribution, infos[1].distribution) == ("hvd-test-one", "hvd-test-two")
    assert "hvd-test-one" in infos[1].reason
    assert "tb1" in pm.backends() and "tb2" not in pm.backends()


def test_register_with_wrong_type_fails_that_plugin(make_dist: MakeDist) -> None:
    make_dist(
        "hvd-test-bad",
        {"tbad": "tbad_hooks"},
        {"tbad_hooks": HEADER + "@hookimpl\ndef hvd_register_backends(register):\n    register('tbad')\n"},
    )
    make_dist(
        "hvd-test-good",
        {"tgood": "tgood_hooks"},
        {"tgood_hooks": backend_module("name='tgood', library='x'")},
    )
    pm = get_plugin_manager()
    assert "tgood" in pm.backends()
    (info,) = [i for i in pm.plugin_infos() if i.name == "tbad"]
    assert info.status == "failed" and "TypeError" in info.reason and "'tbad'" in info.reason
    with pytest.raises(PluginError, match="TypeError"):
        pm.backend("tbad")


def test_hook_that_raises_contributes_nothing(make_dist: MakeDist, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="horovod.plugins")
    source = backend_module("name='traise', library='x'") + "    raise RuntimeError('boom')\n"
    make_dist("hvd-test-raise", {"traise": "traise_hooks"}, {"traise_hooks": source})
    pm = get_plugin_manager()
    assert "traise" not in pm.backends()
    assert infos_by_name(pm)["traise"] == ["failed"]
    assert any("traise" in r.getMessage() and "boom" in r.getMessage() for r in caplog.records)


def test_unknown_hook_is_warned_about(make_dist: MakeDist, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="horovod.plugins")
    make_dist(
        "hvd-test-typo",
        {"ttypo": "ttypo_hooks"},
        {"ttypo_hooks": HEADER + "@hookimpl\ndef hvd_register_backend(register):\n    pass\n"},
    )
    assert infos_by_name(get_plugin_manager())["ttypo"] == ["loaded"]
    assert any("hvd_register_backend" in r.getMessage() for r in caplog.records)


def test_default_backend_priority_and_in_process_only(make_dist: MakeDist) -> None:
    source = backend_module(
        "name='tlow', library='a', device_kinds=('tdev',), priority=0",
        "name='thigh', library='b', device_kinds=('tdev', 'cpu'), priority=10",
        "name='tinproc', library='c', device_kinds=('tdev', 'tonly'), priority=100, in_process_only=True",
    )
    make_dist("hvd-test-prio", {"tprio": "tprio_hooks"}, {"tprio_hooks": source})
    pm = get_plugin_manager()
    assert pm.default_backend("tdev").name == "thigh"
    assert pm.default_backend("tdev", allow_in_process_only=True).name == "tinproc"
    with pytest.raises(PluginError, match="tinproc"):  # says why nothing was chosen
        pm.default_backend("tonly")
    with pytest.raises(PluginError, match="pip install"):
        pm.default_backend("tnowhere")


def test_lifecycle_hooks_get_their_arguments(make_dist: MakeDist, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="horovod.plugins")
    recorder = HEADER + textwrap.dedent("""
        CALLS = []

        @hookimpl
        def hvd_after_init(rank, size, backend):
            CALLS.append(("init", rank, size, backend))

        @hookimpl
        def hvd_before_shutdown():
            CALLS.append(("shutdown",))
        """)
    failing = HEADER + "@hookimpl\ndef hvd_after_init(rank):\n    raise ValueError('bad init')\n"
    failing += "@hookimpl\ndef hvd_before_shutdown():\n    raise AssertionError('called after failing')\n"
    make_dist("hvd-test-fail", {"tfail": "tfail_hooks"}, {"tfail_hooks": failing})
    make_dist("hvd-test-life", {"tlife": "tlife_hooks"}, {"tlife_hooks": recorder})
    pm = get_plugin_manager()
    pm.after_init(rank=1, size=4, backend="tgood")
    pm.before_shutdown()
    assert sys.modules["tlife_hooks"].CALLS == [("init", 1, 4, "tgood"), ("shutdown",)]
    assert infos_by_name(pm)["tfail"] == ["failed"]
    assert any("tfail" in r.getMessage() and "bad init" in r.getMessage() for r in caplog.records)


def test_plugin_infos_report_statuses(make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOROVOD_PLUGINS_DISABLE", "core,toff")
    make_dist(
        "hvd-test-a",
        {"tok": "tok_hooks", "toff": "toff_hooks"},
        {"tok_hooks": backend_module("name='tok', library='x'"), "toff_hooks": ""},
        version="2.5",
    )
    make_dist(
        "hvd-test-b",
        {"tok": "tok_hooks", "tkaputt": "tkaputt_hooks"},
        {"tkaputt_hooks": "import tno_such_module_anywhere\n"},
    )
    infos = [i for i in get_plugin_manager().plugin_infos() if i.name in ("tok", "toff", "tkaputt")]
    assert [(i.name, i.status) for i in infos] == [
        ("tok", "loaded"),
        ("toff", "disabled"),
        ("tok", "duplicate"),
        ("tkaputt", "failed"),
    ]
    assert (infos[0].module, infos[0].distribution, infos[0].version, infos[0].reason) == (
        "tok_hooks",
        "hvd-test-a",
        "2.5",
        "",
    )
    assert "tno_such_module_anywhere" in infos[3].reason


def test_missing_backend_names_the_package_to_install(make_dist: MakeDist) -> None:
    make_dist(
        "hvd-test-good",
        {"tgood": "tgood_hooks"},
        {"tgood_hooks": backend_module("name='tgood', library='x'")},
    )
    with pytest.raises(PluginError) as err:
        get_plugin_manager().backend("tmissing")
    message = str(err.value)
    assert "'tmissing'" in message and "tgood" in message and "pip install hvd-backend-tmissing" in message


def test_in_process_register(make_dist: MakeDist) -> None:
    class Plugin:
        @hookspecs.hookimpl
        def hvd_register_backends(self, register: Callable[[BackendSpec], None]) -> None:
            register(BackendSpec(name="tobj", library="x"))

    pm = get_plugin_manager()
    pm.register(Plugin(), name="tobj-plugin")
    assert "tobj" in pm.backends()
    with pytest.raises(ValueError, match="tobj-plugin"):
        pm.register(Plugin(), name="tobj-plugin")


def test_builtin_core_plugin_registers_inmemory_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    pm = get_plugin_manager()  # "core" itself is disabled, so this name can't clash
    pm.register(builtin_hooks, name="core-under-test")
    spec = pm.backend("inmemory")
    assert (spec.device_kinds, spec.priority, spec.in_process_only) == (("cpu",), -100, True)
    assert spec.version
    assert pm.default_backend("cpu", allow_in_process_only=True).name != "" and callable(spec.library)
    # The path is looked up without importing the extension, whether or not it is built here.
    try:
        assert Path(spec.library_path()).is_file()
    except RuntimeError as exc:
        assert "horovod.common._native._core" in str(exc)
    # In a fresh interpreter (this one may have loaded the engine for other tests).
    probe = (
        "import sys; from horovod.common import builtin_hooks\n"
        "try:\n    builtin_hooks._native_library()\nexcept RuntimeError:\n    pass\n"
        "assert 'horovod.common._native._core' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)
    monkeypatch.setattr(builtin_hooks, "_NATIVE_MODULE", "horovod.common._native._tno_such_ext")
    with pytest.raises(RuntimeError, match=r"_tno_such_ext.*hvd-core"):
        spec.library_path()


def test_hookspecs_follow_the_contract() -> None:
    specs = [f for n, f in vars(hookspecs).items() if hasattr(f, "horovod_spec")]
    assert {f.__name__ for f in specs} == {
        "hvd_register_backends",
        "hvd_register_frameworks",
        "hvd_rendezvous_store",
        "hvd_external_launch",
        "hvd_init_world",
        "hvd_process_set_ranks",
        "hvd_after_init",
        "hvd_before_shutdown",
    }
    for f in specs:
        assert f.__name__.startswith("hvd_") and ".. versionadded::" in (f.__doc__ or "")
        sig = inspect.signature(f)
        assert sig.return_annotation is not inspect.Signature.empty
        assert all(p.annotation is not inspect.Parameter.empty for p in sig.parameters.values())


def test_rendezvous_store_comes_from_the_first_plugin_that_offers_one() -> None:
    class Store:
        def set(self, key: str, value: bytes) -> None: ...

        def get(self, key: str, timeout: float) -> bytes | None:
            return None

    offered = Store()

    class Launcher:
        @hookspecs.hookimpl
        def hvd_rendezvous_store(self, env):
            return offered if env.get("HOROVOD_RENDEZVOUS_ADDR") else None

    pm = get_plugin_manager()
    pm.register(Launcher(), name="launcher-under-test")
    assert pm.rendezvous_store({"HOROVOD_RENDEZVOUS_ADDR": "127.0.0.1"}) is offered
    assert pm.rendezvous_store({}) is None
