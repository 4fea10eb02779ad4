"""horovodrun's flags: parsing, their mapping to HOROVOD_* variables, the config file, bad input,
features refused for now, --check-build and --list-plugins."""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import horovodrun, python_ranks
from horovod.runner import cli, controller, env_mapping, settings
from horovod.runner.errors import NotSupportedError, UsageError
from horovod.runner.output import OutputRouter


def parse(*argv: str) -> argparse.Namespace:
    ns = cli.parse(list(argv))
    settings.apply_config_file(ns)
    return ns


def job(*argv: str) -> settings.JobSettings:
    return settings.from_namespace(parse(*argv), environ={})


# --- every Horovod flag parses ------------------------------------------------------------------

HOROVOD_FLAGS = [
    "-np 2",
    "--num-proc 2",
    "--disable-cache",
    "--start-timeout 10",
    "--network-interface lo",
    "--network-interfaces lo",
    "--output-filename out",
    "--verbose",
    "-p 22",
    "--ssh-port 22",
    "-i key",
    "--ssh-identity-file key",
    "--fusion-threshold-mb 32",
    "--cycle-time-ms 2.5",
    "--cache-capacity 512",
    "--hierarchical-allreduce",
    "--no-hierarchical-allreduce",
    "--hierarchical-allgather",
    "--no-hierarchical-allgather",
    "--autotune",
    "--autotune-log-file log.csv",
    "--autotune-warmup-samples 3",
    "--autotune-steps-per-sample 10",
    "--autotune-bayes-opt-max-samples 20",
    "--autotune-gaussian-process-noise 0.8",
    "--min-np 1",
    "--min-num-proc 1",
    "--max-np 4",
    "--max-num-proc 4",
    "--slots-per-host 2",
    "--elastic-timeout 600",
    "--reset-limit 3",
    "--blacklist-cooldown-range 10 100",
    "--timeline-filename t.json",
    "--timeline-mark-cycles",
    "--no-stall-check",
    "--stall-check-warning-time-seconds 60",
    "--stall-check-shutdown-time-seconds 120",
    "--mpi-threads-disable",
    "--mpi-args=--bind-to none",
    "--tcp",
    "--binding-args=--rankfile f",
    "--num-nccl-streams 2",
    "--thread-affinity 1",
    "--gloo-timeout-seconds 60",
    "--log-level DEBUG",
    "--log-without-timestamp",
    "--prefix-output-with-timestamp",
    "-H localhost:2",
    "--hosts localhost:2",
    "-hostfile hosts",
    "--hostfile hosts",
    "--host-discovery-script d.sh",
    "--gloo",
    "--mpi",
    "--jsrun",
    "-cb",
    "--check-build",
    "--list-plugins",
    "--config-file c.yaml",
]


@pytest.mark.parametrize("flag", HOROVOD_FLAGS)
def test_every_horovod_flag_parses(flag: str) -> None:
    argv = [flag] if flag.startswith(("--mpi-args=", "--binding-args=")) else flag.split()
    ns = cli.parse([*argv, "python", "train.py"])
    assert ns.command == ["python", "train.py"]


def test_command_keeps_its_own_flags() -> None:
    ns = cli.parse(["-np", "2", "python", "train.py", "-np", "7", "--verbose"])
    assert ns.num_proc == 2 and ns.verbose is None
    assert ns.command == ["python", "train.py", "-np", "7", "--verbose"]


# --- tunables -> environment --------------------------------------------------------------------


