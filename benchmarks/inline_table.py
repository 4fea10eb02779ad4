"""Small cached ops across two hosts with the negotiation record's inline space grown, at its base
size, and off (run_all.py --only inline): what riding the negotiation saves each collective.

Alternating launches of hosts.py on the namespace cluster of hosts_table.py, with the defaults
(HOROVOD_NEGOTIATION_INLINE_BYTES=1024, and a space that grows by up to
HOROVOD_NEGOTIATION_INLINE_MAX_BYTES=131072 over both records), with the base space alone
(HOROVOD_NEGOTIATION_INLINE_MAX_BYTES=0), and with none (HOROVOD_NEGOTIATION_INLINE_BYTES=0);
torch.distributed's time from the same launches is shown for scale.
"""

from __future__ import annotations

import statistics

from hosts_table import alternating_launches, measured_or_why
from stats import human_bytes, load_average

#: Launches of each setting, alternating.
INLINE_PAIRS = 4
OPS = ["broadcast", "allreduce", "allgather", "alltoall"]
SIZES = ["1024", "4096", "16384", "65536"]
SETTINGS = {
    "grown": {},
    "base": {"HOROVOD_NEGOTIATION_INLINE_MAX_BYTES": "0"},
    "none": {"HOROVOD_NEGOTIATION_INLINE_BYTES": "0"},
}


def inline_section(tmp: str) -> list[str]:
    """The table, or one line saying why it was not measured."""
    return measured_or_why("Negotiation inline space across hosts", lambda: inline_table(tmp))


def inline_table(tmp: str) -> list[str]:
    before = load_average()
    runs = alternating_launches(tmp, "inline", SETTINGS, INLINE_PAIRS, ["--ops", *OPS, "--sizes", *SIZES])
    rows = [
        "### Small cached ops across 2 hosts, the negotiation's inline space grown, at its base, and off (hvd, TCP)",
        "",
        "Method: the cluster and script of the table above (one rank per host, float32, the same name every",
        "call, so each op after the first is a cache hit; each repetition starts after a barrier and counts",
        f"on the rank that finished last). Three settings in alternating launches, {INLINE_PAIRS} of each: the",
        "defaults (a 1 KiB base space that grows by up to 64 KiB per record), `HOROVOD_NEGOTIATION_INLINE_MAX_BYTES=0`",
        "(the base alone), `HOROVOD_NEGOTIATION_INLINE_BYTES=0` (no inline data). Each time is the median of",
        "every repetition of every launch of that setting (a repetition: the mean of 20 calls); none / grown",
        "is the ratio of those medians (above 1, riding the negotiation wins), with the range of the launch",
        "triples' own ratios. torch.distributed (gloo) from the launches with the defaults, for scale.",
        "",
        "| op | size | grown (default) | base only | none | none / grown | torch.distributed |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, r in enumerate(runs["grown"][0]["results"]):
        medians = {
            kind: statistics.median(t for run in runs[kind] for t in run["results"][k]["hvd"]["samples"])
            for kind in SETTINGS
        }
        torch = statistics.median(t for run in runs["grown"] for t in run["results"][k]["torch"]["samples"])
        launches = [  # each round of launches' own ratio of medians
            none["results"][k]["hvd"]["median"] / grown["results"][k]["hvd"]["median"]
            for none, grown in zip(runs["none"], runs["grown"], strict=True)
        ]
        rows.append(
            f"| {r['bench']} | {human_bytes(r['bytes'])} | "
            + " | ".join(f"{medians[kind] * 1e6:.0f} us" for kind in SETTINGS)
            + f" | {medians['none'] / medians['grown']:.2f} [{min(launches):.2f}..{max(launches):.2f}] "
            f"| {torch * 1e6:.0f} us |"
        )
    return [*rows, "", f"Load average 1m/5m before: {before}, after: {load_average()}."]
