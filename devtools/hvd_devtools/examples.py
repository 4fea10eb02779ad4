"""Running a repository example as a user would: ``horovodrun -np N python <script>`` on this host.

For the framework packages' tests of ``examples/`` (hvd-runner installs the launcher's script beside
the test environment's interpreter).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Mapping


def horovodrun(
    script: pathlib.Path, *args: str, np: int = 2, env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Runs ``script`` on ``np`` local ranks; its output is rank-prefixed. One thread per rank (ranks
    share this machine's cores) and quiet TensorFlow start-up logs, plus ``env``."""
    # A HOROVOD_* variable of an enclosing job must not leak into the launched one.
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    environment.update(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0", **(env or {}))
    launcher = pathlib.Path(sys.executable).parent / "horovodrun"
    command = [str(launcher), "-np", str(np), "-H", f"localhost:{np}", sys.executable, str(script), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment, cwd=script.parent)
