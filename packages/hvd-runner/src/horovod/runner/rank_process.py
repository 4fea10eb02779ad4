"""A started rank as the job sees it, whether it runs on this machine or on a remote host over ssh.

A local rank is a process of its own session and process group: stopping it signals the group.
A remote rank is an ``ssh`` client here, running :mod:`horovod.runner.remote_rank` there: stopping
it closes ssh's standard input, and the remote side stops the rank's group itself (SIGTERM, then
SIGKILL after the grace period) and ends with the rank's status; killing it kills the local ssh,
which drops the connection, which the remote side also takes as "stop". While the rank runs, the
launcher sends a heartbeat down that input; a remote side that hears none for
``LIFELINE_TIMEOUT_S`` (the launcher's host cut off, which closes nothing) stops its rank too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import IO

from horovod.runner.process_groups import group_alive, is_stopped, signal_group
from horovod.runner.ssh import SSH_FAILED, SshOptions


class RankProcess:
    """A rank started on this machine."""

    host: str | None = None  # the remote host, None when the rank runs here

    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self._proc = self._popen(argv, env)

    def _popen(self, argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            list(argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # own session and process group: signalled as one
            close_fds=True,
        )

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def stdout(self) -> IO[bytes]:
        assert self._proc.stdout is not None
        return self._proc.stdout

    @property
    def stderr(self) -> IO[bytes]:
        assert self._proc.stderr is not None
        return self._proc.stderr

    def where(self) -> str:
        return f"pid {self.pid}"

    def wait(self) -> int:
        """Waits for the end; returns ``subprocess``'s return code (negative: killed by that signal)."""
        return self._proc.wait()

    def terminate(self) -> None:
        signal_group(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        signal_group(self.pid, signal.SIGKILL)

    def stopped(self) -> bool:
        """Stopped by SIGSTOP or held by a debugger (only a local rank can be seen so)."""
        return is_stopped(self.pid)

    def group_alive(self) -> bool:
        """Whether anything of the rank's process group runs here."""
        return group_alive(self.pid)


#: Seconds between the launcher's heartbeats to a remote rank (a newline on ssh's standard input).
LIFELINE_INTERVAL_S = 5.0
#: Seconds without a heartbeat after which the remote side stops its rank: the launcher is gone or
#: cut off (a network partition closes no connection, so no end of input would ever arrive).
LIFELINE_TIMEOUT_S = 30.0

#: Variables that describe the launcher's own machine or session: a remote rank keeps those its ssh
#: login gives it.
_NOT_FORWARDED = frozenset(
    {
        "HOME", "USER", "LOGNAME", "MAIL", "SHELL", "HOSTNAME", "HOST", "PWD", "OLDPWD", "SHLVL", "_",
        "DISPLAY", "XAUTHORITY", "TERM", "TMUX", "TMUX_PANE", "STY", "WINDOW", "XDG_RUNTIME_DIR",
        "XDG_SESSION_ID", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "DBUS_SESSION_BUS_ADDRESS",
    }
)  # fmt: skip


def forwarded_environment(env: Mapping[str, str]) -> dict[str, str]:
    """What of a rank's environment goes to a remote host: all of it but ssh's and the login's own."""
    return {k: v for k, v in env.items() if k not in _NOT_FORWARDED and not k.startswith("SSH_")}


class RemoteRankProcess(RankProcess):
    """A rank started on ``host`` through ssh (see the module docstring)."""

    def __init__(
        self, host: str, ssh: SshOptions, python: str, argv: Sequence[str], env: Mapping[str, str], grace_s: float
    ) -> None:
        self.host = host
        remote = ssh.argv(host, [python, "-m", "horovod.runner.remote_rank"])
        self._proc = subprocess.Popen(
            remote,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
        request = {
            "argv": list(argv),
            "env": forwarded_environment(env),
            "cwd": os.getcwd(),
            "grace_s": grace_s,
            "lifeline_s": LIFELINE_TIMEOUT_S,
        }
        self._stdin_lock = threading.Lock()
        self._ended = threading.Event()
        # Written from a thread: a large environment fills the pipe before ssh has connected, and
        # the launcher goes on starting the other ranks meanwhile. Then the same thread keeps the
        # lifeline: a heartbeat every LIFELINE_INTERVAL_S, until the rank is stopped.
        payload = json.dumps(request).encode() + b"\n"
        threading.Thread(target=self._keep_alive, args=(payload,), name=f"hvd-ssh-{host}", daemon=True).start()

    def _write(self, data: bytes) -> bool:
        with self._stdin_lock:
            if self._ended.is_set() or self._proc.stdin is None:
                return False
            try:
                self._proc.stdin.write(data)
                self._proc.stdin.flush()
            except (OSError, ValueError):  # ssh already gone: its exit says why
                return False
        return True

    def _keep_alive(self, payload: bytes) -> None:
        if not self._write(payload):
            return
        while not self._ended.wait(LIFELINE_INTERVAL_S) and self._write(b"\n"):
            pass

    def where(self) -> str:
        return f"on host {self.host}"

    def wait(self) -> int:
        code = self._proc.wait()
        # The remote side reports a rank ended by signal N as 128 + N; ssh's own failure is 255.
        if 128 < code < SSH_FAILED and code - 128 in signal.valid_signals():
            return -(code - 128)
        return code

    def terminate(self) -> None:
        self._ended.set()  # no more heartbeats: the remote side stops the rank at the end of input
        with self._stdin_lock:
            if self._proc.stdin is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._proc.stdin.close()

    def stopped(self) -> bool:
        return False
