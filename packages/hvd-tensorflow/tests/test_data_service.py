"""Horovod's tf.data service (horovod.tensorflow.data): a compute job of 2 ranks under horovodrun
serving a training job of 2 ranks, in every layout of dispatchers; the config file; the faults
(a training job that starts first, a wrong key, the compute job killed mid-epoch)."""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import sys
import time

import pytest

from horovod.tensorflow.data import TfDataServiceConfig
from horovod.tensorflow.data.registration import ComputeClient, ComputeService

HERE = pathlib.Path(__file__).resolve().parent
TRAINING = HERE / "data_service_training.py"
pytestmark = pytest.mark.timeout(300)


def horovodrun(argv: list[str], np: int = 2, log: pathlib.Path | None = None) -> subprocess.Popen:
    """A job on `np` local ranks, its output in `log` or in a pipe its caller reads (finish, or line
    by line) while it runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2")
    launcher = pathlib.Path(sys.executable).parent / "horovodrun"
    command = [str(launcher), "-np", str(np), "-H", f"localhost:{np}", sys.executable, *argv]
    out = log.open("w") if log is not None else subprocess.PIPE
    try:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    finally:
        if log is not None:
            out.close()  # type: ignore[union-attr]  # the child has its own descriptor


def compute_job(config: pathlib.Path, *options: str) -> subprocess.Popen:
    """The compute job, its output in compute.log beside its config (read once it has ended)."""
    log = config.with_name("compute.log")
    return horovodrun(["-m", "horovod.tensorflow.data.compute_worker", str(config), *options], log=log)


def kill_tree(proc: subprocess.Popen) -> str:
    """SIGKILL to a launcher and every process under it (a launcher killed alone leaves its ranks
    running); returns what it wrote to its pipe, if any."""
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
    proc.kill()
    out, _ = proc.communicate()
    return out or ""


def finish(proc: subprocess.Popen, timeout: float, log: pathlib.Path | None = None) -> tuple[int, str]:
    """Its exit status and output (from `log` where it writes there), once it ends within `timeout`."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out = kill_tree(proc)
        out = log.read_text() if log is not None else out
        raise AssertionError(f"still running after {timeout} s:\n{out[-3000:]}") from None
    return proc.returncode, log.read_text() if log is not None else out


@pytest.mark.parametrize(
    "layout",
    [
        [],
        ["--dispatchers", "2"],
        ["--dispatcher-side", "training"],
        ["--dispatchers", "2", "--dispatcher-side", "training"],
    ],
    ids=["1-compute", "2-compute", "1-training", "2-training"],
)
def test_a_compute_job_serves_every_mode_in_every_layout(tmp_path: pathlib.Path, layout: list[str]) -> None:
    """Both processing modes, with and without a shared job (and round robin with one dispatcher):
    every element as often as the layout says, every batch well formed; the compute job ends, at
    the training job's request, within its timeout."""
    config = tmp_path / "compute.json"
    compute = compute_job(config, "--timeout", "60", *layout)
    try:
        code, out = finish(horovodrun([str(TRAINING), str(config)]), 240)
        assert code == 0 and "checked" in out, out[-3000:]
        code, log = finish(compute, 60, config.with_name("compute.log"))
        assert code == 0, log[-3000:]
    finally:
        if compute.poll() is None:
            kill_tree(compute)


def test_a_training_job_started_first_waits_for_the_compute_job(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "compute.json"
    training = horovodrun([str(TRAINING), str(config)])
    time.sleep(3)
    compute = compute_job(config, "--timeout", "60")
    try:
        code, out = finish(training, 240)
        assert code == 0 and "checked" in out, out[-3000:]
        assert finish(compute, 60, config.with_name("compute.log"))[0] == 0
    finally:
        if compute.poll() is None:
            kill_tree(compute)


def test_the_compute_job_killed_mid_epoch_stops_training_with_a_clear_error(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "compute.json"
    compute = compute_job(config, "--timeout", "10")
    script = tmp_path / "endless.py"
    script.write_text(
        "import sys, tensorflow as tf, horovod.tensorflow as hvd\n"
        "from horovod.tensorflow.data import TfDataServiceConfig\n"
        "hvd.init()\n"
        "config = TfDataServiceConfig.read(sys.argv[1], wait_for_file_creation=True, timeout=60)\n"
        "ds = tf.data.Dataset.range(10**9).batch(4).send_to_data_service(config, hvd.rank(), hvd.size())\n"
        "for i, b in enumerate(ds):\n"
        "    if i == 100: print('reading', flush=True)\n"
    )
    training = horovodrun([str(script), str(config)], np=1)
    try:
        while training.stdout is not None:  # until the training reads data, then the compute job dies
            line = training.stdout.readline()
            assert line, "the training job ended before reading"
            if "reading" in line:
                break
        kill_tree(compute)  # the whole job, its ranks included, as when its hosts fail
        code, out = finish(training, 60)
        assert code != 0 and "the compute job stopped" in out and "10 s" in out, out[-3000:]
    finally:
        for proc in (compute, training):
            if proc.poll() is None:
                kill_tree(proc)


def test_a_client_without_the_key_is_refused() -> None:
    service = ComputeService()
    try:
        stranger = ComputeClient(service.addresses(), b"x" * 32, verbose=0)
        with pytest.raises(RuntimeError, match="refused this client"):
            stranger.register_dispatcher(0, "grpc://127.0.0.1:1")
        member = ComputeClient(service.addresses(), service.key, verbose=0)
        member.register_dispatcher(0, "grpc://127.0.0.1:1")
        assert member.wait_for_dispatcher_registration(0, 5) == "grpc://127.0.0.1:1"
        with pytest.raises(TimeoutError, match=r"dispatcher 1 to register did not happen within 0\.5 s"):
            member.wait_for_dispatcher_registration(1, 0.5)
        assert member.probe() == "running"
        member.shutdown()
        assert member.probe() == "shutting down"
    finally:
        service.shutdown()
    states = [member.probe() for _ in range(3)]  # its last answer on a kept connection, then nothing
    assert states[-1] == "gone" and set(states) <= {"shutting down", "gone"}, states


def test_the_config_file_is_written_whole_and_read_with_a_bounded_wait(tmp_path: pathlib.Path) -> None:
    addresses = {"eth0": [("198.18.0.1", 1234)]}
    config = TfDataServiceConfig(2, "/tmp/journals", "eth0", 3, "training", addresses, b"k" * 32, timeout=9)
    path = tmp_path / "c.json"
    config.write(str(path))
    assert TfDataServiceConfig.read(str(path)) == config
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]  # no partial file left behind
    with pytest.raises(TimeoutError, match=r"missing\.json did not appear within 0\.3 s"):
        TfDataServiceConfig.read(str(tmp_path / "missing.json"), wait_for_file_creation=True, timeout=0.3)
    with pytest.raises(ValueError, match="dispatcher_side must be 'compute' or 'training'"):
        TfDataServiceConfig(1, None, None, 1, "elsewhere", {}, b"")
    (tmp_path / "bad.json").write_text('{"dispatchers": 1}')
    with pytest.raises(ValueError, match="not a compute service config"):
        TfDataServiceConfig.read(str(tmp_path / "bad.json"))
