"""``horovod.run``: run a Python function on every rank of a job and return the results.

The function and its arguments are cloudpickled into a private job directory (mode 0700); each
rank runs ``python -m horovod.runner.task_fn <dir>`` through the same launcher code as
``horovodrun`` and writes its pickled return value back there. Results are read from that local
directory only, never from the network.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from horovod.runner import settings as settings_mod
from horovod.runner.errors import UsageError


def _log(message: str) -> None:
    print(f"horovod.run: {message}", file=sys.stderr, flush=True)


def run(
    func: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    np: int = 1,
    min_np: int | None = None,
    max_np: int | None = None,
    slots: int | None = None,
    reset_limit: int | None = None,
    hosts: str | None = None,
    hostfile: str | None = None,
    start_timeout: int | None = None,
    ssh_port: int | None = None,
    ssh_identity_file: str | None = None,
    disable_cache: bool | None = None,
    output_filename: str | None = None,
    verbose: bool | None = None,
    use_gloo: bool | None = None,
    use_mpi: bool | None = None,
    mpi_args: str | None = None,
    network_interface: str | None = None,
    executable: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Any]:
    """Runs ``func(*args, **kwargs)`` on ``np`` ranks; returns the return values, ordered by rank.

    Arguments are those of Horovod's ``horovod.run``. ``env`` adds variables to the ranks'
    environment (on top of this process's). ``executable`` is the Python interpreter of the ranks
    (default: this one). Raises ``RuntimeError`` naming the first rank that failed, with its
    traceback; ``ValueError`` for bad arguments, and for elastic (``min_np``, ``max_np``, ``slots``,
    ``reset_limit``) and MPI (``use_mpi``, ``mpi_args``) runs, not supported yet.
    """
    if not callable(func):
        raise TypeError(f"horovod.run: func must be callable, got {type(func).__name__}")
    if isinstance(np, bool) or not isinstance(np, int) or np < 1:
        raise UsageError(f"horovod.run: np={np!r} must be a positive integer")
    if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise UsageError("horovod.run: env must map strings to strings")

    ns = settings_mod.empty_namespace()
    ns.np = np
    ns.min_np, ns.max_np, ns.slots, ns.reset_limit = min_np, max_np, slots, reset_limit
    ns.hosts, ns.hostfile, ns.start_timeout = hosts, hostfile, start_timeout
    ns.ssh_port, ns.ssh_identity_file = ssh_port, ssh_identity_file
    ns.disable_cache = disable_cache or None
    ns.output_filename, ns.verbose = output_filename, verbose
    ns.use_gloo, ns.use_mpi, ns.mpi_args = use_gloo or None, use_mpi or None, mpi_args
    if network_interface:
        ns.nics = [n.strip() for n in network_interface.split(",") if n.strip()]
    job_settings = settings_mod.from_namespace(ns)

    import cloudpickle

    from horovod.runner import task_fn
    from horovod.runner.job import run_job

    with tempfile.TemporaryDirectory(prefix="hvd-run-") as directory:
        os.chmod(directory, 0o700)
        with open(os.path.join(directory, "func.pkl"), "wb") as f:
            cloudpickle.dump((func, tuple(args), dict(kwargs or {})), f)
        with open(os.path.join(directory, "sys_path.json"), "w", encoding="utf-8") as f:
            json.dump([p for p in sys.path if isinstance(p, str)], f)
        command = [executable or sys.executable, "-m", "horovod.runner.task_fn", directory]
        outcome = run_job(job_settings, command, extra_env=env, log=_log)

        if outcome.failed is not None:
            rank = outcome.failed.rank
            raise RuntimeError(
                f"horovod.run: rank {rank} {outcome.failed.describe()}"
                + _traceback_of(task_fn.error_path(directory, rank))
            )
        results = []
        for rank in range(job_settings.size):
            path = task_fn.result_path(directory, rank)
            if not os.path.exists(path):
                raise RuntimeError(
                    f"horovod.run: rank {rank} exited with code 0 without returning a result"
                    + _traceback_of(task_fn.error_path(directory, rank))
                )
            with open(path, "rb") as f:
                results.append(cloudpickle.load(f))
        return results


def _traceback_of(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return ":\n" + f.read()
    except OSError:
        return ""
