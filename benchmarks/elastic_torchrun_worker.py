"""One worker of torchrun's elastic-recovery run (elastic_recovery.py starts it under
``torchrun --nnodes=1 --nproc-per-node=3 --max-restarts=3 --rdzv-backend=c10d``).

The same tiny MLP and batches as elastic_hvd_worker.py, with torch.distributed (gloo) and DDP.
When a worker fails, torchrun stops every worker of the group and starts them all again, so the
state must come from a checkpoint, as torchrun's documentation prescribes: rank 0 writes one after
every step (to a temporary file, then renamed: a restart never reads half a file), and every
worker, on start, resumes from it when it is there. Rank --kill-rank SIGKILLs itself at the start
of step --kill-step in the group's first life only (TORCHELASTIC_RESTART_COUNT 0), before that
step's allreduce; training ends at step --kill-step + --steps-after.

Events (elastic_common.record): ``start`` (before the imports), ``joined``
(init_process_group returned), ``resumed`` (checkpoint loaded and DDP built), ``commit`` (the
step done, and on rank 0 its checkpoint written).
"""

from __future__ import annotations

import time

STARTED = time.time()  # before the imports: each restart pays the interpreter's and torch's start-up

import argparse  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import elastic_common as common  # noqa: E402

RANK = int(os.environ["RANK"])
RESTART = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def record(event: str, **fields: object) -> None:
    common.record(event, framework="torchrun", rank=RANK, restart=RESTART, **fields)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--kill-rank", type=int, default=1)
    parser.add_argument("--kill-step", type=int, default=40)
    parser.add_argument("--steps-after", type=int, default=260)
    args = parser.parse_args()

    record("start", t=STARTED)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    size = dist.get_world_size()
    record("joined", size=size)

    model = common.mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    step = 0
    if os.path.exists(args.checkpoint):  # a restart: every worker resumes from the last step rank 0 saved
        saved = torch.load(args.checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        step = saved["step"]
    ddp = DistributedDataParallel(model)
    record("resumed", step=step, size=size)

    while step < args.kill_step + args.steps_after:
        if args.kill_rank == RANK and RESTART == 0 and step == args.kill_step:
            common.die(framework="torchrun", rank=RANK, restart=RESTART, step=step)
        x, y = common.batch(step, RANK)
        optimizer.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        optimizer.step()
        step += 1
        if RANK == 0:
            tmp = args.checkpoint + ".tmp"
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, tmp)
            os.replace(tmp, args.checkpoint)
        record("commit", step=step, size=size)
    dist.destroy_process_group()
    record("done", step=step)


if __name__ == "__main__":
    main()
