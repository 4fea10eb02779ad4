"""Every rank's timeline on one clock (``HOROVOD_TIMELINE_ALL_RANKS=1``, horovodrun's
``--timeline-all-ranks``), merged into one Chrome trace with a track per rank.

Each rank writes its own timeline, ``<HOROVOD_TIMELINE>.rank<N>``, whose first event (``hvd_clock``)
says where its times start on that host's monotonic clock and in Unix time. When the timeline
starts, the ranks measure how far each one's monotonic clock is from rank 0's: a few allgathers in a
row, each rank reading its clock as each one completes (they complete together, within the wake-up
of each rank), the median of those readings' differences giving the offset and their spread its
uncertainty; each rank writes its own to ``<its timeline>.clock.json``. :func:`merge` puts every
event on rank 0's clock, one track (process) per rank with a row (thread) per tensor, and checks the
alignment at the end: the same collective completes on every rank at about one moment, so the
median difference of the ranks' completions, after alignment, is the skew left; the merged file's
metadata gives it beside the measured offsets.

    python -m horovod.common.timelines OUT RANK_FILE...     # merge (horovodrun does it by itself)
    python -m horovod.common.timelines --svg OUT.svg MERGED  # a picture of a merged trace (:func:`to_svg`)

.. versionadded:: 0.2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["clock_file", "measure_clock_offset", "merge", "note_clock", "rank_files", "to_svg"]

#: Allgathers the clock measurement takes.
CLOCK_ROUNDS = 7
#: The rows of the clock measurement's collectives (left out of the picture).
CLOCK_ROWS = "hvd.clock."
#: Phases whose end marks a collective's completion, for the end check.
COMPLETIONS = ("ALLREDUCE", "ALLGATHER", "BROADCAST", "ALLTOALL", "REDUCESCATTER")


def rank_files(path: str | Path, size: int) -> list[Path]:
    """Where each rank writes its timeline for ``HOROVOD_TIMELINE=path`` with every rank writing.

    :param path: the timeline path the job was given.
    :param size: the job's number of ranks.
    """
    return [Path(f"{path}.rank{rank}") for rank in range(size)]


def clock_file(timeline: str | Path) -> Path:
    """The file beside a rank's timeline holding its measured clock offset.

    :param timeline: the rank's own timeline file.
    """
    return Path(f"{timeline}.clock.json")


def measure_clock_offset(rounds: int = CLOCK_ROUNDS) -> tuple[float, float]:
    """(offset, uncertainty) in microseconds of this rank's monotonic clock from rank 0's, by
    ``rounds`` allgathers in a row (a collective: every rank calls it).

    :param rounds: how many allgathers: each gives one reading per rank.
    """
    import numpy as np

    import horovod.common as hvd

    readings = []
    hvd.allgather(np.zeros((1, 1), np.int64), name=CLOCK_ROWS + "sync")
    for k in range(rounds):
        now = time.monotonic_ns() // 1000  # the microseconds of the timeline's events
        gathered = hvd.allgather(np.array([[now]], np.int64), name=f"{CLOCK_ROWS}{k}")
        readings.append(int(gathered[hvd.rank(), 0]) - int(gathered[0, 0]))
    offset = statistics.median(readings)
    return float(offset), float(max(abs(r - offset) for r in readings))


def note_clock(timeline: str | Path) -> None:
    """Measures this rank's clock offset and writes it beside its timeline (a collective).

    :param timeline: this rank's own timeline file.
    """
    import horovod.common as hvd

    offset, uncertainty = measure_clock_offset()
    clock_file(timeline).write_text(
        json.dumps({"rank": hvd.rank(), "offset_us": offset, "uncertainty_us": uncertainty}) + "\n"
    )


def _read(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    events = json.loads(path.read_text())
    clock = next((e["args"] for e in events if e.get("name") == "hvd_clock"), None)
    if clock is None:
        raise ValueError(f"{path}: no hvd_clock event: not a timeline written with HOROVOD_TIMELINE_ALL_RANKS")
    measured_path = clock_file(path)
    measured = json.loads(measured_path.read_text()) if measured_path.exists() else {}
    return events, clock, measured


def _completions(events: list[dict[str, Any]], rows: dict[int, str], shift: float) -> dict[tuple[str, int], float]:
    """(tensor, its n-th completion) -> when, on the merged clock."""
    open_by_row: dict[int, list[str]] = {}
    seen: dict[str, int] = {}
    found = {}
    for e in events:
        if e.get("ph") == "B":
            open_by_row.setdefault(e["pid"], []).append(e.get("name", ""))
        elif e.get("ph") == "E" and open_by_row.get(e["pid"]):
            name = open_by_row[e["pid"]].pop()
            tensor = rows.get(e["pid"], "")
            if name in COMPLETIONS and tensor:
                n = seen.get(tensor, 0)
                seen[tensor] = n + 1
                found[(tensor, n)] = e["ts"] + shift
    return found


def merge(out: str | Path, paths: Sequence[str | Path]) -> dict[str, Any]:
    """Merges the ranks' timelines into ``out``: one Chrome trace (JSON object format, which
    Perfetto and chrome://tracing open) on rank 0's clock, a track per rank and a row per tensor.
    Returns the merged file's metadata (ranks, offsets, the skew left).

    :param out: the merged file.
    :param paths: the ranks' timeline files, any order.
    """
    ranks = []
    for path in paths:
        events, clock, measured = _read(Path(path))
        ranks.append((int(clock["rank"]), events, clock, measured))
    ranks.sort(key=lambda r: r[0])
    # Rank r's event at ts is at start_r + ts on its clock, start_r + ts - offset_r on rank 0's.
    origin = min(clock["start_monotonic_us"] - measured.get("offset_us", 0.0) for _, _, clock, measured in ranks)
    merged: list[dict[str, Any]] = []
    completions = {}
    for rank, events, clock, measured in ranks:
        shift = clock["start_monotonic_us"] - measured.get("offset_us", 0.0) - origin
        rows = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
        merged.append({"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"rank {rank}"}})
        merged.append({"name": "process_sort_index", "ph": "M", "pid": rank, "args": {"sort_index": rank}})
        for row, tensor in rows.items():
            merged.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": row, "args": {"name": tensor}})
        merged.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": 0, "args": {"name": "cycles"}})
        for e in events:
            if e.get("ph") == "M":
                continue
            moved = dict(e)
            moved["ts"] = round(e["ts"] + shift, 1)
            moved["tid"] = e.get("pid", 0)  # the tensor's row becomes a row of the rank's track
            moved["pid"] = rank
            merged.append(moved)
        completions[rank] = _completions(events, rows, shift)
    # The end check: the same collective completes together on every rank.
    differences = [
        when - completions[ranks[0][0]][key]
        for rank, _, _, _ in ranks[1:]
        for key, when in completions[rank].items()
        if key in completions[ranks[0][0]]
    ]
    metadata = {
        "ranks": [rank for rank, _, _, _ in ranks],
        "start_unix_us": min(clock["start_unix_us"] for _, _, clock, _ in ranks),
        "clock_offsets_us": {str(rank): measured.get("offset_us") for rank, _, _, measured in ranks},
        "clock_uncertainty_us": {str(rank): measured.get("uncertainty_us") for rank, _, _, measured in ranks},
        "completion_skew_us": statistics.median(differences) if differences else None,
        "collectives_compared": len(differences),
    }
    partial = Path(f"{out}.partial")
    partial.write_text(json.dumps({"traceEvents": merged, "displayTimeUnit": "ms", "metadata": metadata}) + "\n")
    partial.replace(out)
    return metadata


#: The picture's phases and their colours; other phases are grey.
PHASE_COLOURS = {
    "NEGOTIATE": "#f2b84b",  # submitted, waiting for every rank to submit it too
    "ALLREDUCE": "#3f7fbf",
    "ALLGATHER": "#5aa36b",
    "BROADCAST": "#8e6cc0",
    "ALLTOALL": "#c0605a",
    "REDUCESCATTER": "#4bb3b3",
    "MEMCPY": "#9aa7b4",
}


def _colour(phase: str) -> str:
    for prefix, colour in PHASE_COLOURS.items():
        if phase.startswith(prefix):
            return colour
    return "#bbbbbb"


def to_svg(trace: dict[str, Any], width: int = 1200, row_height: int = 16) -> str:
    """A picture of a merged trace (:func:`merge`'s file, loaded): a band per rank, a row per
    tensor, each phase a bar on the common time axis (negotiation, the wait for peers included, in
    amber). For documentation and a quick look; Perfetto shows the same trace with every detail.

    The rows of the clock measurement's own collectives (``hvd.clock.*``) are left out.

    :param trace: the merged trace (``json.load`` of its file).
    :param width: the picture's width in pixels.
    :param row_height: each row's height in pixels.
    """
    from xml.sax.saxutils import escape

    events = trace["traceEvents"]
    tracks = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    rows = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    spans: list[tuple[int, int, str, float, float]] = []
    open_spans: dict[tuple[int, int], list[tuple[str, float]]] = {}
    for e in events:
        key = (e.get("pid", 0), e.get("tid", 0))
        if e.get("ph") == "B":
            open_spans.setdefault(key, []).append((e.get("name", ""), e["ts"]))
        elif e.get("ph") == "E" and open_spans.get(key):
            name, begin = open_spans[key].pop()
            if not rows.get(key, "").startswith(CLOCK_ROWS):
                spans.append((key[0], key[1], name, begin, e["ts"]))
    if not spans:
        raise ValueError("the trace has no phases to draw")
    start, end = min(s[3] for s in spans), max(s[4] for s in spans)
    label, axis = 150, 24
    scale = (width - label - 50) / max(end - start, 1.0)
    used = sorted({(rank, row) for rank, row, *_ in spans})
    y_of = {key: axis + i * row_height + 18 * sorted(tracks).index(key[0]) for i, key in enumerate(used)}
    height = max(y_of.values()) + row_height + 30
    size = f'width="{width}" height="{height}"'
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" {size} font-family="sans-serif" font-size="11">',
        f'<rect {size} fill="white"/>',
    ]
    step = 10 ** max(0, len(str(int((end - start) / 5))) - 1)  # a round tick interval, in microseconds
    tick = start
    while tick <= end:
        x = label + (tick - start) * scale
        out.append(f'<line x1="{x:.1f}" y1="{axis - 6}" x2="{x:.1f}" y2="{height}" stroke="#eeeeee"/>')
        out.append(f'<text x="{x:.1f}" y="{axis - 10}" fill="#666">{(tick - start) / 1000:.0f} ms</text>')
        tick += step * 5
    for rank in sorted(tracks):
        first = min(y for key, y in y_of.items() if key[0] == rank)
        out.append(f'<text x="4" y="{first - 4}" font-weight="bold">{escape(tracks[rank])}</text>')
    for key, y in y_of.items():
        out.append(f'<text x="14" y="{y + row_height - 4}" fill="#333">{escape(rows.get(key, "cycles"))[:22]}</text>')
    for rank, row, name, begin, finish in spans:
        x = label + (begin - start) * scale
        w = max((finish - begin) * scale, 1.0)
        out.append(
            f'<rect x="{x:.1f}" y="{y_of[(rank, row)] + 2}" width="{w:.1f}" height="{row_height - 4}" '
            f'fill="{_colour(name)}"><title>{escape(name)} {(finish - begin) / 1000:.2f} ms</title></rect>'
        )
    x = label
    for phase in ("NEGOTIATE", "ALLREDUCE", "ALLGATHER", "BROADCAST"):
        out.append(f'<rect x="{x}" y="{height - 16}" width="10" height="10" fill="{_colour(phase)}"/>')
        out.append(f'<text x="{x + 14}" y="{height - 7}" fill="#333">{phase.lower()}</text>')
        x += 110
    note = "(negotiation: from submission until every rank has it)"
    out.append(f'<text x="{x}" y="{height - 7}" fill="#666">{note}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m horovod.common.timelines", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the merged trace (with --svg: the picture)")
    parser.add_argument("timelines", nargs="+", help="the ranks' timeline files (<HOROVOD_TIMELINE>.rank<N>)")
    parser.add_argument("--svg", action="store_true", help="draw the one merged trace given instead of merging")
    args = parser.parse_args(argv)
    if args.svg:
        (trace,) = (json.loads(Path(path).read_text()) for path in args.timelines)
        Path(args.out).write_text(to_svg(trace))
        return
    print(json.dumps(merge(args.out, args.timelines)))


if __name__ == "__main__":
    main()
