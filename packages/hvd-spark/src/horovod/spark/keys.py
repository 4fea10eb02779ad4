"""The rendezvous store keys a Spark job of hvd uses between its driver and its tasks.

``horovod.spark.run``: a task announces itself under ``task/<partition>`` (its host), the driver
answers under ``env/<partition>`` with the rank's environment once every task has announced itself.
``horovod.spark.run_elastic``: a task announces itself under ``task/<partition>.<attempt>`` and
then runs the workers the driver sends it, one at a time (``cmd/<task>/<n>``), reporting each one's
end (``exit/<worker>``) and taking the driver's signals for it (``signal/<worker>/<TERM|KILL>``),
until the driver marks the job ``done``.

Under ``stream/`` (transient keys: handed to the driver, never stored): a rank's output
(``stream/out/<rank>/<stdout|stderr>``) and a task's heartbeat (``stream/alive/<task>``).
"""

from __future__ import annotations

#: Under ``<job key>/``: the keys the server forwards without storing.
STREAM = "spark/stream/"


def task(job_key: str, task: str) -> str:
    return f"{job_key}/spark/task/{task}"


def parse_task(job_key: str, key: str) -> str | None:
    """The task id of a task announcement of this job, else None."""
    prefix = f"{job_key}/spark/task/"
    return key[len(prefix) :] if key.startswith(prefix) and len(key) > len(prefix) else None


def environment(job_key: str, partition: int) -> str:
    return f"{job_key}/spark/env/{partition}"


def output(job_key: str, rank: int, stream: str) -> str:
    """Where rank (or elastic worker) ``rank`` sends its ``stream``; with ``stream=""``, the prefix."""
    return f"{job_key}/{STREAM}out/{rank}/{stream}"


def parse_output(job_key: str, key: str) -> tuple[int, str] | None:
    """``(rank, stream)`` of an output key of this job, else None."""
    prefix = f"{job_key}/{STREAM}out/"
    if not key.startswith(prefix):
        return None
    rank, _, stream = key[len(prefix) :].partition("/")
    if not rank.isdigit() or stream not in ("stdout", "stderr"):
        return None
    return int(rank), stream


def alive(job_key: str, task: str) -> str:
    return f"{job_key}/{STREAM}alive/{task}"


def parse_alive(job_key: str, key: str) -> str | None:
    prefix = f"{job_key}/{STREAM}alive/"
    return key[len(prefix) :] if key.startswith(prefix) else None


def command(job_key: str, task: str, seq: int) -> str:
    return f"{job_key}/spark/cmd/{task}/{seq}"


def worker_exit(job_key: str, worker_id: int) -> str:
    return f"{job_key}/spark/exit/{worker_id}"


def parse_worker_exit(job_key: str, key: str) -> int | None:
    prefix = f"{job_key}/spark/exit/"
    rest = key[len(prefix) :] if key.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None


def signal(job_key: str, worker_id: int, name: str) -> str:
    return f"{job_key}/spark/signal/{worker_id}/{name}"


def done(job_key: str) -> str:
    return f"{job_key}/spark/done"
