"""The job-end report: what each rank's engine did over the job, and the job's view of it.

Each rank's engine counts as it goes (time and bytes of its collectives by op type, the wait for
its peers before each one could run, its slowest tensors, fused buffers, stalls; and on each
process set's rank 0, which member arrived last at each collective and by how much, on that rank's
own clock). At the end a rank turns its counters into :func:`rank_report`, plain JSON-ready data;
a launcher (horovodrun, ``horovod.run``, Spark, Ray) gathers the ranks' reports and
:func:`job_report` merges them, with what the launcher knows of a rank that died; :func:`summary`
is the few lines printed when the job ends.

.. versionadded:: 0.2
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SCHEMA", "job_report", "rank_report", "summary", "this_rank"]

#: The report's format; a reader checks it before it reads anything else.
SCHEMA = "hvd-job-report/1"
#: How many of its slowest tensors a rank reports, and the job's summary names.
SLOWEST_TENSORS = 10
SUMMARY_TENSORS = 3
#: Jobs of up to this many ranks get a line of each rank's times in the summary (the JSON has them all).
SUMMARY_RANKS = 8
#: A rank is named a straggler when it was last at this share of the collectives or more.
STRAGGLER_SHARE = 0.25


def rank_report(engine: Any, rank: int, size: int) -> dict[str, Any]:
    """This rank's report from its engine's counters (``Engine.job_stats()`` and ``stats()``).

    :param engine: the rank's running engine (``horovod.common.state.context().engine``).
    :param rank: the rank's rank in the job.
    :param size: the job's number of ranks.
    """
    stats = engine.stats()
    counters = engine.job_stats()
    sets = {}
    for set_id, raw in counters["sets"].items():
        tensors = sorted(raw["tensors"].items(), key=lambda item: -item[1][2])
        sets[str(set_id)] = {
            "ops": {
                op: {"tensors": count, "bytes": nbytes, "seconds": time_us / 1e6}
                for op, (count, nbytes, time_us) in raw["ops"].items()
            },
            "wait_seconds": raw["wait_us"] / 1e6,
            "slowest_tensors": [
                {
                    "name": name,
                    "count": count,
                    "bytes": nbytes,
                    "seconds": total_us / 1e6,
                    "most_seconds": most_us / 1e6,
                    "wait_seconds": wait_us / 1e6,
                }
                for name, (count, nbytes, total_us, most_us, wait_us) in tensors[:SLOWEST_TENSORS]
            ],
            "tensor_names": len(raw["tensors"]),
            "arrivals": raw["arrivals"],
            "last_arrivals": {
                str(job_rank): {
                    "times": last,
                    "late_seconds": late_us / 1e6,
                    "most_seconds": most_us / 1e6,
                    "most_tensor": tensor,
                }
                for job_rank, (last, late_us, most_us, tensor) in raw["lateness"].items()
            },
            "stalls": raw["stalls"],
            "stalled_tensors": dict(raw["stalled_tensors"]),
        }
    tensors = stats["tensors"]
    return {
        "schema": SCHEMA,
        "rank": rank,
        "size": size,
        "host": socket.gethostname(),
        "cycles": stats["cycles"],
        "tensors": tensors,
        "cache_hit_rate": stats["cache_hits"] / tensors if tensors else 0.0,
        "fused_buffers": counters["fused_buffers"],
        "fused_bytes_mean": counters["fused_bytes"] / counters["fused_buffers"] if counters["fused_buffers"] else 0,
        "fused_bytes_most": counters["most_fused_bytes"],
        "sets": sets,
    }


def this_rank() -> dict[str, Any]:
    """This process's report, from its running engine (between ``hvd.init()`` and ``hvd.shutdown()``:
    a launcher's ``hvd_before_shutdown`` hook calls it)."""
    import horovod.common as hvd
    from horovod.common import state

    return rank_report(state.context().engine, hvd.rank(), hvd.size())