def test_tunables_map_to_horovod_variables() -> None:
    env = job(
        "-np",
        "1",
        "--fusion-threshold-mb",
        "32",
        "--cycle-time-ms",
        "2.5",
        "--cache-capacity",
        "512",
        "--hierarchical-allreduce",
        "--no-hierarchical-allgather",
        "--autotune",
        "--autotune-log-file",
        "a.csv",
        "--autotune-warmup-samples",
        "3",
        "--autotune-steps-per-sample",
        "7",
        "--autotune-bayes-opt-max-samples",
        "9",
        "--autotune-gaussian-process-noise",
        "0.5",
        "--timeline-filename",
        "t.json",
        "--timeline-mark-cycles",
        "--no-stall-check",
        "--stall-check-warning-time-seconds",
        "61",
        "--stall-check-shutdown-time-seconds",
        "120",
        "--mpi-threads-disable",
        "--tcp",
        "--num-nccl-streams",
        "2",
        "--thread-affinity",
        "1",
        "--gloo-timeout-seconds",
        "45",
        "--log-level",
        "debug",
        "--log-without-timestamp",
    ).env
    assert env == {
        "HOROVOD_FUSION_THRESHOLD": str(32 * 1024 * 1024),
        "HOROVOD_CYCLE_TIME": "2.5",
        "HOROVOD_CACHE_CAPACITY": "512",
        "HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
        "HOROVOD_HIERARCHICAL_ALLGATHER": "0",
        "HOROVOD_AUTOTUNE": "1",
        "HOROVOD_AUTOTUNE_LOG": "a.csv",
        "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "3",
        "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "7",
        "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "9",
        "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": "0.5",
        "HOROVOD_TIMELINE": "t.json",
        "HOROVOD_TIMELINE_MARK_CYCLES": "1",
        "HOROVOD_STALL_CHECK_DISABLE": "1",
        "HOROVOD_STALL_CHECK_TIME_SECONDS": "61",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "120",
        "HOROVOD_MPI_THREADS_DISABLE": "1",
        "NCCL_IB_DISABLE": "1",
        "HOROVOD_NUM_NCCL_STREAMS": "2",
        "HOROVOD_THREAD_AFFINITY": "1",
        "HOROVOD_GLOO_TIMEOUT_SECONDS": "45",
        "HOROVOD_LOG_LEVEL": "DEBUG",
        "HOROVOD_LOG_HIDE_TIME": "1",
        "HOROVOD_START_TIMEOUT": "30",
    }


def test_flags_not_given_export_nothing() -> None:
    assert job("-np", "1").env == {"HOROVOD_START_TIMEOUT": "30"}


def test_every_tunable_has_a_flag() -> None:
    dests = {action.dest for action in cli.build_parser()._actions}
    assert {t.dest for t in env_mapping.TUNABLES} <= dests


def test_start_timeout_from_flag_or_environment() -> None:
    assert job("-np", "1", "--start-timeout", "7").start_timeout_s == 7
    ns = parse("-np", "1")
    assert settings.from_namespace(ns, environ={"HOROVOD_START_TIMEOUT": "12"}).env["HOROVOD_START_TIMEOUT"] == "12"
    with pytest.raises(UsageError, match="HOROVOD_START_TIMEOUT='soon'"):
        settings.from_namespace(parse("-np", "1"), environ={"HOROVOD_START_TIMEOUT": "soon"})


def test_network_interface() -> None:
    env = job("-np", "1", "--network-interface", "lo").env
    assert env["HOROVOD_GLOO_IFACE"] == "lo" and env["NCCL_SOCKET_IFNAME"] == "lo"
    with pytest.raises(UsageError, match="no interface named 'hvd-nonexistent0'"):
        job("-np", "1", "--network-interface", "lo,hvd-nonexistent0")


def test_hosts_and_np() -> None:
    assert job("-H", "localhost:3").size == 3  # -np defaults to the slots given
    assert job("-np", "2", "-H", "localhost:4").size == 2
    with pytest.raises(UsageError, match="-np/--num-proc is required"):
        job()


def test_output_directory_rank_width() -> None:
    router = OutputRouter(sys.stdout, sys.stderr, size=11, output_dir="out")
    assert router.rank_dir(3) == str(Path("out") / "rank.03")
    assert OutputRouter(sys.stdout, sys.stderr, size=10, output_dir="out").rank_dir(3) == str(Path("out") / "rank.3")
    assert OutputRouter(sys.stdout, sys.stderr, size=2).rank_dir(0) is None


