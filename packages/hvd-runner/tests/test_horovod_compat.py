"""Horovod 0.28's launcher API as scripts use it: ``horovod.run``'s parameters (and their older
names), ``horovod.runner.launch.parse_args`` and ``run_commandline``, and every horovodrun flag
with Horovod's attribute name."""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import textwrap
from pathlib import Path

import pytest

import horovod
import horovod.runner
from conftest import horovodrun, python_ranks
from horovod.runner import cli, launch, settings
from horovod.runner.errors import UsageError

pytestmark = pytest.mark.timeout(180)

# Horovod 0.28's horovod.run, in its order.
HOROVOD_RUN_PARAMETERS = [
    "func",
    "args",
    "kwargs",
    "num_proc",
    "min_num_proc",
    "max_num_proc",
    "slots",
    "reset_limit",
    "cooldown_range",
    "hosts",
    "hostfile",
    "host_discovery_script",
    "start_timeout",
    "ssh_port",
    "ssh_identity_file",
    "disable_cache",
    "output_filename",
    "verbose",
    "use_gloo",
    "use_mpi",
    "mpi_args",
    "network_interface",
    "network_interfaces",
    "executable",
    "np",
    "min_np",
    "max_np",
]

# Each option string of Horovod 0.28's horovodrun, with the attribute parse_args gives it.
HOROVOD_OPTIONS = {
    "-np": "num_proc",
    "--num-proc": "num_proc",
    "-cb": "check_build",
    "--check-build": "check_build",
    "--disable-cache": "disable_cache",
    "--start-timeout": "start_timeout",
    "--network-interfaces": "nics",
    "--network-interface": "nics",
    "--output-filename": "output_filename",
    "--verbose": "verbose",
    "--config-file": "config_file",
    "-p": "ssh_port",
    "--ssh-port": "ssh_port",
    "-i": "ssh_identity_file",
    "--ssh-identity-file": "ssh_identity_file",
    "--fusion-threshold-mb": "fusion_threshold_mb",
    "--cycle-time-ms": "cycle_time_ms",
    "--cache-capacity": "cache_capacity",
    "--hierarchical-allreduce": "hierarchical_allreduce",
    "--no-hierarchical-allreduce": "hierarchical_allreduce",
    "--hierarchical-allgather": "hierarchical_allgather",
    "--no-hierarchical-allgather": "hierarchical_allgather",
    "--torus-allreduce": "torus_allreduce",
    "--no-torus-allreduce": "torus_allreduce",
    "--autotune": "autotune",
    "--no-autotune": "autotune",
    "--autotune-log-file": "autotune_log_file",
    "--autotune-warmup-samples": "autotune_warmup_samples",
    "--autotune-steps-per-sample": "autotune_steps_per_sample",
    "--autotune-bayes-opt-max-samples": "autotune_bayes_opt_max_samples",
    "--autotune-gaussian-process-noise": "autotune_gaussian_process_noise",
    "--min-np": "min_num_proc",
    "--min-num-proc": "min_num_proc",
    "--max-np": "max_num_proc",
    "--max-num-proc": "max_num_proc",
    "--slots-per-host": "slots",
    "--elastic-timeout": "elastic_timeout",
    "--reset-limit": "reset_limit",
    "--blacklist-cooldown-range": "cooldown_range",
    "--timeline-filename": "timeline_filename",
    "--timeline-mark-cycles": "timeline_mark_cycles",
    "--no-timeline-mark-cycles": "timeline_mark_cycles",
    "--no-stall-check": "no_stall_check",
    "--stall-check": "no_stall_check",
    "--stall-check-warning-time-seconds": "stall_check_warning_time_seconds",
    "--stall-check-shutdown-time-seconds": "stall_check_shutdown_time_seconds",
    "--mpi-threads-disable": "mpi_threads_disable",
    "--no-mpi-threads-disable": "mpi_threads_disable",
    "--mpi-args": "mpi_args",
    "--tcp": "tcp_flag",
    "--binding-args": "binding_args",
    "--num-nccl-streams": "num_nccl_streams",
    "--thread-affinity": "thread_affinity",
    "--gloo-timeout-seconds": "gloo_timeout_seconds",
    "--log-level": "log_level",
    "--log-with-timestamp": "log_with_timestamp",
    "--log-without-timestamp": "log_with_timestamp",
    "--log-hide-timestamp": "log_with_timestamp",
    "--no-log-hide-timestamp": "log_with_timestamp",
    "-prefix-timestamp": "prefix_output_with_timestamp",
    "--prefix-output-with-timestamp": "prefix_output_with_timestamp",
    "-H": "hosts",
    "--hosts": "hosts",
    "-hostfile": "hostfile",
    "--hostfile": "hostfile",
    "--host-discovery-script": "host_discovery_script",
    "--gloo": "use_gloo",
    "--mpi": "use_mpi",
    "--jsrun": "use_jsrun",
}


