"""Input pipelines on a compute job: a tf.data service of dispatchers and workers, which training
jobs read from (Horovod's ``horovod.tensorflow.data``).

The compute job (``python -m horovod.tensorflow.data.compute_worker CONFIG`` under horovodrun) runs a
tf.data worker on every rank and its dispatchers (``--dispatchers N``, each served by size/N ranks),
or leaves the dispatchers to the training job (``--dispatcher-side training``). Its rank 0 writes
CONFIG: where the registration service is (registration.py), its key, and the layout. The training
job reads CONFIG and either sends a dataset there (``dataset.send_to_data_service(config, rank,
size)``) or takes its dispatcher's address (``with tf_data_service(config, rank) as address``) to
``distribute`` a dataset itself. ``config.compute_client().shutdown()`` ends the compute job.

Dispatchers and workers listen on the job's network interface and advertise its address (not
``localhost``), so a compute job on some hosts serves training jobs on others.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import tensorflow as tf

from horovod.tensorflow.data.registration import ComputeClient, job_address

_log = logging.getLogger("horovod")

#: The processing modes of tf.data.experimental.service.distribute.
PROCESSING_MODES = ("distributed_epoch", "parallel_epochs")
DISPATCHER_SIDES = ("compute", "training")


@dataclasses.dataclass(frozen=True)
class TfDataServiceConfig:
    """What a compute job tells the training jobs (Horovod's fields and JSON form).

    :param dispatchers: how many dispatchers serve the training ranks (1: all of them; else one each).
    :param dispatchers_work_dir: where the dispatchers keep their journals (``<dir>/dispatcher-<i>``):
        fault-tolerant dispatchers that recover their state on restart; None for none.
    :param dispatchers_nic: the network interface whose address the dispatchers and workers advertise
        (None or empty: the job's interface, ``HOROVOD_GLOO_IFACE``, else loopback on one machine).
    :param workers_per_dispatcher: how many compute ranks run tf.data workers for each dispatcher.
    :param dispatcher_side: where the dispatchers run: ``"compute"`` or ``"training"``.
    :param addresses: the registration service's addresses, by network interface.
    :param key: the registration service's secret (hex in the file).
    :param timeout: how long, in seconds, each side waits for the other.
    """

    dispatchers: int
    dispatchers_work_dir: str | None
    dispatchers_nic: str | None
    workers_per_dispatcher: int
    dispatcher_side: str
    addresses: Mapping[str, Sequence[tuple[str, int]]]
    key: bytes
    timeout: int = 60

    def __post_init__(self) -> None:
        if self.dispatcher_side not in DISPATCHER_SIDES:
            raise ValueError(f"dispatcher_side must be 'compute' or 'training', got {self.dispatcher_side!r}")
        if self.dispatchers < 1 or self.workers_per_dispatcher < 1:
            raise ValueError(
                f"a compute job needs at least one dispatcher and one worker each, got {self.dispatchers} "
                f"dispatcher(s) of {self.workers_per_dispatcher} worker(s)"
            )

    def compute_client(self, verbose: int = 1) -> ComputeClient:
        """A client of the compute job's registration service; ``shutdown()`` ends the compute job.

        :param verbose: 0 is silent; above, waits say what they wait for.
        """
        return ComputeClient(self.addresses, self.key, self.workers_per_dispatcher, verbose=verbose)

    def to_dict(self) -> dict[str, Any]:
        config = dataclasses.asdict(self)
        config["key"] = self.key.hex()
        config["addresses"] = {intf: [list(a) for a in addrs] for intf, addrs in self.addresses.items()}
        return config

    @staticmethod
    def from_dict(config: Mapping[str, Any]) -> TfDataServiceConfig:
        """The config of its JSON form (``to_dict``).

        :param config: the dictionary ``to_dict`` made.
        """
        try:
            return TfDataServiceConfig(
                dispatchers=int(config["dispatchers"]),
                dispatchers_work_dir=config.get("dispatchers_work_dir") or None,
                dispatchers_nic=config.get("dispatchers_nic") or None,
                workers_per_dispatcher=int(config["workers_per_dispatcher"]),
                dispatcher_side=str(config["dispatcher_side"]),
                addresses={
                    intf: [(str(a[0]), int(a[1])) for a in addrs] for intf, addrs in dict(config["addresses"]).items()
                },
                key=bytes.fromhex(config["key"]),
                timeout=int(config.get("timeout", 60)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a compute service config ({type(error).__name__}: {error})") from None

    def write(self, filename: str) -> None:
        """Writes the config to ``filename`` whole or not at all (a reader never sees half of it).

        :param filename: where.
        """
        directory = os.path.dirname(os.path.abspath(filename))
        fd, partial = tempfile.mkstemp(prefix=".compute-config-", dir=directory)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(self.to_dict(), f)
            os.replace(partial, filename)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise

    @staticmethod
    def read(filename: str, wait_for_file_creation: bool = False, timeout: float | None = None) -> TfDataServiceConfig:
        """The config in ``filename``, waiting for it to appear when asked.

        :param filename: the file the compute job's rank 0 writes.
        :param wait_for_file_creation: wait until the file exists (the compute job may start later).
        :param timeout: how long to wait, in seconds (None: as long as it takes, as Horovod).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while wait_for_file_creation and not os.path.exists(filename):
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"the compute job's config {filename} did not appear within {timeout:g} s")
            time.sleep(0.2)
        with open(filename) as f:
            return TfDataServiceConfig.from_dict(json.load(f))


#: How often a training rank checks that the compute job is still there (watch_compute_job).
WATCH_S = 2.0
_watched: set[tuple[tuple[str, int], ...]] = set()
_watched_lock = threading.Lock()


def watch_compute_job(compute_config: TfDataServiceConfig) -> None:
    """On a training rank reading from the compute job: once the job is gone (its service has not
    answered for ``timeout`` seconds, before the training job asked it to stop), end this process
    with a message saying so. tf.data's client would wait for the lost dispatcher and workers for
    ever, in native code, where no Python exception can reach it."""
    key = tuple(sorted((h, p) for addrs in compute_config.addresses.values() for h, p in addrs))
    with _watched_lock:
        if key in _watched:
            return
        _watched.add(key)
    client = compute_config.compute_client(verbose=0)

    def watch() -> None:
        silent_since = None
        while True:
            time.sleep(WATCH_S)
            state = client.probe()
            if state == "shutting down":
                return
            if state == "running":
                silent_since = None
                continue
            silent_since = silent_since or time.monotonic()
            if time.monotonic() - silent_since >= compute_config.timeout:
                print(
                    f"horovod.tensorflow.data: the compute job stopped: its service at {client.where} has not "
                    f"answered for {compute_config.timeout} s (the config's timeout), and this rank's data comes "
                    "from it; stopping this rank",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(70)  # EX_SOFTWARE; horovodrun names the rank and this message is its last line

    threading.Thread(target=watch, name="hvd-compute-watch", daemon=True).start()


def _dispatch_server(compute_config: TfDataServiceConfig, index: int) -> tuple[Any, str]:
    """Dispatcher ``index`` on this host, and the address it serves at (the interface's, not localhost)."""
    work_dir = None
    if compute_config.dispatchers_work_dir:
        work_dir = os.path.join(os.path.abspath(compute_config.dispatchers_work_dir), f"dispatcher-{index}")
    server = tf.data.experimental.service.DispatchServer(
        tf.data.experimental.service.DispatcherConfig(port=0, work_dir=work_dir, fault_tolerant_mode=bool(work_dir))
    )
    port = server._address.rsplit(":", 1)[1]  # the port it bound (the public target names localhost)
    return server, f"grpc://{job_address(compute_config.dispatchers_nic)[1]}:{port}"


@contextlib.contextmanager
def tf_data_service(compute_config: TfDataServiceConfig, rank: int) -> Iterator[str]:
    """The address of the dispatcher training rank ``rank`` reads from, once its workers are there.

    With ``dispatcher_side="training"`` the training ranks run the dispatchers (rank 0 alone for
    one dispatcher; each rank its own for several), registered for the compute job's workers to
    join, and stopped when the context ends.

    :param compute_config: the compute job's config (``TfDataServiceConfig.read``).
    :param rank: this training rank.
    """
    compute = compute_config.compute_client(verbose=0)
    several = compute_config.dispatchers > 1
    dispatcher_id = rank if several else 0
    if several and rank >= compute_config.dispatchers:
        raise ValueError(
            f"training rank {rank} has no dispatcher: the compute job has {compute_config.dispatchers}, one per "
            "training rank"
        )
    watch_compute_job(compute_config)
    server = None
    if compute_config.dispatcher_side == "training" and (several or rank == 0):
        server, address = _dispatch_server(compute_config, dispatcher_id)
        compute.register_dispatcher(dispatcher_id, address)
    try:
        address = compute.wait_for_dispatcher_registration(dispatcher_id, compute_config.timeout)
        compute.wait_for_dispatcher_worker_registration(dispatcher_id, compute_config.timeout)
        yield address
    finally:
        if server is not None:
            server.stop()


def send_to_data_service(
    dataset: tf.data.Dataset,
    compute_config: TfDataServiceConfig,
    rank: int,
    size: int | None = None,
    processing_mode: str = "distributed_epoch",
    reuse_dataset: bool = False,
    round_robin: bool = False,
) -> tf.data.Dataset:
    """``dataset``, produced by the compute job's workers (its dispatchers must run there).

    :param dataset: the input pipeline, run on the compute job.
    :param compute_config: the compute job's config (``TfDataServiceConfig.read``).
    :param rank: this training rank.
    :param size: the training ranks (for ``round_robin``).
    :param processing_mode: ``"distributed_epoch"`` (each element once per epoch, split among the
        workers) or ``"parallel_epochs"`` (every worker runs the whole dataset).
    :param reuse_dataset: the training ranks share one job of the dataset (its elements split among
        them) instead of each reading it whole.
    :param round_robin: with ``reuse_dataset``, the ranks take the job's batches in turn, in lockstep
        (the dataset must repeat forever).
    """
    if compute_config.dispatcher_side == "training":
        raise RuntimeError(
            "send_to_data_service needs the compute job's dispatchers; with --dispatcher-side training, "
            "use the tf_data_service context manager around training instead"
        )
    if processing_mode not in PROCESSING_MODES:
        raise ValueError(f"processing_mode must be one of {', '.join(PROCESSING_MODES)}, got {processing_mode!r}")
    if round_robin and (not reuse_dataset or size is None):
        raise ValueError("round_robin needs reuse_dataset=True and the number of training ranks (size)")
    with tf_data_service(compute_config, rank) as address:
        return dataset.apply(
            tf.data.experimental.service.distribute(
                processing_mode=processing_mode,
                service=address,
                job_name="job" if reuse_dataset else None,
                consumer_index=rank if reuse_dataset and round_robin else None,
                num_consumers=size if reuse_dataset and round_robin else None,
            )
        )


tf.data.Dataset.send_to_data_service = send_to_data_service  # Horovod's spelling: dataset.send_to_data_service(...)


def compute_worker_fn(compute_config: TfDataServiceConfig, timeout: int | None = None) -> None:
    """A compute rank: its dispatcher (where it runs one), its tf.data worker, until the training job
    asks for the shutdown.

    :param compute_config: the compute job's config.
    :param timeout: how long, in seconds, the worker waits for its dispatcher once running (None: the
        config's timeout).
    """
    import horovod.tensorflow as hvd

    hvd.init()
    index = hvd.rank()
    dispatcher_index = index // compute_config.workers_per_dispatcher
    compute = compute_config.compute_client(verbose=0)
    host = job_address(compute_config.dispatchers_nic)[1]
    dispatcher = worker = None
    try:
        if compute_config.dispatcher_side == "compute" and index % compute_config.workers_per_dispatcher == 0:
            dispatcher, address = _dispatch_server(compute_config, dispatcher_index)
            compute.register_dispatcher(dispatcher_index, address)
            _log.info("dispatcher %d serves at %s", dispatcher_index, address)
        address = compute.wait_for_dispatcher_registration(dispatcher_index, compute_config.timeout)
        worker = tf.data.experimental.service.WorkerServer(
            tf.data.experimental.service.WorkerConfig(
                dispatcher_address=address.split("://", 1)[1],
                worker_address=f"{host}:%port%",
                data_transfer_address=f"{host}:%dts_port%",
                heartbeat_interval_ms=1000,
                dispatcher_timeout_ms=(timeout or compute_config.timeout) * 1000,
            )
        )
        compute.register_worker_for_dispatcher(dispatcher_index, index)
        compute.wait_for_shutdown()
        if compute_config.dispatcher_side == "training":
            # Its dispatcher, the training job's, may be gone already: stopping a worker whose
            # dispatcher has gone waits for it in native code, for ever. It stops with the process
            # (compute_worker.main ends it), and is kept from the collector, which would stop it.
            _RUNNING.append(worker)
            worker = None
        else:  # every worker stops before any dispatcher (the barrier), each quickly then
            worker.stop()
            worker = None
        hvd.barrier()
    finally:
        for server in (worker, dispatcher):
            if server is not None:
                server.stop()


#: tf.data workers that must not be stopped (nor collected, which stops them) before the process ends.
_RUNNING: list[Any] = []
