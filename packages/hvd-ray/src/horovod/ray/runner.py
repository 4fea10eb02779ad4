"""``RayExecutor``: a Horovod job whose workers are Ray actors (Horovod's API)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from horovod.ray import placement
from horovod.ray.rendezvous import start_rendezvous
from horovod.ray.settings import RaySettings
from horovod.ray.worker import THREADS_DEFAULT, BaseHorovodWorker
from horovod.runner import job_report, threads
from horovod.runner.hosts import ranks_by_host
from horovod.runner.job import placement_environment
from horovod.runner.rendezvous.job import JobRendezvous

#: Seconds the other workers get, once one has failed, to end by themselves (their collectives fail
#: within moments of a lost peer) before the executor reports the failure.
FAILURE_GRACE_S = 10.0


class WorkerError(RuntimeError):
    """A worker's function raised, or its actor died; names the rank.

    :param rank: the rank that failed (also the ``rank`` attribute).
    :param message: what happened: its exception, or that its actor died.
    """

    def __init__(self, rank: int, message: str) -> None:
        super().__init__(message)
        self.rank = rank


class RayExecutor:
    """Runs Horovod workers as Ray actors: ``start()``, then ``run``/``execute`` functions on every
    worker (results by rank), then ``shutdown()``.

    ``num_workers`` workers packed onto as few nodes as fit, or ``num_hosts`` nodes with
    ``num_workers_per_host`` each (Horovod's older spelling: ``num_slots``, ``cpus_per_slot``,
    ``gpus_per_slot``). Each worker reserves ``cpus_per_worker`` CPUs (and ``gpus_per_worker``
    GPUs with ``use_gpu``) in a placement group. Call ``ray.init()`` first.

    :param settings: what ``create_settings`` returns (default: its defaults).
    :param num_workers: the number of workers, packed onto as few nodes as fit; give it or ``num_hosts``, not both.
    :param num_hosts: the number of nodes, each with ``num_workers_per_host`` workers (one node each, spread strictly).
    :param num_workers_per_host: workers on each of the ``num_hosts`` nodes (default 1).
    :param cpus_per_worker: CPUs each worker reserves (default 1).
    :param use_gpu: give each worker GPUs (``gpus_per_worker``, default 1).
    :param gpus_per_worker: GPUs each worker reserves with ``use_gpu`` (default 1).
    :param use_current_placement_group: inside a placement group (a Ray Tune trial, say), place the workers in it
        instead of reserving a new one (default ``True``).
    :param num_slots: Horovod's older name: with ``num_hosts``, workers per host; alone, the number of workers (keyword
        only).
    :param cpus_per_slot: Horovod's older name of ``cpus_per_worker`` (keyword only).
    :param gpus_per_slot: Horovod's older name of ``gpus_per_worker`` (keyword only).
    :param min_workers: refused (``ValueError``): elastic jobs on Ray run with :class:`ElasticRayExecutor`.
    :param max_workers: refused (``ValueError``), as ``min_workers``.
    """

    @classmethod
    def create_settings(
        cls,
        timeout_s: int = 30,
        ssh_identity_file: str | None = None,
        ssh_str: str | None = None,
        placement_group_timeout_s: int = 100,
        nics: list[str] | None = None,
    ) -> RaySettings:
        """The settings of a :class:`RayExecutor` (Horovod's ``create_settings``).

        :param timeout_s: seconds Horovod's collectives may wait for a peer (``HOROVOD_GLOO_TIMEOUT_SECONDS``), and the
            workers' start-up may take (default 30).
        :param ssh_identity_file: accepted for Horovod's signature: Ray starts the workers, no SSH is used.
        :param ssh_str: accepted for Horovod's signature; unused, as ``ssh_identity_file``.
        :param placement_group_timeout_s: seconds to wait for Ray to place every worker (default 100).
        :param nics: network interfaces for the workers' traffic (the first one's address serves the rendezvous);
            default: Ray's address of this node.
        """
        return RaySettings(timeout_s, ssh_identity_file, ssh_str, placement_group_timeout_s, nics)

    def __init__(
        self,
        settings: RaySettings | None = None,
        num_workers: int | None = None,
        num_hosts: int | None = None,
        num_workers_per_host: int = 1,
        cpus_per_worker: float = 1,
        use_gpu: bool = False,
        gpus_per_worker: float | None = None,
        use_current_placement_group: bool = True,
        *,
        num_slots: int | None = None,
        cpus_per_slot: float | None = None,
        gpus_per_slot: float | None = None,
        min_workers: int | None = None,
        max_workers: int | None = None,
    ) -> None:
        if min_workers is not None or max_workers is not None:
            raise ValueError(
                "RayExecutor(min_workers=..., max_workers=...): elastic jobs on Ray run with "
                "horovod.ray.ElasticRayExecutor"
            )
        if num_slots is not None:  # Horovod's older names: num_hosts x num_slots
            if num_hosts is None and num_workers is None:
                num_workers = num_slots
            else:
                num_workers_per_host = num_slots
        cpus = cpus_per_slot if cpus_per_slot is not None else cpus_per_worker
        gpus = gpus_per_slot if gpus_per_slot is not None else gpus_per_worker
        self.settings = settings or RaySettings()
        self._plan = placement.layout(num_workers, num_hosts, num_workers_per_host, cpus, (gpus or 1) if use_gpu else 0)
        self._use_current_placement_group = use_current_placement_group
        self.workers: list[Any] = []  # actor handles, by rank
        self._group: Any = None
        self._own_group = False
        self._rendezvous: JobRendezvous | None = None

    @property
    def num_workers(self) -> int:
        return self._plan.num_workers

    # --- starting -------------------------------------------------------------------------------

    def start(
        self,
        executable_cls: Callable[..., Any] | None = None,
        executable_args: list[Any] | None = None,
        executable_kwargs: dict[str, Any] | None = None,
        extra_env_vars: dict[str, str] | None = None,
    ) -> None:
        """Places the workers, forms the Horovod job (ranks by node) and, with ``executable_cls``,
        makes ``executable_cls(*executable_args, **executable_kwargs)`` in every worker.

        :param executable_cls: a class (or any callable) made in every worker; :meth:`execute` passes the object to its
            functions. Optional.
        :param executable_args: positional arguments of ``executable_cls``.
        :param executable_kwargs: keyword arguments of ``executable_cls``.
        :param extra_env_vars: variables added to every worker's environment.
        """
        import ray

        if not ray.is_initialized():
            raise RuntimeError("RayExecutor.start(): Ray is not initialised; call ray.init() first")
        if self.workers:
            raise RuntimeError("RayExecutor.start(): already started; call shutdown() first")
        try:
            self._start(ray, extra_env_vars or {})
            self._call_all("start_executable", executable_cls, executable_args, executable_kwargs)
        except BaseException:
            self.shutdown()
            raise

    def _start(self, ray: Any, extra_env: dict[str, str]) -> None:
        from ray.util.placement_group import get_current_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        current = get_current_placement_group() if self._use_current_placement_group else None
        if current is not None:
            self._group = current
        else:
            self._group = placement.reserve(self._plan, self.settings.placement_group_timeout_s)
            self._own_group = True
        actor = ray.remote(BaseHorovodWorker)
        for i in range(self._plan.num_workers):
            strategy = PlacementGroupSchedulingStrategy(
                self._group,
                placement_group_bundle_index=-1 if current is not None else i // self._plan.workers_per_bundle,
            )
            options: dict[str, Any] = {"num_cpus": self._plan.cpus_per_worker, "scheduling_strategy": strategy}
            if self._plan.gpus_per_worker:
                options["num_gpus"] = self._plan.gpus_per_worker
            self.workers.append(actor.options(**options).remote())
        infos = self._get([w.node_info.remote() for w in self.workers], "reporting its node")
        placements = ranks_by_host([node for node, _, _ in infos])
        self.workers = [w for _, w in sorted(zip((p.rank for p in placements), self.workers, strict=True))]
        placements.sort(key=lambda p: p.rank)
        self._rendezvous = start_rendezvous(self.settings.nics, self.settings.timeout_s, extra_env)
        envs = [placement_environment(self._rendezvous.env, p) for p in placements]
        self._get(
            [w.update_env_vars.remote(env) for w, env in zip(self.workers, envs, strict=True)], "taking its environment"
        )
        if line := threads.describe(self._rendezvous.env, THREADS_DEFAULT):
            print(f"horovod.ray: {line}", flush=True)

    def _get(self, refs: list[Any], doing: str) -> list[Any]:
        import ray

        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=self.settings.timeout_s)
        if len(ready) < len(refs):
            late = [i for i, r in enumerate(refs) if r not in ready]
            raise TimeoutError(
                f"worker(s) {late} did not finish {doing} within {self.settings.timeout_s} s (timeout_s)"
            )
        return list(ray.get(refs))

    # --- running --------------------------------------------------------------------------------

    def run(
        self,
        fn: Callable[..., Any],
        args: list[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        callbacks: list[Callable[[Any], None]] | None = None,
    ) -> list[Any]:
        """``fn(*args, **kwargs)`` on every worker; the results by rank. Raises :class:`WorkerError`
        naming the first rank that failed (its exception, or its actor's death).

        :param fn: the function every worker runs; sent to the workers with Ray's serialization. It calls ``hvd.init()``
            itself.
        :param args: positional arguments of ``fn``.
        :param kwargs: keyword arguments of ``fn``.
        :param callbacks: functions each worker's result is handed to, as it arrives.
        """
        return self._gather(self.run_remote(fn, args, kwargs), callbacks)

    def run_remote(
        self, fn: Callable[..., Any], args: list[Any] | None = None, kwargs: dict[str, Any] | None = None
    ) -> list[Any]:
        """As ``run``, without waiting: one ObjectRef per worker, by rank.

        :param fn: the function every worker runs; sent to the workers with Ray's serialization.
        :param args: positional arguments of ``fn``.
        :param kwargs: keyword arguments of ``fn``.
        """
        self._check_started()
        return [w.run.remote(fn, args, kwargs) for w in self.workers]

    def execute(self, fn: Callable[[Any], Any], callbacks: list[Callable[[Any], None]] | None = None) -> list[Any]:
        """``fn(executable)`` on every worker (the object ``start`` made, or None); results by rank.

        :param fn: called in every worker with the object ``start`` made (or ``None``).
        :param callbacks: functions each worker's result is handed to, as it arrives.
        """
        self._check_started()
        return self._gather([w.execute.remote(fn) for w in self.workers], callbacks)

    def execute_single(self, fn: Callable[[Any], Any]) -> Any:
        """``fn(executable)`` on rank 0 only.

        :param fn: called in rank 0's worker with the object ``start`` made (or ``None``).
        """
        self._check_started()
        return self._gather([self.workers[0].execute.remote(fn)], None)[0]

    def _check_started(self) -> None:
        if not self.workers:
            raise RuntimeError("the RayExecutor is not started: call start() first")

    def _gather(self, refs: list[Any], callbacks: list[Callable[[Any], None]] | None) -> list[Any]:
        """Every ref's value, by rank; each result handed to the callbacks as it arrives. On the first
        failure the others get FAILURE_GRACE_S to end (their collectives fail), then it is raised."""
        import ray

        rank_of = {ref: rank for rank, ref in enumerate(refs)}
        results: dict[int, Any] = {}
        pending = list(refs)
        first: WorkerError | None = None
        deadline = float("inf")
        while pending and time.monotonic() < deadline:
            ready, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            for ref in ready:
                rank = rank_of[ref]
                try:
                    results[rank] = ray.get(ref)
                except Exception as error:
                    if first is None:
                        first = WorkerError(rank, _describe(rank, error))
                        first.__cause__ = error
                        deadline = time.monotonic() + FAILURE_GRACE_S
                    continue
                for callback in callbacks or ():
                    callback(results[rank])
        if first is not None:
            raise first
        return [results[r] for r in range(len(refs))]

    # --- ending ---------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Ends every worker actor, frees the placement group (when this executor made it) and stops
        the rendezvous server. Idempotent."""
        import ray

        if self._rendezvous is not None:  # the last job's report: each worker posted its own at hvd.shutdown()
            job_report.finish(
                self._rendezvous.server.get,
                self._rendezvous.job_key,
                len(self.workers),
                failure=None,
                ended={},
                report_file=None,
                quiet=False,
                log=lambda line: print(f"horovod.ray: {line}", file=sys.stderr, flush=True),
            )
        for worker in self.workers:
            ray.kill(worker, no_restart=True)
        self.workers = []
        if self._group is not None and self._own_group:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self._group)
        self._group = None
        if self._rendezvous is not None:
            self._rendezvous.stop()
            self._rendezvous = None

    def _call_all(self, method: str, *args: Any) -> list[Any]:
        return self._gather([getattr(w, method).remote(*args) for w in self.workers], None)


def _describe(rank: int, error: BaseException) -> str:
    """What a worker's failure says: its exception, or that its actor died."""
    from ray.exceptions import RayActorError, RayTaskError

    if isinstance(error, RayTaskError):
        cause = error.cause if error.cause is not None else error
        return f"rank {rank} failed: {type(cause).__name__}: {cause}"
    if isinstance(error, RayActorError):
        return f"rank {rank}'s worker actor died (its process was killed or crashed): {error}"
    return f"rank {rank} failed: {type(error).__name__}: {error}"
