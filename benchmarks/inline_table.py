"""Small cached ops across two hosts with and without the negotiation record's inline space
(run_all.py --only inline): what riding the negotiation saves a broadcast or allreduce.

Alternating launches of hosts.py on the namespace cluster of hosts_table.py, with
HOROVOD_NEGOTIATION_INLINE_BYTES at its default (1024) and at 0; torch.distributed's time from the
same launches is shown for scale.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from hosts_table import missing, run_hosts
from stats import human_bytes, load_average

#: Launches of each setting, alternating.
INLINE_PAIRS = 3
SIZES = ["64", "256", "1024"]
SETTINGS = {"inline": "1024", "no inline": "0"}


def inline_section(tmp: str) -> list[str]:
    """The table, or one line saying why it was not measured."""
    from horovod.runner.testing.netns_cluster import ClusterError

    why = missing()
    if why:
        return [f"### Negotiation inline space across hosts: not measured ({why})"]
    before = load_average()
    runs: dict[str, list[dict]] = {kind: [] for kind in SETTINGS}
    try:
        for i in range(INLINE_PAIRS):
            for kind, inline_bytes in SETTINGS.items():
                out = Path(tmp) / f"inline-{inline_bytes}-{i}.json"
                args = ["--ops", "broadcast", "allreduce", "--sizes", *SIZES]
                runs[kind].append(run_hosts(out, args, extra_env={"HOROVOD_NEGOTIATION_INLINE_BYTES": inline_bytes}))
    except ClusterError as error:
        return [f"### Negotiation inline space across hosts: not measured (the namespace cluster failed: {error})"]
    rows = [
        "### Small cached ops across 2 hosts, with and without the negotiation's inline space (hvd on Gloo over TCP)",
        "",
        "Method: the cluster and script of the table above (one rank per host, float32, the same name every",
        "call, so each op after the first is a cache hit), `HOROVOD_NEGOTIATION_INLINE_BYTES=1024` (the",
        f"default) and `=0` in alternating launches, {INLINE_PAIRS} of each. Each figure is the median over",
        "launches of a launch's median time per op; the ratio is the median of the pairs' ratios (without /",
        "with: above 1, riding the negotiation wins). torch.distributed (gloo) from the same launches, for scale.",
        "",
        "| op | size | with inline | without | without / with | torch.distributed |",
        "|---|---|---|---|---|---|",
    ]
    for k, r in enumerate(runs["inline"][0]["results"]):
        with_ = [run["results"][k]["hvd"]["median"] for run in runs["inline"]]
        without = [run["results"][k]["hvd"]["median"] for run in runs["no inline"]]
        torch = [run["results"][k]["torch"]["median"] for kind in SETTINGS for run in runs[kind]]
        ratios = [w / i for i, w in zip(with_, without, strict=True)]
        rows.append(
            f"| {r['bench']} | {human_bytes(r['bytes'])} | {statistics.median(with_) * 1e6:.0f} us "
            f"| {statistics.median(without) * 1e6:.0f} us "
            f"| {statistics.median(ratios):.2f} [{min(ratios):.2f}..{max(ratios):.2f}] "
            f"| {statistics.median(torch) * 1e6:.0f} us |"
        )
    return [*rows, "", f"Load average 1m/5m before: {before}, after: {load_average()}."]
