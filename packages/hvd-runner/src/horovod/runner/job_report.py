"""The job-end report of a horovodrun job (hvd-core's :mod:`horovod.common.job_report`).

Each rank, as it shuts Horovod down, posts its report to the launcher's rendezvous store (one set
per rank, after its last collective: nothing is sent while the job runs). When the job ends, well
or badly, the launcher reads what arrived, names the ranks that sent nothing with how they ended,
prints the summary (unless ``--no-job-report``) and writes the whole report as JSON where
``--report-file`` says.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from horovod.runner import worker_env

_POST_TIMEOUT_S = 5.0


@dataclasses.dataclass(frozen=True)
class ElasticHistory:
    """An elastic job's last world, whose ranks' reports make its job-end report."""

    generation: int
    resets: int
    #: The worker id of each rank (the key its report was posted under), and its host.
    workers: list[str]
    hosts: list[str]


def key_prefix(job_key: str) -> str:
    return f"{job_key}/runner/report/"


def post(env: Mapping[str, str] | None = None) -> None:
    """Sends this rank's report to the launcher of its job; never raises (the report is an extra)."""
    env = os.environ if env is None else env
    if not env.get(worker_env.RENDEZVOUS_ADDR) or not env.get(worker_env.JOB_KEY):
        return
    try:
        from horovod.common.plugin_api import elastic_protocol, job_report
        from horovod.runner.rendezvous.client import RendezvousClient

        report = job_report.this_rank()
        # An elastic worker posts at every reset, under its own id: the driver keeps the last world's.
        worker = env.get(elastic_protocol.WORKER_ID, "").strip()
        key = key_prefix(env[worker_env.JOB_KEY]) + (f"w{worker}" if worker else str(report["rank"]))

        client = RendezvousClient.from_env(env, request_timeout_s=_POST_TIMEOUT_S)
        try:
            client.set(key, json.dumps(report).encode())
        finally:
            client.close()
    except Exception:  # a rank without a report is named as such at the end
        pass


def collect(
    read: Callable[[str], bytes | None], job_key: str, size: int, workers: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The reports the ranks posted (``read``: the launcher's store, without waiting); of an elastic
    job, those of the last world's `workers` (by rank), each posted from that world."""
    reports = []
    for rank in range(size):
        raw = read(key_prefix(job_key) + (f"w{workers[rank]}" if workers else str(rank)))
        if raw is None:
            continue
        try:
            report = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            continue
        if report.get("rank") == rank and report.get("size") == size:  # else from an earlier world
            reports.append(report)
    return reports


def finish(
    read: Callable[[str], bytes | None],
    job_key: str,
    size: int,
    *,
    failure: str | None,
    ended: Mapping[int, str],
    report_file: str | None,
    quiet: bool,
    log: Callable[[str], None],
    elastic: ElasticHistory | None = None,
) -> dict[str, Any] | None:
    """Merges the ranks' reports, prints the summary and writes the JSON; returns the report. A
    report that cannot be made or written is said in one line, never fails the job's outcome. A
    job that succeeded without any rank reporting (it never started Horovod) prints nothing. Of an
    elastic job, the report is its last world's (`elastic`), whose engines counted from its start."""
    from horovod.common.plugin_api import job_report

    try:
        reports = collect(read, job_key, size, elastic.workers if elastic else None)
        quiet = quiet or (not reports and failure is None)
        report = job_report.job_report(reports, size, failure=failure, ended=ended)
        if elastic:
            report["elastic"] = {"generation": elastic.generation, "resets": elastic.resets, "hosts": elastic.hosts}
    except Exception as error:  # the job's own outcome stands whatever happens here
        log(f"job report: not made ({type(error).__name__}: {error})")
        return None
    if not quiet:
        if elastic:
            hosts = ", ".join(sorted(set(elastic.hosts))) or "none"
            log(
                f"job report: elastic: {elastic.resets} reset(s); the counts below are the last world's "
                f"(world {elastic.generation}: {size} rank(s) on {hosts}), since it formed"
            )
        for line in job_report.summary(report):
            log(line)
    if report_file:
        try:
            path = Path(report_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(path.name + ".partial")  # never a half-written report under the name
            partial.write_text(json.dumps(report, indent=1) + "\n")
            partial.replace(path)
            if not quiet:
                log(f"job report: written to {path}")
        except OSError as error:
            log(f"job report: cannot write {report_file}: {error}")
    return report
