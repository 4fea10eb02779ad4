"""Cached ops across two hosts with eager messages on, with the negotiation records alone sent that
way, and off (run_all.py --only eager): what sending ahead saves each collective.

Alternating launches of hosts.py on the namespace cluster of hosts_table.py: the defaults
(HOROVOD_NEGOTIATION_EAGER_BYTES=4194304: every member's negotiation record goes straight to each
peer, and a cached broadcast's or alltoall's data up to 4 MiB per peer goes ahead of negotiation),
the records alone (a 4 KiB limit, so no data of these sizes goes ahead: it rides the negotiation
inline or goes the usual way), and neither (0: records by allgather, data after negotiation). Each
cell is hvd's busbw against torch.distributed's from the same repetitions.
"""

from __future__ import annotations

import statistics

from hosts_table import alternating_launches, measured_or_why
from stats import human_bytes, load_average

#: Launches of each setting, alternating.
EAGER_PAIRS = 3
OPS = ["broadcast", "alltoall", "allreduce"]
SIZES = ["4096", "262144", "1048576", "4194304"]
SETTINGS = {
    "records and data": {},
    "records only": {"HOROVOD_NEGOTIATION_EAGER_BYTES": "4096"},
    "off": {"HOROVOD_NEGOTIATION_EAGER_BYTES": "0"},
}


def eager_section(tmp: str) -> list[str]:
    """The table, or one line saying why it was not measured."""
    return measured_or_why("Eager messages across hosts", lambda: eager_table(tmp))


def _ratios(run: dict, k: int) -> list[float]:
    """Each repetition's hvd/torch busbw ratio (torch's time over hvd's) for result `k` of a launch."""
    result = run["results"][k]
    return [t / h for h, t in zip(result["hvd"]["samples"], result["torch"]["samples"], strict=True)]


def eager_table(tmp: str) -> list[str]:
    before = load_average()
    runs = alternating_launches(
        tmp, "eager", SETTINGS, EAGER_PAIRS, ["--ops", *OPS, "--sizes", *SIZES, "--repeats", "9"]
    )
    rows = [
        "### Cached ops across 2 hosts: eager messages on, the negotiation records alone, and off (hvd, TCP)",
        "",
        "Method: the cluster and script of the hosts table (one rank per host, float32, the same name every",
        "call, so each op after the first is a cache hit; repetitions alternate hvd and torch.distributed,",
        "each after a barrier, counted on the rank that finished last). Three settings of",
        f"`HOROVOD_NEGOTIATION_EAGER_BYTES` in alternating launches, {EAGER_PAIRS} of each: the default 4194304",
        "(records and data ahead), 4096 (the records alone: no data of these sizes goes ahead) and 0 (neither). Each",
        "cell: hvd/torch busbw, the median of every repetition's own ratio over all launches of the",
        "setting [the lowest..highest launch's median].",
        "",
        "| op | size | " + " | ".join(SETTINGS) + " |",
        "|---|---|" + "---|" * len(SETTINGS),
    ]
    for k, r in enumerate(runs["off"][0]["results"]):
        cells = []
        for kind in SETTINGS:
            pooled = statistics.median(x for run in runs[kind] for x in _ratios(run, k))
            launches = [statistics.median(_ratios(run, k)) for run in runs[kind]]
            cells.append(f"{pooled:.2f} [{min(launches):.2f}..{max(launches):.2f}]")
        rows.append(f"| {r['bench']} | {human_bytes(r['bytes'])} | " + " | ".join(cells) + " |")
    return [*rows, "", f"Load average 1m/5m before: {before}, after: {load_average()}."]
