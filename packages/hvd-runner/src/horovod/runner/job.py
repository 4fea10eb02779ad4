"""One job, start to end: the rendezvous server, each rank's environment, the ranks themselves.

Shared by ``horovodrun`` (:mod:`horovod.runner.launch`) and ``horovod.run`` (:mod:`horovod.runner.api`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from horovod.common.plugin_api import failure_report_key
from horovod.runner import exit_report, job_report, loss_report, network, threads, worker_env
from horovod.runner import settings as settings_mod
from horovod.runner.hosts import Placement
from horovod.runner.local import DEFAULT_GRACE_S, LocalJob, Outcome, RankSpec, Report, start_here
from horovod.runner.output import OutputRouter
from horovod.runner.rank_process import RankProcess, RemoteRankProcess
from horovod.runner.rendezvous import auth
from horovod.runner.rendezvous.server import DEFAULT_MAX_VALUE_BYTES, RendezvousServer, StoreFull
from horovod.runner.settings import JobSettings
from horovod.runner.timeline_files import merge_ranks_timelines


def max_value_bytes(environ: Mapping[str, str]) -> int:
    raw = environ.get(worker_env.RENDEZVOUS_MAX_VALUE_BYTES, "").strip()
    if not raw:
        return DEFAULT_MAX_VALUE_BYTES
    if not raw.isdigit() or int(raw) < 1:
        from horovod.runner.errors import UsageError

        raise UsageError(f"{worker_env.RENDEZVOUS_MAX_VALUE_BYTES}={raw!r} is not a positive number of bytes")
    return int(raw)


def common_environment(
    settings: JobSettings,
    base: Mapping[str, str],
    *,
    job_key: str,
    addr: str,
    port: int,
    secret: bytes,
    max_value: int,
    nics: Sequence[str] = (),
) -> dict[str, str]:
    """What every process of the job gets: ``base``, the job's settings, then the contract's variables."""
    common = dict(base)
    if nics:  # a job across hosts: the interfaces chosen for it (--network-interface is in settings.env)
        common[worker_env.GLOO_IFACE] = nics[0]
        common[worker_env.NCCL_SOCKET_IFNAME] = ",".join(nics)
    common.update(settings.env)
    common.setdefault("PYTHONUNBUFFERED", "1")  # output reaches the launcher as it is printed
    common[worker_env.JOB_KEY] = job_key
    common[worker_env.RENDEZVOUS_ADDR] = addr
    common[worker_env.RENDEZVOUS_PORT] = str(port)
    common[worker_env.RENDEZVOUS_SECRET] = auth.encode_secret(secret)
    common[worker_env.RENDEZVOUS_MAX_VALUE_BYTES] = str(max_value)
    return common


def placement_environment(common: Mapping[str, str], p: Placement) -> dict[str, str]:
    """``common`` with the variables of one rank's place in the job (``HOROVOD_RANK``...)."""
    env = dict(common)
    env[worker_env.RANK] = str(p.rank)
    env[worker_env.SIZE] = str(p.size)
    env[worker_env.LOCAL_RANK] = str(p.local_rank)
    env[worker_env.LOCAL_SIZE] = str(p.local_size)
    env[worker_env.CROSS_RANK] = str(p.cross_rank)
    env[worker_env.CROSS_SIZE] = str(p.cross_size)
    env[worker_env.HOSTNAME] = p.hostname
    return env


