"""horovodrun end to end: real processes on this machine, connected through the rendezvous server.

Every job has a hard timeout (the subprocess's, plus pytest-timeout's); ranks are at most 4.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import (
    LineReader,
    assert_all_gone,
    horovodrun,
    horovodrun_argv,
    python_ranks,
    reported_pids,
    run_twice_and_compare_digests,
)

pytestmark = pytest.mark.timeout(180)

ALLREDUCE = textwrap.dedent(
    """\
    import numpy as np, horovod.common as hvd
    hvd.init()
    r, s = hvd.rank(), hvd.size()
    total = hvd.allreduce(np.arange(5, dtype=np.float32) * (r + 1), op=hvd.Sum, name="x")
    ints = hvd.allreduce(np.full(3, r, dtype=np.int64), op=hvd.Sum, name="i")
    avg = hvd.allreduce(np.full(2, float(r)), op=hvd.Average, name="avg")
    print(f"rank {r}/{s} sum {total.tolist()} ints {ints.tolist()} avg {avg.tolist()}", flush=True)
    hvd.shutdown()
    """
)


def expected_allreduce_line(rank: int, size: int) -> str:
    factor = sum(range(1, size + 1))
    total = [float(i * factor) for i in range(5)]
    ints = [sum(range(size))] * 3
    avg = [sum(range(size)) / size] * 2
    return f"[{rank}]<stdout>:rank {rank}/{size} sum {total} ints {ints} avg {avg}"


@pytest.mark.parametrize("np_", [2, 3, 4])
def test_allreduce_through_horovodrun(np_: int, job_env: dict[str, str]) -> None:
    result = horovodrun("-np", str(np_), "-H", f"localhost:{np_}", *python_ranks(ALLREDUCE), env=job_env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for rank in range(np_):
        assert expected_allreduce_line(rank, np_) in lines, result.stdout


def test_allreduce_with_hosts_from_a_hostfile(tmp_path: Path, job_env: dict[str, str]) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# this machine only\nlocalhost slots=2\n")
    result = horovodrun("-np", "2", "--hostfile", str(hostfile), *python_ranks(ALLREDUCE), env=job_env)
    assert result.returncode == 0, result.stderr
    assert expected_allreduce_line(1, 2) in result.stdout.splitlines()


def test_hierarchical_allreduce_with_this_machine_as_two_hosts(job_env: dict[str, str]) -> None:
    # Two names of this machine are two hosts to the job: the hierarchy groups ranks by the host
    # they were placed on, so its steps run here (each host's through shared memory).
    run_twice_and_compare_digests(lambda args: horovodrun("-H", "localhost:2,127.0.0.1:1", *args, env=job_env))


def test_topology_and_contract_variables(job_env: dict[str, str]) -> None:
    """Two host names for this machine: ranks are placed as on two hosts (local/cross ranks)."""
    import socket

    code = textwrap.dedent(
        """\
        import os
        import horovod.common as hvd
        hvd.init()
        e = os.environ
        print("topo", hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size(),
              e["HOROVOD_HOSTNAME"], e["HOROVOD_JOB_KEY"], e["HOROVOD_RENDEZVOUS_ADDR"], flush=True)
        hvd.shutdown()
        """
    )
    hostname = socket.gethostname()
    result = horovodrun("-H", f"localhost:2,{hostname}:1", *python_ranks(code), env=job_env)
    assert result.returncode == 0, result.stderr
    rows = sorted(line.split(":", 1)[1].split()[1:] for line in result.stdout.splitlines() if ">:topo " in line)
    assert [row[:7] for row in rows] == [
        ["0", "3", "0", "2", "0", "2", "localhost"],
        ["1", "3", "1", "2", "0", "1", "localhost"],
        ["2", "3", "0", "1", "1", "2", hostname],
    ]
    job_keys = {row[7] for row in rows}
    assert len(job_keys) == 1 and next(iter(job_keys)).startswith("hvd-")
    assert {row[8] for row in rows} == {"127.0.0.1"}


def test_output_is_prefixed_with_the_rank(job_env: dict[str, str]) -> None:
    code = (
        "import os, sys; r = os.environ['HOROVOD_RANK']; "
        "print('hello', r); print('oops', r, file=sys.stderr); print('two\\nlines', r)"
    )
    result = horovodrun("-np", "2", *python_ranks(code), env=job_env)
    assert result.returncode == 0, result.stderr
    out, err = result.stdout.splitlines(), result.stderr.splitlines()
    for r in range(2):
        assert f"[{r}]<stdout>:hello {r}" in out
        assert f"[{r}]<stdout>:two" in out and f"[{r}]<stdout>:lines {r}" in out
        assert f"[{r}]<stderr>:oops {r}" in err
        assert f"[{r}]<stderr>:oops {r}" not in out


def test_prefix_output_with_timestamp(job_env: dict[str, str]) -> None:
    result = horovodrun("-np", "1", "--prefix-output-with-timestamp", *python_ranks("print('stamped')"), env=job_env)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^\w{3} \w{3} \d{2} \d{2}:\d{2}:\d{2} \d{4}\[0\]<stdout>:stamped$", result.stdout, re.M), (
        result.stdout
    )


def test_output_filename_writes_each_rank_unprefixed(tmp_path: Path, job_env: dict[str, str]) -> None:
    code = "import os, sys; r = os.environ['HOROVOD_RANK']; print('out', r); print('err', r, file=sys.stderr)"
    out_dir = tmp_path / "logs"
    result = horovodrun("-np", "3", "--output-filename", str(out_dir), *python_ranks(code), env=job_env)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["rank.0", "rank.1", "rank.2"]
    for r in range(3):
        assert (out_dir / f"rank.{r}" / "stdout").read_text() == f"out {r}\n"
        assert (out_dir / f"rank.{r}" / "stderr").read_text() == f"err {r}\n"
        assert f"[{r}]<stdout>:out {r}" in result.stdout  # still shown on the terminal


def test_tunables_and_config_file_reach_the_ranks(tmp_path: Path, job_env: dict[str, str]) -> None:
    config = tmp_path / "hvd.yaml"
    config.write_text("params:\n  cache_capacity: 77\n  fusion_threshold_mb: 64\nlogging:\n  level: error\n")
    names = [
        "HOROVOD_FUSION_THRESHOLD",
        "HOROVOD_CACHE_CAPACITY",
        "HOROVOD_LOG_LEVEL",
        "HOROVOD_CYCLE_TIME",
        "HOROVOD_TIMELINE",
    ]
    code = f"import os; print('env', *[os.environ.get(n, '-') for n in {names!r}])"
    timeline = tmp_path / "timeline.json"
    result = horovodrun(
        "-np",
        "2",
        "--config-file",
        str(config),
        "--fusion-threshold-mb",
        "2",
        "--cycle-time-ms",
        "3",
        "--timeline-filename",
        str(timeline),
        *python_ranks(code),
        env=job_env,
    )
    assert result.returncode == 0, result.stderr
    for r in range(2):
        assert f"[{r}]<stdout>:env {2 * 1024 * 1024} 77 ERROR 3.0 {timeline}" in result.stdout.splitlines()


def test_timeline_is_written(tmp_path: Path, job_env: dict[str, str]) -> None:
    timeline = tmp_path / "timeline.json"
    result = horovodrun("-np", "2", "--timeline-filename", str(timeline), *python_ranks(ALLREDUCE), env=job_env)
    assert result.returncode == 0, result.stderr
    assert timeline.exists() and "allreduce" in timeline.read_text().lower()


def test_unusable_output_directory_is_reported(tmp_path: Path, job_env: dict[str, str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = horovodrun("-np", "1", "--output-filename", str(blocker / "logs"), *python_ranks("pass"), env=job_env)
    assert result.returncode == 1
    assert "cannot create the output directory of rank 0" in result.stderr


def test_missing_command_is_reported(job_env: dict[str, str]) -> None:
    result = horovodrun("-np", "2", "hvd-no-such-command-anywhere", env=job_env)
    assert result.returncode == 127
    assert "cannot start rank 0" in result.stderr and "hvd-no-such-command-anywhere" in result.stderr


# --- failures -------------------------------------------------------------------------------------

WAITER = textwrap.dedent(
    """\
    import os, subprocess, sys, time, signal
    import numpy as np, horovod.common as hvd
    child = subprocess.Popen(["sleep", "300"])  # a rank's own child must not outlive the job either
    print("pid", os.getpid(), flush=True)
    print("child", child.pid, flush=True)
    rank = int(os.environ["HOROVOD_RANK"])
    {before_init}
    hvd.init()
    {after_init}
    hvd.allreduce(np.ones(3), name="blocked")  # the failed rank never joins: the others wait here
    time.sleep(300)
    """
)


def run_failing_job(
    job_env: dict[str, str], np_: int, before_init: str = "", after_init: str = ""
) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    code = WAITER.format(before_init=before_init or "pass", after_init=after_init or "pass")
    started = time.monotonic()
    result = horovodrun("-np", str(np_), *python_ranks(code), env=job_env, timeout=90)
    elapsed = time.monotonic() - started
    lines = result.stdout.splitlines()
    pids = reported_pids(lines, "pid") + reported_pids(lines, "child")
    assert elapsed < 60, f"the failed job took {elapsed:.0f} s to end"
    assert_all_gone(pids)
    return result, pids


def test_rank_exit_code_is_the_jobs(job_env: dict[str, str]) -> None:
    result, pids = run_failing_job(job_env, 3, before_init="if rank == 1: time.sleep(0.5); sys.exit(3)")
    assert result.returncode == 3, result.stderr
    assert "rank 1 exited with code 3" in result.stderr
    assert "job failed: rank 1" in result.stderr
    assert len(pids) == 6


def test_rank_raising_fails_the_job(job_env: dict[str, str]) -> None:
    result, pids = run_failing_job(job_env, 2, after_init="if rank == 1: raise RuntimeError('boom on rank 1')")
    assert result.returncode != 0
    assert "[1]<stderr>:RuntimeError: boom on rank 1" in result.stderr
    assert re.search(
        r"job failed: rank 1 \(pid \d+\) (exited with code \d+|was killed by signal \w+( by horovodrun)?) "
        r"\(uncaught RuntimeError: boom on rank 1\)",
        result.stderr,
    ), result.stderr
    assert len(pids) == 4


def test_the_rank_that_failed_first_is_named_even_if_another_exits_first(job_env: dict[str, str]) -> None:
    """Rank 1 raises but takes long to exit; rank 0 fails later but is gone sooner."""
    code = textwrap.dedent(
        """        import atexit, os, sys, time
        import horovod.common as hvd
        hvd.init()
        if hvd.rank() == 1:
            atexit.register(time.sleep, 2)  # a slow exit: still unwinding when rank 0 is gone
            raise KeyError("the real cause")
        time.sleep(0.5)
        sys.exit(5)
        """
    )
    result = horovodrun("-np", "2", *python_ranks(code), env=job_env, timeout=90)
    # With a store-based backend rank 0 may die of SIGABRT at exit instead (hvd-core does not shut
    # its engine down at exit, and the engine thread can be inside a store call during finalization).
    assert re.search(
        r"rank 0 (exited with code 5|was killed by signal \w+); stopping the other 1 rank\(s\)", result.stderr
    )
    assert re.search(
        r"job failed: rank 1 \(pid \d+\) .*\(uncaught KeyError: 'the real cause'\); it began to fail first",
        result.stderr,
    ), result.stderr
    assert result.returncode not in (0, 5)


def test_rank_killed_by_sigkill(job_env: dict[str, str]) -> None:
    result, pids = run_failing_job(
        job_env,
        4,
        after_init=(
            "if rank == 2: signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)  # must be SIGKILLed\n"
            "if rank == 1: time.sleep(0.5); os.kill(os.getpid(), signal.SIGKILL)"
        ),
    )
    assert result.returncode == 128 + signal.SIGKILL
    assert "rank 1 was killed by signal SIGKILL" in result.stderr
    assert "rank(s) 2 still running" in result.stderr and "sending SIGKILL" in result.stderr
    assert len(pids) == 8


def test_success_leaves_no_process_behind(job_env: dict[str, str]) -> None:
    code = "import subprocess, os; c = subprocess.Popen(['sleep', '300']); print('child', c.pid, flush=True)"
    result = horovodrun("-np", "2", *python_ranks(code), env=job_env)
    assert result.returncode == 0, result.stderr
    pids = reported_pids(result.stdout.splitlines(), "child")
    assert len(pids) == 2
    assert_all_gone(pids)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_the_launcher_stops_every_rank(signum: int, job_env: dict[str, str]) -> None:
    code = WAITER.format(
        before_init="pass", after_init="if rank == 0: signal.signal(signal.SIGTERM, signal.SIG_IGN)"
    ).replace('hvd.allreduce(np.ones(3), name="blocked")', 'print("ready", flush=True)')
    with (
        subprocess.Popen(
            horovodrun_argv("-np", "3", *python_ranks(code)),
            env=job_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # a signal for the launcher only, as a terminal's Ctrl-C would be
            preexec_fn=_as_a_foreground_job,
        ) as proc,
        _killed_at_exit(proc),
    ):
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        out = LineReader(proc.stdout)
        err = LineReader(proc.stderr)
        lines = out.wait_for(lambda ls: sum(">:ready" in line for line in ls) == 3)
        pids = reported_pids(lines, "pid") + reported_pids(lines, "child")
        assert len(pids) == 6
        proc.send_signal(signum)
        try:
            returncode = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # the launcher prints its threads' stacks
            raise AssertionError("the launcher did not end; its stderr:\n" + "\n".join(err.rest(timeout=2))) from None
        assert returncode == 128 + signum
        stderr = "\n".join(err.rest())
        assert "every rank was stopped" in stderr
        assert_all_gone([*pids, proc.pid])


def _as_a_foreground_job() -> None:
    """SIGINT at its default, as a terminal gives it to the command it runs. A shell starts a
    background command of a script with SIGINT ignored, and the launcher, as any program, keeps an
    ignored SIGINT: this test would otherwise depend on how its own run was started."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def _killed_at_exit(proc: subprocess.Popen[str]) -> Iterator[None]:
    """Whatever the test asserts, the launcher does not outlive it."""
    try:
        yield
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# --- the secret -------------------------------------------------------------------------------------


