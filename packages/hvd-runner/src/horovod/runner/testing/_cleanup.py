"""Finding and removing everything a namespace cluster of a given prefix made, whoever made it.

Everything is found from the prefix alone (names, /proc, the state file), never from a Python
object: a run killed with SIGKILL leaves no object behind, and the next ``up()`` or the command
line's ``down`` must still clear what it left.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from horovod.runner.testing import _sshd
from horovod.runner.testing._sshd import ClusterError

INTERFACE = "hvd0"
NETNS_DIR = Path("/run/netns")  # where `ip netns add` pins namespaces
ETC_NETNS = Path("/etc/netns")
STATE_DIR = Path("/run")
# Where cluster directories go. sshd's StrictModes refuses an authorized_keys file below a
# directory that others can write, /tmp included (sticky or not); /run is root's alone.
BASE_DIR = Path("/run")

NetId = tuple[int, int]  # (st_dev, st_ino) of a network namespace


def state_file(prefix: str) -> Path:
    """The running cluster's description, for `down` from another process (and for stale ones)."""
    return STATE_DIR / f"hvd-netns-{prefix}.json"


def names_re(prefix: str) -> re.Pattern[str]:
    """The cluster's namespace names: the switch and the hosts (exactly: no other prefix matches)."""
    return re.compile(rf"{re.escape(prefix)}-(sw|h\d+)")


def dir_re(prefix: str) -> re.Pattern[str]:
    """A cluster directory of this prefix: mkdtemp adds exactly 8 characters, so no other prefix matches."""
    return re.compile(rf"hvd-netns-{re.escape(prefix)}-[a-z0-9_]{{8}}")


def namespaces(prefix: str) -> list[str]:
    pattern = names_re(prefix)
    with contextlib.suppress(FileNotFoundError):
        return sorted(n for n in os.listdir(NETNS_DIR) if pattern.fullmatch(n))
    return []


def net_ids(names: Sequence[str]) -> dict[NetId, str]:
    ids = {}
    for name in names:
        with contextlib.suppress(OSError):
            st = os.stat(NETNS_DIR / name)
            ids[(st.st_dev, st.st_ino)] = name
    return ids


def processes() -> list[tuple[int, NetId, str]]:
    """(pid, network namespace, command line) of every live process but this one.

    What `ip netns pids` does, for every namespace in one pass over /proc.
    """
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")  # fails for a zombie: it holds no namespace
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        found.append((int(entry.name), (st.st_dev, st.st_ino), cmdline.decode(errors="replace").strip()))
    return found


def cluster_processes(prefix: str) -> dict[int, str]:
    """pid -> description of every process in the prefix's namespaces, or naming its directories.

    The second kind catches an sshd whose namespace was deleted from under it.
    """
    nets = net_ids(namespaces(prefix))
    pattern = dir_re(prefix)
    return {
        pid: f"process {pid} ({cmdline[:120]}){' in ' + nets[net] if net in nets else ''}"
        for pid, net, cmdline in processes()
        if net in nets or pattern.search(cmdline)
    }


def _kill_until_gone(find: Callable[[], dict[int, str]], *, grace: float = 2.0, timeout: float = 10.0) -> list[str]:
    """SIGTERM what find() returns, SIGKILL what is left after grace; re-check until none (bounded).

    Returns descriptions of what survived (nothing, unless a process is stuck in the kernel).
    """
    start = time.monotonic()
    termed: set[int] = set()
    while (found := find()) and time.monotonic() - start < timeout:
        late = time.monotonic() - start > grace
        for pid in found:
            if late or pid not in termed:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL if late else signal.SIGTERM)
                termed.add(pid)
        time.sleep(0.02)
    return list(found.values())


def _cluster_dirs(prefix: str) -> list[Path]:
    dirs = set()
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        dirs.add(Path(json.loads(state_file(prefix).read_text())["dir"]))
    pattern = dir_re(prefix)
    for base in {BASE_DIR, Path(tempfile.gettempdir())}:
        with contextlib.suppress(OSError):
            dirs.update(base / n for n in os.listdir(base) if pattern.fullmatch(n))
    return sorted(d for d in dirs if d.is_dir())


def _etc_dirs(prefix: str) -> list[Path]:
    pattern = names_re(prefix)
    with contextlib.suppress(FileNotFoundError):
        return sorted(ETC_NETNS / n for n in os.listdir(ETC_NETNS) if pattern.fullmatch(n))
    return []


def leftovers(prefix: str) -> list[str]:
    """Everything of the prefix's clusters that still exists, described (empty after a teardown)."""
    found = [f"namespace {n}" for n in namespaces(prefix)]
    found += [str(d) for d in _etc_dirs(prefix)]
    found += list(cluster_processes(prefix).values())
    found += [f"cluster directory {d}" for d in _cluster_dirs(prefix)]
    if state_file(prefix).exists():
        found.append(f"state file {state_file(prefix)}")
    # A cluster interface in the machine's own namespace would be a set-up bug; look anyway.
    links = json.loads(_sshd.run([_sshd.need("ip"), "-j", "link", "show"]).stdout or "[]")
    found += [
        f"interface {link['ifname']} in the root namespace"
        for link in links
        if link["ifname"] == INTERFACE or link["ifname"].startswith(f"{prefix}-")
    ]
    return found


def remove_cluster(prefix: str) -> None:
    """Stop and delete every cluster of this prefix, even half set up or left by a killed run.

    Processes go first: a namespace lives on, invisible to `ip netns`, while a process is in it.
    Deleting the switch's namespace deletes the bridge and every veth pair with it.
    """
    errors = [f"still running after SIGKILL: {p}" for p in _kill_until_gone(lambda: cluster_processes(prefix))]
    ip = _sshd.need("ip")
    results = _sshd.run_all([[ip, "netns", "del", name] for name in namespaces(prefix)])
    errors += [out.strip() for code, out in results if code != 0]
    for directory in _etc_dirs(prefix) + _cluster_dirs(prefix):
        shutil.rmtree(directory, ignore_errors=True)
    state_file(prefix).unlink(missing_ok=True)
    if errors:
        raise ClusterError(f"removing the {prefix!r} cluster: " + "; ".join(errors))
