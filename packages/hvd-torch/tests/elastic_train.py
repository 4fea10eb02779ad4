"""The worker of hvd-torch's elastic test: a linear model trained under hvd.elastic.run with a
TorchState holding the model, the optimizer, an ElasticSampler and, per epoch, how many times each
sample was processed (allreduced every step, so it counts every worker's batch).

Worker ``KILL_WORKER`` SIGKILLs itself once, in epoch 1 after its first batch (a marker file in
``ELASTIC_MARKERS`` remembers it). At the end each worker prints
``done rank=R size=S counts_ok=B checksum=C``: every sample processed exactly once in every epoch,
and a checksum of the weights.
"""

from __future__ import annotations

import os
import signal
import time

import torch

import horovod.torch as hvd

N, BATCH, EPOCHS = 144, 6, 4  # N and BATCH multiples of 6: no padding on 2 or 3 workers, however it resizes
WORKER = os.environ.get("HOROVOD_ELASTIC_WORKER_ID")
MARKERS = os.environ["ELASTIC_MARKERS"]


class Indexed(torch.utils.data.Dataset[tuple[int, torch.Tensor, torch.Tensor]]):
    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(N, 8, generator=generator)
        self.y = self.x @ torch.arange(8.0) + 1.0

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor, torch.Tensor]:
        return i, self.x[i], self.y[i]


def fire_once(name: str) -> bool:
    try:
        os.close(os.open(os.path.join(MARKERS, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


hvd.init()
torch.set_num_threads(1)
torch.manual_seed(int(WORKER or 0))  # different initial weights: the sync must make them equal
model = torch.nn.Linear(8, 1)
optimizer = hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.01), named_parameters=model.named_parameters()
)
dataset = Indexed()
sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=3)
loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=sampler)
state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, counts=torch.zeros(EPOCHS, N))


@hvd.elastic.run
def train(state: hvd.elastic.TorchState) -> None:
    for state.epoch in range(state.epoch, EPOCHS):  # noqa: B020 - Horovod's idiom: resumes the epoch
        for batch, (index, x, y) in enumerate(loader):
            if os.environ.get("KILL_WORKER") == WORKER and state.epoch == 1 and batch == 1 and fire_once("kill"):
                print(f"worker {WORKER} dies in epoch 1, batch 1", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x).squeeze(1), y).backward()
            optimizer.step()
            seen = torch.zeros(N)
            seen[index] += 1
            state.counts[state.epoch] += hvd.allreduce(seen, op=hvd.Sum, name="seen")
            state.sampler.record_batch(batch, BATCH)
            time.sleep(0.15)
            state.commit()
        state.sampler.set_epoch(state.epoch + 1)
        state.commit()


train(state)
checksum = float(sum(p.detach().double().sum() * (i + 1) for i, p in enumerate(model.parameters())))
counts_ok = bool((state.counts == 1).all())
print(f"done rank={hvd.rank()} size={hvd.size()} counts_ok={counts_ok} checksum={checksum!r}", flush=True)
hvd.shutdown()
