"""What the two elastic-recovery workers share: the model, the data, the kill, and the event log.

Imported by elastic_hvd_worker.py (under horovodrun) and elastic_torchrun_worker.py (under
torchrun); elastic_recovery.py reads the log. Both workers train the same tiny MLP on the same
synthetic batches, so the two recoveries differ only in what each framework does after a death.

Every event is one JSON line appended to the file named by HVD_BENCH_EVENTS, with the wall clock
(time.time(): the processes share this machine's clock) and the process's id. Each line is a single
os.write on a descriptor opened with O_APPEND: lines from different processes never interleave, and
a line written just before SIGKILL is already in the kernel's hands, so the death's time survives it.
"""

from __future__ import annotations

import json
import os
import signal
import time

import torch
import torch.nn as nn

EVENTS = "HVD_BENCH_EVENTS"
# Inputs, hidden units, classes, batch per rank: a step of well under a millisecond of compute, so that
# three ranks on two cores measure the frameworks' recovery, not the model (the brief: keep it tiny).
FEATURES, HIDDEN, CLASSES, BATCH = 32, 64, 10, 32

_fd: int | None = None


def record(event: str, t: float | None = None, **fields: object) -> None:
    global _fd
    if _fd is None:
        _fd = os.open(os.environ[EVENTS], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    line = {"t": time.time() if t is None else t, "event": event, "pid": os.getpid(), **fields}
    os.write(_fd, (json.dumps(line) + "\n").encode())


def die(**fields: object) -> None:
    """Records the death's time, then SIGKILLs this process: no handler, no clean-up, no goodbye."""
    record("death", **fields)
    os.kill(os.getpid(), signal.SIGKILL)


def mlp() -> nn.Module:
    torch.manual_seed(0)  # every rank builds the same model (both frameworks then broadcast rank 0's anyway)
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s synthetic batch of step `step`: the same in both frameworks and after a restart."""
    g = torch.Generator().manual_seed(step * 1009 + rank)
    return torch.randn(BATCH, FEATURES, generator=g), torch.randint(0, CLASSES, (BATCH,), generator=g)
