"""The OpenSSH side of the namespace test cluster: commands, keys, configuration files, daemons.

Everything here is plain file and process work; which namespace a command runs in is the caller's
business (it passes the ``ip netns exec NS`` prefix).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

SSHD = "/usr/sbin/sshd"  # sshd re-executes itself, so it must be started by its absolute path
# ip lives in /usr/sbin, which a PATH (a virtual environment's, a CI's) may lack.
_SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


class ClusterError(RuntimeError):
    """A step of setting up, using or tearing down the test cluster failed; the message names it."""


def tool(name: str) -> str | None:
    """The absolute path of a system tool, or None."""
    return shutil.which(name) or shutil.which(name, path=_SYSTEM_PATH)


def need(name: str) -> str:
    found = tool(name)
    if found is None:
        raise ClusterError(f"{name} not found (looked in PATH and {_SYSTEM_PATH})")
    return found


def _failure(argv: Sequence[str], returncode: int, output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return f"{shlex.join(argv)} failed (exit {returncode}): {' | '.join(lines) or 'no output'}"


def run(argv: Sequence[str], *, timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one command to completion; a failure or a timeout raises ClusterError naming it."""
    try:
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as error:
        raise ClusterError(f"{shlex.join(argv)} did not finish within {timeout:g} s") from error
    except OSError as error:
        raise ClusterError(f"{shlex.join(argv)} could not start: {error}") from error
    if check and result.returncode != 0:
        raise ClusterError(_failure(argv, result.returncode, result.stderr + result.stdout))
    return result


def run_all(commands: Sequence[Sequence[str]], *, timeout: float = 30.0) -> list[tuple[int, str]]:
    """Run commands concurrently (each host's step at once: set-up time does not grow with hosts).

    Returns (exit status, stderr + stdout) per command, in order; a command still running at the
    deadline is killed and raises ClusterError, once every command has been waited for.
    """
    deadline = time.monotonic() + timeout
    procs: list[subprocess.Popen[str]] = []
    try:
        for argv in commands:
            procs.append(subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    except OSError as error:
        for proc in procs:
            proc.kill()
            proc.communicate()
        raise ClusterError(f"{shlex.join(commands[len(procs)])} could not start: {error}") from error
    results: list[tuple[int, str]] = []
    late: list[str] = []
    for argv, proc in zip(commands, procs, strict=True):
        try:
            output, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            late.append(shlex.join(argv))
        results.append((proc.returncode, output))
    if late:
        raise ClusterError(f"did not finish within {timeout:g} s: {'; '.join(late)}")
    return results


def check_all(commands: Sequence[Sequence[str]], *, timeout: float = 30.0) -> None:
    """run_all, raising ClusterError for every command that failed."""
    results = run_all(commands, timeout=timeout)
    failed = [_failure(argv, code, out) for argv, (code, out) in zip(commands, results, strict=True) if code != 0]
    if failed:
        raise ClusterError("; ".join(failed))


def generate_keys(keys: Sequence[tuple[Path, str]]) -> None:
    """Fresh passphrase-less ed25519 key pairs (path, comment): the user key and the host keys."""
    keygen = need("ssh-keygen")
    check_all([[keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)] for path, comment in keys])


def public_key(path: Path) -> str:
    """'ssh-ed25519 AAAA...' of a generated key, without its comment."""
    kind, blob, *_ = Path(f"{path}.pub").read_text().split()
    return f"{kind} {blob}"


def write_private(path: Path, text: str, mode: int = 0o600) -> None:
    """Write a file readable by root only: sshd's StrictModes refuses anything others can write."""
    path.write_text(text)
    path.chmod(mode)


