"""Running mpirun: its exit status becomes horovodrun's, and signals to horovodrun reach it.

mpirun starts, watches and stops the ranks itself; what is left here is to pass signals on and to
hear how it ended. It runs in its own session and process group, so that a Ctrl-C at the terminal
reaches it once, through horovodrun (which forwards SIGINT and SIGTERM, and SIGHUP as SIGTERM), not
twice: Open MPI and Hydra treat a second SIGINT as "abort now". If mpirun has not ended ``grace_s``
after the first signal, or on a second Ctrl-C, its process group is killed. Its stderr passes
through horovodrun, chunk by chunk as it comes, and the end of it is kept to name the failed rank
(:mod:`mpi_failure`).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence

from horovod.runner.process_groups import shell_status, signal_group

#: Seconds mpirun gets to stop its ranks after a signal (it runs its own SIGTERM-then-SIGKILL).
DEFAULT_GRACE_S = 10.0
#: Bytes of mpirun's stderr kept for reading its failure report.
_TAIL_BYTES = 256 * 1024
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class MpirunStartError(RuntimeError):
    """mpirun could not be started."""


@dataclasses.dataclass(frozen=True)
class MpirunExit:
    #: As subprocess reports it: the code, or -N when killed by signal N.
    returncode: int
    #: The first signal horovodrun received and passed on, if any.
    signal: int | None
    #: The end of mpirun's stderr (decoded), for naming the failed rank.
    stderr_tail: str

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signal).name if self.signal is not None else ""

    @property
    def exit_code(self) -> int:
        """horovodrun's exit status: 128 + N when interrupted by signal N, else mpirun's (as a shell shows it)."""
        if self.signal is not None:
            return 128 + self.signal
        return shell_status(self.returncode)


class _StderrRelay(threading.Thread):
    def __init__(self, source: int, sink: Callable[[bytes], None]) -> None:
        super().__init__(daemon=True, name="mpirun-stderr")
        self._source = source
        self._sink = sink
        self.tail = bytearray()

    def run(self) -> None:
        while True:
            chunk = os.read(self._source, 65536)
            if not chunk:
                break
            self._sink(chunk)
            self.tail += chunk
            del self.tail[:-_TAIL_BYTES]
        os.close(self._source)


def _write_stderr(chunk: bytes) -> None:
    stream = getattr(sys.stderr, "buffer", None)
    if stream is not None:
        stream.write(chunk)
        stream.flush()
    else:  # a text-only stream (tests capture stderr this way)
        sys.stderr.write(chunk.decode(errors="replace"))
        sys.stderr.flush()


def run_mpirun(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    log: Callable[[str], None],
    grace_s: float = DEFAULT_GRACE_S,
    stderr_sink: Callable[[bytes], None] = _write_stderr,
) -> MpirunExit:
    """Runs ``argv`` (an mpirun command) to its end; returns how it ended."""
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(list(argv), env=dict(env), stderr=write_end, start_new_session=True)
    except OSError as error:
        os.close(read_end)
        raise MpirunStartError(f"cannot start {argv[0]}: {error.strerror or error}") from error
    finally:
        os.close(write_end)
    relay = _StderrRelay(read_end, stderr_sink)
    relay.start()
    received: list[int] = []
    killer: list[threading.Timer] = []

    def kill_group() -> None:
        if proc.poll() is None:
            log(f"mpirun still running {grace_s:g} s after {signal.Signals(received[0]).name}; sending SIGKILL")
            signal_group(proc.pid, signal.SIGKILL)

    def forward(signum: int, frame: object) -> None:
        if received and signum == signal.SIGINT:  # a second Ctrl-C: do not wait
            signal_group(proc.pid, signal.SIGKILL)
            return
        received.append(signum)
        if proc.poll() is None:
            # mpirun stops its ranks on SIGINT and SIGTERM; a hang-up means the same here.
            proc.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)
        if not killer:
            killer.append(threading.Timer(grace_s, kill_group))
            killer[0].daemon = True
            killer[0].start()

    previous = {}
    on_main_thread = threading.current_thread() is threading.main_thread()
    if on_main_thread:
        previous = {signum: signal.signal(signum, forward) for signum in _FORWARDED}
    try:
        returncode = proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if killer:
            killer[0].cancel()
        # What mpirun left in its group (a rank that ignored its stop) goes with it.
        signal_group(proc.pid, signal.SIGKILL)
    relay.join(timeout=5.0)
    tail = bytes(relay.tail).decode(errors="replace")
    return MpirunExit(returncode, received[0] if received else None, tail)
