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
INLINE_PAIRS = 8
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
        f"default) and `=0` in alternating launches, {INLINE_PAIRS} of each. Each time is the median of every",
        "repetition of every launch of that setting (a repetition: the mean of 20 calls); without / with is the",
        "ratio of those medians (above 1, riding the negotiation wins), with the range of the launch pairs' own",
        "ratios. torch.distributed (gloo) from the launches with the inline space, for scale.",
        "",
        "| op | size | with inline | without | without / with | torch.distributed |",
        "|---|---|---|---|---|---|",
    ]
    for k, r in enumerate(runs["inline"][0]["results"]):
        with_, without, torch = (
            [t for run in runs[kind] for t in run["results"][k][side]["samples"]]
            for kind, side in (("inline", "hvd"), ("no inline", "hvd"), ("inline", "torch"))
        )
        pairs = [  # each pair of launches' own ratio of medians
            a["results"][k]["hvd"]["median"] / b["results"][k]["hvd"]["median"]
            for a, b in zip(runs["no inline"], runs["inline"], strict=True)
        ]
        with_m, without_m = statistics.median(with_), statistics.median(without)
        rows.append(
            f"| {r['bench']} | {human_bytes(r['bytes'])} | {with_m * 1e6:.0f} us | {without_m * 1e6:.0f} us "
            f"| {without_m / with_m:.2f} [{min(pairs):.2f}..{max(pairs):.2f}] "
            f"| {statistics.median(torch) * 1e6:.0f} us |"
        )
    return [*rows, "", f"Load average 1m/5m before: {before}, after: {load_average()}."]
