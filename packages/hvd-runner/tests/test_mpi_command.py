"""horovodrun --mpi without running it: the mpirun command for Open MPI and MPICH, the variables
it exports, telling the two MPIs apart, and reading which rank failed from mpirun's report."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import stat
from pathlib import Path

import pytest

from horovod.runner import mpi_command, mpi_env, mpi_failure, mpi_impl
from horovod.runner.errors import UsageError
from horovod.runner.hosts import Host
from horovod.runner.mpi_command import MpiJob
from horovod.runner.mpi_impl import MPICH, OPENMPI

COMMAND = ["python", "train.py", "--lr", "0.1"]


def build(flavour: str, **overrides: object) -> list[str]:
    fields: dict[str, object] = {
        "flavour": flavour,
        "launcher": "/venv/bin/mpirun",
        "np": 2,
        "hosts": [Host("localhost", 2)],
        "command": COMMAND,
    }
    fields.update(overrides)
    return mpi_command.build(MpiJob(**fields))


def pairs(argv: list[str]) -> list[tuple[str, str]]:
    return list(itertools.pairwise(argv))


# --- the command, flavour by flavour -----------------------------------------------------------------


def test_openmpi_basic_command() -> None:
    argv = build(OPENMPI, export=["HOROVOD_CONTROLLER", "PATH"])
    assert argv == [
        "/venv/bin/mpirun",
        "--tag-output",
        "-np",
        "2",
        "-H",
        "localhost:2",
        "--bind-to",
        "none",
        "--map-by",
        "slot",
        "-x",
        "HOROVOD_CONTROLLER",
        "-x",
        "PATH",
        *COMMAND,
    ]


def test_mpich_basic_command() -> None:
    argv = build(MPICH, export=["HOROVOD_CONTROLLER", "PATH"])
    assert argv == [
        "/venv/bin/mpirun",
        "-prepend-rank",
        "-np",
        "2",
        "-hosts",
        "localhost:2",
        "-bind-to",
        "none",
        "-genvlist",
        "HOROVOD_CONTROLLER,PATH",
        *COMMAND,
    ]


@pytest.mark.parametrize("flavour", [OPENMPI, MPICH])
def test_allow_run_as_root_only_for_open_mpi_as_root(flavour: str) -> None:
    as_root = build(flavour, as_root=True)
    assert ("--allow-run-as-root" in as_root) == (flavour == OPENMPI)
    assert "--allow-run-as-root" not in build(flavour, as_root=False)
    if flavour == OPENMPI:
        assert as_root.index("--allow-run-as-root") == 1  # mpirun's own switch, before the command


@pytest.mark.parametrize(("flavour", "flag"), [(OPENMPI, "-H"), (MPICH, "-hosts")])
def test_hosts_in_each_mpis_syntax(flavour: str, flag: str) -> None:
    argv = build(flavour, np=5, hosts=[Host("node-a", 2), Host("node-b", 3)])
    assert (flag, "node-a:2,node-b:3") in pairs(argv)
    assert ("-np", "5") in pairs(argv)


@pytest.mark.parametrize("flavour", [OPENMPI, MPICH])
def test_mpi_args_are_appended_verbatim_before_the_command(flavour: str) -> None:
    argv = build(flavour, mpi_args="--mca btl_tcp_if_exclude 'lo,docker0' -x EXTRA=\"a b\"")
    tail = ["--mca", "btl_tcp_if_exclude", "lo,docker0", "-x", "EXTRA=a b", *COMMAND]
    assert argv[-len(tail) :] == tail


def test_unbalanced_quotes_in_mpi_args_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match='--mpi-args "-x \'A": No closing quotation'):
        build(OPENMPI, mpi_args="-x 'A")


@pytest.mark.parametrize("flavour", [OPENMPI, MPICH])
def test_binding_args_replace_the_default(flavour: str) -> None:
    argv = build(flavour, binding_args="--bind-to socket --map-by socket")
    assert argv.count("--bind-to") == 1 and ("--bind-to", "socket") in pairs(argv)
    assert "none" not in argv


@pytest.mark.parametrize("flavour", [OPENMPI, MPICH])
@pytest.mark.parametrize("mpi_args", ["--map-by ppr:1:node", "-bind-to core", "--bind-to=core"])
def test_no_default_binding_when_mpi_args_set_one(flavour: str, mpi_args: str) -> None:
    """Two conflicting binding options would make mpirun refuse the job."""
    argv = build(flavour, mpi_args=mpi_args)
    assert "none" not in argv and "slot" not in argv
    assert argv[-len(COMMAND) - len(shlex.split(mpi_args)) : -len(COMMAND)] == shlex.split(mpi_args)


def test_open_mpi_ssh_port_and_key_for_remote_hosts() -> None:
    argv = build(OPENMPI, ssh_port=2222, ssh_identity_file="/k/id rsa")
    assert ("plm_rsh_args", "-p 2222 -i '/k/id rsa'") in pairs(argv)


def test_mpich_ssh_options_say_where_to_put_them() -> None:
    with pytest.raises(UsageError, match=re.escape("~/.ssh/config")):
        build(MPICH, ssh_port=2222)


def test_network_interfaces() -> None:
    assert ("btl_tcp_if_include", "eth0,eth1") in pairs(build(OPENMPI, nics=["eth0", "eth1"]))
    assert ("-iface", "eth0") in pairs(build(MPICH, nics=["eth0", "eth1"]))


def test_output_files_and_timestamps() -> None:
    openmpi = build(OPENMPI, output_filename="logs", prefix_timestamp=True)
    assert ("--output-filename", "logs") in pairs(openmpi) and "--timestamp-output" in openmpi
    mpich = build(MPICH, output_filename="logs", prefix_timestamp=True)
    assert ("-outfile-pattern", "logs/rank.%r.stdout") in pairs(mpich)
    assert ("-errfile-pattern", "logs/rank.%r.stderr") in pairs(mpich)


def test_no_command_is_an_error() -> None:
    with pytest.raises(UsageError, match="no command"):
        build(OPENMPI, command=[])


# --- what is exported ----------------------------------------------------------------------------------


def test_environment_drops_horovodrun_per_job_variables_and_adds_the_jobs() -> None:
    base = {
        "PATH": "/bin",
        "HOROVOD_RANK": "3",
        "HOROVOD_SIZE": "4",
        "HOROVOD_RENDEZVOUS_ADDR": "10.0.0.1",
        "HOROVOD_RENDEZVOUS_SECRET": "abc",
        "HOROVOD_JOB_KEY": "hvd-1",
        "HOROVOD_LOG_LEVEL": "INFO",
    }
    env = mpi_env.environment(base, {"HOROVOD_CONTROLLER": "mpi"})
    assert env == {"PATH": "/bin", "HOROVOD_LOG_LEVEL": "INFO", "HOROVOD_CONTROLLER": "mpi"}


def test_exported_names() -> None:
    env = {
        "PATH": "/bin",
        "PYTHONPATH": "/src",
        "LD_LIBRARY_PATH": "/lib",
        "MY_SETTING": "1",
        "HOROVOD_CYCLE_TIME": "2",
        "PWD": "/x",
        "OLDPWD": "/y",
        "HOSTNAME": "h",
        "SHLVL": "1",
        "_": "/usr/bin/env",
        "BASH_FUNC_f%%": "() { :; }",
        "OMPI_COMM_WORLD_RANK": "0",
        "OMPI_MCA_btl": "tcp",
        "PMIX_RANK": "0",
        "PMI_RANK": "0",
        "HYDRA_CONTROL_FD": "5",
        "PRTE_MCA_x": "1",
    }
    assert mpi_env.exported_names(env) == ["HOROVOD_CYCLE_TIME", "LD_LIBRARY_PATH", "MY_SETTING", "PATH", "PYTHONPATH"]


# --- which MPI ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "flavour"),
    [
        ("mpirun (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/\n", OPENMPI),
        ("mpirun (Open MPI) 4.1.5\n", OPENMPI),
        ("HYDRA build details:\n    Version:                                 5.0.2\n", MPICH),
        ("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619\n", MPICH),
        ("something else 1.0\n", None),
    ],
)
def test_flavour_from_version_text(text: str, flavour: str | None) -> None:
    assert mpi_impl.flavour_of(text) == flavour


def fake_launcher(directory: Path, name: str, version_text: str) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\ncat <<'EOF'\n" + version_text + "EOF\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_detect_runs_version_and_names_it(tmp_path: Path) -> None:
    launcher = fake_launcher(tmp_path, "mpirun", "HYDRA build details:\n    Version:   5.0.2\n")
    found = mpi_impl.detect(str(launcher), os.environ)
    assert (found.flavour, found.version) == (MPICH, "5.0.2")
    assert found.describe() == f"MPICH (Hydra) 5.0.2 ({launcher})"


def test_detect_refuses_an_unknown_mpi(tmp_path: Path) -> None:
    launcher = fake_launcher(tmp_path, "mpirun", "Acme MPI 9\n")
    with pytest.raises(
        UsageError, match=r"neither Open MPI nor MPICH \(its --version says: 'Acme MPI 9'\).*pip install mpich"
    ):
        mpi_impl.detect(str(launcher), os.environ)


def test_launcher_is_looked_up_on_path_mpirun_before_mpiexec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mpi_impl.sys, "executable", str(tmp_path / "no-venv" / "python"))
    fake_launcher(tmp_path, "mpiexec", "x\n")
    assert mpi_impl.find_launcher({"PATH": str(tmp_path)}) == str(tmp_path / "mpiexec")
    fake_launcher(tmp_path, "mpirun", "x\n")
    assert mpi_impl.find_launcher({"PATH": str(tmp_path)}) == str(tmp_path / "mpirun")
    assert mpi_impl.find_launcher({"PATH": str(tmp_path / "empty")}) is None


def test_launcher_beside_this_python_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_bin, system_bin = tmp_path / "venv", tmp_path / "system"
    venv_bin.mkdir(), system_bin.mkdir()
    fake_launcher(venv_bin, "mpirun", "x\n"), fake_launcher(system_bin, "mpirun", "x\n")
    monkeypatch.setattr(mpi_impl.sys, "executable", str(venv_bin / "python"))
    assert mpi_impl.find_launcher({"PATH": str(system_bin)}) == str(venv_bin / "mpirun")


# --- which rank failed ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "summary"),
    [
        (
            (
                "prterun detected that one or more processes exited with non-zero status, ...\n"
                "   Process name: [prterun-vm-3055@1,1]\n   Exit code:    3\n"
            ),
            "job failed: rank 1 exited with code 3; mpirun exited with code 3",
        ),
        (
            "   Process name: [[52381,1],2]\n   Exit code:    3\n",
            "job failed: rank 2 exited with code 3; mpirun exited with code 3",
        ),
        (
            "prterun noticed that process rank 1 with PID 5903 on node vm exited on\nsignal 11 (Segmentation fault).\n",
            "job failed: rank 1 was killed by signal 11 (Segmentation fault); mpirun exited with code 3",
        ),
        (
            '[0] ok\n[1] Traceback (most recent call last):\n[1]   File "<string>", line 1\n[1] ValueError: bad lr\n',
            "job failed: rank 1 raised ValueError: bad lr; mpirun exited with code 3",
        ),
        (
            (
                "[1,0]<stderr>: Traceback (most recent call last):\n"
                "[1,0]<stderr>:   File \"x\"\n[1,0]<stderr>: KeyError: 'a'\n"
            ),
            "job failed: rank 0 raised KeyError: 'a'; mpirun exited with code 3",
        ),
        (  # a peer's consequence comes first: the cause is the rank that raised something else
            (
                '[0] Traceback (most recent call last):\n[0]   File "x"\n'
                "[0] horovod.common.exceptions.HorovodInternalError: Horovod has stopped: rank 2 shut Horovod down\n"
                '[2] Traceback (most recent call last):\n[2]   File "y"\n[2] RuntimeError: boom\n'
            ),
            "job failed: rank 2 raised RuntimeError: boom; mpirun exited with code 3",
        ),
        (  # chained exceptions: the last one is what the rank died of
            (
                "[1] Traceback (most recent call last):\n[1]   File \"x\"\n[1] KeyError: 'a'\n[1] \n"
                "[1] During handling of the above exception, another exception occurred:\n[1] \n"
                '[1] Traceback (most recent call last):\n[1]   File "y"\n[1] ValueError: b\n'
            ),
            "job failed: rank 1 raised ValueError: b; mpirun exited with code 3",
        ),
        (  # only consequences (the culprit called sys.exit): the one they name
            (
                '[0] Traceback (most recent call last):\n[0]   File "x"\n'
                "[0] horovod.common.exceptions.HorovodInternalError: Horovod has stopped: rank 1 shut Horovod down\n"
            ),
            (
                "job failed: rank 1 (named by rank 0's error: horovod.common.exceptions.HorovodInternalError: "
                "Horovod has stopped: rank 1 shut Horovod down); mpirun exited with code 3"
            ),
        ),
        ("nothing useful\n", "job failed: mpirun exited with code 3 (it did not say which rank)"),
    ],
)
def test_failed_rank_from_mpiruns_report(output: str, summary: str) -> None:
    assert mpi_failure.describe(3, output) == summary


def test_mpirun_killed_by_a_signal() -> None:
    assert mpi_failure.describe(-9, "") == "job failed: mpirun was killed by signal 9 (it did not say which rank)"
