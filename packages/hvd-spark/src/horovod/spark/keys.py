"""The rendezvous store keys a ``horovod.spark.run`` job uses between its driver and its Spark tasks.

A task announces itself under ``task/<partition>`` (its host), the driver answers under
``env/<partition>`` with the rank's environment once every task has announced itself, and the rank's
output travels under ``out/<rank>/<stream>`` (transient keys: handed to the driver, never stored).
"""

from __future__ import annotations

#: Under ``<job key>/``: the keys the server forwards without storing.
OUTPUT = "spark/out/"


def task(job_key: str, partition: int) -> str:
    return f"{job_key}/spark/task/{partition}"


def environment(job_key: str, partition: int) -> str:
    return f"{job_key}/spark/env/{partition}"


def output(job_key: str, rank: int, stream: str) -> str:
    return f"{job_key}/{OUTPUT}{rank}/{stream}"


def parse_output(job_key: str, key: str) -> tuple[int, str] | None:
    """``(rank, stream)`` of an output key of this job, else None."""
    prefix = f"{job_key}/{OUTPUT}"
    if not key.startswith(prefix):
        return None
    rank, _, stream = key[len(prefix) :].partition("/")
    if not rank.isdigit() or stream not in ("stdout", "stderr"):
        return None
    return int(rank), stream


def parse_task(job_key: str, key: str) -> int | None:
    """The partition of a task announcement of this job, else None."""
    prefix = f"{job_key}/spark/task/"
    rest = key[len(prefix) :] if key.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None