def _stragglers(reports: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every rank that arrived last at some collective, most often first: from each process set's
    rank 0 (the only member that sees everyone's arrivals)."""
    by_rank: dict[int, dict[str, Any]] = {}
    measured = 0
    for report in reports:
        for set_id, data in report["sets"].items():
            measured += data["arrivals"]
            for job_rank, last in data["last_arrivals"].items():
                entry = by_rank.setdefault(
                    int(job_rank), {"rank": int(job_rank), "times": 0, "late_seconds": 0.0, "most_seconds": 0.0}
                )
                entry["times"] += last["times"]
                entry["late_seconds"] += last["late_seconds"]
                if last["most_seconds"] > entry["most_seconds"]:
                    entry["most_seconds"] = last["most_seconds"]
                    entry["most_tensor"] = last["most_tensor"]
                    entry["process_set"] = int(set_id)
    ranked = sorted(by_rank.values(), key=lambda e: (-e["late_seconds"], e["rank"]))
    for entry in ranked:
        entry["share"] = entry["times"] / measured if measured else 0.0
        entry["mean_late_seconds"] = entry["late_seconds"] / entry["times"] if entry["times"] else 0.0
    return ranked


def job_report(
    reports: Iterable[Mapping[str, Any]],
    size: int,
    *,
    failure: str | None = None,
    ended: Mapping[int, str] | None = None,
) -> dict[str, Any]:
    """The job's report from its ranks'.

    :param reports: the ranks' reports (:func:`rank_report`) that reached the launcher, any order;
        those of another schema are left out.
    :param size: the job's number of ranks: a rank without a report is listed as missing.
    :param failure: what ended the job, when it failed (the launcher's words).
    :param ended: how each rank that failed ended, by rank, for the missing ones' entries.
    """
    kept = sorted((dict(r) for r in reports if r.get("schema") == SCHEMA), key=lambda r: r["rank"])
    present = {r["rank"] for r in kept}
    ops: dict[str, dict[str, float]] = {}
    slow: dict[str, dict[str, float]] = {}
    for report in kept:
        for data in report["sets"].values():
            for op, totals in data["ops"].items():
                mine = ops.setdefault(op, {"tensors": 0, "bytes": 0, "seconds": 0.0})
                for field in mine:
                    mine[field] += totals[field]
            for tensor in data["slowest_tensors"]:
                mine = slow.setdefault(tensor["name"], {"count": 0, "seconds": 0.0, "most_seconds": 0.0, "ranks": 0})
                mine["count"] += tensor["count"]
                mine["seconds"] += tensor["seconds"]
                mine["most_seconds"] = max(mine["most_seconds"], tensor["most_seconds"])
                mine["ranks"] += 1
    slowest = [
        {"name": name, "mean_seconds": v["seconds"] / v["count"], **v}
        for name, v in sorted(slow.items(), key=lambda kv: -kv[1]["seconds"] / max(1, kv[1]["count"]))
    ][:SLOWEST_TENSORS]
    stalls: dict[str, int] = {}
    for report in kept:
        for data in report["sets"].values():
            for name, count in data["stalled_tensors"].items():
                stalls[name] = stalls.get(name, 0) + count
    return {
        "schema": SCHEMA,
        "size": size,
        "failure": failure,
        "missing_ranks": {
            str(rank): (ended or {}).get(rank, "no report (it did not reach shutdown)")
            for rank in range(size)
            if rank not in present
        },
        "ops": ops,
        "stragglers": _stragglers(kept),
        "slowest_tensors": slowest,
        "stalled_tensors": stalls,
        "ranks": kept,
    }


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def summary(report: Mapping[str, Any]) -> list[str]:
    """The report's few lines for the end of a job's output: what ran, each rank's time in
    collectives and waiting (up to ``SUMMARY_RANKS`` ranks), the stragglers, the slowest tensors,
    stalls, the ranks that sent nothing and the failure.

    :param report: the job's report (:func:`job_report`).
    """
    lines = []
    ranks = report["ranks"]
    per_rank = []
    for r in ranks:
        collective = sum(op["seconds"] for data in r["sets"].values() for op in data["ops"].values())
        wait = sum(data["wait_seconds"] for data in r["sets"].values())
        per_rank.append(f"rank {r['rank']} {collective:.2f} s in collectives, {wait:.2f} s waiting")
    ops = ", ".join(f"{op} {int(v['tensors'])} tensors {_bytes(v['bytes'])}" for op, v in sorted(report["ops"].items()))
    lines.append(f"job report: {len(ranks)} of {report['size']} ranks reported; {ops or 'no collectives'}")
    if per_rank and len(per_rank) <= SUMMARY_RANKS:
        lines.append("  " + "; ".join(per_rank))
    for straggler in report["stragglers"][:3]:
        if straggler["share"] < STRAGGLER_SHARE:  # last now and then: the ranks' usual jitter
            continue
        lines.append(
            f"  straggler: rank {straggler['rank']} arrived last at {straggler['times']} collectives "
            f"({straggler['share']:.0%}), {straggler['mean_late_seconds'] * 1000:.0f} ms after the first on average "
            f"(most {straggler['most_seconds'] * 1000:.0f} ms, at {straggler.get('most_tensor', '?')})"
        )
    for tensor in report["slowest_tensors"][:SUMMARY_TENSORS]:
        lines.append(
            f"  slow tensor: {tensor['name']}: {tensor['mean_seconds'] * 1000:.1f} ms from submission to completion "
            f"on average ({int(tensor['count'])} times)"
        )
    for name, count in sorted(report["stalled_tensors"].items(), key=lambda kv: -kv[1])[:SUMMARY_TENSORS]:
        lines.append(f"  stalled: {name} ({count} stall warnings)")
    for rank, why in sorted(report["missing_ranks"].items(), key=lambda kv: int(kv[0])):
        lines.append(f"  rank {rank}: {why}")
    if report.get("failure"):
        lines.append(f"  the job failed: {report['failure']}")
    return lines