# --- config file ----------------------------------------------------------------------------------

HOROVOD_CONFIG = textwrap.dedent(
    """\
    params:
      fusion_threshold_mb: 32
      cycle_time_ms: 10
      cache_capacity: 2048
      hierarchical_allreduce: true
      hierarchical_allgather: true
    autotune:
      enabled: true
      log_file: 'horovod_autotune_log.txt'
      warmup_samples: 5
      steps_per_sample: 20
      bayes_opt_max_samples: 50
      gaussian_process_noise: 0.9
    timeline:
      filename: 'horovod_timeline.json'
      mark_cycles: true
    stall_check:
      enabled: true
      warning_time_seconds: 120
      shutdown_time_seconds: 240
    library_options:
      mpi_threads_disable: true
      num_nccl_streams: 2
      mlsl_bgt_affinity: 1
    logging:
      level: INFO
      with_timestamp: false
    """
)


def test_config_file_maps_to_the_same_variables(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(HOROVOD_CONFIG)
    ns = cli.parse(["-np", "1", "--config-file", str(path)])
    warnings = settings.apply_config_file(ns)
    assert warnings == [f"--config-file {path}: library_options.mlsl_bgt_affinity: unknown key, ignored"]
    env = settings.from_namespace(ns, environ={}).env
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(32 * 1024 * 1024)
    assert env["HOROVOD_CYCLE_TIME"] == "10.0"
    assert env["HOROVOD_CACHE_CAPACITY"] == "2048"
    assert env["HOROVOD_HIERARCHICAL_ALLREDUCE"] == "1" and env["HOROVOD_HIERARCHICAL_ALLGATHER"] == "1"
    assert env["HOROVOD_AUTOTUNE"] == "1" and env["HOROVOD_AUTOTUNE_LOG"] == "horovod_autotune_log.txt"
    assert env["HOROVOD_AUTOTUNE_WARMUP_SAMPLES"] == "5" and env["HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE"] == "20"
    assert env["HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"] == "50"
    assert env["HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"] == "0.9"
    assert env["HOROVOD_TIMELINE"] == "horovod_timeline.json" and env["HOROVOD_TIMELINE_MARK_CYCLES"] == "1"
    assert env["HOROVOD_STALL_CHECK_DISABLE"] == "0"
    assert env["HOROVOD_STALL_CHECK_TIME_SECONDS"] == "120" and env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] == "240"
    assert env["HOROVOD_MPI_THREADS_DISABLE"] == "1" and env["HOROVOD_NUM_NCCL_STREAMS"] == "2"
    assert env["HOROVOD_LOG_LEVEL"] == "INFO" and env["HOROVOD_LOG_HIDE_TIME"] == "1"


def test_command_line_wins_over_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(HOROVOD_CONFIG)
    env = job(
        "-np",
        "1",
        "--fusion-threshold-mb",
        "8",
        "--config-file",
        str(path),
        "--no-hierarchical-allreduce",
        "--no-stall-check",
        "--log-level",
        "ERROR",
    ).env
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(8 * 1024 * 1024)
    assert env["HOROVOD_HIERARCHICAL_ALLREDUCE"] == "0"
    assert env["HOROVOD_STALL_CHECK_DISABLE"] == "1"
    assert env["HOROVOD_LOG_LEVEL"] == "ERROR"
    assert env["HOROVOD_CACHE_CAPACITY"] == "2048"  # not on the command line: from the file


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("params:\n  fusion_threshold_mb: big\n", "params.fusion_threshold_mb: expected an integer, got 'big'"),
        ("params:\n  cache_capacity: -1\n", "params.cache_capacity: -1 must be at least 0"),
        ("autotune:\n  gaussian_process_noise: 2\n", "gaussian_process_noise: 2.0 must be at most 1"),
        ("timeline:\n  mark_cycles: maybe\n", "timeline.mark_cycles: expected true or false"),
        ("logging:\n  level: LOUD\n", "logging.level: 'LOUD' is not one of"),
        ("controller: carrier-pigeon\n", "controller: 'carrier-pigeon' is not one of gloo, mpi"),
        ("- a list\n", "expected a mapping of sections"),
        ("params: [1, 2]\n", "params: expected a mapping of keys"),
        ("params: {\n", "not valid YAML"),
    ],
)
def test_bad_config_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(content)
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse("-np", "1", "--config-file", str(path))


