"""``python -m horovod.runner.remote_rank``: runs one rank on a remote host, started there by ssh.

horovodrun writes one JSON line to this process's standard input: ``{"argv", "env", "cwd",
"grace_s", "lifeline_s"}``. The rank gets this host's login environment with ``env`` over it (the
job's variables, the rendezvous secret among them, travel this way and never on a command line).
Then horovodrun keeps standard input open for the rank's lifetime and sends a newline down it every
few seconds. The rank is stopped when that input ends (horovodrun stopping the rank, or horovodrun,
ssh or the connection gone), when no newline came for ``lifeline_s`` (horovodrun's host is cut off:
a network partition closes no connection), or on SIGTERM, SIGHUP or SIGINT here. Stopping means
SIGTERM to the rank's process group, SIGKILL after ``grace_s``; what the rank leaves in its group
when it ends is stopped too, so nothing of the job outlives it on this host.

The exit status is the rank's, or 128 + N when a signal N ended it (as a shell reports it); 127 when
its command cannot be started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

from horovod.runner import threads
from horovod.runner.process_groups import group_alive, shell_status, signal_group

_POLL_S = 0.05


def _stop_group(pgid: int, grace_s: float, rank_proc: subprocess.Popen[bytes] | None) -> None:
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and group_alive(pgid):
        if rank_proc is not None:
            rank_proc.poll()  # reaps the rank itself, so its zombie does not count as alive
        time.sleep(_POLL_S)
    if group_alive(pgid):
        signal_group(pgid, signal.SIGKILL)


def _read_request() -> bytes:
    """The first line of standard input, read from the descriptor itself: a buffered reader would
    be left to a daemon thread blocked in it, which the interpreter cannot shut down cleanly."""
    data = b""
    while b"\n" not in data:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


def main() -> int:
    line = _read_request()
    try:
        request = json.loads(line)
        argv, cwd = list(request["argv"]), request.get("cwd")
        env = {**os.environ, **request["env"]}  # this host's login environment, then the job's
        env = threads.apply(env, threads.host_cores())  # this host's cores shared among its ranks
        grace_s = float(request.get("grace_s", 3.0))
        lifeline_s = float(request.get("lifeline_s", 30.0))
    except (ValueError, KeyError, TypeError):
        print("horovodrun (remote): no job description on standard input", file=sys.stderr, flush=True)
        return 2
    if cwd and not os.path.isdir(cwd):
        cwd = None  # the launcher's directory does not exist here: the login directory, as ssh gives
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, on_signal)
    try:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as error:
        print(f"horovodrun: cannot start {argv[0]!r} on this host: {error.strerror or error}", file=sys.stderr)
        return 127

    last_heard = [time.monotonic()]

    def await_end_of_input() -> None:
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                last_heard[0] = time.monotonic()
        stop.set()

    threading.Thread(target=await_end_of_input, daemon=True).start()
    while proc.poll() is None and not stop.wait(_POLL_S):
        if time.monotonic() - last_heard[0] > lifeline_s:
            print(
                f"horovodrun (remote): no word from the launcher for {lifeline_s:g} s (its host is gone or cut "
                "off); stopping this rank",
                file=sys.stderr,
                flush=True,
            )
            break
    if proc.poll() is None:
        _stop_group(proc.pid, grace_s, proc)
    returncode = proc.wait()
    if group_alive(proc.pid):  # what the rank started and left behind
        _stop_group(proc.pid, grace_s, None)
    return shell_status(returncode)


if __name__ == "__main__":
    sys.exit(main())
