"""The job-end report of a horovodrun job (hvd-core's :mod:`horovod.common.job_report`).

Each rank, as it shuts Horovod down, posts its report to the launcher's rendezvous store (one set
per rank, after its last collective: nothing is sent while the job runs). When the job ends, well
or badly, the launcher reads what arrived, names the ranks that sent nothing with how they ended,
prints the summary (unless ``--no-job-report``) and writes the whole report as JSON where
``--report-file`` says.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from horovod.runner import worker_env

_POST_TIMEOUT_S = 5.0


def key_prefix(job_key: str) -> str:
    return f"{job_key}/runner/report/"


def post(env: Mapping[str, str] | None = None) -> None:
    """Sends this rank's report to the launcher of its job; never raises (the report is an extra)."""
    env = os.environ if env is None else env
    if not env.get(worker_env.RENDEZVOUS_ADDR) or not env.get(worker_env.JOB_KEY):
        return
    try:
        from horovod.common.plugin_api import job_report
        from horovod.runner.rendezvous.client import RendezvousClient

        report = job_report.this_rank()

        client = RendezvousClient.from_env(env, request_timeout_s=_POST_TIMEOUT_S)
        try:
            client.set(key_prefix(env[worker_env.JOB_KEY]) + str(report["rank"]), json.dumps(report).encode())
        finally:
            client.close()
    except Exception:  # a rank without a report is named as such at the end
        pass


def collect(read: Callable[[str], bytes | None], job_key: str, size: int) -> list[dict[str, Any]]:
    """The reports the ranks posted (``read``: the launcher's store, without waiting)."""
    reports = []
    for rank in range(size):
        raw = read(key_prefix(job_key) + str(rank))
        if raw is None:
            continue
        try:
            reports.append(json.loads(raw.decode("utf-8", "replace")))
        except ValueError:
            continue
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
) -> dict[str, Any] | None:
    """Merges the ranks' reports, prints the summary and writes the JSON; returns the report. A
    report that cannot be made or written is said in one line, never fails the job's outcome. A
    job that succeeded without any rank reporting (it never started Horovod) prints nothing."""
    from horovod.common.plugin_api import job_report

    try:
        reports = collect(read, job_key, size)
        quiet = quiet or (not reports and failure is None)
        report = job_report.job_report(reports, size, failure=failure, ended=ended)
    except Exception as error:  # the job's own outcome stands whatever happens here
        log(f"job report: not made ({type(error).__name__}: {error})")
        return None
    if not quiet:
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
