"""Broadcasts on process sets through horovod.torch take a global root_rank, as in Horovod: the sets
[0] and [1], and with 3 ranks [0, 2] and [1, 2], each member root in turn, for every broadcast
horovod.torch has (tensor, in place, async, object, parameters, optimizer state); a root outside the
set is refused on every member, naming the set's ranks."""

from __future__ import annotations

import pytest
import torch

import horovod.torch as hvd
from hvdtorch_testutil import cluster


def sets_for(n: int) -> list[list[int]]:
    return [[0], [1], [0, 2], [1, 2]] if n >= 3 else [[0], [1]]


def case_global_roots_on_process_sets() -> None:
    hvd.init(process_sets="dynamic")
    n = hvd.size()
    sets = [hvd.add_process_set(ranks) for ranks in sets_for(n)]
    rank = hvd.rank()
    for ps in sets:
        if not ps.included():
            continue
        for root in ps.ranks:
            tag = f"{ps.process_set_id}.{root}"
            mine = torch.full((3,), float(rank))
            assert hvd.broadcast(mine, root_rank=root, process_set=ps, name=f"b.{tag}").tolist() == [root] * 3
            in_place = torch.full((2,), float(rank))
            hvd.broadcast_(in_place, root_rank=root, process_set=ps, name=f"bi.{tag}")
            assert in_place.tolist() == [root] * 2
            handle = hvd.broadcast_async(torch.tensor([rank]), root_rank=root, process_set=ps, name=f"ba.{tag}")
            assert hvd.synchronize(handle).tolist() == [root]
            got = hvd.broadcast_object(("from", rank), root_rank=root, process_set=ps, name=f"bo.{tag}")
            assert got == ("from", root)
            model = torch.nn.Linear(2, 1)
            with torch.no_grad():
                model.weight.fill_(float(rank))
                model.bias.fill_(float(rank))
            hvd.broadcast_parameters(model.state_dict(), root_rank=root, process_set=ps)
            assert model.weight.tolist() == [[float(root)] * 2] and model.bias.tolist() == [float(root)]
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * (rank + 1), momentum=0.9)
            hvd.broadcast_optimizer_state(optimizer, root_rank=root, process_set=ps)
            assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * (root + 1))
        outsider = next(r for r in range(n) if r not in ps.ranks)
        with pytest.raises(ValueError, match=rf"root rank {outsider} is not a member of process set"):
            hvd.broadcast(torch.ones(1), root_rank=outsider, process_set=ps, name=f"outside.{ps.process_set_id}")
    hvd.barrier()


@pytest.mark.parametrize("np_", [2, 3])
def test_broadcasts_on_process_sets_take_global_roots(np_: int) -> None:
    cluster(case_global_roots_on_process_sets, np_)
