"""The namespace test cluster itself: real sshd hosts, isolation, faults, and a clean teardown.

These clusters use prefixes and subnets of their own (hvdc/1, hvdd/2, hvde/3), never the session
fixture's (hvdt/0), so they can run beside it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from horovod.runner.testing import _sshd
from horovod.runner.testing.netns_cluster import NetnsCluster, requirements_missing

MISSING = requirements_missing()

# Without root the cluster cannot exist; as root, anything else missing fails (the fixtures say what).
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason=f"the namespace cluster needs root: {MISSING}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[NetnsCluster]:
    if MISSING:
        pytest.fail(MISSING)
    with NetnsCluster(hosts=3, prefix="hvdc", subnet=1) as made:
        yield made


def ssh(cluster: NetnsCluster, source: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`ssh ARGS` run on the source host, as a launcher there would."""
    return cluster.run(
        source, ["ssh", *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def root_links() -> list[str]:
    return [link["ifname"] for link in json.loads(subprocess.check_output(["ip", "-j", "link"], timeout=10))]


def cluster_sshd_pids(prefix: str) -> list[int]:
    """Live sshd processes started with a configuration of a cluster of this prefix."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if os.readlink(entry / "exe") == _sshd.SSHD and f"hvd-netns-{prefix}-" in (entry / "cmdline").read_text():
                pids.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return pids


@needs_root
@pytest.mark.timeout(60)
def test_hosts_answer_ssh(cluster: NetnsCluster) -> None:
    h0, h1, h2 = cluster.hosts
    result = ssh(cluster, h0, h1, "hostname")
    assert result.returncode == 0, result.stderr
    # The UTS namespace is the machine's: every host has its hostname, which no cluster name is.
    assert result.stdout.strip() == os.uname().nodename
    assert os.uname().nodename not in cluster.hosts
    # The session runs inside h2's namespace: its only interfaces are lo and hvd0.
    result = ssh(cluster, h0, h2, "cat /proc/self/net/dev")
    assert result.returncode == 0, result.stderr
    interfaces = {line.split(":")[0].strip() for line in result.stdout.splitlines() if ":" in line}
    assert interfaces == {"lo", cluster.interface}
    # Every host reaches every host, itself included, by name.
    for source in cluster.hosts:
        for target in cluster.hosts:
            result = ssh(cluster, source, target, "true")
            assert result.returncode == 0, f"{source} -> {target}: {result.stderr}"


@needs_root
@pytest.mark.timeout(60)
def test_each_host_has_only_its_own_address(cluster: NetnsCluster) -> None:
    assert [cluster.address(h) for h in cluster.hosts] == ["198.18.1.10", "198.18.1.11", "198.18.1.12"]
    for host in cluster.hosts:
        links = json.loads(subprocess.check_output(["ip", "-n", cluster.namespace(host), "-j", "addr"], timeout=10))
        addresses = {link["ifname"]: [(a["family"], a["local"]) for a in link["addr_info"]] for link in links}
        assert set(addresses) == {"lo", "hvd0"}
        assert addresses["hvd0"] == [("inet", cluster.address(host))]  # no IPv6 link-local either
    assert not [name for name in root_links() if name == "hvd0" or name.startswith("hvdc-")]


@needs_root
@pytest.mark.timeout(60)
def test_same_python_on_every_host(cluster: NetnsCluster) -> None:
    code = "import sys, horovod.runner; print(sys.executable)"
    result = ssh(cluster, cluster.hosts[0], cluster.hosts[2], sys.executable, "-c", f"'{code}'")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == sys.executable


@needs_root
@pytest.mark.timeout(60)
def test_many_sessions_at_once(cluster: NetnsCluster) -> None:
    h0, h1, _ = cluster.hosts
    procs = [
        subprocess.Popen(cluster.command(h0, ["ssh", h1, "sleep 1"]), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(32)  # sshd's default MaxStartups (10) would refuse some
    ]
    failures = []
    for proc in procs:
        _, err = proc.communicate(timeout=30)
        if proc.returncode:
            failures.append(err.decode())
    assert not failures


@needs_root
@pytest.mark.timeout(60)
def test_unknown_key_is_refused(cluster: NetnsCluster, tmp_path: Path) -> None:
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True, timeout=30)
    # -F /dev/null: the namespace's ssh_config would offer the cluster's own key beside -i's.
    options = ["-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]
    options += ["-o", f"UserKnownHostsFile={cluster.known_hosts}", "-i", str(other), "-o", "IdentitiesOnly=yes"]
    result = ssh(cluster, cluster.hosts[0], *options, cluster.hosts[1], "true")
    assert result.returncode == 255
    assert "Permission denied (publickey)" in result.stderr


@needs_root
@pytest.mark.timeout(60)
def test_pause_and_resume_host(cluster: NetnsCluster) -> None:
    h0, h1, h2 = cluster.hosts
    try:
        cluster.pause_host(h1)
        result = ssh(cluster, h0, "-o", "ConnectTimeout=2", h1, "true")
        assert result.returncode == 255
        assert ssh(cluster, h0, h2, "true").returncode == 0  # the others still answer
    finally:
        cluster.resume_host(h1)
    result = ssh(cluster, h0, "-o", "ConnectTimeout=5", h1, "true")
    assert result.returncode == 0, result.stderr


@needs_root
@pytest.mark.timeout(60)
def test_stop_and_start_sshd(cluster: NetnsCluster) -> None:
    h0, h1, _ = cluster.hosts
    session = subprocess.Popen(
        cluster.command(h0, ["ssh", h1, "echo open; sleep 60"]), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    try:
        assert session.stdout is not None
        assert session.stdout.readline() == b"open\n"
        cluster.stop_sshd(h1)
        result = ssh(cluster, h0, "-o", "ConnectTimeout=2", h1, "true")
        assert result.returncode == 255
        assert "Connection refused" in result.stderr
        assert session.poll() is None  # open sessions outlive the listener, as on a real host
        cluster.start_sshd(h1)
        assert ssh(cluster, h0, h1, "true").returncode == 0
    finally:
        session.kill()
        session.communicate(timeout=10)
        # Killing an ssh client leaves its remote command running (no tty, no SIGHUP): as with a
        # real host, the remote side must be stopped on the host itself.
        for pid in cluster.processes(h1):
            os.kill(pid, signal.SIGKILL)
        cluster.restore()


@needs_root
@pytest.mark.timeout(60)
def test_restore(cluster: NetnsCluster) -> None:
    h0, h1, h2 = cluster.hosts
    try:
        cluster.stop_sshd(h1)
        cluster.pause_host(h0)
    finally:
        cluster.restore()
    assert ssh(cluster, h0, h1, "true").returncode == 0
    assert ssh(cluster, h2, h0, "true").returncode == 0


@needs_root
@pytest.mark.timeout(60)
def test_processes_on_a_host(cluster: NetnsCluster) -> None:
    h1 = cluster.hosts[1]
    assert cluster.processes(h1) == []
    proc = subprocess.Popen(cluster.command(h1, ["sleep", "60"]))
    try:
        # `ip netns exec` enters the namespace, then becomes the command: wait until it has entered.
        deadline = time.monotonic() + 10
        while cluster.processes(h1) != [proc.pid] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert cluster.processes(h1) == [proc.pid]
        assert cluster.processes(cluster.hosts[0]) == []
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert cluster.processes(h1) == []


@needs_root
@pytest.mark.timeout(90)
def test_teardown_leaves_nothing_even_after_a_killed_run() -> None:
    if MISSING:
        pytest.fail(MISSING)
    first = NetnsCluster(hosts=2, prefix="hvdd", subnet=2).up()
    stale_dir, stale_sshd = first.dir, cluster_sshd_pids("hvdd")
    assert len(stale_sshd) == 2
    # A process left on a host by a killed run, beside its sshd.
    orphan = subprocess.Popen(first.command(first.hosts[1], ["sleep", "60"]))
    try:
        # Another object with the same prefix: up() replaces the stale cluster, never joins it.
        with NetnsCluster(hosts=2, prefix="hvdd", subnet=2) as second:
            assert orphan.wait(timeout=10) != 0
            assert not stale_dir.exists()
            assert not set(stale_sshd) & set(cluster_sshd_pids("hvdd"))
            assert second.run(second.hosts[0], ["ssh", second.hosts[1], "true"], timeout=30).returncode == 0
            assert len(cluster_sshd_pids("hvdd")) == 2
        assert second.leftovers() == []
    finally:
        if orphan.poll() is None:
            orphan.kill()
        orphan.wait(timeout=10)
    netns = subprocess.check_output(["ip", "netns", "list"], text=True, timeout=10)
    assert not [line for line in netns.splitlines() if line.startswith("hvdd-")]
    assert not [name for name in os.listdir("/etc/netns") if name.startswith("hvdd-")]
    assert cluster_sshd_pids("hvdd") == []
    assert first.leftovers() == []


@needs_root
@pytest.mark.timeout(90)
def test_command_line_up_and_down() -> None:
    if MISSING:
        pytest.fail(MISSING)
    module = [sys.executable, "-m", "horovod.runner.testing.netns_cluster"]
    up = subprocess.run(
        [*module, "up", "--hosts", "2", "--prefix", "hvde", "--subnet", "3"], capture_output=True, text=True, timeout=60
    )
    try:
        assert up.returncode == 0, up.stderr
        assert "hvde-h1  198.18.3.11" in up.stdout
        assert "ip netns exec hvde-h0 horovodrun -np 4 -H hvde-h0:2,hvde-h1:2 --network-interface hvd0" in up.stdout
        # The daemons outlive the command that started them.
        result = subprocess.run(
            ["ip", "netns", "exec", "hvde-h1", "ssh", "hvde-h0", "true"], capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 0, result.stderr
    finally:
        down = subprocess.run([*module, "down", "--prefix", "hvde"], capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    assert NetnsCluster(prefix="hvde").leftovers() == []
    assert cluster_sshd_pids("hvde") == []


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="prefix"):
        NetnsCluster(prefix="Bad-Prefix")
    with pytest.raises(ValueError, match="subnet"):
        NetnsCluster(subnet=512)
    assert NetnsCluster(hosts=1, subnet=300).address("hvdt-h0") == "198.19.44.10"
