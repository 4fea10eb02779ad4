"""Before a job starts ranks on remote hosts: is every host reachable over ssh, and what are its
network interfaces? One ssh per host, all at once, each bounded by the start timeout.

Answers are cached for an hour (in ``$XDG_CACHE_HOME/hvd/host-checks.json``), so that a second job
on the same hosts starts at once; ``--disable-cache`` checks again and leaves the cache alone. Only
hosts that answered are cached: a failure is always checked anew.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from horovod.runner.ssh import SSH_FAILED, SshOptions

if TYPE_CHECKING:  # (interfaces.py imports psutil: horovodrun imports this module for every job)
    from horovod.runner.interfaces import Interfaces

CACHE_TTL_S = 3600.0


class HostCheckError(RuntimeError):
    """A host could not be reached, or cannot run ranks; the message names the host and why."""


@dataclasses.dataclass(frozen=True)
class HostInfo:
    host: str
    interfaces: Interfaces


def _cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hvd" / "host-checks.json"


def _cache_key(host: str, ssh: SshOptions, python: str) -> str:
    return json.dumps([host, ssh.port, ssh.identity_file, python])


def _read_cache() -> dict[str, dict[str, object]]:
    try:
        with open(_cache_path(), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(entries: dict[str, dict[str, object]]) -> None:
    path = _cache_path()
    now = time.time()
    fresh = {k: v for k, v in entries.items() if now - float(v.get("at", 0)) < CACHE_TTL_S}  # type: ignore[arg-type]
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".host-checks-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(fresh, f)
        os.replace(tmp, path)


def _last_lines(text: str, n: int = 3) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-n:]) if lines else "no message"


def probe_over_ssh(host: str, ssh: SshOptions, python: str, timeout_s: float) -> HostInfo:
    """Runs :mod:`horovod.runner.host_probe` on ``host``; raises HostCheckError saying what failed."""
    argv = ssh.argv(host, [python, "-m", "horovod.runner.host_probe"])
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s, start_new_session=True
        )
    except subprocess.TimeoutExpired:
        raise HostCheckError(
            f"host {host} did not answer over ssh within {timeout_s:g} s (raise --start-timeout if it is only slow)"
        ) from None
    except FileNotFoundError:
        raise HostCheckError("cannot reach remote hosts: no ssh client (install OpenSSH's ssh)") from None
    if done.returncode == SSH_FAILED:
        raise HostCheckError(f"ssh to host {host} failed: {_last_lines(done.stderr)}")
    if done.returncode == 127:
        raise HostCheckError(
            f"host {host} has no {python} ({_last_lines(done.stderr)}): the ranks' helper runs with the launcher's "
            "Python path on every host, so install hvd there at the same path"
        )
    if done.returncode != 0:
        raise HostCheckError(
            f"checking host {host} failed (exit {done.returncode}; is hvd-runner installed there?): "
            f"{_last_lines(done.stderr)}"
        )
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        interfaces = {str(k): [str(a) for a in v] for k, v in answer["interfaces"].items()}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise HostCheckError(f"host {host} answered the check with something else: {done.stdout[-200:]!r}") from None
    return HostInfo(host, interfaces)


def check_hosts(
    hosts: Sequence[str], ssh: SshOptions, python: str, *, timeout_s: float, use_cache: bool
) -> dict[str, HostInfo]:
    """Checks every host at once; raises HostCheckError naming every host that failed."""
    cache = _read_cache() if use_cache else {}
    now = time.time()
    found: dict[str, HostInfo] = {}
    to_check = []
    for host in hosts:
        entry = cache.get(_cache_key(host, ssh, python))
        if entry is not None and now - float(entry.get("at", 0)) < CACHE_TTL_S:  # type: ignore[arg-type]
            found[host] = HostInfo(host, entry["interfaces"])  # type: ignore[arg-type]
        else:
            to_check.append(host)
    failures = []
    if to_check:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(to_check))) as pool:
            futures = {host: pool.submit(probe_over_ssh, host, ssh, python, timeout_s) for host in to_check}
            for host, future in futures.items():
                try:
                    found[host] = future.result()
                except HostCheckError as error:
                    failures.append(str(error))
    if failures:
        raise HostCheckError("; ".join(failures))
    if use_cache and to_check:
        for host in to_check:
            cache[_cache_key(host, ssh, python)] = {"at": now, "interfaces": found[host].interfaces}
        _write_cache(cache)
    return {host: found[host] for host in hosts}
