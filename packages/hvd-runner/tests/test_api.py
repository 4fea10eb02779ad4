"""horovod.run: a Python function on every rank, results back in rank order."""

from __future__ import annotations

import os
import sys

import pytest

import horovod
from horovod.runner.errors import NotSupportedError, UsageError

pytestmark = pytest.mark.timeout(180)


def allreduce_fn(scale: float, offset: int = 0) -> tuple[int, int, list[float]]:
    """Module-level: the ranks import this test module by name (horovod.run passes sys.path on)."""
    import numpy as np

    import horovod.common as hvd

    hvd.init()
    try:
        total = hvd.allreduce(np.arange(3, dtype=np.float64) * (hvd.rank() + 1) * scale, op=hvd.Sum, name="t")
        return hvd.rank(), hvd.size() + offset, total.tolist()
    finally:
        hvd.shutdown()


@pytest.mark.parametrize("np_", [2, 3, 4])
def test_run_returns_results_in_rank_order(np_: int, backend: str) -> None:
    results = horovod.run(
        allreduce_fn, args=(2.0,), kwargs={"offset": 10}, np=np_, env={"HOROVOD_CPU_OPERATIONS": backend}
    )
    factor = 2.0 * sum(range(1, np_ + 1))
    assert results == [(r, np_ + 10, [0.0, factor, 2 * factor]) for r in range(np_)]


def test_run_ships_closures_by_value(backend: str) -> None:
    captured = {"greeting": "hi"}

    def fn() -> str:
        return f"{captured['greeting']} from {os.environ['HOROVOD_RANK']} of {os.environ['HOROVOD_SIZE']}"

    assert horovod.run(fn, np=2, env={"HOROVOD_CPU_OPERATIONS": backend}) == ["hi from 0 of 2", "hi from 1 of 2"]


def test_run_env_adds_variables(backend: str) -> None:
    results = horovod.run(
        lambda: (os.environ.get("HVD_TEST_MARKER"), os.environ.get("PATH") is not None),
        np=1,
        env={"HOROVOD_CPU_OPERATIONS": backend, "HVD_TEST_MARKER": "set-by-env"},
    )
    assert results == [("set-by-env", True)]


def test_run_returns_rich_objects(backend: str) -> None:
    import numpy as np

    results = horovod.run(lambda: {"arr": np.arange(3), "none": None}, np=2, env={"HOROVOD_CPU_OPERATIONS": backend})
    assert [r["arr"].tolist() for r in results] == [[0, 1, 2]] * 2


def test_run_output_is_prefixed(capfd: pytest.CaptureFixture[str], backend: str) -> None:
    horovod.run(lambda: print("said", os.environ["HOROVOD_RANK"]), np=2, env={"HOROVOD_CPU_OPERATIONS": backend})
    out = capfd.readouterr().out.splitlines()
    assert "[0]<stdout>:said 0" in out and "[1]<stdout>:said 1" in out


def failing_fn() -> None:
    import numpy as np

    import horovod.common as hvd

    if os.environ["HOROVOD_RANK"] == "1":
        raise ValueError("boom on rank 1")
    hvd.init()
    hvd.allreduce(np.ones(2), name="never-completes")


def test_failing_rank_raises_with_its_traceback(backend: str) -> None:
    with pytest.raises(RuntimeError) as info:
        horovod.run(failing_fn, np=3, env={"HOROVOD_CPU_OPERATIONS": backend})
    message = str(info.value)
    assert "rank 1 exited with code 1" in message
    assert "Traceback (most recent call last)" in message
    assert "ValueError: boom on rank 1" in message
    assert "failing_fn" in message


def test_rank_calling_sys_exit(backend: str) -> None:
    def fn() -> None:
        if os.environ["HOROVOD_RANK"] == "0":
            sys.exit(3)

    with pytest.raises(RuntimeError, match="rank 0 exited with code 3"):
        horovod.run(fn, np=2, env={"HOROVOD_CPU_OPERATIONS": backend})


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"np": 0}, UsageError, "np=0 must be a positive integer"),
        ({"max_np": 4}, UsageError, "an elastic job needs --min-np"),
        ({"slots": 2}, UsageError, "only apply to elastic jobs"),
        ({"reset_limit": 1}, UsageError, "only apply to elastic jobs"),
        ({"use_mpi": True}, NotSupportedError, r"horovod.run through mpirun \(--mpi\) is not supported yet"),
        ({"mpi_args": "-x A"}, UsageError, r"--mpi-args only apply when mpirun starts the ranks"),
        ({"hosts": "localhost:x"}, UsageError, "slots 'x'"),
        ({"np": 3, "hosts": "localhost:2"}, UsageError, "more processes than the 2 slots"),
        ({"network_interface": "hvd-nonexistent0"}, UsageError, "no interface named"),
    ],
)
def test_bad_or_unsupported_arguments(kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        horovod.run(print, **kwargs)
    assert issubclass(error, ValueError)


def test_an_unreachable_host_is_named_with_sshs_reason() -> None:
    from horovod.runner.host_check import HostCheckError

    with pytest.raises(HostCheckError, match=r"ssh to host hvd-no-such-remote-host failed: .*Could not resolve"):
        horovod.run(print, hosts="hvd-no-such-remote-host:2", disable_cache=True, start_timeout=10)


def test_func_must_be_callable() -> None:
    with pytest.raises(TypeError, match="func must be callable"):
        horovod.run("not a function")
