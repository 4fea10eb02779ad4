"""The collectives across two hosts (run_all.py --only hosts): the cluster, the launch, the table.

The hosts are network namespaces on this machine (horovod.runner.testing.netns_cluster): each runs
sshd and has its own interface on a bridge, so horovodrun starts the ranks over ssh and every byte
between them crosses TCP over a veth pair, as between two machines (without a wire's bandwidth or
latency: what it measures is what each library does on TCP, not a network). It needs root, `ip` and
sshd; without them the table says so and the other benchmarks go on.

This module imports neither torch nor hvd (run_all.py imports it): the ranks run hosts.py.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from stats import human_bytes, load_average, spread, summary

HERE = Path(__file__).resolve().parent
# Its own prefix and subnet: the test suites' clusters (hvdt, ...) may be up at the same time.
PREFIX, SUBNET = "hvdb", 6
# torch.distributed's rendezvous port on the first host: the namespace is new, so nothing else holds it.
TORCH_PORT = 29500


def missing() -> str | None:
    """Why the cluster cannot run here, or None."""
    from horovod.runner.testing.netns_cluster import requirements_missing

    return requirements_missing()


def run_hosts(
    out: Path,
    args: list[str],
    *,
    extra_env: Mapping[str, str] | None = None,
    timeout: int = 3600,
    script: str = "hosts.py",
    slots: int = 1,
) -> dict:
    """`script` (hosts.py) on two namespace hosts, `slots` ranks each, with `args`; returns what rank 0 wrote.

    The cluster is torn down however the run ends (the context manager), a hung run included (the
    timeout). `extra_env` reaches both ranks (horovodrun forwards the launcher's environment).
    """
    from horovod.runner.testing.netns_cluster import NetnsCluster

    with NetnsCluster(hosts=2, prefix=PREFIX, subnet=SUBNET) as cluster:
        first, second = cluster.hosts
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "HVD_BENCH_TORCH_ADDR": cluster.address(first),
            "HVD_BENCH_TORCH_PORT": str(TORCH_PORT),
            # torch's gloo picks its interface from the host name otherwise, which names no cluster address.
            "GLOO_SOCKET_IFNAME": cluster.interface,
            **(extra_env or {}),
        }
        # horovodrun runs on the first host, as a launcher on a cluster's head node would; the
        # namespaces share this filesystem, so the same interpreter and paths work on both.
        launcher = [sys.executable, "-m", "horovod.runner", "-H", f"{first}:{slots},{second}:{slots}"]
        launcher += ["--network-interface", cluster.interface]
        command = [*launcher, sys.executable, str(HERE / script), "--out", str(out), *args]
        subprocess.run(cluster.command(first, command), check=True, env=env, cwd=HERE, timeout=timeout)
    return json.loads(out.read_text())


def alternating_launches(
    tmp: str, tag: str, settings: Mapping[str, Mapping[str, str]], pairs: int, args: list[str], **launch
) -> dict[str, list[dict]]:
    """`pairs` launches of each setting (the environment it adds), one of each in turn, so that every
    setting sees the machine's load change alike: {setting: [what rank 0 wrote, launch by launch]}.
    `launch` goes to run_hosts (script, slots); its errors too."""
    runs: dict[str, list[dict]] = {kind: [] for kind in settings}
    for i in range(pairs):
        for k, (kind, env) in enumerate(settings.items()):
            runs[kind].append(run_hosts(Path(tmp) / f"{tag}-{k}-{i}.json", args, extra_env=env, **launch))
    return runs


def measured_or_why(title: str, build: Callable[[], list[str]]) -> list[str]:
    """`build()`'s table, or one line saying why the cluster could not measure `title` (the other
    benchmarks go on): the machine lacks what the cluster needs, or the cluster failed to come up."""
    from horovod.runner.testing.netns_cluster import ClusterError

    why = missing()
    if not why:
        try:
            return build()
        except ClusterError as error:  # not hvd's failure: the namespaces could not be set up or torn down
            why = f"the namespace cluster failed: {error}"
    print(f"{title}: not measured ({why})", file=sys.stderr)
    return [f"### {title}: not measured ({why})"]


def counts_by_size(results: list[dict], count: Callable[[dict], int]) -> str:
    """'20 (4 KiB..64 KiB), 3 (256 KiB..16 MiB), ...': `count` of each result (calls per repetition,
    repetitions), by the sizes that share it."""
    ranges: dict[int, list[int]] = {}
    for r in results:
        ranges.setdefault(count(r), []).append(r["bytes"])
    return ", ".join(
        f"{n} ({human_bytes(min(sizes))}..{human_bytes(max(sizes))})"
        for n, sizes in sorted(ranges.items(), key=lambda kv: min(kv[1]))
    )


def repetition_ratios(result: dict) -> list[float]:
    """hvd/torch busbw of each repetition of one result: the same bytes and factor on both sides,
    so the inverse ratio of its two times."""
    return [t / h for h, t in zip(result["hvd"]["samples"], result["torch"]["samples"], strict=True)]


def pooled_launches(launches: list[dict]) -> dict:
    """Several launches of the sweep as one: each result's repetitions of every launch together (a
    launch's repetitions alternate hvd and torch.distributed, so its pairs stay pairs), with each
    launch's own median ratio kept as `launch_ratios`. A launch sees the machine in one state for
    minutes; pooled, a cell no longer rests on a single one."""
    pooled = {**launches[0], "launches": len(launches), "results": []}
    for k, first in enumerate(launches[0]["results"]):
        same = [launch["results"][k] for launch in launches]
        pooled["results"].append(
            {
                **first,
                **{side: summary([x for r in same for x in r[side]["samples"]]) for side in ("hvd", "torch")},
                "launch_ratios": [statistics.median(repetition_ratios(r)) for r in same],
                "load": ", ".join(r["load"] for r in same),
            }
        )
    return pooled


def hosts_table(data: dict) -> list[str]:
    """One row per collective and size: medians of each side, and the median of the repetitions' ratios."""
    results = data["results"]
    launches = data.get("launches", 1)
    ratio_spread = (
        "[min..max] of the repetitions"
        if launches == 1
        else f"over the {launches} launches of the sweep, one after another, [lowest..highest launch's median]"
    )
    torch_ops = sorted({r["torch_op"] for r in results if r["torch_op"]})
    rows = [
        (
            f"### Collectives across {data['hosts']} hosts, {data['ranks']} ranks (one per host), hvd on Gloo over TCP "
            "(float32; time per op: median [min..max] of the repetitions)"
        ),
        "",
        "Method: the hosts are network namespaces on this machine, each with sshd and its own interface on",
        "a bridge (horovod.runner.testing.netns_cluster); horovodrun on the first starts a rank on each over",
        "ssh, and torch.distributed (gloo) in the same processes connects to the first host's address, so",
        "both libraries move every byte over TCP through a veth pair (no wire: this measures what each does",
        "on TCP, bounded by the machine's cores). One thread per rank for both (OMP_NUM_THREADS=1,",
        "torch.set_num_threads(1)). Within each size the repetitions alternate hvd and torch.distributed,",
        (
            f"after {data['warmup']} warm-up calls each; calls per repetition: "
            f"{counts_by_size(results, lambda r: r['inner'])}; repetitions: "
            f"{counts_by_size(results, lambda r: r['hvd']['n'])}."
        ),
        "Each repetition starts after a barrier (untimed) and counts on the rank that finished last: the",
        "op is done when every rank has its result (a broadcast's root returns before its receivers do).",
        "busbw = bytes / time x 2(n-1)/n for allreduce, x (n-1)/n for allgather, reducescatter and",
        "alltoall, x 1 for broadcast (bytes: each rank's input). hvd/torch: the median of the repetitions'",
        f"own busbw ratios {ratio_spread}, the figure that counts on this noisy machine. Out of place: hvd's",
        "`hvd.allreduce` against torch's clone + all_reduce."
        + (f" torch's reducescatter: `{', '.join(torch_ops)}`." if torch_ops else ""),
        "",
        "| op | size | hvd time | torch.distributed time | hvd busbw | torch busbw | hvd/torch busbw | load 1m/5m |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        bus_h, bus_t = (r["bytes"] / r[side]["median"] * r["busbw_factor"] for side in ("hvd", "torch"))
        ratios = repetition_ratios(r)
        low, high = (min(r["launch_ratios"]), max(r["launch_ratios"])) if launches > 1 else (min(ratios), max(ratios))
        rows.append(
            f"| {r['bench']} | {human_bytes(r['bytes'])} | {spread(r['hvd'])} | {spread(r['torch'])} | "
            f"{bus_h / 1e9:.3f} GB/s | {bus_t / 1e9:.3f} GB/s | "
            f"{statistics.median(ratios):.2f} [{low:.2f}..{high:.2f}] | {r['load']} |"
        )
    return rows


def hosts_section(tmp: str, args: list[str], launches: int = 1) -> list[str]:
    """run_all.py's part: the table (of `launches` launches of the sweep, pooled), or one line saying
    why it was not measured."""

    def build() -> list[str]:
        before = load_average()
        data = pooled_launches([run_hosts(Path(tmp) / f"hosts-{i}.json", args) for i in range(launches)])
        after = f"Load average 1m/5m before the cross-host run: {before}, after: {load_average()}."
        return [*hosts_table(data), "", after]

    return measured_or_why("Collectives across hosts", build)


#: Launches of each kind (flat, hierarchical) for the hierarchical table, alternating.
HIERARCHICAL_PAIRS = 3


def hierarchical_section(tmp: str) -> list[str]:
    """Flat against hierarchical allreduce on two hosts of two ranks each, in alternating launches
    (the choice is made at init), or one line saying why it was not measured."""
    return measured_or_why("Hierarchical allreduce across hosts", lambda: hierarchical_table(tmp))


def hierarchical_table(tmp: str) -> list[str]:
    before = load_average()
    settings = {
        "flat": {"HOROVOD_HIERARCHICAL_ALLREDUCE": "0"},
        "hierarchical": {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1"},
    }
    runs = alternating_launches(tmp, "hier", settings, HIERARCHICAL_PAIRS, [], script="hierarchical.py", slots=2)
    rows = [
        "### Hierarchical allreduce across 2 hosts of 2 ranks (hvd on Gloo; float32 allreduce in place)",
        "",
        "Method: the cluster of the table above, `-H h0:2,h1:2`: ranks of one host talk through shared memory,",
        "across hosts over TCP. `HOROVOD_HIERARCHICAL_ALLREDUCE=0` and `=1` in alternating launches,",
        f"{HIERARCHICAL_PAIRS} of each; each figure is the median over launches of a launch's median time per",
        "allreduce; the ratio is the median of the pairs' ratios (flat / hierarchical: above 1, the",
        "hierarchy wins). Four ranks share this machine's two cores, so the figures say what each algorithm",
        "costs in copies and steps here,",
        "not what a network between machines would make of it.",
        "",
        "| size | flat | hierarchical | flat / hierarchical |",
        "|---|---|---|---|",
    ]
    sizes = [r["bytes"] for r in runs["flat"][0]["results"]]
    for k, size in enumerate(sizes):
        flat = [run["results"][k]["median"] for run in runs["flat"]]
        hier = [run["results"][k]["median"] for run in runs["hierarchical"]]
        ratios = [f / h for f, h in zip(flat, hier, strict=True)]
        rows.append(
            f"| {human_bytes(size)} | {statistics.median(flat) * 1e3:.2f} ms | {statistics.median(hier) * 1e3:.2f} ms "
            f"| {statistics.median(ratios):.2f} [{min(ratios):.2f}..{max(ratios):.2f}] |"
        )
    used = {run["hierarchical_allreduces"] > 0 for run in runs["hierarchical"]} | {
        run["hierarchical_allreduces"] == 0 for run in runs["flat"]
    }
    if used != {True}:
        rows.append("")
        rows.append("(a launch did not use the algorithm it was meant to: see hierarchical_allreduces in its JSON)")
    return [*rows, "", f"Load average 1m/5m before: {before}, after: {load_average()}."]
