"""Elastic jobs across hosts: the launcher on hvdt-h0 of the network-namespace cluster, workers
started over ssh on the hosts a discovery script lists (one slot each, so worker ids follow the
hosts: h0 -> 0, h1 -> 1, h2 -> 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elastic_jobs import ElasticJob, assert_finished_consistently, discovery, set_hosts
from horovod.runner.testing.netns_cluster import NetnsCluster

pytestmark = pytest.mark.timeout(240)


def on_h0(cluster: NetnsCluster):
    return lambda argv: cluster.command("hvdt-h0", argv)


def test_worker_killed_on_a_remote_host(netns_cluster: NetnsCluster, job_env: dict[str, str], tmp_path: Path) -> None:
    """Worker 2 (on hvdt-h2, over ssh) dies: the two others restore and go on; its replacement,
    started on hvdt-h2 again, joins with the state.

    Which world the replacement first joins depends on timing: the two survivors normally form
    world 1 at once and the replacement joins world 2, but in a rare race of Gloo's TCP transport
    (a send to the lost peer started just as its connection dropped is never woken) one survivor
    waits out HOROVOD_GLOO_TIMEOUT_SECONDS, and by then the replacement is ready for world 1."""
    script, _ = discovery(tmp_path, "hvdt-h0:1\nhvdt-h1:1\nhvdt-h2:1\n")
    env = {**job_env, "STEPS": "200", "STEP_SLEEP": "0.03", "KILL_WORKER": "2", "KILL_AT_STEP": "30"}
    job = ElasticJob(["--min-np", "2", "--host-discovery-script", script], env, tmp_path, on_h0(netns_cluster))
    code, out, err = job.finish()
    log = "\n".join(err)
    assert code == 0, log
    assert "worker 2 (on hvdt-h2, slot 0) failed: its process was killed by signal SIGKILL" in log
    assert "world 0 is over (worker 2 (on hvdt-h2, slot 0) failed)" in log
    worlds = re.findall(r"world (\d+) formed in .*: (\d+) worker\(s\) on (.*)", log)
    assert worlds[0] == ("0", "3", "hvdt-h0:1, hvdt-h1:1, hvdt-h2:1"), log
    after = [(int(n), int(size), hosts) for n, size, hosts in worlds[1:]]
    # The survivors alone, then with the replacement; or, after the race above, all three at once.
    assert after in (
        [(1, 2, "hvdt-h0:1, hvdt-h1:1"), (2, 3, "hvdt-h0:1, hvdt-h1:1, hvdt-h2:1")],
        [(1, 3, "hvdt-h0:1, hvdt-h1:1, hvdt-h2:1")],
    ), log
    assert_finished_consistently(out, 3, 200)
    for host in ("hvdt-h1", "hvdt-h2"):
        assert netns_cluster.processes(host) == [], f"processes left on {host}"


def test_hosts_added_and_removed(netns_cluster: NetnsCluster, job_env: dict[str, str], tmp_path: Path) -> None:
    """hvdt-h2 appears (its worker joins over ssh and receives the state), then hvdt-h1 goes (its
    worker leaves by itself, status 0); the job ends on hvdt-h0 and hvdt-h2."""
    script, listing = discovery(tmp_path, "hvdt-h0:1\nhvdt-h1:1\n")
    env = {**job_env, "STEPS": "300", "STEP_SLEEP": "0.03"}
    job = ElasticJob(["--min-np", "2", "--host-discovery-script", script], env, tmp_path, on_h0(netns_cluster))
    job.wait_log(r"world 0 formed")
    set_hosts(listing, "hvdt-h0:1\nhvdt-h1:1\nhvdt-h2:1\n")
    job.wait_log(r"world 1 formed in .*: 3 worker\(s\)")
    set_hosts(listing, "hvdt-h0:1\nhvdt-h2:1\n")
    code, out, err = job.finish()
    log = "\n".join(err)
    assert code == 0, log
    assert "hosts changed: added hvdt-h2:1" in log and "hosts changed: removed hvdt-h1:1" in log
    assert "worker 1 (on hvdt-h1, slot 0) leaves the job: its host was removed" in log
    assert re.search(r"world 2 formed in .*: 2 worker\(s\) on hvdt-h0:1, hvdt-h2:1", log), log
    assert "failed" not in log
    assert_finished_consistently(out, 2, 300)
    assert netns_cluster.processes("hvdt-h1") == []
