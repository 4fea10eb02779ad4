"""Recognising a process started by an MPI launcher (mpirun, mpiexec, srun) rather than horovodrun.

The decision uses environment variables, because it must be cheap and must not initialise MPI in a
plain ``python train.py`` (an MPI singleton start can be slow, and Open MPI's may try to start a
runtime daemon). Only the decision: rank, size and the hosts' ranks then come from MPI itself
(:func:`horovod.backends.mpi.runtime.job_topology`), which is right whatever the launcher and
whichever variables it sets.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Variables an MPI launcher sets in every process it starts, and nothing else does.
MPI_LAUNCHER_VARIABLES = (
    "OMPI_COMM_WORLD_SIZE",  # Open MPI's mpirun / mpiexec, every version
    "PMIX_RANK",  # PMIx launchers: Open MPI 5's prterun, Slurm's srun --mpi=pmix
    "PMI_SIZE",  # PMI-1/2 launchers: MPICH's Hydra mpiexec (Intel MPI, MVAPICH), srun --mpi=pmi2
    "MPI_LOCALNRANKS",  # Hydra
)


def started_by_mpi_launcher(env: Mapping[str, str]) -> bool:
    """Whether ``env`` is that of a process an MPI launcher started."""
    return any(env.get(name, "").strip() for name in MPI_LAUNCHER_VARIABLES)
