"""horovod.torch.elastic: ElasticSampler's partitions across resizes, TorchState's save, restore
and sync, and a real elastic job (horovodrun) losing a worker mid-epoch and growing back."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import horovod.torch as hvd
from horovod.torch.elastic import sampler as sampler_module
from hvdtorch_testutil import cluster

pytestmark = pytest.mark.timeout(240)


class Dataset:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def samplers(n: int, world: int, monkeypatch: pytest.MonkeyPatch, state: dict | None = None) -> list:
    """One ElasticSampler per rank of a world of ``world`` (each built as that rank would)."""
    built = []
    for r in range(world):
        monkeypatch.setattr(sampler_module, "rank", lambda r=r: r)
        monkeypatch.setattr(sampler_module, "size", lambda: world)
        s = hvd.elastic.ElasticSampler(Dataset(n), shuffle=True, seed=7)
        if state is not None:
            s.load_state_dict(state)
        built.append(s)
    return built


def test_sampler_splits_an_epoch_and_resumes_it_on_a_new_world(monkeypatch: pytest.MonkeyPatch) -> None:
    three = samplers(36, 3, monkeypatch)
    parts = [list(s) for s in three]
    assert [len(p) for p in parts] == [12, 12, 12] and sorted(itertools.chain(*parts)) == list(range(36))
    for batch in range(2):  # two steps of 4 per rank, recorded on rank 0 for every rank
        three[0].record_batch(batch, 4)
    done = {i for p in parts for i in p[:8]}
    assert three[0].processed_indices == done and len(done) == 24

    two = samplers(36, 2, monkeypatch, three[0].state_dict())  # the world shrank: 12 samples left
    rest = [list(s) for s in two]
    assert [len(p) for p in rest] == [6, 6]
    assert sorted(itertools.chain(*rest)) == sorted(set(range(36)) - done)  # nothing skipped, nothing repeated

    two[0].set_epoch(1)
    assert two[0].processed_indices == set() and len(two[0]) == 18 and list(two[0]) != rest[0]


def test_sampler_pads_like_distributed_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = [list(s) for s in samplers(10, 3, monkeypatch)]
    flat = list(itertools.chain(*parts))
    assert [len(p) for p in parts] == [4, 4, 4] and set(flat) == set(range(10)) and len(flat) - len(set(flat)) == 2
    empty = samplers(4, 2, monkeypatch, {"epoch": 0, "processed_indices": {0, 1, 2, 3}})
    assert [list(s) for s in empty] == [[], []] and len(empty[0]) == 0


def test_sampler_record_indices_and_get_indices(monkeypatch: pytest.MonkeyPatch) -> None:
    (s,) = samplers(8, 1, monkeypatch)
    order = list(s)
    assert s.get_indices(1, 3) == order[3:6] and s.get_indices(2, 3) == order[6:]
    s.record_indices(order[:2])
    s.reset()
    assert sorted(s) == sorted(order[2:])


def _torch_state_case(tmp: str) -> dict:
    hvd.init()
    r = hvd.rank()
    torch.manual_seed(r)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()  # momentum buffers exist, different on each rank
    state = hvd.elastic.TorchState(model, optimizer, epoch=r, notes=[r])
    state.sync()  # everyone takes rank 0's
    synced = [p.detach().clone() for p in model.parameters()]
    buffers = [v["momentum_buffer"].clone() for v in optimizer.state_dict()["state"].values()]
    with torch.no_grad():
        model.weight.add_(1.0)
    state.epoch, state.notes = 5, [1, 2]
    state.commit()
    committed = model.weight.detach().clone()
    with torch.no_grad():
        model.weight.mul_(0.0)
    state.notes.append(3)
    optimizer.param_groups[0]["lr"] = 9.0
    state.restore()
    return {
        "synced": [t.tolist() for t in synced],
        "buffers": [t.tolist() for t in buffers],
        "restored_weight": bool(torch.equal(model.weight, committed)),
        "epoch": state.epoch,
        "notes": state.notes,
        "lr": optimizer.param_groups[0]["lr"],
    }


def test_torch_state_sync_commit_restore(tmp_path: Path) -> None:
    results = cluster(_torch_state_case, 2, str(tmp_path))
    assert results[0]["synced"] == results[1]["synced"] and results[0]["buffers"] == results[1]["buffers"]
    for result in results:
        assert result["restored_weight"] and result["epoch"] == 5 and result["notes"] == [1, 2]
        assert result["lr"] == 0.1  # the optimizer's state_dict, param groups included, came back


def test_elastic_job_loses_a_worker_mid_epoch_and_grows_back(tmp_path: Path) -> None:
    """Through horovodrun: 3 workers, worker 2 killed in epoch 1; the other two restore the last commit
    and finish that epoch without it, the replacement joins at a later commit; every sample is
    processed exactly once in every epoch, and the weights end identical on every worker."""
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("HOROVOD_")}
    (tmp_path / "markers").mkdir()
    env.update(HOROVOD_CPU_OPERATIONS="gloo", KILL_WORKER="2", ELASTIC_MARKERS=str(tmp_path / "markers"))
    script = str(Path(__file__).with_name("elastic_train.py"))
    done = subprocess.run(
        [sys.executable, "-m", "horovod.runner.launch", "-np", "3", "--min-np", "2", "-H", "localhost:3",
         sys.executable, script],
        env=env, capture_output=True, text=True, timeout=200, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    log = done.stderr
    assert done.returncode == 0, log + done.stdout
    assert "worker 2 dies in epoch 1, batch 1" in done.stdout
    assert re.search(r"world 1 formed in .*: 2 worker\(s\)", log), log
    assert re.search(r"world 2 formed in .*: 3 worker\(s\)", log), log
    finals = [
        dict(p.split("=", 1) for p in m.group(1).split()) for m in re.finditer(r"<stdout>:done (.*)", done.stdout)
    ]
    assert sorted(f["rank"] for f in finals) == ["0", "1", "2"] and all(f["size"] == "3" for f in finals), finals
    assert all(f["counts_ok"] == "True" for f in finals), finals
    assert len({f["checksum"] for f in finals}) == 1, finals


class _Counter:
    def __init__(self) -> None:
        self.count = 0


class _CounterHandler(hvd.elastic.StateHandler):
    """A custom kind of state, as Horovod's users register one."""

    def save(self) -> None:
        self.saved = self.value.count

    def restore(self) -> None:
        self.value.count = self.saved

    def sync(self) -> None:
        self.value.count = hvd.broadcast_object(self.value.count, root_rank=0, name="counter")


def _custom_handler_case() -> list[int]:
    hvd.init()
    counter = _Counter()
    counter.count = 10 + hvd.rank()
    state = hvd.elastic.TorchState(counter=counter, epoch=0)
    state.sync()
    synced = counter.count
    counter.count = 42
    state.commit()
    counter.count = -1
    state.restore()
    return [synced, counter.count]


def test_custom_state_handlers_through_the_registry() -> None:
    from horovod.torch.elastic import state as torch_state

    defaults = torch_state.get_handler_registry()
    assert [h for _, h in defaults] == [
        torch_state.ModelStateHandler,
        torch_state.OptimizerStateHandler,
        torch_state.SamplerStateHandler,
    ]
    torch_state.set_handler_registry([(_Counter, _CounterHandler), *defaults])
    try:
        assert cluster(_custom_handler_case, 2) == [[10, 42], [10, 42]]
    finally:
        torch_state.set_handler_registry(defaults)
