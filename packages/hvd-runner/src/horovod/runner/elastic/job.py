"""One elastic job, start to end: the rendezvous server, the workers' environment, the driver."""

from __future__ import annotations

import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from horovod.common.plugin_api import elastic_protocol as protocol
from horovod.runner import exit_report, job_report, network, threads, worker_env
from horovod.runner.elastic.driver import ElasticDriver, WorkerAsked, WorkerExited, WorkerReported
from horovod.runner.elastic.host_manager import HostManager
from horovod.runner.elastic.settings import ElasticSettings
from horovod.runner.errors import UsageError
from horovod.runner.job import common_environment, max_value_bytes
from horovod.runner.local import DEFAULT_GRACE_S
from horovod.runner.output import OutputRouter
from horovod.runner.rank_process import RankProcess, RemoteRankProcess
from horovod.runner.rendezvous import auth
from horovod.runner.rendezvous.server import RendezvousServer
from horovod.runner.settings import JobSettings

#: What workers are given as HOROVOD_ELASTIC_TIMEOUT: the driver bounds every world's forming and
#: answers every request (or ends the job, which stops the worker), and a worker's client fails at
#: once when the driver is gone; so a worker waiting for its world (a new one, while the others
#: train on to their next commit) must not give up by itself.
_WORKER_WAIT_S = 7 * 24 * 3600


def run_elastic_job(
    settings: ElasticSettings,
    argv: Sequence[str],
    *,
    log: Callable[[str], None],
    extra_env: Mapping[str, str] | None = None,
) -> int:
    """Runs ``argv`` as the workers of an elastic job; returns horovodrun's exit status."""
    base = {**os.environ, **(extra_env or {})}
    secret = auth.new_secret()
    job_key = "hvd-" + secrets.token_hex(8)
    job = settings.job
    for note in job.notes:
        log(f"note: {note}")
    job_network = _network(job)
    with RendezvousServer(secret, host=job_network.rendezvous_host, max_value_bytes=max_value_bytes(base)) as server:
        common = common_environment(
            job,
            base,
            job_key=job_key,
            addr=server.host,
            port=server.port,
            secret=secret,
            max_value=server.max_value_bytes,
            nics=job_network.nics,
        )
        common[protocol.ELASTIC] = "1"
        common[protocol.ELASTIC_TIMEOUT] = str(_WORKER_WAIT_S)
        output = OutputRouter(
            sys.stdout,
            sys.stderr,
            size=max(settings.max_np or 0, job.size, 100),
            prefix_timestamp=job.prefix_timestamp,
            output_dir=job.output_filename,
        )
        remote_grace_s = max(0.5, DEFAULT_GRACE_S - 1.0)
        checked: set[str] = set(job.remote_hosts)
        hosts = HostManager(settings.cooldown_range)
        cores = threads.host_cores()
        if line := threads.describe(common, "each host's cores over its slots"):
            log(line)
        driver: ElasticDriver

        def start_worker(worker_id: int, host: str, slot: int) -> RankProcess:
            env = dict(common)
            env[protocol.WORKER_ID] = str(worker_id)
            env[worker_env.HOSTNAME] = host
            # Its host's cores shared among the host's slots: here, or on a remote host by remote_rank.py.
            env[threads.HOST_RANKS] = str(max(1, hosts.current_hosts.get(host, 1)))
            output.prepare(worker_id)
            proc: RankProcess
            if _is_remote(host):
                proc = RemoteRankProcess(host, job.ssh, sys.executable, list(argv), env, remote_grace_s)
            else:
                proc = RankProcess(list(argv), threads.apply(env, cores))
            output.attach(worker_id, "stdout", proc.stdout)
            output.attach(worker_id, "stderr", proc.stderr)

            def wait() -> None:
                returncode = proc.wait()
                driver.events.put(WorkerExited(worker_id, returncode, time.monotonic()))

            threading.Thread(target=wait, name=f"hvd-wait-w{worker_id}", daemon=True).start()
            if job.verbose:
                log(f"elastic: started worker {worker_id} on {host}, slot {slot} ({proc.where()})")
            return proc

        def check_host(host: str) -> str | None:
            """None when ``host`` can run workers: this machine, or a host that answers over ssh."""
            if host in checked or not _is_remote(host):
                return None
            from horovod.runner.host_check import HostCheckError, check_hosts

            try:
                check_hosts(
                    [host], job.ssh, sys.executable, timeout_s=job.start_timeout_s, use_cache=job.use_host_cache
                )
            except HostCheckError as error:
                return str(error)
            checked.add(host)
            return None

        driver = ElasticDriver(
            settings.driver,
            settings.discovery,
            hosts,
            job_key=job_key,
            start_worker=start_worker,
            publish=server.set,
            log=log,
            check_host=check_host,
        )
        server.watch(store_watcher(job_key, driver))
        if job.verbose and job_network.description:
            log(f"network: {job_network.description}")
        try:
            code = driver.run()
        finally:
            output.join(5.0)
            output.close()
        history, ended = driver.last_world()
        job_report.finish(
            server.get,
            job_key,
            len(history.workers),
            failure=driver.failure,
            ended=ended,
            report_file=job.report_file,
            quiet=not job.job_report,
            log=log,
            elastic=history,
        )
        return code


def _network(job: JobSettings) -> network.JobNetwork:
    """The job's network, chosen from the hosts found at start (checked over ssh). Hosts found later
    must reach the rendezvous server on it: a job that starts on this machine alone listens on
    loopback, unless --network-interface names the interface remote hosts will come on."""
    if job.remote_hosts or not job.nics:
        return network.prepare(job)
    from horovod.runner.interfaces import local_interfaces

    addresses = local_interfaces().get(job.nics[0], [])
    if not addresses:
        raise UsageError(f"--network-interface {job.nics[0]}: it has no IPv4 address on this machine")
    address = addresses[0].split("/", 1)[0]
    return network.JobNetwork(address, job.nics, f"rendezvous on {address} ({job.nics[0]}), for hosts found later")


def _is_remote(host: str) -> bool:
    from horovod.runner.hosts import is_local

    return not is_local(host)


def store_watcher(job_key: str, driver: ElasticDriver) -> Callable[[str, bytes], None]:
    """Turns the workers' writes to the store into the driver's events (in the server's threads)."""
    requests = protocol.request_prefix(job_key)
    reports = exit_report.key_prefix(job_key) + exit_report.WORKER_PREFIX

    def on_set(key: str, value: bytes) -> None:
        if key.startswith(requests) and key[len(requests) :].isdigit():
            try:
                request = protocol.WorldRequest.decode(value)
            except ValueError:
                return  # not from a worker of ours (every request is authenticated: a bug, not an attack)
            driver.events.put(WorkerAsked(int(key[len(requests) :]), request))
        elif key.startswith(reports) and key[len(reports) :].isdigit():
            reason, primary = exit_report.decode(value)
            if primary and reason != exit_report.EXITING:
                driver.events.put(WorkerReported(int(key[len(reports) :]), reason))

    return on_set