def run_job(
    settings: JobSettings,
    argv: Sequence[str],
    *,
    extra_env: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    log: Callable[[str], None],
) -> Outcome:
    """Runs ``argv`` as every rank of the job ``settings`` describes; returns how it ended."""
    base = dict(os.environ)
    base.update(extra_env or {})
    max_value = max_value_bytes(base)
    secret = auth.new_secret()
    job_key = "hvd-" + secrets.token_hex(8)
    for note in settings.notes:
        log(f"note: {note}")
    reports: dict[int, Report] = {}
    prefix = exit_report.key_prefix(job_key)
    job_network = network.prepare(settings)  # checks the remote hosts over ssh first

    with RendezvousServer(secret, host=job_network.rendezvous_host, max_value_bytes=max_value) as server:

        def publish_loss(line: str) -> None:
            with contextlib.suppress(StoreFull):  # the job filled the store: survivors only miss this detail
                server.set(failure_report_key(job_key), line.encode())

        losses = loss_report.LossReporter(
            publish_loss, hosts={p.rank: p.hostname for p in settings.placements}, reports=reports
        )

        def on_set(key: str, value: bytes) -> None:
            rank = key[len(prefix) :]
            if key.startswith(prefix) and rank.isdigit():
                reason, primary = exit_report.decode(value)
                reports.setdefault(int(rank), Report(time.monotonic(), reason, primary))
                if primary and reason != exit_report.EXITING:
                    losses.rank_reported(int(rank), reason)

        server.watch(on_set)
        common = common_environment(
            settings,
            base,
            job_key=job_key,
            addr=server.host,
            port=server.port,
            secret=secret,
            max_value=max_value,
            nics=job_network.nics,
        )
        envs = [placement_environment(common, p) for p in settings.placements]
        # The ranks of this machine get their share of its cores here; a remote host's, there
        # (remote_rank.py), from its own.
        remote = frozenset(settings.remote_hosts)
        cores = threads.host_cores()
        local_sizes = {p.hostname: p.local_size for p in settings.placements if p.hostname not in remote}
        shares = threads.host_shares(local_sizes, cores, bool(remote))
        if line := threads.describe(envs[0], f"the host's cores over its ranks ({shares})"):
            log(line)
        envs = [
            env if p.hostname in remote else threads.apply(env, cores)
            for p, env in zip(settings.placements, envs, strict=True)
        ]
        if settings.verbose:
            if job_network.description:
                log(f"network: {job_network.description}")
            log(f"rendezvous server listening on {server.host}:{server.port} (HMAC-authenticated)")
            for line in settings_mod.describe(settings):
                log(line)
            given = {k: v for k, v in envs[0].items() if base.get(k) != v}  # what the launcher sets
            log("environment given to the ranks (rank 0's shown for per-rank values):")
            for key, value in sorted(worker_env.masked(given).items()):
                log(f"  {key}={value}" + ("  (per rank)" if key in _PER_RANK else ""))
            log(f"backend: {_backend_choice(envs[0])}")
            log("command: " + shlex.join(argv))
        ranks = [RankSpec(p, list(argv), env) for p, env in zip(settings.placements, envs, strict=True)]
        output = OutputRouter(
            stdout or sys.stdout,
            stderr or sys.stderr,
            size=settings.size,
            prefix_timestamp=settings.prefix_timestamp,
            output_dir=settings.output_filename,
        )
        job = LocalJob(
            ranks,
            output,
            log=log,
            start_timeout_s=settings.start_timeout_s,
            reports=reports,
            observer=losses,
            starter=_starter(settings),
        )
        outcome = job.run()
        merge_ranks_timelines(envs[0], settings, log)
        failure, ended = _how_it_ended(outcome, reports)
        job_report.finish(
            server.get,
            job_key,
            settings.size,
            failure=failure,
            ended=ended,
            report_file=settings.report_file,
            quiet=not settings.job_report,
            log=log,
        )
        return outcome


def _how_it_ended(outcome: Outcome, reports: Mapping[int, Report]) -> tuple[str | None, dict[int, str]]:
    """(the failure that ended the job, None if none; how each rank that failed ended) for the report."""
    ended = {}
    for rank, exit_ in outcome.exits.items():
        if exit_.returncode != 0:
            said = reports.get(rank)
            ended[rank] = exit_.describe() + (
                f" ({said.reason})" if said and said.reason != exit_report.EXITING else ""
            )
    failure = None
    if outcome.failed is not None:
        failure = f"rank {outcome.failed.rank} {ended.get(outcome.failed.rank, outcome.failed.describe())}"
    return failure, ended


def _starter(settings: JobSettings) -> Callable[[RankSpec], RankProcess]:
    """Starts a rank here, or over ssh on its remote host."""
    if not settings.remote_hosts:
        return start_here
    remote = frozenset(settings.remote_hosts)
    # The remote side stops a rank within this grace, a second before the launcher would give up on
    # its ssh and kill it, so that a job stopped by the launcher has ended on every host when it returns.
    remote_grace_s = max(0.5, DEFAULT_GRACE_S - 1.0)

    def start(spec: RankSpec) -> RankProcess:
        host = spec.placement.hostname
        if host not in remote:
            return start_here(spec)
        return RemoteRankProcess(host, settings.ssh, sys.executable, spec.argv, spec.env, remote_grace_s)

    return start


_PER_RANK = frozenset(
    {
        worker_env.RANK,
        worker_env.LOCAL_RANK,
        worker_env.LOCAL_SIZE,
        worker_env.CROSS_RANK,
        worker_env.CROSS_SIZE,
        worker_env.HOSTNAME,
    }
)


def _backend_choice(env: Mapping[str, str]) -> str:
    """Which backend the ranks' hvd.init() will pick, for --verbose."""
    for key in (worker_env.CPU_OPERATIONS, worker_env.CONTROLLER):
        if env.get(key, "").strip():
            return f"{env[key].strip().lower()} (from {key})"
    from horovod.common.plugin_api import PluginError, get_plugin_manager

    try:
        return f"{get_plugin_manager().default_backend('cpu').name} (the installed default)"
    except PluginError as error:
        return f"none: {error}"