def sshd_config(*, address: str, host_key: Path, authorized_keys: Path, pid_file: Path) -> str:
    """One host's sshd configuration: key-only root login on the host's cluster address only."""
    return "\n".join(
        [
            f"ListenAddress {address}",
            "Port 22",
            "AddressFamily inet",
            f"HostKey {host_key}",
            f"AuthorizedKeysFile {authorized_keys}",
            f"PidFile {pid_file}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes yes",
            # Tests start many sessions at once (a rank per slot, plus probes): the default
            # 10:30:100 would refuse some of them at random.
            "MaxStartups 100:30:200",
            "MaxSessions 100",
            "PrintMotd no",
            "UseDNS no",
            "X11Forwarding no",
            "",
        ]
    )


def ssh_config(*, known_hosts: Path, identity: Path) -> str:
    """The client configuration every namespace sees as /etc/ssh/ssh_config: no prompt, no guess."""
    return "\n".join(
        [
            "Host *",
            "    StrictHostKeyChecking yes",
            f"    UserKnownHostsFile {known_hosts}",
            # The machine's own /etc/ssh is hidden in the namespaces; nothing global to read.
            "    GlobalKnownHostsFile /dev/null",
            f"    IdentityFile {identity}",
            "    BatchMode yes",
            "",
        ]
    )


def start(prefix: Sequence[Sequence[str]], configs: Sequence[Path], logs: Sequence[Path]) -> None:
    """Start one sshd per configuration (prefix[i] runs it in its namespace); each daemonizes."""
    commands = [[*p, SSHD, "-f", str(c), "-E", str(log)] for p, c, log in zip(prefix, configs, logs, strict=True)]
    results = run_all(commands)
    failed = [
        _failure(argv, code, out + _tail(log))
        for argv, (code, out), log in zip(commands, results, logs, strict=True)
        if code != 0
    ]
    if failed:
        raise ClusterError("; ".join(failed))


def _tail(path: Path, lines: int = 5) -> str:
    with contextlib.suppress(OSError):
        return f"\n{path.name}: " + " / ".join(path.read_text().splitlines()[-lines:])
    return ""


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def _is_sshd(pid: int) -> bool:
    """pid is a live sshd (a zombie has no executable: the daemons' parent, init, reaps them late)."""
    try:
        return os.readlink(f"/proc/{pid}/exe") == SSHD
    except OSError:
        return False


def running(pid_file: Path) -> bool:
    pid = read_pid(pid_file)
    return pid is not None and _is_sshd(pid)


def stop(pid_file: Path, *, timeout: float = 5.0) -> None:
    """Stop the listening sshd (sessions already open go on, as when a real host's sshd stops)."""
    pid = read_pid(pid_file)
    if pid is None or not _is_sshd(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _is_sshd(pid):
        if time.monotonic() > deadline:
            raise ClusterError(f"sshd (pid {pid}, {pid_file}) did not exit within {timeout:g} s of SIGTERM")
        time.sleep(0.02)
    pid_file.unlink(missing_ok=True)


def wait_until_answering(probes: Sequence[Sequence[str]], logs: Sequence[Path], *, timeout: float = 20.0) -> None:
    """Run each probe (an ``ssh HOST true`` inside a namespace) until it succeeds, all concurrently.

    The daemons listen before they detach, so the first round normally succeeds; only a refused or
    unanswered connection is retried (a slow start), an authentication failure is reported at once,
    with ssh's message and the end of that sshd's log (which says why it refused).
    """
    deadline = time.monotonic() + timeout
    pending = list(zip(probes, logs, strict=True))
    while True:
        results = run_all([argv for argv, _ in pending], timeout=max(1.0, deadline - time.monotonic()))
        failed = [(argv, log, code, out) for (argv, log), (code, out) in zip(pending, results, strict=True) if code]
        if not failed:
            return
        if time.monotonic() > deadline or any(_FATAL.search(out) for *_, out in failed):
            raise ClusterError("; ".join(_failure(argv, code, out + _tail(log)) for argv, log, code, out in failed))
        pending = [(argv, log) for argv, log, *_ in failed]
        time.sleep(0.1)


# ssh's messages for what waiting cannot mend.
_FATAL = re.compile(r"Permission denied|Host key verification failed|Could not resolve|Bad configuration")
