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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from horovod.runner import settings as settings_mod
from horovod.runner.errors import UsageError


def _log(message: str) -> None:
    print(f"horovod.run: {message}", file=sys.stderr, flush=True)


def _one_of(new_name: str, new: Any, old_name: str, old: Any) -> Any:
    """The value of a parameter Horovod renamed, given under either name (both: a UsageError)."""
    if old is None:
        return new
    if new is not None:
        raise UsageError(
            f"horovod.run: {new_name}={new!r} and {old_name}={old!r} are the same parameter; give only {new_name}"
        )
    return old


def _nics(name: str, value: str | Sequence[str]) -> list[str]:
    names = value.split(",") if isinstance(value, str) else list(value)
    if not all(isinstance(n, str) for n in names):
        raise UsageError(f"horovod.run: {name} must be interface names, comma-separated or a list; got {value!r}")
    return [n.strip() for n in names if n.strip()]


def run(
    func: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    num_proc: int | None = 1,
    min_num_proc: int | None = None,
    max_num_proc: int | None = None,
    slots: int | None = None,
    reset_limit: int | None = None,
    cooldown_range: tuple[int, int] | None = None,
    hosts: str | None = None,
    hostfile: str | None = None,
    host_discovery_script: str | None = None,
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
    network_interfaces: str | Sequence[str] | None = None,
    executable: str | None = None,
    np: int | None = None,
    min_np: int | None = None,
    max_np: int | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> list[Any]:
    """Runs ``func(*args, **kwargs)`` on ``num_proc`` ranks (default 1); returns the return values,
    ordered by rank.

    The parameters are Horovod 0.28's, in its order (positional callers pass the same values);
    ``env`` is a keyword-only addition. ``min_num_proc``, ``max_num_proc`` or
    ``host_discovery_script`` make the run elastic (as ``horovodrun``'s flags do; ``func`` then uses
    ``hvd.elastic.run``): the results are those of the workers of the last world, by their rank in it.

    :param func: the function every rank runs (it calls ``hvd.init()``); sent to the ranks with
        cloudpickle, as are its arguments and return value.
    :param args: positional arguments of ``func``.
    :param kwargs: keyword arguments of ``func``.
    :param num_proc: the number of ranks (default 1), or, in an elastic run, the number to start
        with.
    :param min_num_proc: the fewest ranks an elastic run goes on with (``--min-np``); makes the run
        elastic.
    :param max_num_proc: the most ranks an elastic run grows to (``--max-np``); makes the run elastic.
    :param slots: ranks per host for the hosts of the discovery script (``--slots-per-host``); elastic
        runs only.
    :param reset_limit: how many times an elastic run may scale up or down before it fails
        (``--reset-limit``; default: no limit).
    :param cooldown_range: ``(min, max)``: a host whose workers keep failing stays out ``min``
        seconds, doubling up to ``max`` (``--blacklist-cooldown-range``; default: for good); elastic
        runs only.
    :param hosts: the hosts and their slots, ``"host1:2,host2:4"`` (``-H``); default: this machine,
        with ``num_proc`` slots. Not together with ``hostfile``.
    :param hostfile: a file of hosts, one ``host slots=N`` a line (``--hostfile``).
    :param host_discovery_script: an executable that prints the hosts currently available, one
        ``host:slots`` a line; makes the run elastic, the hosts followed as they change.
    :param start_timeout: seconds for every rank to start and connect (default:
        ``HOROVOD_START_TIMEOUT``, else 30).
    :param ssh_port: the SSH port of the remote hosts (default: SSH's own).
    :param ssh_identity_file: the SSH private key to reach the remote hosts with.
    :param disable_cache: check every remote host over SSH again instead of using the answers of the
        last hour (``--disable-cache``).
    :param output_filename: a directory each rank's output is also written to
        (``<dir>/rank.<N>/stdout`` and ``stderr``).
    :param verbose: print what the launcher does (secrets masked).
    :param use_gloo: run the ranks with Gloo (``--gloo``); not together with ``use_mpi``.
    :param use_mpi: run the ranks through mpirun; refused by ``horovod.run`` (``ValueError``): launch
        the script with ``horovodrun --mpi`` instead.
    :param mpi_args: extra arguments of mpirun; refused with the rest of MPI runs.
    :param network_interface: the network interfaces the ranks use between them, comma-separated
        (``--network-interface``); default: the interfaces every host has on one shared network.
    :param network_interfaces: the same, by horovodrun's other name: a comma-separated string or a
        list; not together with ``network_interface``.
    :param executable: the Python interpreter the ranks run ``func`` with (default: this one,
        ``sys.executable``).
    :param np: Horovod's older name of ``num_proc``, accepted without a warning (giving both is a
        ``ValueError``).
    :param min_np: Horovod's older name of ``min_num_proc``.
    :param max_np: Horovod's older name of ``max_num_proc``.
    :param env: variables added to the ranks' environment, on top of this process's (strings to
        strings); keyword only.
    :raises RuntimeError: naming the first rank that failed, with its traceback (an elastic run: the
        driver's reason).
    :raises ValueError: for bad arguments (a ``UsageError``), and for MPI runs (``use_mpi``,
        ``mpi_args``), not supported here yet.
    """
    if not callable(func):
        raise TypeError(f"horovod.run: func must be callable, got {type(func).__name__}")
    # num_proc has a default (1, as Horovod's): np, when given, is the number asked for, and a
    # num_proc other than the default beside it is the same parameter given twice.
    num_proc = _one_of("num_proc", None if num_proc == 1 and np is not None else num_proc, "np", np)
    min_num_proc = _one_of("min_num_proc", min_num_proc, "min_np", min_np)
    max_num_proc = _one_of("max_num_proc", max_num_proc, "max_np", max_np)
    if network_interface is not None and network_interfaces is not None:
        raise UsageError("horovod.run: network_interface and network_interfaces are the same parameter; give only one")
    given_as = "num_proc" if np is None else "np"
    if num_proc is None:
        num_proc = 1
    if isinstance(num_proc, bool) or not isinstance(num_proc, int) or num_proc < 1:
        raise UsageError(f"horovod.run: {given_as}={num_proc!r} must be a positive integer")
    if hosts is not None and hostfile is not None:
        raise UsageError("horovod.run: give hosts or hostfile, not both")
    if use_gloo and use_mpi:
        raise UsageError("horovod.run: use_gloo and use_mpi cannot both be set")
    if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise UsageError("horovod.run: env must map strings to strings")

    ns = settings_mod.empty_namespace()
    ns.num_proc = num_proc
    ns.min_num_proc, ns.max_num_proc, ns.slots, ns.reset_limit = min_num_proc, max_num_proc, slots, reset_limit
    ns.cooldown_range, ns.host_discovery_script = cooldown_range, host_discovery_script
    ns.hosts, ns.hostfile, ns.start_timeout = hosts, hostfile, start_timeout
    ns.ssh_port, ns.ssh_identity_file = ssh_port, ssh_identity_file
    ns.disable_cache = disable_cache or None
    ns.output_filename, ns.verbose = output_filename, verbose
    ns.use_gloo, ns.use_mpi, ns.mpi_args = use_gloo or None, use_mpi or None, mpi_args
    if network_interface is not None:
        ns.nics = _nics("network_interface", network_interface) or None
    elif network_interfaces is not None:
        ns.nics = _nics("network_interfaces", network_interfaces) or None
    elastic = settings_mod.is_elastic(ns)
    if elastic:
        from horovod.runner.elastic import settings as elastic_settings

        if np is None and num_proc == 1:
            ns.num_proc = None  # the default, not asked for: an elastic job starts with --min-np
        job_settings: Any = elastic_settings.from_namespace(ns)
    else:
        job_settings = settings_mod.from_namespace(ns)

    import cloudpickle

    from horovod.runner import task_fn

    with tempfile.TemporaryDirectory(prefix="hvd-run-") as directory:
        os.chmod(directory, 0o700)
        with open(os.path.join(directory, "func.pkl"), "wb") as f:
            cloudpickle.dump((func, tuple(args), dict(kwargs or {})), f)
        with open(os.path.join(directory, "sys_path.json"), "w", encoding="utf-8") as f:
            json.dump([p for p in sys.path if isinstance(p, str)], f)
        command = [executable or sys.executable, "-m", "horovod.runner.task_fn", directory]
        if elastic:
            return _run_elastic(job_settings, command, env, directory)
        from horovod.runner.job import run_job

        outcome = run_job(job_settings, command, extra_env=env, log=_log)
        if outcome.failed is not None:
            rank = outcome.failed.rank
            raise RuntimeError(
                f"horovod.run: rank {rank} {outcome.failed.describe()}"
                + _traceback_of(task_fn.error_path(directory, rank))
            )
        return _results(directory, range(job_settings.size))


def _run_elastic(settings: Any, command: list[str], env: Mapping[str, str] | None, directory: str) -> list[Any]:
    """An elastic horovod.run: the results of the workers of the last world, by their rank there."""
    from horovod.runner.elastic.job import run_elastic_job

    code = run_elastic_job(settings, command, log=_log, extra_env=env)
    if code != 0:
        errors = sorted(f for f in os.listdir(directory) if f.startswith("error."))
        detail = "".join(_traceback_of(os.path.join(directory, f)) for f in errors[:1])
        raise RuntimeError(
            f"horovod.run: the elastic job failed with status {code} (its reason is logged above)" + detail
        )
    ranks = sorted(
        int(f[len("result.") : -len(".pkl")])
        for f in os.listdir(directory)
        if f.startswith("result.") and f[len("result.") : -len(".pkl")].isdigit()
    )
    if ranks != list(range(len(ranks))):
        raise RuntimeError(f"horovod.run: the elastic job ended with results of ranks {ranks}, not of a whole world")
    return _results(directory, ranks)


def _results(directory: str, ranks: Any) -> list[Any]:
    import cloudpickle

    from horovod.runner import task_fn

    results = []
    for rank in ranks:
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
