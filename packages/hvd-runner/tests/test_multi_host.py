"""Jobs across hosts: horovodrun -H over ssh, on a cluster of network namespaces with real sshd
(``netns_cluster``: three hosts hvdt-h0..2 on one bridge, the launcher running on hvdt-h0 as on the
first machine of a cluster). The hosts share the filesystem, as an NFS-mounted cluster does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import HIERARCHICAL, LineReader, horovodrun_argv, python_ranks, run_twice_and_compare_digests
from horovod.runner.testing.faults import FaultInjector
from horovod.runner.testing.netns_cluster import NetnsCluster

pytestmark = pytest.mark.timeout(240)

#: Seconds any one job across hosts may take before the test fails.
JOB_TIMEOUT_S = 120

TOPOLOGY = textwrap.dedent(
    """\
    import os, numpy as np, horovod.common as hvd
    hvd.init()
    r, s = hvd.rank(), hvd.size()
    total = hvd.allreduce(np.arange(4, dtype=np.float32) * (r + 1), op=hvd.Sum, name="x")
    gathered = hvd.allgather(np.full(r + 1, r, dtype=np.int32), name="g")
    print(
        f"rank {r}/{s} host {os.environ['HOROVOD_HOSTNAME']} netns {os.readlink('/proc/self/ns/net')} "
        f"local {hvd.local_rank()}/{hvd.local_size()} cross {hvd.cross_rank()}/{hvd.cross_size()} "
        f"homogeneous {hvd.is_homogeneous()} sum {total.tolist()} gathered {gathered.tolist()}",
        flush=True,
    )
    hvd.shutdown()
    """
)


def run_on(
    cluster: NetnsCluster, args: list[str], env: dict[str, str], host: str = "hvdt-h0", timeout: float = JOB_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """horovodrun ``args``, started on ``host`` of the cluster."""
    return subprocess.run(
        cluster.command(host, horovodrun_argv(*args)),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def netns_of(cluster: NetnsCluster, host: str) -> str:
    done = cluster.run(host, ["readlink", "/proc/self/ns/net"], capture_output=True, text=True, timeout=10)
    return done.stdout.strip()


def rank_lines(stdout: str) -> dict[int, str]:
    lines = {}
    for line in stdout.splitlines():
        m = re.match(r"\[(\d+)\]<stdout>:(rank .*)", line)
        if m:
            lines[int(m.group(1))] = m.group(2)
    return lines


@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        # rank: (host, local rank, local size, cross rank, cross size)
        ("hvdt-h0:1,hvdt-h1:1", [("hvdt-h0", 0, 1, 0, 2), ("hvdt-h1", 0, 1, 1, 2)]),
        (
            "hvdt-h0:2,hvdt-h1:1",
            [("hvdt-h0", 0, 2, 0, 2), ("hvdt-h0", 1, 2, 0, 1), ("hvdt-h1", 0, 1, 1, 2)],
        ),
        (
            "hvdt-h0:1,hvdt-h1:2,hvdt-h2:1",
            [("hvdt-h0", 0, 1, 0, 3), ("hvdt-h1", 0, 2, 1, 3), ("hvdt-h1", 1, 2, 0, 1), ("hvdt-h2", 0, 1, 2, 3)],
        ),
    ],
)
def test_ranks_run_on_their_hosts_with_horovods_topology(
    netns_cluster: NetnsCluster,
    job_env: dict[str, str],
    hosts: str,
    expected: list[tuple[str, int, int, int, int]],
) -> None:
    result = run_on(netns_cluster, ["-H", hosts, *python_ranks(TOPOLOGY)], job_env)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = rank_lines(result.stdout)
    size = len(expected)
    assert sorted(lines) == list(range(size)), result.stdout
    homogeneous = len({e[2] for e in expected}) == 1
    total = [float(i * sum(range(1, size + 1))) for i in range(4)]
    gathered = [r for r in range(size) for _ in range(r + 1)]
    for rank, (host, local, local_size, cross, cross_size) in enumerate(expected):
        assert lines[rank] == (
            f"rank {rank}/{size} host {host} netns {netns_of(netns_cluster, host)} "
            f"local {local}/{local_size} cross {cross}/{cross_size} homogeneous {homogeneous} "
            f"sum {total} gathered {gathered}"
        ), result.stdout


def test_hostfile_and_network_interface(netns_cluster: NetnsCluster, job_env: dict[str, str], tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# two hosts of the cluster\nhvdt-h1 slots=2\nhvdt-h2 slots=1\n")
    result = run_on(
        netns_cluster,
        [
            "--hostfile",
            str(hostfile),
            "--network-interface",
            netns_cluster.interface,
            "--verbose",
            *python_ranks(TOPOLOGY),
        ],
        job_env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = rank_lines(result.stdout)
    assert [lines[r].split()[3] for r in range(3)] == ["hvdt-h1", "hvdt-h1", "hvdt-h2"]
    # The launcher is not one of the hosts: its server listens on its own address on their network.
    address = netns_cluster.address("hvdt-h0")
    assert f"HOROVOD_RENDEZVOUS_ADDR={address}" in result.stderr
    assert f"HOROVOD_GLOO_IFACE={netns_cluster.interface}" in result.stderr
    assert "rank 0 on hvdt-h1 (ssh)" in result.stderr


def test_output_files_and_timestamps_for_ranks_on_every_host(
    netns_cluster: NetnsCluster, job_env: dict[str, str], tmp_path: Path
) -> None:
    # The launcher writes the files, on its own machine, from what ssh brings back of each rank.
    code = (
        "import os, sys; r = os.environ['HOROVOD_RANK']; h = os.environ['HOROVOD_HOSTNAME']; "
        "print('out', r, h); print('err', r, file=sys.stderr)"
    )
    out_dir = tmp_path / "logs"
    args = ["-H", "hvdt-h1:2,hvdt-h2:1", "--output-filename", str(out_dir), "--prefix-output-with-timestamp"]
    result = run_on(netns_cluster, [*args, *python_ranks(code)], job_env)
    assert result.returncode == 0, result.stdout + result.stderr
    hosts = ["hvdt-h1", "hvdt-h1", "hvdt-h2"]
    assert sorted(p.name for p in out_dir.iterdir()) == ["rank.0", "rank.1", "rank.2"]
    for r, host in enumerate(hosts):
        assert (out_dir / f"rank.{r}" / "stdout").read_text() == f"out {r} {host}\n"
        assert (out_dir / f"rank.{r}" / "stderr").read_text() == f"err {r}\n"
        stamped = rf"^\w{{3}} \w{{3}} \d{{2}} \d{{2}}:\d{{2}}:\d{{2}} \d{{4}}\[{r}\]<stdout>:out {r} {host}$"
        assert re.search(stamped, result.stdout, re.M), result.stdout


def test_every_hosts_timelines_are_merged_by_the_launcher(
    netns_cluster: NetnsCluster, job_env: dict[str, str], tmp_path: Path
) -> None:
    """--timeline-all-ranks across hosts: the remote ranks' files come over ssh (read in the
    directory each rank ran in, here a relative path), and the merge has a track per rank."""
    args = ["-H", "hvdt-h0:1,hvdt-h1:1,hvdt-h2:1", "--no-job-report", "--timeline-filename", "timeline.json"]
    result = subprocess.run(
        netns_cluster.command("hvdt-h0", horovodrun_argv(*args, "--timeline-all-ranks", *python_ranks(TOPOLOGY))),
        env=job_env,
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "timeline: 3 of 3 ranks' timelines merged into timeline.json, one track per rank, 2 copied from remote " in (
        result.stderr
    ), result.stderr
    merged = json.loads((tmp_path / "timeline.json").read_text())
    tracks = sorted(e["args"]["name"] for e in merged["traceEvents"] if e.get("name") == "process_name")
    assert tracks == ["rank 0", "rank 1", "rank 2"] and merged["metadata"]["ranks"] == [0, 1, 2], merged["metadata"]


def test_an_interface_missing_on_a_host_is_named(netns_cluster: NetnsCluster, job_env: dict[str, str]) -> None:
    result = run_on(
        netns_cluster, ["-H", "hvdt-h0:1,hvdt-h1:1", "--network-interface", "lo9", *python_ranks("pass")], job_env
    )
    assert result.returncode == 2, result.stderr
    assert "--network-interface lo9: host(s) hvdt-h0, hvdt-h1 have no interface lo9" in result.stderr


@pytest.mark.parametrize("hosts", ["hvdt-h0:2,hvdt-h1:2", "hvdt-h0:2,hvdt-h1:1,hvdt-h2:2"])
def test_hierarchical_allreduce_equals_the_flat_one(
    netns_cluster: NetnsCluster,
    job_env: dict[str, str],
    hosts: str,
) -> None:
    run_twice_and_compare_digests(lambda args: run_on(netns_cluster, ["-H", hosts, *args], job_env))


def test_hierarchical_allreduce_on_one_host_says_it_has_no_effect(
    netns_cluster: NetnsCluster,
    job_env: dict[str, str],
) -> None:
    result = run_on(
        netns_cluster, ["-H", "hvdt-h1:2", "--hierarchical-allreduce", *python_ranks(HIERARCHICAL)], job_env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "HOROVOD_HIERARCHICAL_ALLREDUCE has no effect in this job: every rank is on one host" in result.stderr


# --- faults ----------------------------------------------------------------------------------

#: Rank 1 pauses three Gloo timeouts before its allreduce (a long checkpoint, scaled down).
SLOW_RANK = textwrap.dedent(
    """\
    import time, numpy as np, horovod.common as hvd
    hvd.init()
    hvd.allreduce(np.ones(4, np.float32), name="before")
    if hvd.rank() == 1:
        time.sleep(15)
    total = hvd.allreduce(np.ones(1 << 16, np.float32), op=hvd.Sum, name="after")
    print(f"rank {hvd.rank()} total {total[0]:.0f}", flush=True)
    hvd.shutdown()
    """
)


def test_a_slow_rank_is_not_a_failure(netns_cluster: NetnsCluster, job_env: dict[str, str]) -> None:
    """A rank busy for longer than HOROVOD_GLOO_TIMEOUT_SECONDS before a collective (over TCP between
    hosts): its engine goes on negotiating meanwhile, so its peers wait for it, and nothing fails."""
    env = {**job_env, "HOROVOD_GLOO_TIMEOUT_SECONDS": "5"}
    result = run_on(netns_cluster, ["-H", "hvdt-h1:1,hvdt-h2:1", *python_ranks(SLOW_RANK)], env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(rank_lines(result.stdout).values()) == ["rank 0 total 2", "rank 1 total 2"], result.stdout


def test_a_host_that_does_not_answer_is_named(netns_cluster: NetnsCluster, job_env: dict[str, str]) -> None:
    netns_cluster.pause_host("hvdt-h2")
    try:
        result = run_on(
            netns_cluster,
            [
                "-H",
                "hvdt-h0:1,hvdt-h1:1,hvdt-h2:1",
                "--disable-cache",
                "--start-timeout",
                "3",
                *python_ranks("print('ran', flush=True)"),
            ],
            job_env,
            timeout=60,
        )
    finally:
        netns_cluster.resume_host("hvdt-h2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "host hvdt-h2 did not answer over ssh within 3 s" in result.stderr
    assert "hvdt-h1" not in result.stderr  # the hosts that answered are not blamed
    assert "ran" not in result.stdout  # no rank started anywhere


def test_refused_ssh_authentication_shows_sshs_reason(netns_cluster: NetnsCluster, job_env: dict[str, str]) -> None:
    with netns_cluster.refusing_keys("hvdt-h1"):
        result = run_on(
            netns_cluster,
            ["-H", "hvdt-h0:1,hvdt-h1:1", "--disable-cache", *python_ranks("print('ran', flush=True)")],
            job_env,
            timeout=60,
        )
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"ssh to host hvdt-h1 failed: .*Permission denied \(publickey\)", result.stderr), result.stderr


WORKER = textwrap.dedent(
    """\
    import os, signal, subprocess, sys, time, numpy as np, horovod.common as hvd
    hvd.init()
    r = hvd.rank()
    child = subprocess.Popen(["sleep", "300"])  # stopped with its rank, wherever it runs
    print(f"ready {{r}} {{os.environ['HOROVOD_HOSTNAME']}}", flush=True)
    {action}
    for step in range(100000):
        hvd.allreduce(np.ones(3), name=f"step.{{step}}")
        time.sleep(0.05)
    """
)


def _leftovers(cluster: NetnsCluster, marker: str) -> dict[str, list[int]]:
    """Processes of the test's job (their command line holds ``marker``) still alive, by host."""
    import psutil

    found = {}
    for host in cluster.hosts:
        pids = []
        for pid in cluster.processes(host):
            try:
                proc = psutil.Process(pid)
                if proc.status() != psutil.STATUS_ZOMBIE and (
                    marker in " ".join(proc.cmdline()) or proc.name() == "sleep"
                ):
                    pids.append(pid)
            except psutil.NoSuchProcess:
                pass
        if pids:
            found[host] = pids
    return found


