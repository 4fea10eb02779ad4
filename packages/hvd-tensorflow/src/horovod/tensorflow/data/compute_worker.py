"""The compute job: ``horovodrun -np N python -m horovod.tensorflow.data.compute_worker CONFIG``.

Every rank runs a tf.data worker; ``--dispatchers D`` dispatchers (N must be a multiple of D) run
on ranks 0, N/D, 2N/D... (``--dispatcher-side compute``, the default) or in the training job
(``--dispatcher-side training``). Rank 0 starts the registration service and writes CONFIG for the
training job; the job ends when the training job calls ``compute_client().shutdown()``.
``--timeout`` bounds every wait of either job for the other (seconds).
"""

from __future__ import annotations

import argparse
import os
import sys

from horovod.tensorflow.data.compute_service import DISPATCHER_SIDES, TfDataServiceConfig, compute_worker_fn
from horovod.tensorflow.data.registration import ComputeService


def main(
    dispatchers: int,
    dispatchers_work_dir: str | None,
    dispatchers_nic: str | None,
    dispatcher_side: str,
    configfile: str,
    timeout: int = 60,
) -> None:
    """Runs this rank of the compute job until the training job asks it to stop.

    :param dispatchers: how many dispatchers serve the training job.
    :param dispatchers_work_dir: where fault-tolerant dispatchers keep their journals (None: not fault tolerant).
    :param dispatchers_nic: the interface whose address the servers advertise (None: the job's).
    :param dispatcher_side: where the dispatchers run: ``"compute"`` or ``"training"``.
    :param configfile: where rank 0 writes the config the training job reads.
    :param timeout: how long, in seconds, each side waits for the other.
    """
    rank = int(os.environ.get("HOROVOD_RANK", "0"))
    size = int(os.environ.get("HOROVOD_SIZE", "1"))
    if dispatchers < 1 or size % dispatchers:
        raise ValueError(f"the compute job's {size} ranks must be a multiple of --dispatchers ({dispatchers})")
    service = None
    try:
        if rank == 0:
            service = ComputeService(dispatchers_nic)
            config = TfDataServiceConfig(
                dispatchers=dispatchers,
                dispatchers_work_dir=dispatchers_work_dir,
                dispatchers_nic=dispatchers_nic,
                workers_per_dispatcher=size // dispatchers,
                dispatcher_side=dispatcher_side,
                addresses=service.addresses(),
                key=service.key,
                timeout=timeout,
            )
            config.write(configfile)
        else:
            config = TfDataServiceConfig.read(configfile, wait_for_file_creation=True, timeout=timeout)
        compute_worker_fn(config, timeout)
    finally:
        if service is not None:
            service.shutdown()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m horovod.tensorflow.data.compute_worker", description=__doc__)
    parser.add_argument("configfile", help="where rank 0 writes the config the training job reads")
    parser.add_argument("--dispatchers", type=int, default=1, help="the number of dispatchers (default 1)")
    parser.add_argument(
        "--dispatchers-work-dir", default=None, help="where fault-tolerant dispatchers keep their journals"
    )
    parser.add_argument(
        "--dispatchers-nic", default=None, help="the interface the servers advertise (default: the job's interface)"
    )
    parser.add_argument(
        "--dispatcher-side", choices=DISPATCHER_SIDES, default="compute", help="where the dispatchers run"
    )
    parser.add_argument("--timeout", type=int, default=60, help="seconds each job waits for the other (default 60)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = parse_args()
    main(
        args.dispatchers,
        args.dispatchers_work_dir,
        args.dispatchers_nic,
        args.dispatcher_side,
        args.configfile,
        args.timeout,
    )
    # The tf.data servers left running end with the process, here, not in the interpreter's
    # teardown, which would stop them one by one (see compute_worker_fn).
    import horovod.tensorflow as hvd

    hvd.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
