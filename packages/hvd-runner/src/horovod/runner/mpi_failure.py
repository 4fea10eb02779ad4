"""Which rank made an mpirun job fail, read from what mpirun printed (when it says).

mpirun's exit status is the failing rank's, but only Open MPI names the rank ("The first process
to do so was: Process name: [...,1] Exit code: 3", or "process rank 1 ... exited on signal 11").
MPICH's Hydra names none (its "BAD TERMINATION" box gives a PID). With either, a rank that died of
an uncaught Python exception printed a traceback tagged with its rank (``--tag-output``:
``[1,1]<stderr>: Traceback ...``; ``-prepend-rank``: ``[1] Traceback ...``). Its peers print
tracebacks too, of ``HorovodInternalError``: those are consequences, not causes, but their message
names the rank that was lost ("Horovod has stopped: rank 1 shut Horovod down ...").
"""

from __future__ import annotations

import re

# Open MPI 5: "[prterun-vm-3055@1,1]"; Open MPI 4: "[[52381,1],1]". The rank is after the last comma.
_OPENMPI_EXIT = re.compile(r"Process name:\s*\[(?:\[[^\]]*\]|[^\],\n]*),(\d+)\]\s*\n\s*Exit code:\s*(\d+)")
_OPENMPI_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on\s+signal (\d+)(?: \(([^)]*)\))?")
# A line of a rank's output: "[1] text" (Hydra) or "[1,1]<stderr>: text" (Open MPI: job, rank).
_TAGGED = re.compile(r"^\[(?:\d+,)?(\d+)\](?:<std\w+>:)? ?(.*)$")
_CONSEQUENCE = "HorovodInternalError"
_NAMED_RANK = re.compile(r"\brank (\d+)\b")


def _exceptions(output: str) -> list[tuple[int, str]]:
    """(rank, the last line of its traceback: the exception), in the order tracebacks began."""
    in_traceback: dict[int, bool] = {}
    last: dict[int, str] = {}
    for line in output.splitlines():
        match = _TAGGED.match(line)
        if not match:
            continue
        rank, text = int(match.group(1)), match.group(2)
        if text.startswith("Traceback (most recent call last):"):
            in_traceback[rank] = True
            last.setdefault(rank, "")
        elif in_traceback.get(rank) and text and not text[0].isspace():
            last[rank] = text.strip()
            in_traceback[rank] = False
    return [(rank, text) for rank, text in last.items() if text]


def _from_tracebacks(output: str) -> str | None:
    found = _exceptions(output)
    for rank, exception in found:
        if _CONSEQUENCE not in exception:
            return f"rank {rank} raised {exception}"
    for rank, exception in found:
        named = _NAMED_RANK.search(exception)
        if named and int(named.group(1)) != rank:
            return f"rank {named.group(1)} (named by rank {rank}'s error: {exception})"
    return None


def failed_rank(output: str) -> str | None:
    """ "rank N exited with code C" (and the like) when mpirun's ``output`` tells which rank failed."""
    match = _OPENMPI_EXIT.search(output)
    if match:
        return f"rank {match.group(1)} exited with code {match.group(2)}"
    match = _OPENMPI_SIGNAL.search(output)
    if match:
        name = f" ({match.group(3)})" if match.group(3) else ""
        return f"rank {match.group(1)} was killed by signal {match.group(2)}{name}"
    return _from_tracebacks(output)


def describe(returncode: int, output: str) -> str:
    """The launcher's one-line summary of a failed mpirun."""
    how = f"mpirun was killed by signal {-returncode}" if returncode < 0 else f"mpirun exited with code {returncode}"
    culprit = failed_rank(output)
    return f"job failed: {culprit}; {how}" if culprit else f"job failed: {how} (it did not say which rank)"
