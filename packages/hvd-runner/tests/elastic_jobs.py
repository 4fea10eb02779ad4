"""Running elastic_worker.py under horovodrun and reading what it says, for the elastic tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from conftest import LineReader, horovodrun_argv

WORKER = str(Path(__file__).with_name("elastic_worker.py"))
JOB_TIMEOUT_S = 120


class ElasticJob:
    """horovodrun running elastic_worker.py, its output read as it comes."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        tmp_path: Path,
        wrap: Callable[[list[str]], list[str]] = lambda argv: argv,
    ) -> None:
        markers = tmp_path / "markers"
        markers.mkdir(exist_ok=True)
        env = {**env, "ELASTIC_MARKERS": str(markers)}
        self.proc = subprocess.Popen(
            wrap(horovodrun_argv(*args, sys.executable, WORKER)),  # wrap: e.g. run it on a cluster host
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.out = LineReader(self.proc.stdout)
        self.err = LineReader(self.proc.stderr)

    def wait_log(self, pattern: str, count: int = 1, timeout: float = 60.0) -> None:
        """Waits until the launcher has logged ``count`` lines matching ``pattern``."""
        regex = re.compile(pattern)
        self.err.wait_for(lambda lines: sum(1 for line in lines if regex.search(line)) >= count, timeout)

    def finish(self, timeout: float = JOB_TIMEOUT_S) -> tuple[int, list[str], list[str]]:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.out.rest(5.0)
            self.err.rest(5.0)
            raise AssertionError(f"horovodrun did not end within {timeout} s:\n" + "\n".join(self.err.lines)) from None
        out, err = self.out.rest(), self.err.rest()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return code, out, err


def done_lines(stdout: list[str]) -> list[dict[str, str]]:
    """Each worker's final ``done`` line, parsed."""
    found = []
    for line in stdout:
        m = re.search(r"<stdout>:done (.*)", line)
        if m:
            found.append(dict(part.split("=", 1) for part in m.group(1).split()))
    return found


def assert_finished_consistently(stdout: list[str], size: int, steps: int) -> None:
    """``size`` workers finished: every step counted exactly once, and every worker's state equal."""
    done = done_lines(stdout)
    assert len(done) == size, stdout
    assert sorted(int(d["rank"]) for d in done) == list(range(size))
    assert all(d["size"] == str(size) and d["steps"] == str(steps) and d["log_ok"] == "True" for d in done), done
    assert all(int(d["syncs_checked"]) >= 1 for d in done), done  # the state was equal on every worker at each
    assert len({d["total"] for d in done}) == 1, done


def discovery(tmp_path: Path, hosts: str) -> tuple[str, Path]:
    """A discovery script printing the file it returns (set_hosts changes the hosts)."""
    listing = tmp_path / "hosts.txt"
    set_hosts(listing, hosts)
    script = tmp_path / "discover.sh"
    script.write_text(f"#!/bin/sh\ncat {listing}\n")
    script.chmod(0o755)
    return str(script), listing


def set_hosts(listing: Path, hosts: str) -> None:
    """Rewrites a discovery listing in one step (a new file renamed over it): the driver runs the
    script at any moment, and a file caught while being written reads as no hosts at all."""
    new = listing.with_suffix(".new")
    new.write_text(hosts)
    os.replace(new, listing)
