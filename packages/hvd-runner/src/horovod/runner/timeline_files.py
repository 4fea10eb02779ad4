"""The ranks' timelines of a horovodrun job (``--timeline-all-ranks``), merged when it ends.

Each rank writes ``FILE.rank<N>`` (and its measured clock offset beside it) on its own host. The
files of this machine's ranks are read where they are; those of ranks on remote hosts are copied
over the job's ssh (``cat``, in the directory the rank ran in), so the merge has every rank whether
or not the hosts share a filesystem. The merge itself is hvd-core's (:mod:`horovod.common.timelines`).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from horovod.runner.settings import JobSettings

#: Seconds one remote file may take to arrive.
FETCH_TIMEOUT_S = 120


def merge_ranks_timelines(env: Mapping[str, str], settings: JobSettings, log: Callable[[str], None]) -> None:
    """With every rank writing its timeline (HOROVOD_TIMELINE_ALL_RANKS), their files merged into
    the timeline's path on this machine, on one clock; one line says what was merged."""
    path = env.get("HOROVOD_TIMELINE", "")
    if env.get("HOROVOD_TIMELINE_ALL_RANKS") != "1" or path in ("", "DYNAMIC"):
        return
    from horovod.common.plugin_api import timelines

    remote = {p.rank: p.hostname for p in settings.placements if p.hostname in settings.remote_hosts}
    with tempfile.TemporaryDirectory(prefix="hvd-timelines-") as scratch:
        found, fetched = [], 0
        for rank, file in enumerate(timelines.rank_files(path, settings.size)):
            if rank not in remote:
                if file.exists():
                    found.append(file)
                continue
            copy = Path(scratch) / file.name
            why = _fetch(settings, remote[rank], file, copy) or _fetch(
                settings, remote[rank], timelines.clock_file(file), timelines.clock_file(copy)
            )
            if why:
                log(f"timeline: rank {rank}'s file {file} not copied from {remote[rank]}: {why}")
                continue
            found.append(copy)
            fetched += 1
        if not found:
            return
        try:
            merged = timelines.merge(path, found)
        except (OSError, ValueError) as error:
            log(f"timeline: the ranks' files were not merged: {error}")
            return
    skew = merged["completion_skew_us"]
    log(
        f"timeline: {len(found)} of {settings.size} ranks' timelines merged into {path}, one track per rank"
        + (f", {fetched} copied from remote hosts over ssh" if fetched else "")
        + (f" (collectives complete {skew:.0f} us apart across ranks after alignment)" if skew is not None else "")
    )


def _fetch(settings: JobSettings, host: str, remote: Path, local: Path) -> str | None:
    """Copies ``remote`` (relative: to this directory, where remote ranks run when it exists there)
    from ``host`` to ``local``; None, or why not."""
    script = f"cd {shlex.quote(os.getcwd())} 2>/dev/null; exec cat -- {shlex.quote(str(remote))}"
    try:
        done = subprocess.run(
            settings.ssh.argv(host, ["sh", "-c", script]),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=FETCH_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if done.returncode != 0:
        return done.stderr.decode("utf-8", "replace").strip() or f"ssh exited with {done.returncode}"
    local.write_bytes(done.stdout)
    return None
