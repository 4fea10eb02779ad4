"""The package without ranks: it imports without MXNet's heavy parts, and registers its plugin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_plugin_registers_mxnet_without_importing_it() -> None:
    code = (
        "import sys\n"
        "from horovod.common.plugin_api import get_plugin_manager\n"
        "spec = get_plugin_manager().frameworks()['mxnet']\n"
        "assert spec.module == 'horovod.mxnet', spec\n"
        "assert 'mxnet' not in sys.modules, 'the plugin imported MXNet'\n"
        "import horovod.mxnet as hvd\n"
        "assert 'mxnet' not in sys.modules, 'importing horovod.mxnet imported MXNet'\n"
        "assert callable(hvd.allreduce) and 'mxnet' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", code], check=True, timeout=120)


def test_horovodrun_check_build_lists_mxnet() -> None:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "horovodrun"), "--check-build"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if "MXNet" in line)
    assert "[X]" in line, out.stdout
