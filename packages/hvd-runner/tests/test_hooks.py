"""The runner plugin: hvd-core asks it for the store of a rank started by horovodrun."""

from __future__ import annotations

import subprocess
import sys

import pytest

from horovod.common.plugin_api import get_plugin_manager
from horovod.common.testing.probes import reset_plugins
from horovod.runner import hooks, worker_env
from horovod.runner.rendezvous import auth
from horovod.runner.rendezvous.client import RendezvousClient, RendezvousError
from horovod.runner.rendezvous.server import RendezvousServer


def job_env(server: RendezvousServer, secret: bytes) -> dict[str, str]:
    return {
        worker_env.RENDEZVOUS_ADDR: server.host,
        worker_env.RENDEZVOUS_PORT: str(server.port),
        worker_env.RENDEZVOUS_SECRET: auth.encode_secret(secret),
    }


def test_no_store_outside_a_horovodrun_job() -> None:
    assert hooks.hvd_rendezvous_store(env={}) is None
    assert hooks.hvd_rendezvous_store(env={"HOROVOD_RANK": "0"}) is None


def test_store_of_a_horovodrun_job_works() -> None:
    secret = auth.new_secret()
    with RendezvousServer(secret) as server:
        store = hooks.hvd_rendezvous_store(env=job_env(server, secret))
        assert isinstance(store, RendezvousClient)
        store.set("k", b"v")
        assert store.get("k", 1.0) == b"v"
        store.close()


@pytest.mark.parametrize(
    ("drop", "change", "message"),
    [
        (worker_env.RENDEZVOUS_SECRET, None, "HOROVOD_RENDEZVOUS_SECRET not set"),
        (worker_env.RENDEZVOUS_PORT, None, "HOROVOD_RENDEZVOUS_PORT not set"),
        (None, (worker_env.RENDEZVOUS_PORT, "http"), "is not a port number"),
        (None, (worker_env.RENDEZVOUS_SECRET, "abc"), "HOROVOD_RENDEZVOUS_SECRET is invalid"),
    ],
)
def test_incomplete_settings_fail_loudly(drop: str | None, change: tuple[str, str] | None, message: str) -> None:
    secret = auth.new_secret()
    with RendezvousServer(secret) as server:
        env = job_env(server, secret)
        if drop:
            del env[drop]
        if change:
            env[change[0]] = change[1]
        with pytest.raises(RendezvousError, match=message):
            hooks.hvd_rendezvous_store(env=env)


def test_plugin_manager_finds_the_runner_plugin() -> None:
    reset_plugins()
    try:
        secret = auth.new_secret()
        with RendezvousServer(secret) as server:
            store = get_plugin_manager().rendezvous_store(job_env(server, secret))
            assert isinstance(store, RendezvousClient)
            store.close()
        assert get_plugin_manager().rendezvous_store({}) is None
    finally:
        reset_plugins()


def test_importing_the_hooks_is_light() -> None:
    probe = (
        "import sys, horovod.runner.hooks, horovod.runner\n"
        "heavy = [m for m in ('numpy', 'cloudpickle', 'yaml', 'http.client', 'horovod.runner.api', "
        "'horovod.common._native._core') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


def test_horovod_run_is_the_runner_api() -> None:
    import horovod
    from horovod.runner.api import run

    assert horovod.run is run


def test_exit_reports_round_trip_and_tolerate_garbage() -> None:
    from horovod.runner import exit_report

    assert exit_report.decode(exit_report.encode("uncaught KeyError: 'x'", True)) == ("uncaught KeyError: 'x'", True)
    assert exit_report.decode(exit_report.encode("uncaught HorovodInternalError: shut down", False))[1] is False
    assert exit_report.decode(b"\xff not json") == ("\ufffd not json", True)
    assert exit_report.key("hvd-abc", 3) == "hvd-abc/runner/exit/3"


def test_horovod_internal_errors_are_secondary() -> None:
    from horovod.common.exceptions import HorovodInternalError
    from horovod.runner import exit_report

    assert exit_report.is_secondary(HorovodInternalError("peer lost"))
    assert not exit_report.is_secondary(ValueError("user bug"))


def test_a_rank_reports_its_uncaught_exception_to_the_launcher() -> None:
    """What the runner plugin installs after hvd.init(), in a process of its own."""
    secret = auth.new_secret()
    with RendezvousServer(secret) as server:
        env = {
            **job_env(server, secret),
            worker_env.JOB_KEY: "hvd-test",
            worker_env.RANK: "2",
            "PYTHONPATH": ":".join(sys.path),
        }
        probe = "from horovod.runner import exit_report; exit_report.install(); raise KeyError('why')"
        result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1 and "KeyError: 'why'" in result.stderr
        client = RendezvousClient(server.host, server.port, secret)
        from horovod.runner import exit_report

        assert exit_report.decode(client.get("hvd-test/runner/exit/2", 5)) == ("uncaught KeyError: 'why'", True)
        client.close()
