"""The backend's own C test (N threads over an in-process store), built against the installed header."""

import pathlib
import subprocess

import horovod.common


def test_c_suite_passes():
    script = pathlib.Path(__file__).with_name("run_c_tests.sh")
    result = subprocess.run(
        ["bash", str(script), horovod.common.get_include()], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " 0 failed" in result.stdout, result.stdout[-2000:]
