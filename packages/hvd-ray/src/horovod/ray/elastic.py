"""``ElasticRayExecutor``: an elastic Horovod job whose workers are Ray actors.

The driver is horovodrun's (:mod:`horovod.runner.elastic.driver`): the hosts are the Ray cluster's
alive nodes (slots: their CPUs, or GPUs, per worker), a worker is an actor pinned to its node, and a
dead actor is a failed worker, replaced as in any elastic job. The workers run ``worker_fn``, which
uses ``hvd.elastic.run`` as any elastic script does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from horovod.common.plugin_api import elastic_protocol
from horovod.ray.rendezvous import start_rendezvous
from horovod.ray.settings import ElasticRaySettings
from horovod.ray.worker import LEFT, THREADS_DEFAULT, BaseHorovodWorker
from horovod.runner import threads, worker_env
from horovod.runner.elastic.discovery import HostDiscovery
from horovod.runner.elastic.driver import DriverSettings, ElasticDriver, WorkerExited
from horovod.runner.elastic.host_manager import HostManager
from horovod.runner.elastic.job import store_watcher


class RayHostDiscovery(HostDiscovery):
    """The Ray cluster's alive nodes, by node id; slots from their CPUs (and GPUs) per worker."""

    def __init__(self, cpus_per_slot: float, gpus_per_slot: float | None) -> None:
        self._cpus = cpus_per_slot
        self._gpus = gpus_per_slot

    def find_available_hosts_and_slots(self) -> dict[str, int]:
        import ray

        found = {}
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            resources = node.get("Resources", {})
            slots = int(resources.get("CPU", 0) // self._cpus) if self._cpus else 0
            if self._gpus:
                slots = min(slots, int(resources.get("GPU", 0) // self._gpus))
            if slots > 0:
                found[node["NodeID"]] = slots
        return found


class ActorProcess:
    """A worker actor seen as the driver sees a worker's process (:class:`RankProcess`'s methods)."""

    host: str | None = None  # no ssh: Ray reaches the node

    def __init__(self, actor: Any, run_ref: Any) -> None:
        self._actor = actor
        self._ref = run_ref
        self.pid = 0
        #: ("done", rank, result) or (LEFT, -1, None), once the actor's run has returned.
        self.outcome: tuple[str, int, Any] | None = None
        self.error: BaseException | None = None

    def wait(self) -> int:
        """The actor's run to its end: 0 when it returned, 1 when it raised, -9 when the actor died."""
        import ray
        from ray.exceptions import RayActorError

        try:
            self.outcome = ray.get(self._ref)
            return 0
        except RayActorError as error:
            self.error = error
            return -9
        except Exception as error:
            self.error = error
            return 1

    def terminate(self) -> None:
        import ray

        ray.kill(self._actor, no_restart=True)

    kill = terminate

    def stopped(self) -> bool:
        return False


class ElasticRayExecutor:
    """Horovod's ``ElasticRayExecutor(settings, use_gpu, cpus_per_slot, gpus_per_slot, env_vars,
    override_discovery)``: ``start()``, then ``run(worker_fn)`` returns the results of the workers
    that finished, by rank. Call ``ray.init()`` first.

    :param settings: what :meth:`create_settings` returns.
    :param use_gpu: give each worker GPUs (``gpus_per_slot``, default 1).
    :param cpus_per_slot: CPUs each worker reserves (default 1).
    :param gpus_per_slot: GPUs each worker reserves with ``use_gpu`` (default 1).
    :param env_vars: variables added to every worker's environment.
    :param override_discovery: hosts come from the Ray cluster; ``False`` (a discovery script of your own) is refused
        with ``ValueError``.
    """

    @staticmethod
    def create_settings(
        min_np: int = 1,
        max_np: int | None = None,
        reset_limit: int | None = None,
        elastic_timeout: int = 600,
        timeout_s: int = 30,
        ssh_identity_file: str | None = None,
        nics: list[str] | None = None,
        **kwargs: Any,
    ) -> ElasticRaySettings:
        """The settings of an :class:`ElasticRayExecutor` (Horovod's ``create_settings``).

        :param min_np: the fewest workers training goes on with (default 1).
        :param max_np: the most workers (default: as many as the cluster has room for).
        :param reset_limit: how many times the job may scale up or down before it fails (default: no limit).
        :param elastic_timeout: seconds a new world may take to form after a change (default 600).
        :param timeout_s: seconds Horovod's collectives may wait for a peer, and the workers' start-up may take (default
            30).
        :param ssh_identity_file: accepted for Horovod's signature: Ray starts the workers, no SSH is used.
        :param nics: network interfaces for the workers' traffic; default: Ray's address of this node.
        :param kwargs: ``cooldown_range`` (``(min, max)`` seconds a failing host stays out) and ``verbose``; any other
            raises ``TypeError``.
        """
        cooldown = kwargs.pop("cooldown_range", None)
        verbose = bool(kwargs.pop("verbose", False))
        if kwargs:
            raise TypeError(f"create_settings() got unexpected arguments: {', '.join(sorted(kwargs))}")
        return ElasticRaySettings(
            timeout_s=timeout_s,
            ssh_identity_file=ssh_identity_file,
            nics=nics,
            verbose=verbose,
            min_np=min_np,
            max_np=max_np,
            reset_limit=reset_limit,
            elastic_timeout=elastic_timeout,
            cooldown_range=cooldown,
        )

    def __init__(
        self,
        settings: ElasticRaySettings,
        use_gpu: bool = False,
        cpus_per_slot: float = 1,
        gpus_per_slot: float | None = None,
        env_vars: dict[str, str] | None = None,
        override_discovery: bool = True,
    ) -> None:
        if not override_discovery:
            raise ValueError(
                "ElasticRayExecutor(override_discovery=False): hosts come from the Ray cluster; a discovery script "
                "runs with horovodrun --host-discovery-script"
            )
        self.settings = settings
        self._cpus = cpus_per_slot
        self._gpus = (gpus_per_slot or 1) if use_gpu else None
        self._env_vars = dict(env_vars or {})
        self._started = False
        self._log_lines: list[str] = []

    def start(self) -> None:
        import ray

        if not ray.is_initialized():
            raise RuntimeError("ElasticRayExecutor.start(): Ray is not initialised; call ray.init() first")
        self._started = True

    def run(self, worker_fn: Callable[[], Any], callbacks: list[Callable[[Any], None]] | None = None) -> list[Any]:
        """Runs ``worker_fn()`` elastically (it calls ``hvd.init()`` and uses ``hvd.elastic.run``);
        returns the results of the workers of the last world, by rank. Raises RuntimeError with the
        driver's reason when the job fails.

        :param worker_fn: the function every worker runs, without arguments (it calls ``hvd.init()`` and uses
            ``hvd.elastic.run``).
        :param callbacks: functions each finished worker's result is handed to.
        """
        import ray

        if not self._started:
            raise RuntimeError("the ElasticRayExecutor is not started: call start() first")
        s = self.settings
        rendezvous = start_rendezvous(s.nics, s.timeout_s, self._env_vars)
        rendezvous.env[elastic_protocol.ELASTIC] = "1"
        # The driver bounds every world's forming (see horovod.runner.elastic.job).
        rendezvous.env[elastic_protocol.ELASTIC_TIMEOUT] = str(7 * 24 * 3600)
        actor_cls = ray.remote(BaseHorovodWorker)
        if line := threads.describe(rendezvous.env, THREADS_DEFAULT):
            print(f"horovod.ray: {line}", flush=True)
        procs: dict[int, ActorProcess] = {}
        driver: ElasticDriver

        def start_worker(worker_id: int, host: str, slot: int) -> ActorProcess:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options: dict[str, Any] = {
                "num_cpus": self._cpus,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(host, soft=False),
            }
            if self._gpus:
                options["num_gpus"] = self._gpus
            actor: Any = actor_cls.options(**options).remote()  # Ray's typing of actor handles is partial
            env = dict(rendezvous.env)
            env[elastic_protocol.WORKER_ID] = str(worker_id)
            env[worker_env.HOSTNAME] = host
            actor.update_env_vars.remote(env)  # an actor runs its calls in order: before run_elastic
            proc = ActorProcess(actor, actor.run_elastic.remote(worker_fn))
            procs[worker_id] = proc

            def wait() -> None:
                returncode = proc.wait()
                driver.events.put(WorkerExited(worker_id, returncode, time.monotonic()))

            threading.Thread(target=wait, name=f"hvd-ray-w{worker_id}", daemon=True).start()
            return proc

        driver = ElasticDriver(
            DriverSettings(
                min_np=s.min_np,
                max_np=s.max_np,
                initial_np=s.min_np,
                elastic_timeout_s=float(s.elastic_timeout),
                reset_limit=s.reset_limit,
            ),
            RayHostDiscovery(self._cpus, self._gpus),
            HostManager(s.cooldown_range),
            job_key=rendezvous.job_key,
            start_worker=start_worker,
            publish=rendezvous.server.set,
            log=self._log,
        )
        rendezvous.server.watch(store_watcher(rendezvous.job_key, driver))
        try:
            code = driver.run()
        finally:
            rendezvous.stop()
        if code != 0:
            last = next((line for line in reversed(self._log_lines) if "job failed" in line), "see the log above")
            raise RuntimeError(f"elastic Horovod job on Ray failed (status {code}): {last}")
        finished = sorted(
            (p.outcome[1], p.outcome[2]) for p in procs.values() if p.outcome is not None and p.outcome[0] != LEFT
        )
        results = [result for _, result in finished]
        for callback in callbacks or ():
            for result in results:
                callback(result)
        return results

    def _log(self, line: str) -> None:
        self._log_lines.append(line)
        if self.settings.verbose or "failed" in line or "formed" in line:
            print(f"horovod.ray: {line}", flush=True)
