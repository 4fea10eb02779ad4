"""The environment of mpirun under ``horovodrun --mpi``, and which variables it exports to the ranks.

Like Horovod, every variable of the launcher's environment is exported by name (a rank on another
host gets only what is exported; scripts rely on their own variables reaching every rank), except:

- horovodrun's per-job variables (rank, rendezvous...): under MPI the ranks learn rank and size
  from MPI, and a stale ``HOROVOD_RANK`` or rendezvous address inherited from an enclosing job
  would point them at the wrong job;
- variables the MPI launchers set for each process themselves (``OMPI_*``, ``PMIX_*``, ``PMI_*``,
  Hydra's...): Open MPI forwards its ``OMPI_MCA_*`` settings on its own;
- the shell's per-process and per-host ones (``PWD``, ``HOSTNAME``, exported functions...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from horovod.runner import worker_env

#: horovodrun's own per-job contract (worker_env), meaningless under MPI.
RUNNER_ONLY = frozenset(
    {
        worker_env.RANK,
        worker_env.SIZE,
        worker_env.LOCAL_RANK,
        worker_env.LOCAL_SIZE,
        worker_env.CROSS_RANK,
        worker_env.CROSS_SIZE,
        worker_env.HOSTNAME,
        worker_env.JOB_KEY,
        worker_env.RENDEZVOUS_ADDR,
        worker_env.RENDEZVOUS_PORT,
        worker_env.RENDEZVOUS_SECRET,
        worker_env.RENDEZVOUS_MAX_VALUE_BYTES,
    }
)

_NOT_EXPORTED = re.compile(
    r"^(?:BASH_FUNC_.*|PWD|OLDPWD|SHLVL|_|HOSTNAME"
    r"|OMPI_.*|OPAL_.*|PMIX_.*|PRTE_.*|ORTE_.*|PMI_.*|HYDRA_.*|HYDI_.*|MPIR_.*|MPI_LOCAL.*)$"
)
#: Names mpirun can take on its command line (a shell function export "BASH_FUNC_f%%" cannot).
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def environment(base: Mapping[str, str], job_env: Mapping[str, str]) -> dict[str, str]:
    """mpirun's environment: ``base`` less horovodrun's per-job variables, plus ``job_env``."""
    env = {k: v for k, v in base.items() if k not in RUNNER_ONLY}
    env.update(job_env)
    return env


def exported_names(env: Mapping[str, str]) -> list[str]:
    """The names mpirun exports to every rank, sorted."""
    return sorted(k for k in env if _NAME.match(k) and not _NOT_EXPORTED.match(k))
