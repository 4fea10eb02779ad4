"""A rank lost in the middle of PyTorch training, through horovodrun: the survivors' optimizer step
raises HorovodInternalError naming the lost rank, and the job ends with that rank's status."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(240)

TRAINING = textwrap.dedent(
    """\
    import os, signal
    import torch
    import horovod.torch as hvd
    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for step in range(50):
        if step == 5 and hvd.rank() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        try:
            optimizer.step()
        except hvd.HorovodInternalError as error:
            print(f"survivor {hvd.rank()} at step {step}: {error}", flush=True)
            raise
    print(f"rank {hvd.rank()} finished training", flush=True)
    """
)


@pytest.mark.parametrize("np_", [2, 3])
def test_survivors_of_a_killed_rank_raise_in_the_optimizer_step(np_: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(HOROVOD_CPU_OPERATIONS="gloo", OMP_NUM_THREADS="1")
    result = subprocess.run(
        ["horovodrun", "-np", str(np_), "-H", f"localhost:{np_}", sys.executable, "-c", TRAINING],
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
        stdin=subprocess.DEVNULL,
    )
    survivors = {}
    for line in result.stdout.splitlines():
        found = re.match(r"\[(\d+)\]<stdout>:survivor (\d+) at step (\d+): (.*)", line)
        if found:
            survivors[int(found.group(1))] = (int(found.group(3)), found.group(4))
    assert sorted(survivors) == [r for r in range(np_) if r != 1], result.stdout + result.stderr
    for step, error in survivors.values():
        assert step == 5, error  # the step in which rank 1 was lost
        assert "rank 1 (on localhost): its process (pid" in error and "was killed by signal SIGKILL" in error, error
    assert result.returncode == 128 + 9, result.stderr
    assert re.search(r"job failed: rank 1 \(pid \d+\) was killed by signal SIGKILL", result.stderr), result.stderr
    assert "finished training" not in result.stdout
