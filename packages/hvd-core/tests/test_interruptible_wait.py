"""A rank blocked in synchronize() on a peer that has not submitted yet still runs Python's signal
handlers: Ctrl-C raises KeyboardInterrupt there, an alarm's handler runs, and the operation and its
handle survive the interruption (synchronize it again to get the result).

One rank in this process, on its main thread (where Python runs signal handlers). The peer that
has not submitted is played by the second member of a group: the group's first member waits for
it, as a collective waits for a rank that has not reached it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common.collectives import Collectives, group_key
from horovod.common.ops import NumpyAdapter

collectives = Collectives(NumpyAdapter())


@pytest.fixture
def one_rank() -> Iterator[None]:
    hvd.init()
    yield
    hvd.shutdown()


def _first_of_a_pair(name: str) -> tuple[int, tuple[int, int]]:
    group = (group_key(name), 2)
    return collectives.allreduce_async(np.full(2, 1.0), name=f"{name}.0", op=hvd.Sum, group=group), group


def _second_of_the_pair(name: str, group: tuple[int, int]) -> int:
    return collectives.allreduce_async(np.full(2, 2.0), name=f"{name}.1", op=hvd.Sum, group=group)


class Alarm(Exception):
    pass


def _signal_soon(signum: int) -> threading.Timer:
    """Sends ``signum`` to this process shortly, from another thread, while the main thread waits."""
    timer = threading.Timer(0.3, os.kill, args=(os.getpid(), signum))
    timer.start()
    return timer


@pytest.mark.timeout(30)
def test_ctrl_c_interrupts_a_blocked_synchronize_and_the_handle_stays_valid(one_rank: None) -> None:
    # Python's own Ctrl-C handler: a process started in the background (CI) inherits SIGINT ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        handle, group = _first_of_a_pair("interrupted")
        timer = _signal_soon(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            hvd.synchronize(handle)  # without slices this would wait for the second member forever
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not hvd.poll(handle)  # still running, still known
    second = _second_of_the_pair("interrupted", group)
    assert hvd.synchronize(handle).tolist() == [1.0, 1.0]
    assert hvd.synchronize(second).tolist() == [2.0, 2.0]
    assert hvd.allreduce(np.ones(1), op=hvd.Sum, name="after").tolist() == [1.0]  # the engine works on


@pytest.mark.timeout(30)
def test_an_alarm_handler_runs_in_a_blocked_synchronize(one_rank: None) -> None:
    def on_alarm(signum: int, frame: object) -> None:
        raise Alarm()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        handle, group = _first_of_a_pair("alarmed")
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(Alarm):
            hvd.synchronize(handle)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    second = _second_of_the_pair("alarmed", group)
    assert hvd.synchronize(handle).tolist() == [1.0, 1.0] and hvd.synchronize(second).tolist() == [2.0, 2.0]
