"""One worker of hvd's elastic-recovery run (elastic_recovery.py starts it under
``horovodrun -np 3 --min-np 2 -H localhost:3``).

The tiny MLP of elastic_common.py, trained with hvd.DistributedOptimizer under hvd.elastic.run,
committing every step. Worker --kill-worker (HOROVOD_ELASTIC_WORKER_ID: the driver never reuses one,
so this fires once) SIGKILLs itself at the start of step --kill-step, before that step's allreduce:
the others are then waiting on it. The driver starts a replacement at once; it joins the survivors
at a later commit. Training ends --steps-after steps after the world has its --np workers again (or
at --max-steps): every rank decides from the same committed state, so they end together.

Events (elastic_common.record), for where the time goes: ``start`` (the process began, before its
imports), ``joined`` (hvd.init() returned the first time), ``restore`` (hvd.elastic.run caught
HorovodInternalError: the engine noticed the loss, and its error is in Python), ``reset`` (init()
of the new world returned), ``sync_start``/``sync_end`` (the state broadcast from rank 0 at the
start of each try), ``commit`` (state.commit() returned), and the log lines of hvd.elastic.run.
These hooks subclass TorchState and listen to the "horovod.elastic" logger; hvd's code is untouched.
"""

from __future__ import annotations

import time

STARTED = time.time()  # before the imports: a replacement's start-up (torch's import) is part of joining

import argparse  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import elastic_common as common  # noqa: E402
import horovod.torch as hvd  # noqa: E402

WORKER = os.environ.get("HOROVOD_ELASTIC_WORKER_ID", "?")


def record(event: str, **fields: object) -> None:
    common.record(event, framework="hvd", worker=WORKER, **fields)


class _ElasticLog(logging.Handler):
    """hvd.elastic.run's own lines ("restoring the last commit after: ...") as events."""

    def emit(self, rec: logging.LogRecord) -> None:
        record("log", message=rec.getMessage()[:300])


class BenchState(hvd.elastic.TorchState):
    """TorchState, timing restore() and sync(); nothing else changes."""

    def restore(self) -> None:
        record("restore")  # called right after hvd.elastic.run caught the HorovodInternalError
        super().restore()

    def sync(self) -> None:
        record("sync_start")
        super().sync()
        record("sync_end", rank=hvd.rank(), size=hvd.size())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--np", type=int, default=3, help="the full world's size")
    parser.add_argument("--kill-worker", default="1")
    parser.add_argument("--kill-step", type=int, default=40)
    parser.add_argument("--steps-after", type=int, default=20, help="steps at full size after the replacement joined")
    parser.add_argument("--max-steps", type=int, default=20000)
    args = parser.parse_args()

    record("start", t=STARTED)
    elastic_log = logging.getLogger("horovod.elastic")
    elastic_log.setLevel(logging.INFO)
    elastic_log.addHandler(_ElasticLog())
    torch.set_num_threads(1)
    hvd.init()
    record("joined", rank=hvd.rank(), size=hvd.size())

    model = common.mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    # shrunk_at / grown_at: the steps at which the world first ran short of --np, then had them again.
    state = BenchState(model, optimizer, step=0, shrunk_at=-1, grown_at=-1)
    state.register_reset_callbacks([lambda: record("reset", rank=hvd.rank(), size=hvd.size())])

    @hvd.elastic.run
    def train(state: BenchState) -> None:
        while True:
            if args.kill_worker == WORKER and state.step == args.kill_step:
                common.die(framework="hvd", worker=WORKER, rank=hvd.rank(), step=state.step)
            x, y = common.batch(state.step, hvd.rank())
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            state.step += 1
            if hvd.size() < args.np and state.shrunk_at < 0:
                state.shrunk_at = state.step
            if state.shrunk_at >= 0 and hvd.size() == args.np and state.grown_at < 0:
                state.grown_at = state.step
            state.commit()
            record("commit", step=state.step, rank=hvd.rank(), size=hvd.size())
            regrown = state.grown_at >= 0 and state.step >= state.grown_at + args.steps_after
            if regrown or state.step >= args.max_steps:
                return

    train(state)
    record("done", step=state.step, rank=hvd.rank(), size=hvd.size())


if __name__ == "__main__":
    main()
