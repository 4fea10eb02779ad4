"""The worker of the chaos soak (test_chaos_soak.py): a linear model trained under hvd.elastic.run
until the soak says stop, committing after every step, while faults hit the hosts.

State: the model, its optimizer, the step and the log of committed steps. Each step allreduces the
gradients (DistributedOptimizer) and whether the soak's STOP_FILE exists (so every worker stops at
the same step). Rank 0 prints ``commit step=N`` after each commit. At the end each worker prints
``done rank=R size=S steps=N log_ok=B checksum=C``: every step committed exactly once, and a
checksum of the weights.
"""

from __future__ import annotations

import os
import time

import torch

import horovod.torch as hvd

STOP_FILE = os.environ["STOP_FILE"]
STEP_SLEEP_S = float(os.environ.get("STEP_SLEEP", "0.1"))

hvd.init()
torch.set_num_threads(1)
torch.manual_seed(int(os.environ.get("HOROVOD_ELASTIC_WORKER_ID", "0")))  # the sync must make them equal
model = torch.nn.Linear(16, 1)
optimizer = hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.001), named_parameters=model.named_parameters()
)
generator = torch.Generator().manual_seed(0)
x = torch.randn(64, 16, generator=generator)
y = x @ torch.arange(16.0)
state = hvd.elastic.TorchState(model, optimizer, step=0, log=[])


@hvd.elastic.run
def train(state: hvd.elastic.TorchState) -> None:
    while True:
        stop = hvd.allreduce(torch.tensor([float(os.path.exists(STOP_FILE))]), op=hvd.Max, name="stop")
        if stop.item() > 0:
            return
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x).squeeze(1), y).backward()
        optimizer.step()
        state.log.append(state.step)
        state.step += 1
        time.sleep(STEP_SLEEP_S)
        state.commit()
        if hvd.rank() == 0:
            print(f"commit step={state.step}", flush=True)


train(state)
checksum = float(sum(p.detach().double().sum() * (i + 1) for i, p in enumerate(model.parameters())))
print(
    f"done rank={hvd.rank()} size={hvd.size()} steps={state.step} log_ok={state.log == list(range(state.step))} "
    f"checksum={checksum!r}",
    flush=True,
)
hvd.shutdown()
