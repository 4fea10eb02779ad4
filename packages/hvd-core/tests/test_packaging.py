"""The horovod namespace as installed: lazy horovod.run, extended __path__, light imports."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

import horovod


def test_horovod_run_names_the_package_to_install() -> None:
    if importlib.util.find_spec("horovod.runner") is None:
        with pytest.raises(ImportError, match="pip install hvd-runner"):
            _ = horovod.run  # the lookup itself raises
    else:
        assert callable(horovod.run)


def test_namespace_path_is_extended() -> None:
    assert isinstance(horovod.__path__, list) and len(horovod.__path__) >= 1
    assert horovod.__version__


def test_importing_horovod_common_loads_neither_engine_nor_numpy() -> None:
    probe = (
        "import sys, horovod.common, horovod.common.hookspecs\n"
        "assert 'horovod.common._native._core' not in sys.modules\n"
        "assert 'numpy' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


def test_lone_process_runs_without_a_backend_package() -> None:
    probe = (
        "import numpy as np, horovod.common as hvd\n"
        "hvd.init(); assert hvd.size() == 1\n"
        "assert hvd.allreduce(np.arange(3.0), op=hvd.Sum).tolist() == [0.0, 1.0, 2.0]\n"
        "hvd.shutdown()\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