def test_config_file_controller_mpi_selects_mpirun(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("controller: mpi\n")
    assert controller.choose(parse("-np", "1", "--config-file", str(path)), {}).mpi
    assert not controller.choose(parse("-np", "1", "--gloo", "--config-file", str(path)), {}).mpi


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        parse("-np", "1", "--config-file", str(tmp_path / "nope.yaml"))


# --- refused ----------------------------------------------------------------------------------------


def test_jsrun_is_refused() -> None:
    with pytest.raises(NotSupportedError, match=r"\(--jsrun\) is not supported yet"):
        job("-np", "1", "--jsrun")


@pytest.mark.parametrize(
    "argv",
    [
        ["--slots-per-host", "2"],
        ["--slots", "2"],
        ["--elastic-timeout", "60"],
        ["--reset-limit", "1"],
        ["--blacklist-cooldown-range", "1", "2"],
    ],
)
def test_elastic_only_flags_need_an_elastic_job(argv: list[str]) -> None:
    with pytest.raises(
        UsageError, match="only apply to elastic jobs: add --min-np, --max-np or --host-discovery-script"
    ):
        job("-np", "1", *argv)


def test_ssh_flags_on_local_hosts_are_noted_not_ignored() -> None:
    notes = job("-np", "1", "-p", "2222", "-i", "key", "--disable-cache").notes
    assert any("-p/--ssh-port has no effect" in n for n in notes)
    assert any("-i/--ssh-identity-file has no effect" in n for n in notes)
    assert any("--disable-cache has no effect" in n for n in notes)


def test_ssh_flags_for_remote_hosts_are_not_noted() -> None:
    settings = job("-H", "localhost:1,hvd-no-such-remote-host:1", "-p", "2222", "-i", "key", "--disable-cache")
    assert settings.notes == ()
    assert settings.remote_hosts == ("hvd-no-such-remote-host",)
    assert (settings.ssh.port, settings.ssh.identity_file, settings.use_host_cache) == (2222, "key", False)


# --- through the command (exit codes and messages) -------------------------------------------------


def test_an_unreachable_host_exits_1_naming_it() -> None:
    result = horovodrun("-H", "hvd-no-such-remote-host:1", "--disable-cache", *python_ranks("print('ran')"), timeout=60)
    assert result.returncode == 1, result
    assert "ssh to host hvd-no-such-remote-host failed: " in result.stderr
    assert "Could not resolve hostname" in result.stderr
    assert "ran" not in result.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-np", "0"], "argument -np/--num-proc: 0 is not a positive integer"),
        (["-np", "two"], "argument -np/--num-proc: 'two' is not an integer"),
        (["-np", "2", "-H", "localhost:x"], "slots 'x' of host 'localhost' must be a positive integer"),
        (["-np", "2", "-H", ":2"], "empty host name"),
        (["-np", "2", "--hostfile", "/nonexistent/hosts"], "--hostfile: '/nonexistent/hosts' does not exist"),
        (["-np", "3", "-H", "localhost:2"], "-np 3 asks for more processes than the 2 slots available"),
        (["-np", "2"], "no command given"),
        (["-np", "1", "--log-level", "LOUD"], "argument --log-level: 'LOUD' is not one of"),
        (["-np", "1", "--min-np", "2"], "-np 1 is below --min-np 2"),
        (["--min-np", "2", "--max-np", "1"], "--min-np 2 <= -np 2 <= --max-np 1 does not hold"),
        (["-np", "1", "--timeline-steps", "9:3"], "argument --timeline-steps: '9:3' is not a window of steps"),
        (
            ["-H", "localhost:1,127.0.0.1:1,hvd-no-such-remote-host:1"],
            "hosts localhost, 127.0.0.1 are all this machine: list it once, with all its slots",
        ),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(argv: list[str], message: str) -> None:
    command = [] if "no command given" in message else python_ranks("print('should not run')")
    result = horovodrun(*argv, *command, timeout=60)
    assert result.returncode == 2, result
    assert message in result.stderr
    assert "should not run" not in result.stdout


def test_gloo_flag(job_env: dict[str, str]) -> None:
    """--gloo selects the gloo backend, or says how to install it."""
    code = "import os; print('ops', os.environ['HOROVOD_CPU_OPERATIONS'], os.environ['HOROVOD_CONTROLLER'])"
    result = horovodrun("-np", "1", "--gloo", *python_ranks(code), env=job_env, timeout=60)
    if "[X] Gloo" in horovodrun("--check-build", timeout=60).stdout:
        assert result.returncode == 0, result.stderr
        assert "[0]<stdout>:ops gloo gloo" in result.stdout.splitlines()
    else:
        assert result.returncode == 2
        assert "--gloo: the gloo backend is not installed: pip install hvd-backend-gloo" in result.stderr


def test_check_build_lists_installed_backends() -> None:
    from horovod.common.plugin_api import get_plugin_manager
    from horovod.common.testing.probes import reset_plugins

    reset_plugins()
    backends = {n for n, s in get_plugin_manager().backends().items() if not s.in_process_only}
    reset_plugins()
    result = horovodrun("--check-build", timeout=60)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for section in ("Available Frameworks:", "Available Controllers:", "Available Tensor Operations:"):
        assert section in out
    for display in ("TensorFlow", "PyTorch", "MXNet", "MPI", "Gloo", "NCCL", "DDL", "CCL"):
        assert f"] {display}" in out
    known = {"gloo": "Gloo", "mpi": "MPI", "nccl": "NCCL"}
    for name in backends:
        assert f"[X] {known.get(name, name)}" in out
    if "gloo" not in backends:
        assert "[ ] Gloo" in out
    assert "inmemory" not in out  # in-process test backends cannot run a job


def test_check_build_names_what_a_gpu_backend_runs_on() -> None:
    """A GPU backend's line carries its version, which names the library it loads (NCCL's release)."""
    from horovod.runner.check_build import _lines

    lines = _lines([("NCCL", "nccl"), ("Gloo", "gloo")], {"nccl", "gloo"}, [], {"nccl": "0.2.0 (NCCL 2.30.7)"})
    assert lines == ["    [X] NCCL (0.2.0 (NCCL 2.30.7))", "    [X] Gloo"]


def test_list_plugins() -> None:
    result = horovodrun("--list-plugins", timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "DISTRIBUTION", "VERSION", "STATUS", "REASON"]
    runner = [line.split() for line in lines if line.startswith("runner ")]
    assert runner and runner[0][1:4] == ["hvd-runner", importlib.metadata.version("hvd-runner"), "loaded"]


def test_list_plugins_shows_why_a_plugin_is_not_loaded() -> None:
    import os

    env = dict(os.environ, HOROVOD_PLUGINS_DISABLE="core")
    result = horovodrun("--list-plugins", env=env, timeout=60)
    assert result.returncode == 0
    core = [line for line in result.stdout.splitlines() if line.startswith("core ")]
    assert core and "disabled" in core[0] and "HOROVOD_PLUGINS_DISABLE" in core[0]


def test_version() -> None:
    import horovod

    result = horovodrun("--version", timeout=60)
    assert result.returncode == 0
    assert result.stdout.startswith(horovod.__version__)


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "horovodrun"
    assert script.exists() or shutil.which("horovodrun")
