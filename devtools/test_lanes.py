"""`./dev test` without arguments: every default nox session, each lane of them at once.

    python devtools/test_lanes.py NOX NOXFILE [--matrix]    (run by ./dev, with the tools' nox)

The noxfile gives every default session one lane (its ``LANES``, as a ``lane-N`` tag). Each lane is
one ``nox -t lane-N`` process running its sessions in turn, and the lanes run side by side: one lane
alone leaves a core idle half the time on a 2-core machine, while its tests wait on timeouts,
sockets, the JVM or ssh. Their output is interleaved line by line, each line marked with its lane
and the minutes since the start. The run ends with what failed, again (each failure's error lines,
pytest's failed tests, sanitizer reports' top frames and nox's failed commands: they are far up in
a long log, and a log's tail may be all one sees of it), then each lane's outcome, and fails if any lane failed.
Interrupted (Ctrl-C, SIGTERM), it passes the signal on to every lane's process group and ends
them, so that no session goes on running. Each session's environment is removed when the session
ends (the noxfile's DROP_ENVIRONMENTS_VARIABLE, set for the lanes): kept, the run's environments
outgrew a CI machine's free disk.

With ``--matrix`` (``./dev test --matrix``) each lane also runs the package matrix's cells tagged
``matrix-lane-N`` (devtools/matrix.toml; the default sessions hold its corners already), after its
default sessions.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import IO, Any

LANE_TAG = "lane-"
MATRIX_LANE_TAG = "matrix-lane-"
# The noxfile's DROP_ENVIRONMENTS_VARIABLE: set, every session removes its environment when it ends.
DROP_ENVIRONMENTS = {"HVD_DROP_SESSION_ENVIRONMENTS": "1"}
# After passing an interruption on, how long the lanes get to end their sessions (tests tear down
# network namespaces, Spark, Ray) before they are killed.
STOP_GRACE_S = 60.0
# Lines repeated at the end: from pytest's report of each failure, its header and its "E" lines (the
# error and the values; at most ERROR_LINES_PER_TEST of them), then the failed tests of its short
# summary and its last line; from each sanitizer report, its headings and the top frames of each of
# its stacks (SANITIZER_FRAMES, each line cut at DIGEST_LINE_CHARS: C++ frames run to thousands);
# and nox's own word on a failed command or session.
FAILURES_START = re.compile(r"^=+ (FAILURES|ERRORS) =+$")
FAILURE_HEADER = re.compile(r"^_{3,} .+ _{3,}$")
ERROR_LINE = re.compile(r"^E ")
ERROR_LINES_PER_TEST = 12
SUMMARY_START = re.compile(r"^=+ short test summary info =+$")
SUMMARY_FAILURE = re.compile(r"^(FAILED|ERROR) ")
SUMMARY_END = re.compile(r"^=+ .*(passed|failed|error|errors|skipped|deselected).* in [0-9.]+s.*=+$")
SANITIZER_START = re.compile(r"(WARNING|ERROR): (Thread|Address|Leak)Sanitizer|runtime error:")
SANITIZER_END = re.compile(r"^SUMMARY: \w+Sanitizer")
STACK_FRAME = re.compile(r"^\s+#(\d+) ")
SANITIZER_FRAMES = 6
DIGEST_LINE_CHARS = 240
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
NOX_FAILURE = re.compile(r"^nox > (Command .* failed|Session .* (failed|aborted|interrupted))")


class FailureDigest:
    """Picks, line by line, what a session's output says about its failures (the lines above)."""

    def __init__(self) -> None:
        self.section = ""  # "failures", "summary", "sanitizer" or "" (elsewhere)
        self.error_lines = 0

    def keep(self, line: str) -> str | None:
        """The line as it goes in the digest (cut short where long), or None when it stays out."""
        bare = ANSI_ESCAPE.sub("", line.rstrip("\n"))
        if FAILURES_START.match(bare):
            self.section = "failures"
        elif SUMMARY_START.match(bare):
            self.section = "summary"
        elif SANITIZER_START.search(bare):
            self.section = "sanitizer"
        keep = bool(NOX_FAILURE.match(bare))
        if self.section == "failures" and FAILURE_HEADER.match(bare):
            keep, self.error_lines = True, 0
        elif self.section == "failures" and ERROR_LINE.match(bare) and self.error_lines < ERROR_LINES_PER_TEST:
            keep, self.error_lines = True, self.error_lines + 1
        elif self.section == "summary":
            keep = keep or bool(SUMMARY_FAILURE.match(bare))
            if SUMMARY_END.match(bare):
                keep = keep or "failed" in bare or "error" in bare
                self.section = ""
        elif self.section == "sanitizer":
            frame = STACK_FRAME.match(bare)
            keep = keep or (int(frame.group(1)) < SANITIZER_FRAMES if frame else bool(bare.strip()))
            if SANITIZER_END.match(bare):
                self.section = ""
        if not keep:
            return None
        return bare[:DIGEST_LINE_CHARS] + ("..." if len(bare) > DIGEST_LINE_CHARS else "") + "\n"


