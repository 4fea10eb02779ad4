"""Forwarding the ranks' output: each line prefixed ``[rank]<stdout>:`` / ``[rank]<stderr>:``.

One reader thread per rank and stream copies lines as they come, so ranks never block on a full
pipe and lines from different ranks never mix within a line. With ``output_dir`` every rank's
streams are also written, unprefixed, to ``<output_dir>/rank.<N>/stdout`` and ``stderr`` (``N``
zero-padded to the width of the last rank, so the files sort in rank order).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import IO, TextIO


class _Sink:
    """A text stream written in whole lines, as bytes when it has a binary buffer."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write_line(self, data: bytes) -> None:
        with self._lock:
            buffer = getattr(self._stream, "buffer", None)
            try:
                if buffer is not None:
                    self._stream.flush()  # keep order with text written through the text layer
                    buffer.write(data)
                    buffer.flush()
                else:
                    self._stream.write(data.decode("utf-8", "replace"))
                    self._stream.flush()
            except (OSError, ValueError):
                pass  # our own stdout is gone (closed pipe): keep draining the rank's pipe


class OutputRouter:
    """Where the ranks' stdout and stderr go."""

    def __init__(
        self,
        stdout: TextIO,
        stderr: TextIO,
        *,
        size: int,
        prefix_timestamp: bool = False,
        output_dir: str | None = None,
    ) -> None:
        self._sinks = {"stdout": _Sink(stdout), "stderr": _Sink(stderr)}
        self._prefix_timestamp = prefix_timestamp
        self._output_dir = output_dir
        self._width = len(str(max(size - 1, 0)))
        self._files: list[IO[bytes]] = []
        self._threads: list[threading.Thread] = []

    def rank_dir(self, rank: int) -> str | None:
        if self._output_dir is None:
            return None
        return os.path.join(self._output_dir, f"rank.{rank:0{self._width}d}")

    def prepare(self, rank: int) -> None:
        """Creates the rank's output directory (before the rank starts, so errors come early)."""
        directory = self.rank_dir(rank)
        if directory is not None:
            os.makedirs(directory, exist_ok=True)

    def attach(self, rank: int, stream: str, pipe: IO[bytes]) -> None:
        """Starts copying ``pipe`` (the rank's ``stream``: "stdout" or "stderr") until it closes."""
        copy: IO[bytes] | None = None
        directory = self.rank_dir(rank)
        if directory is not None:
            copy = open(os.path.join(directory, stream), "wb")  # noqa: SIM115 - closed by close()
            self._files.append(copy)
        thread = threading.Thread(
            target=self._pump, args=(rank, stream, pipe, copy), name=f"hvd-output-{rank}-{stream}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _pump(self, rank: int, stream: str, pipe: IO[bytes], copy: IO[bytes] | None) -> None:
        sink = self._sinks[stream]
        tag = f"[{rank}]<{stream}>:".encode()
        try:
            for line in iter(pipe.readline, b""):
                if copy is not None:
                    copy.write(line)
                    copy.flush()
                if not line.endswith(b"\n"):
                    line += b"\n"  # a last line without newline still ends our line
                prefix = tag
                if self._prefix_timestamp:
                    prefix = time.strftime("%a %b %d %H:%M:%S %Y").encode() + tag
                sink.write_line(prefix + line)
        except (OSError, ValueError):
            pass  # the pipe was closed under us
        finally:
            pipe.close()

    def join(self, timeout: float) -> bool:
        """Waits for every stream to reach its end; False if some are still open after ``timeout``."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def close(self) -> None:
        for f in self._files:
            with contextlib.suppress(OSError):
                f.close()
        self._files.clear()
