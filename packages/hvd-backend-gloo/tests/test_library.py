"""Packaging and loading: the entry point, and a library that keeps its (and Gloo's) symbols local.

Debian's libgloo and the Gloo bundled in torch share hundreds of symbol names; the library must
export nothing but its entry point, and hvd-core must load it without making it global.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from horovod.backends.gloo import __version__, library_path
from horovod.common.plugin_api import get_plugin_manager


def test_entry_point_registers_the_default_cpu_backend() -> None:
    plugins = get_plugin_manager()
    spec = plugins.backend("gloo")
    assert spec.device_kinds == ("cpu",) and spec.priority == 100 and not spec.in_process_only
    assert spec.version == __version__
    path = spec.library_path()
    assert os.path.isabs(path) and os.path.isfile(path) and path == library_path()
    assert plugins.default_backend("cpu").name == "gloo"


def test_the_engine_finds_the_extensions() -> None:
    # hvd_backend_ext_v1: the engine reduces fused tensors and averages through the multi-buffer
    # allreduce, in place of its fusion buffer and scaling pass, and sends cached broadcasts' and
    # alltoalls' data ahead of negotiation through the eager messages.
    from horovod.common.testing.probes import load_backend

    assert load_backend(library_path()).extensions == ["allreduce_buffers", "eager", "eager_receive_into"]


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps")
def test_hooks_module_loads_no_native_code() -> None:
    code = textwrap.dedent(
        """
        import horovod.backends.gloo.hooks
        from horovod.common.plugin_api import get_plugin_manager
        get_plugin_manager().backends()  # discovery calls the hook
        maps = open("/proc/self/maps").read()
        print("libgloo" in maps, "libhvd_backend_gloo" in maps)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["False", "False"], out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_library_exports_only_its_entry_points() -> None:
    out = subprocess.run(["nm", "-D", "--defined-only", library_path()], capture_output=True, text=True, check=True)
    symbols = [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]
    assert sorted(symbols) == ["hvd_backend_ext_v1_get", "hvd_backend_v1_get", "hvd_gloo_transport"], symbols


def test_loading_keeps_symbols_local() -> None:
    # In a fresh interpreter, so that nothing this test session loaded can interfere.
    code = textwrap.dedent(
        """
        import ctypes
        from horovod.common.framework_api import DEVICE_CPU
        from horovod.common.plugin_api import get_plugin_manager
        from horovod.common.testing.probes import load_backend

        backend = load_backend(get_plugin_manager().backend("gloo").library_path())
        assert backend.name == "gloo" and backend.device_kinds == DEVICE_CPU, backend.name
        everything = ctypes.CDLL(None)
        for symbol in ("hvd_backend_v1_get", "_ZN4gloo9allreduceERKNS_16AllreduceOptionsE"):
            assert not hasattr(everything, symbol), symbol + " is visible in the global namespace"
        print("ok", backend.version)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["ok", __version__], out.stdout + out.stderr


def test_deep_binding_only_when_another_gloo_is_global() -> None:
    code = textwrap.dedent(
        """
        import ctypes, os
        from horovod.backends.gloo import library_path, protect_from_global_gloo

        path = library_path()

        def loaded():
            try:
                ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)
                return True
            except OSError:
                return False

        protect_from_global_gloo(path)
        print(loaded())
        try:
            ctypes.CDLL("libgloo.so.0", mode=os.RTLD_GLOBAL)  # stands in for torch's Gloo made global
        except OSError:
            print("no-libgloo")
            raise SystemExit(0)
        protect_from_global_gloo(path)
        print(loaded())
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    if out.stdout.split()[-1] == "no-libgloo":
        pytest.skip("Gloo is not in the loader's search path under the name libgloo.so.0")
    assert out.stdout.split() == ["False", "True"], out.stdout


def test_runs_beside_torch_made_global() -> None:
    """TORCH_USE_RTLD_GLOBAL=1 makes torch's Gloo global; both Gloos must still work side by side."""
    pytest.importorskip("torch")
    code = textwrap.dedent(
        """
        import threading
        from datetime import timedelta
        import numpy as np
        import torch, torch.distributed as dist
        import horovod.common as hvd
        from horovod.common.testing import run_cluster

        def torch_allreduce():
            store, out = dist.HashStore(), [None, None]
            def member(rank):
                pg = dist.ProcessGroupGloo(dist.PrefixStore("t", store), rank, 2, timedelta(seconds=60))
                t = torch.full((8,), rank + 1.0)
                pg.allreduce([t]).wait()
                out[rank] = t.tolist()
            threads = [threading.Thread(target=member, args=(r,)) for r in range(2)]
            for t in threads: t.start()
            for t in threads: t.join()
            return out

        def case():
            hvd.init()
            return hvd.allreduce(np.full(8, hvd.rank() + 1.0, np.float32), op=hvd.Sum, name="x").tolist()

        assert torch_allreduce() == [[3.0] * 8] * 2
        assert run_cluster(case, 2, backend="gloo") == [[3.0] * 8] * 2
        assert torch_allreduce() == [[3.0] * 8] * 2
        print("ok")
        """
    )
    env = {**os.environ, "TORCH_USE_RTLD_GLOBAL": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0 and out.stdout.split() == ["ok"], f"exit {out.returncode}\n{out.stdout}\n{out.stderr}"