def test_secret_is_not_on_command_lines_nor_in_verbose_output(tmp_path: Path, job_env: dict[str, str]) -> None:
    code = textwrap.dedent(
        f"""\
        import os, time
        import horovod.common as hvd
        hvd.init()
        with open(os.path.join({str(tmp_path)!r}, "secret." + os.environ["HOROVOD_RANK"]), "w") as f:
            f.write(os.environ["HOROVOD_RENDEZVOUS_SECRET"])
        print("pid", os.getpid(), flush=True)
        while not os.path.exists(os.path.join({str(tmp_path)!r}, "go")):
            time.sleep(0.05)
        hvd.shutdown()
        """
    )
    with (
        subprocess.Popen(
            horovodrun_argv("-np", "2", "--verbose", *python_ranks(code)),
            env=job_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        ) as proc,
        _killed_at_exit(proc),
    ):
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        out = LineReader(proc.stdout)
        err = LineReader(proc.stderr)
        pids = reported_pids(out.wait_for(lambda ls: len(reported_pids(ls)) == 2))
        secrets = {(tmp_path / f"secret.{r}").read_text() for r in range(2)}
        assert len(secrets) == 1
        secret = secrets.pop()
        assert re.fullmatch(r"[0-9a-f]{64}", secret)
        for pid in [*pids, proc.pid]:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert secret.encode() not in cmdline
            assert bytes.fromhex(secret) not in cmdline
        (tmp_path / "go").touch()
        assert proc.wait(timeout=60) == 0
        stdout, stderr = "\n".join(out.rest()), "\n".join(err.rest())
    assert "HOROVOD_RENDEZVOUS_SECRET=<hidden>" in stderr
    assert "rendezvous server listening on 127.0.0.1:" in stderr
    assert secret not in stdout and secret not in stderr


def test_each_job_gets_its_own_secret_and_key(job_env: dict[str, str]) -> None:
    code = (
        "import os, hashlib; secret = os.environ['HOROVOD_RENDEZVOUS_SECRET']; "
        "print('id', os.environ['HOROVOD_JOB_KEY'], hashlib.sha256(secret.encode()).hexdigest())"
    )
    seen = []
    for _ in range(2):
        result = horovodrun("-np", "1", *python_ranks(code), env=job_env)
        assert result.returncode == 0, result.stderr
        seen.append(result.stdout.split("id", 1)[1].split())
    assert seen[0][0] != seen[1][0] and seen[0][1] != seen[1][1]
