"""Elastic training's worker side without a driver: State, ObjectState and the run loop, in one
process (the broadcast is the identity, as on a world of one rank)."""

from __future__ import annotations

import pytest

from horovod.common import HorovodInternalError, HostsUpdatedInterrupt
from horovod.common.elastic import ObjectState, assignment, protocol, run_fn
from horovod.common.elastic.protocol import HostUpdateResult


def local_state(**kwargs: object) -> ObjectState:
    return ObjectState(bcast_object=lambda obj: obj, get_rank=lambda: 0, **kwargs)


def test_object_state_restores_deep_copies() -> None:
    state = local_state(step=0, seen=[])
    state.step = 5
    state.seen.append("a")
    state.commit()
    state.step = 9
    state.seen.append("b")  # mutated in place after the commit
    state.restore()
    assert state.step == 5 and state.seen == ["a"]
    state.seen.append("c")
    state.restore()
    assert state.seen == ["a"]  # restoring twice gives the commit again, not the object handed out


def test_sync_takes_rank_zeros_committed_values() -> None:
    sent = []

    def bcast(obj: object) -> object:
        sent.append(obj)
        return {"step": 42}

    state = ObjectState(bcast_object=bcast, get_rank=lambda: 1, step=0)
    state.step = 3  # uncommitted: sync sends what was committed
    state.sync()
    assert sent == [{"step": 0}] and state.step == 42


@pytest.mark.parametrize(
    ("updates", "skip_sync"),
    [
        ([HostUpdateResult.removed], True),
        ([HostUpdateResult.added], False),
        ([HostUpdateResult.removed, HostUpdateResult.added], False),
    ],
)
def test_host_updates_interrupt_at_commit(updates: list[HostUpdateResult], skip_sync: bool) -> None:
    state = local_state(step=0)
    state.commit()  # nothing heard: nothing raised
    for i, update in enumerate(updates):
        state.on_hosts_updated(1000.0 + i, int(update))
    with pytest.raises(HostsUpdatedInterrupt) as raised:
        state.commit()
    assert raised.value.skip_sync is skip_sync
    state.commit()  # heard once, acted on once


def test_updates_the_world_already_reflects_interrupt_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        assignment, "_current", protocol.Assignment(generation=2, updates_seen=1, updates_timestamp=50.0)
    )
    state = local_state(step=0)
    state.on_hosts_updated(50.0, int(HostUpdateResult.added))  # published before this world formed
    state.check_host_updates()
    state.on_hosts_updated(51.0, int(HostUpdateResult.added))
    with pytest.raises(HostsUpdatedInterrupt):
        state.check_host_updates()


def test_run_loop_restores_after_a_lost_peer_and_keeps_state_after_host_changes() -> None:
    events: list[str] = []

    class Recording(ObjectState):
        def sync(self) -> None:
            events.append("sync")
            super().sync()

        def restore(self) -> None:
            events.append("restore")
            super().restore()

    state = Recording(bcast_object=lambda obj: obj, get_rank=lambda: 0, step=0)
    faults = [HorovodInternalError("peer lost"), HostsUpdatedInterrupt(skip_sync=True), HostsUpdatedInterrupt()]
    resets = []

    def reset() -> None:
        resets.append(1)
        if len(resets) == 2:  # the world forming failed once: joining is tried again
            raise HorovodInternalError("a peer was lost while the world formed")
        events.append("reset")

    def train(state: ObjectState, target: int) -> int:
        events.append("train")
        state.step += 1  # never committed before the fault: undone by restore()
        if faults:
            raise faults.pop(0)
        return target

    state.register_reset_callbacks([lambda: events.append("callback")])
    assert run_fn(train, reset)(state, 7) == 7
    assert events == [
        "sync", "train", "restore", "reset", "callback",  # lost peer: restore, no state kept
        "sync", "train", "reset", "callback",  # hosts removed: state kept, no sync
        "train", "reset", "callback",  # hosts added (after a failed first try to join): sync
        "sync", "train",
    ]  # fmt: skip
    assert state.step == 1  # the last sync brought back the commit (0), then the last try added 1


class DictStore:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.gets: list[str] = []

    def set(self, key: str, value: bytes) -> None:
        self.data[key] = value

    def get(self, key: str, timeout: float) -> bytes | None:
        self.gets.append(key)
        return self.data.get(key)


def test_world_store_gives_up_on_a_forming_world_that_lost_a_member() -> None:
    inner = DictStore()
    store = assignment.WorldStore(inner, {"HOROVOD_JOB_KEY": "job/gen3"})
    store.set("job/gen3/world/addr/0", b"here")
    assert store.get("job/gen3/world/addr/0", 30.0) == b"here"
    assert store.get("job/gen3/world/addr/1", 0.0) is None  # not there, nobody lost: an ordinary timeout
    inner.set("job/gen3/lost", b"rank 1 (worker 4, on h1): its process was killed by signal SIGKILL")
    with pytest.raises(HorovodInternalError, match="a worker of this world was lost: rank 1 \\(worker 4"):
        store.get("job/gen3/world/addr/1", 30.0)
    assert store.get("job/gen3/lost", 0.0) is not None  # the report itself is read as it is