# --- horovod.run ---------------------------------------------------------------------------------------


def test_run_has_horovods_parameters_in_horovods_order() -> None:
    parameters = inspect.signature(horovod.run).parameters
    positional = [p.name for p in parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == HOROVOD_RUN_PARAMETERS
    keyword_only = {p.name for p in parameters.values() if p.kind is p.KEYWORD_ONLY}
    assert keyword_only == {"env"}
    assert parameters["num_proc"].default == 1
    assert horovod.run is horovod.runner.run


def rank_and_size(offset: int = 0) -> tuple[int, int]:
    return int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"]) + offset


def test_run_positionally_as_horovod_orders_it(backend: str) -> None:
    # func, args, kwargs, num_proc: Horovod's first four positions.
    results = horovod.run(rank_and_size, (10,), None, 2, env={"HOROVOD_CPU_OPERATIONS": backend})
    assert results == [(0, 12), (1, 12)]


@pytest.mark.parametrize("spelling", ["num_proc", "np"])
def test_run_takes_either_name_of_the_number_of_processes(spelling: str, backend: str) -> None:
    assert horovod.run(rank_and_size, **{spelling: 3}, env={"HOROVOD_CPU_OPERATIONS": backend}) == [
        (0, 3),
        (1, 3),
        (2, 3),
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_proc": 2, "np": 2}, r"num_proc=2 and np=2 are the same parameter; give only num_proc"),
        ({"min_num_proc": 1, "min_np": 1}, "min_num_proc=1 and min_np=1 are the same parameter"),
        ({"max_num_proc": 4, "max_np": 3}, "max_num_proc=4 and max_np=3 are the same parameter"),
        ({"network_interface": "lo", "network_interfaces": ["lo"]}, "network_interface and network_interfaces"),
        ({"hosts": "localhost:1", "hostfile": "hosts"}, "give hosts or hostfile, not both"),
        ({"use_gloo": True, "use_mpi": True}, "use_gloo and use_mpi cannot both be set"),
        ({"num_proc": 0}, "num_proc=0 must be a positive integer"),
        ({"network_interfaces": ["lo", 3]}, "must be interface names"),
    ],
)
def test_run_refuses_contradictions(kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        horovod.run(print, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_num_proc": 4}, "an elastic job needs --min-np"),
        ({"cooldown_range": (10, 100)}, "only apply to elastic jobs"),
        ({"min_num_proc": 2, "max_num_proc": 1}, "does not hold"),
    ],
)
def test_elastic_parameters_are_checked(kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        horovod.run(print, **kwargs)


@pytest.mark.parametrize("nics", ["lo,hvd-nonexistent0", ["lo", "hvd-nonexistent0"]])
def test_network_interfaces_by_either_name(nics: str | list[str]) -> None:
    with pytest.raises(UsageError, match="no interface named 'hvd-nonexistent0'"):
        horovod.run(print, network_interfaces=nics)
    if isinstance(nics, str):
        with pytest.raises(UsageError, match="no interface named 'hvd-nonexistent0'"):
            horovod.run(print, network_interface=nics)


# --- parse_args and run_commandline -------------------------------------------------------------------


def test_every_horovod_option_has_horovods_attribute() -> None:
    actions = cli.build_parser()._option_string_actions
    missing = [option for option in HOROVOD_OPTIONS if option not in actions]
    assert not missing
    wrong = {option: actions[option].dest for option, dest in HOROVOD_OPTIONS.items() if actions[option].dest != dest}
    assert not wrong


def test_parse_args_gives_horovods_namespace() -> None:
    ns = launch.parse_args(["-np", "4", "--min-np", "2", "--max-np", "8", "--log-without-timestamp", "python", "t.py"])
    assert isinstance(ns, argparse.Namespace)
    assert (ns.num_proc, ns.min_num_proc, ns.max_num_proc, ns.log_with_timestamp) == (4, 2, 8, False)
    assert ns.command == ["python", "t.py"] and ns.run_func is None and ns.executable is None
    assert not hasattr(ns, "np")


def test_parse_args_reads_sys_argv_and_applies_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "hvd.yaml"
    config.write_text("params:\n  cache_capacity: 7\n  torus_allreduce: true\nlogging:\n  with_timestamp: true\n")
    monkeypatch.setattr(sys, "argv", ["horovodrun", "-np", "2", "--config-file", str(config), "python", "t.py"])
    ns = launch.parse_args()
    assert (ns.num_proc, ns.cache_capacity, ns.torus_allreduce, ns.log_with_timestamp) == (2, 7, True, True)


def test_parse_args_exits_like_horovods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        launch.parse_args(["--check-build"])
    assert done.value.code == 0 and "Available Controllers:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        launch.parse_args(["-np", "1", "--config-file", str(tmp_path / "none.yaml"), "true"])
    assert done.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_run_commandline_returns_on_success_and_exits_with_the_jobs_status(
    monkeypatch: pytest.MonkeyPatch, job_env: dict[str, str]
) -> None:
    for key in [k for k in os.environ if k.startswith("HOROVOD_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOROVOD_CPU_OPERATIONS", job_env["HOROVOD_CPU_OPERATIONS"])
    monkeypatch.setattr(sys, "argv", ["horovodrun", "-np", "2", *python_ranks("pass")])
    assert launch.run_commandline() is None
    monkeypatch.setattr(sys, "argv", ["horovodrun", "-np", "2", *python_ranks("import sys; sys.exit(3)")])
    with pytest.raises(SystemExit) as done:
        launch.run_commandline()
    assert done.value.code == 3


# --- the flags Horovod added or renamed -----------------------------------------------------------------


def env_of(*argv: str) -> dict[str, str]:
    ns = cli.parse(["-np", "1", *argv])
    settings.apply_config_file(ns)
    return settings.from_namespace(ns, environ={}).env


@pytest.mark.parametrize(
    ("argv", "variable", "value"),
    [
        (["--torus-allreduce"], "HOROVOD_TORUS_ALLREDUCE", "1"),
        (["--no-torus-allreduce"], "HOROVOD_TORUS_ALLREDUCE", "0"),
        (["--log-without-timestamp"], "HOROVOD_LOG_HIDE_TIME", "1"),
        (["--log-with-timestamp"], "HOROVOD_LOG_HIDE_TIME", "0"),
    ],
)
def test_new_flags_map_to_their_variable(argv: list[str], variable: str, value: str) -> None:
    assert env_of(*argv)[variable] == value


@pytest.mark.parametrize(
    ("flag", "value", "replacement"),
    [
        ("--log-hide-timestamp", "1", "--log-without-timestamp"),
        ("--no-log-hide-timestamp", "0", "--log-with-timestamp"),
    ],
)
def test_horovods_deprecated_timestamp_flags(flag: str, value: str, replacement: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"{flag} is deprecated; use {replacement}"):
        assert env_of(flag)["HOROVOD_LOG_HIDE_TIME"] == value


def test_torus_allreduce_in_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "hvd.yaml"
    config.write_text("params:\n  torus_allreduce: true\n")
    assert env_of("--config-file", str(config))["HOROVOD_TORUS_ALLREDUCE"] == "1"
    assert env_of("--no-torus-allreduce", "--config-file", str(config))["HOROVOD_TORUS_ALLREDUCE"] == "0"


# --- no silent no-ops, end to end --------------------------------------------------------------------

INIT = textwrap.dedent(
    """\
    import horovod.common as hvd
    hvd.init()
    hvd.shutdown()
    """
)


def test_inactive_knobs_from_flags_are_named_once_per_job(job_env: dict[str, str], tmp_path: Path) -> None:
    result = horovodrun(
        "-np",
        "2",
        "--autotune",
        "--autotune-log-file",
        str(tmp_path / "tune.csv"),
        "--torus-allreduce",
        "--num-nccl-streams",
        "2",
        "--hierarchical-allreduce",
        "--no-hierarchical-allgather",
        *python_ranks(INIT),
        env=job_env,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    for variable in ("HOROVOD_TORUS_ALLREDUCE", "HOROVOD_NUM_NCCL_STREAMS"):
        named = [line for line in lines if f"{variable} is set, but it has no effect: " in line]
        assert len(named) == 1, (variable, result.stderr)
        assert named[0].startswith("[0]<stderr>:")
    # Implemented: not named (autotune's log has its header even for a job this short).
    assert (tmp_path / "tune.csv").read_text().startswith("hierarchical_allreduce,")
    for variable in ("HOROVOD_AUTOTUNE", "HOROVOD_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLGATHER"):
        assert f"{variable} is set, but it has no effect" not in result.stderr


def test_tcp_is_noted_when_no_nccl_backend_reads_it(job_env: dict[str, str]) -> None:
    from horovod.common.plugin_api import get_plugin_manager
    from horovod.common.testing.probes import reset_plugins

    reset_plugins()
    try:
        if "nccl" in get_plugin_manager().backends():
            pytest.skip("an NCCL backend is installed: --tcp acts")
    finally:
        reset_plugins()
    result = horovodrun("-np", "1", "--tcp", *python_ranks("pass"), env=job_env)
    assert result.returncode == 0, result.stderr
    assert "note: --tcp has no effect: it sets NCCL_IB_DISABLE=1, which only NCCL reads" in result.stderr
