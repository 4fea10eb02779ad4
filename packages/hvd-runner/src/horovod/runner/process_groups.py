"""Process groups and process states, for both ways horovodrun starts ranks (itself, or mpirun).

Each rank (or mpirun) runs in its own session and process group, so that it and whatever it
started can be signalled and watched as one.
"""

from __future__ import annotations

import contextlib
import os


def shell_status(returncode: int) -> int:
    """The status a shell would report for ``subprocess``'s return code: the code, or 128 + N when
    killed by signal N."""
    return returncode if returncode >= 0 else 128 - returncode


def group_alive(pgid: int) -> bool:
    """Whether a process group still has a live (non-zombie) member."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        entries = None
    if entries is None or not os.path.exists("/proc/self/stat"):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in entries:
        fields = _stat_fields(entry) if entry.isdigit() else None
        if fields and len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def is_stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped by a signal or a tracer (state T or t in /proc)."""
    fields = _stat_fields(pid)
    return bool(fields and fields[0] in (b"T", b"t"))


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def signal_group(pgid: int, signum: int) -> None:
    """Sends ``signum`` to process group ``pgid``; a group already gone is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
