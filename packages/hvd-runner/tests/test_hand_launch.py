"""Ranks started by hand, named to their rendezvous server with Horovod's variables
``HOROVOD_GLOO_RENDEZVOUS_ADDR`` and ``HOROVOD_GLOO_RENDEZVOUS_PORT`` (and hvd's secret)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import JOB_TIMEOUT_S
from horovod.runner import hooks, worker_env
from horovod.runner.rendezvous import auth
from horovod.runner.rendezvous.client import RendezvousClient, RendezvousError
from horovod.runner.rendezvous.server import RendezvousServer

pytestmark = pytest.mark.timeout(180)

RANK = textwrap.dedent(
    """\
    import numpy as np, horovod.common as hvd
    hvd.init()
    total = hvd.allreduce(np.full(3, hvd.rank() + 1.0), op=hvd.Sum, name="by-hand")
    print(hvd.rank(), hvd.size(), total.tolist(), flush=True)
    hvd.shutdown()
    """
)


def horovods_names(server: RendezvousServer, secret: bytes, size: int = 2) -> dict[str, str]:
    return {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": server.host,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(server.port),
        worker_env.RENDEZVOUS_SECRET: auth.encode_secret(secret),
        worker_env.SIZE: str(size),
    }


def test_ranks_started_by_hand_meet_through_horovods_variables(job_env: dict[str, str]) -> None:
    secret = auth.new_secret()
    with RendezvousServer(secret) as server:
        ranks = []
        for rank in range(3):
            env = dict(job_env)  # no HOROVOD_* but the test backend's choice
            env.update(horovods_names(server, secret, size=3))
            env.update({worker_env.RANK: str(rank), worker_env.LOCAL_RANK: str(rank), worker_env.LOCAL_SIZE: "3"})
            env["HOROVOD_CONTROLLER"] = env[worker_env.CPU_OPERATIONS]  # as Horovod's scripts set both
            ranks.append(
                subprocess.Popen(
                    [sys.executable, "-c", RANK], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
            )
        outputs = []
        for proc in ranks:
            out, err = proc.communicate(timeout=JOB_TIMEOUT_S)
            assert proc.returncode == 0, err
            outputs.append(out.strip())
    assert outputs == [f"{rank} 3 [6.0, 6.0, 6.0]" for rank in range(3)]


def test_the_store_comes_from_horovods_variables() -> None:
    secret = auth.new_secret()
    with RendezvousServer(secret) as server:
        store = hooks.hvd_rendezvous_store(env=horovods_names(server, secret))
        assert isinstance(store, RendezvousClient) and store.address == (server.host, server.port)
        store.set("k", b"v")
        assert store.get("k", 1.0) == b"v"
        store.close()


def test_horovodruns_names_win() -> None:
    env = {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "198.18.0.1",
        "HOROVOD_GLOO_RENDEZVOUS_PORT": "1",
        worker_env.RENDEZVOUS_ADDR: "127.0.0.1",
        worker_env.RENDEZVOUS_PORT: "2",
        worker_env.SIZE: "2",
    }
    assert hooks.rendezvous_env(env) is env


@pytest.mark.parametrize("size", [None, "1"])
def test_left_over_variables_do_not_stop_a_lone_process(size: str | None) -> None:
    # No secret either: a shell's stale HOROVOD_GLOO_* must not break `python train.py` or an MPI job.
    env = {"HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1", "HOROVOD_GLOO_RENDEZVOUS_PORT": "1"}
    if size is not None:
        env[worker_env.SIZE] = size
    assert hooks.rendezvous_env(env) is None
    assert hooks.hvd_rendezvous_store(env=env) is None


def test_a_missing_secret_says_how_to_get_one() -> None:
    env = {"HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1", "HOROVOD_GLOO_RENDEZVOUS_PORT": "1", worker_env.SIZE: "2"}
    with pytest.raises(RendezvousError, match="HOROVOD_RENDEZVOUS_SECRET is not set") as error:
        hooks.hvd_rendezvous_store(env=env)
    assert "RendezvousServer(secret" in str(error.value) and "encode_secret" in str(error.value)


def test_a_missing_port_is_named() -> None:
    env = {"HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1", worker_env.SIZE: "2", worker_env.RENDEZVOUS_SECRET: "00"}
    with pytest.raises(RendezvousError, match="HOROVOD_GLOO_RENDEZVOUS_PORT is not"):
        hooks.hvd_rendezvous_store(env=env)
