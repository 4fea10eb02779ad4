"""A small deterministic data-parallel training run that prints a digest of its final weights.

The same weights must come out whoever starts the ranks (mpirun, horovodrun) and whichever backend
connects them: every input is seeded, and with 2 ranks a sum of two numbers does not depend on the
order the backend adds them in.
"""

import hashlib

import torch

import horovod.torch as hvd

hvd.init()
torch.set_num_threads(1)
rank, size = hvd.rank(), hvd.size()

data = torch.Generator().manual_seed(1234)
x = torch.randn(512, 16, generator=data)
y = (x @ torch.randn(16, 4, generator=data)).argmax(1)

torch.manual_seed(100 + rank)  # different initial weights per rank: broadcast_parameters makes them rank 0's
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * size, momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

shard_x, shard_y = x[rank::size], y[rank::size]
for step in range(40):
    batch = slice((step * 16) % len(shard_x), (step * 16) % len(shard_x) + 16)
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(shard_x[batch]), shard_y[batch])
    loss.backward()
    optimizer.step()

digest = hashlib.sha256()
for name, tensor in sorted(model.state_dict().items()):
    digest.update(name.encode())
    digest.update(tensor.detach().contiguous().numpy().tobytes())
print(
    f"weights rank {rank}/{size} mpi {hvd.mpi_enabled()} loss {loss.item():.6f} sha256 {digest.hexdigest()}", flush=True
)
hvd.shutdown()
