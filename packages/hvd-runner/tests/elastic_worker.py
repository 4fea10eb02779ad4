"""The worker of hvd-runner's elastic tests: a numpy training loop whose whole state is an ObjectState.

Each step allreduces a one and adds the world's size to ``total``, appends the step to ``log`` and
commits. Faults are injected through the environment, each once per job (a marker file in
``ELASTIC_MARKERS`` remembers it fired):

- ``KILL_WORKER`` (a worker id) dies by SIGKILL at step ``KILL_AT_STEP`` (``KILL_MODE=step``), or
  inside ``save()`` of that step's commit (``KILL_MODE=commit``);
- ``DIE_IN_RESTORE`` (a worker id) dies inside ``restore()``, at the first reset after another
  fault: while the next world forms;
- ``STOP_IN_RESTORE`` (a worker id) stops itself (SIGSTOP) there instead: alive, but it never asks;
- ``DIE_AFTER_ASSIGNMENT`` (a worker id) dies at its first reset after another fault, just after the
  driver gave it its place in the next world, before its engine connects to the others (the
  driver's answer is wrapped here to get at that moment);
- ``FAIL_ON_HOST``: a worker placed on that host exits with status 3 before it joins any world.

At the end each worker prints ``done rank=R size=S steps=N total=T log_ok=B``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time

import numpy as np

import horovod.common as hvd
from horovod.common import elastic
from horovod.common.framework_api import allgather_object

WORKER = os.environ.get("HOROVOD_ELASTIC_WORKER_ID", "?")
STEPS = int(os.environ.get("STEPS", "100"))
SLEEP_S = float(os.environ.get("STEP_SLEEP", "0.02"))
KILL_WORKER = os.environ.get("KILL_WORKER")
KILL_AT_STEP = int(os.environ.get("KILL_AT_STEP", "-1"))
KILL_MODE = os.environ.get("KILL_MODE", "step")
DIE_IN_RESTORE = os.environ.get("DIE_IN_RESTORE")
STOP_IN_RESTORE = os.environ.get("STOP_IN_RESTORE")
MARKERS = os.environ.get("ELASTIC_MARKERS", "")


def fire_once(name: str) -> bool:
    """True the first time ``name`` is asked for in this job (by any worker)."""
    try:
        fd = os.open(os.path.join(MARKERS, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def die(where: str) -> None:
    print(f"worker {WORKER} dies {where}", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


class CountingState(elastic.ObjectState):
    def save(self) -> None:
        if KILL_MODE == "commit" and WORKER == KILL_WORKER and self.step == KILL_AT_STEP and fire_once("commit"):
            die("inside save()")
        super().save()

    def restore(self) -> None:
        if WORKER == DIE_IN_RESTORE and fire_once("restore"):
            die("inside restore(), as the next world forms")
        if WORKER == STOP_IN_RESTORE and fire_once("restore"):
            print(f"worker {WORKER} stops itself inside restore()", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
        super().restore()


if os.environ.get("DIE_AFTER_ASSIGNMENT") == WORKER:
    from horovod.common.elastic import assignment

    request_world = assignment.request_world

    def request_then_die(*args: object, **kwargs: object) -> object:
        answer = request_world(*args, **kwargs)  # type: ignore[arg-type]
        if answer.generation > 0 and fire_once("assigned"):
            die(f"after its assignment to world {answer.generation}")
        return answer

    assignment.request_world = request_then_die  # type: ignore[assignment]

# What the run loop says when joining a world fails (a peer lost while it formed).
logging.getLogger("horovod.elastic").addHandler(logging.StreamHandler(sys.stdout))
logging.getLogger("horovod.elastic").setLevel(logging.INFO)

if os.environ.get("FAIL_ON_HOST") == os.environ.get("HOROVOD_HOSTNAME"):
    print(f"worker {WORKER} refuses to run on {os.environ['HOROVOD_HOSTNAME']}", flush=True)
    sys.exit(3)

hvd.init()
state = CountingState(step=0, total=0, log=[])


syncs_checked = 0


@elastic.run
def train(state: CountingState) -> None:
    # Entered after every sync (and after a reset that needed none): every worker's state must be
    # the same here, whatever world it comes from.
    global syncs_checked
    mine = (state.step, state.total, tuple(state.log))
    views = allgather_object(mine, name="state.check")
    if any(view != mine for view in views):
        raise AssertionError(f"worker {WORKER}: states differ after a sync: {views}")
    syncs_checked += 1
    while state.step < STEPS:
        if KILL_MODE == "step" and WORKER == KILL_WORKER and state.step == KILL_AT_STEP and fire_once("step"):
            die(f"at step {state.step}")
        x = hvd.allreduce(np.ones(1), op=hvd.Sum, name="x")
        state.total += int(x[0])
        state.log.append(state.step)
        state.step += 1
        time.sleep(SLEEP_S)
        state.commit()


train(state)
print(
    f"done rank={hvd.rank()} size={hvd.size()} steps={state.step} total={state.total} "
    f"log_ok={state.log == list(range(STEPS))} syncs_checked={syncs_checked} "
    f"omp={os.environ.get('OMP_NUM_THREADS', '-')}",
    flush=True,
)
hvd.shutdown()