def _listed(nox: str, noxfile: str, *selection: str) -> list[dict[str, Any]]:
    listing = subprocess.run(
        [nox, "-f", noxfile, "--list", "--json", *selection], check=True, capture_output=True, text=True
    )
    return list(json.loads(listing.stdout))


def sessions_by_lane(nox: str, noxfile: str, matrix: bool = False) -> dict[str, list[str]]:
    """{lane tag: its sessions}, from ``nox --list --json``; every listed session must have one lane.
    With ``matrix``, the cells of each ``matrix-lane-N`` tag join lane N."""
    listed = _listed(nox, noxfile)
    if matrix:
        cells = [s for s in _listed(nox, noxfile, "-t", "matrix") if not any(t.startswith(LANE_TAG) for t in s["tags"])]
        listed += [{**s, "tags": [t.removeprefix("matrix-") for t in s["tags"]]} for s in cells]
    lanes: dict[str, list[str]] = {}
    for session in listed:
        tags = [tag for tag in session["tags"] if tag.startswith(LANE_TAG)]
        if len(tags) != 1:
            raise SystemExit(
                f"test_lanes: session {session['session']!r} has lanes {tags}: every default session needs "
                "exactly one (LANES in noxfile.py)"
            )
        lanes.setdefault(tags[0], []).append(session["session"])
    return dict(sorted(lanes.items()))


class Lanes:
    """The lanes' nox processes, their output copied to ours, and their end."""

    def __init__(self, nox: str, noxfile: str, lanes: list[str], matrix: bool = False) -> None:
        self.start = time.monotonic()
        self.print_lock = threading.Lock()
        self.processes: dict[str, subprocess.Popen[str]] = {}
        self.readers: list[threading.Thread] = []
        self.failures: dict[str, list[str]] = {lane: [] for lane in lanes}
        for lane in lanes:
            tags = [lane, MATRIX_LANE_TAG + lane.removeprefix(LANE_TAG)] if matrix else [lane]
            process = subprocess.Popen(
                [nox, "-f", noxfile, "-t", *tags],
                env={**os.environ, **DROP_ENVIRONMENTS},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                start_new_session=True,  # its own process group: an interruption reaches all of it
            )
            self.processes[lane] = process
            assert process.stdout is not None
            reader = threading.Thread(target=self._copy, args=(lane, process.stdout), daemon=True)
            reader.start()
            self.readers.append(reader)

    def _stamp(self) -> str:
        minutes, seconds = divmod(int(time.monotonic() - self.start), 60)
        return f"{minutes:3d}:{seconds:02d}"

    def _copy(self, lane: str, stream: IO[str]) -> None:
        digest = FailureDigest()
        for line in stream:
            stamp = f"[{lane} {self._stamp()}] "
            with self.print_lock:
                sys.stdout.write(stamp + line)
                sys.stdout.flush()
            kept = digest.keep(line)
            if kept is not None:
                self.failures[lane].append(stamp + kept)

    def wait(self) -> dict[str, tuple[int, str]]:
        """Waits for every lane: {lane: (exit status, when it ended)}."""
        ended: dict[str, tuple[int, str]] = {}
        while len(ended) < len(self.processes):
            for lane, process in self.processes.items():
                if lane not in ended and process.poll() is not None:
                    ended[lane] = (process.returncode, self._stamp())
            time.sleep(0.5)
        for reader in self.readers:
            reader.join(timeout=5)
        return ended

    def stop(self, signum: int) -> None:
        """Passes `signum` on to every lane still running, then kills what is left after the grace."""
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signum)
        deadline = time.monotonic() + STOP_GRACE_S
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def main(argv: list[str]) -> int:
    matrix = argv[2:] == ["--matrix"]
    if len(argv) != 2 and not matrix:
        print(__doc__, file=sys.stderr)
        return 2
    nox, noxfile = argv[:2]
    lanes = sessions_by_lane(nox, noxfile, matrix)
    for lane, sessions in lanes.items():
        print(f"{lane}: {', '.join(sessions)}", flush=True)
    running = Lanes(nox, noxfile, list(lanes), matrix)

    def interrupted(signum: int, frame: FrameType | None) -> None:
        print(f"test_lanes: {signal.Signals(signum).name}: stopping every lane", file=sys.stderr, flush=True)
        running.stop(signum)
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    ended = running.wait()
    failed = [lane for lane, (status, _) in ended.items() if status != 0]
    failures = [line for lane in failed for line in running.failures[lane]]
    if failures:
        print("\nwhat failed (repeated from above):", flush=True)
        sys.stdout.writelines(failures)
        sys.stdout.flush()
    for lane, (status, at) in ended.items():
        outcome = "passed" if status == 0 else f"FAILED (nox exited with {status})"
        print(f"{lane} {outcome} at {at.strip()}: {', '.join(lanes[lane])}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