def _assert_nothing_left(cluster: NetnsCluster, marker: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while (left := _leftovers(cluster, marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"processes left on the hosts: {left}"


def test_a_killed_remote_rank_ends_the_job_naming_rank_and_host(
    netns_cluster: NetnsCluster,
    job_env: dict[str, str],
) -> None:
    code = WORKER.format(action="if r == 2: time.sleep(0.5); os.kill(os.getpid(), signal.SIGKILL)")
    code += "# marker killed-remote-rank\n"
    result = run_on(netns_cluster, ["-H", "hvdt-h0:1,hvdt-h1:1,hvdt-h2:1", *python_ranks(code)], job_env)
    assert result.returncode == 128 + signal.SIGKILL, result.stdout + result.stderr
    assert "job failed: rank 2 (on host hvdt-h2) was killed by signal SIGKILL" in result.stderr
    # The survivors' collectives fail naming the lost rank and its host.
    assert re.search(r"\[[01]\]<stderr>:.*rank 2.*hvdt-h2", result.stderr), result.stderr
    _assert_nothing_left(netns_cluster, "killed-remote-rank")


def _run_with_a_fault(
    cluster: NetnsCluster, hosts: str, code: str, env: dict[str, str], fault: Callable[[], object]
) -> tuple[subprocess.CompletedProcess[str], float]:
    """``code`` on ``hosts`` through horovodrun on hvdt-h0; ``fault()`` once every rank said ready.
    Returns the job's result and the seconds from the fault to horovodrun's exit."""
    proc = subprocess.Popen(
        cluster.command("hvdt-h0", horovodrun_argv("-H", hosts, *python_ranks(code))),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out, err = LineReader(proc.stdout), LineReader(proc.stderr)
    size = len(hosts.split(","))
    out.wait_for(lambda lines: sum("<stdout>:ready" in line for line in lines) == size, JOB_TIMEOUT_S)
    time.sleep(1.0)  # a few steps together
    fault()
    faulted = time.monotonic()
    try:
        proc.wait(timeout=JOB_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("horovodrun did not end:\n" + "\n".join(err.rest(5.0))) from None
    took = time.monotonic() - faulted
    stdout, stderr = "\n".join(out.rest()), "\n".join(err.rest())
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), took


def test_a_frozen_host_ends_the_job_at_the_timeout(netns_cluster: NetnsCluster, job_env: dict[str, str]) -> None:
    """Every process of hvdt-h2 stopped (SIGSTOP, its sshd too; sockets stay open): the others' next
    collective times out naming it; horovodrun ends once ssh gives up on the host."""
    injector = FaultInjector(netns_cluster, "frozen-host", log=lambda line: None)
    code = WORKER.format(action="pass") + "# marker frozen-host\n"
    env = {**job_env, "HOROVOD_GLOO_TIMEOUT_SECONDS": "5"}
    try:
        result, took = _run_with_a_fault(
            netns_cluster, "hvdt-h0:1,hvdt-h1:1,hvdt-h2:1", code, env, lambda: injector.freeze("hvdt-h2")
        )
    finally:
        injector.thaw("hvdt-h2")
    print(f"frozen host: horovodrun ended {took:.1f} s after the freeze")
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"\[[01]\]<stderr>:.*timed out after 5 s \(HOROVOD_GLOO_TIMEOUT_SECONDS\)", result.stderr), (
        result.stderr
    )
    _assert_nothing_left(netns_cluster, "frozen-host", timeout=60)


def test_a_host_losing_its_sshd_mid_job_changes_nothing(netns_cluster: NetnsCluster, job_env: dict[str, str]) -> None:
    """hvdt-h2's sshd stops while the job runs: the session carrying its rank goes on, and so does the job."""
    code = textwrap.dedent(
        """\
        import os, time, numpy as np, horovod.common as hvd
        hvd.init()
        print(f"ready {hvd.rank()}", flush=True)
        for step in range(100):
            total = hvd.allreduce(np.ones(3), op=hvd.Sum, name="step")
            time.sleep(0.05)
        print(f"rank {hvd.rank()} total {total[0]:.0f}", flush=True)
        """
    )
    try:
        result, _ = _run_with_a_fault(
            netns_cluster, "hvdt-h0:1,hvdt-h1:1,hvdt-h2:1", code, job_env, lambda: netns_cluster.stop_sshd("hvdt-h2")
        )
    finally:
        netns_cluster.restore()
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(rank_lines(result.stdout).values()) == [f"rank {r} total 3" for r in range(3)], result.stdout


def _as_a_foreground_job() -> None:
    """SIGINT at its default, as a terminal gives it (a background test run inherits it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_stopping_horovodrun_leaves_no_process_on_any_host(
    netns_cluster: NetnsCluster,
    job_env: dict[str, str],
    signum: int,
) -> None:
    marker = f"stopped-launcher-{signum}"
    code = WORKER.format(action="pass") + f"# marker {marker}\n"
    argv = netns_cluster.command("hvdt-h0", horovodrun_argv("-H", "hvdt-h0:1,hvdt-h1:2,hvdt-h2:1", *python_ranks(code)))
    with subprocess.Popen(
        argv, env=job_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True, preexec_fn=_as_a_foreground_job,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stderr is not None
            out, err = LineReader(proc.stdout), LineReader(proc.stderr)
            out.wait_for(lambda ls: sum(">:ready" in line for line in ls) == 4)
            assert _leftovers(netns_cluster, marker).keys() == set(netns_cluster.hosts)  # the check sees them
            proc.send_signal(signum)
            returncode = proc.wait(timeout=60)
            stderr = "\n".join(err.rest())
            assert returncode == 128 + signum, stderr
            assert "every rank was stopped" in stderr
            # Checked at once: the launcher returns only once every host has stopped its ranks.
            _assert_nothing_left(netns_cluster, marker, timeout=0.5)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_a_host_cut_off_mid_job_ends_the_job_and_stops_its_ranks(
    netns_cluster: NetnsCluster, job_env: dict[str, str]
) -> None:
    # A partition closes no connection: the survivors' collectives time out, and the cut-off host
    # stops its ranks itself once the launcher's heartbeats stop arriving (rank_process.py).
    marker = "cut-off-host"
    code = WORKER.format(action="pass") + f"# marker {marker}\n"
    argv = netns_cluster.command("hvdt-h0", horovodrun_argv("-H", "hvdt-h0:1,hvdt-h1:1,hvdt-h2:1", *python_ranks(code)))
    env = {**job_env, "HOROVOD_GLOO_TIMEOUT_SECONDS": "5"}
    with subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stderr is not None
            out, err = LineReader(proc.stdout), LineReader(proc.stderr)
            out.wait_for(lambda ls: sum(">:ready" in line for line in ls) == 3)
            netns_cluster.pause_host("hvdt-h2")
            returncode = proc.wait(timeout=90)
            stderr = "\n".join(err.rest())
            assert returncode == 1, stderr
            assert "timed out after 5 s (HOROVOD_GLOO_TIMEOUT_SECONDS)" in stderr
            # The cut-off host, still cut off, stops its rank within the lifeline's 30 s.
            _assert_nothing_left(netns_cluster, marker, timeout=60)
        finally:
            netns_cluster.resume_host("hvdt-h2")
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


RENDEZVOUS_PROBE = textwrap.dedent(
    """\
    import os, urllib.error, urllib.request, horovod.common as hvd
    hvd.init()  # through the launcher's server: it is reachable from this host
    addr, port = os.environ["HOROVOD_RENDEZVOUS_ADDR"], os.environ["HOROVOD_RENDEZVOUS_PORT"]
    try:
        urllib.request.urlopen(f"http://{addr}:{port}/v1/kv/{os.environ['HOROVOD_JOB_KEY']}/x", timeout=10)
        answer = "accepted"
    except urllib.error.HTTPError as error:
        answer = f"refused {error.code}"
    print(f"rank {hvd.rank()} on {os.environ['HOROVOD_HOSTNAME']}: unsigned request {answer}", flush=True)
    hvd.shutdown()
    """
)


def test_the_rendezvous_server_is_reachable_from_the_hosts_and_refuses_unsigned_requests(
    netns_cluster: NetnsCluster,
    job_env: dict[str, str],
) -> None:
    result = run_on(netns_cluster, ["-H", "hvdt-h1:1,hvdt-h2:1", *python_ranks(RENDEZVOUS_PROBE)], job_env)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = rank_lines(result.stdout)
    assert lines == {
        0: "rank 0 on hvdt-h1: unsigned request refused 401",
        1: "rank 1 on hvdt-h2: unsigned request refused 401",
    }, result.stdout
