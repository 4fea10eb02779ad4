"""A member of a group refused at submission never leaves its partners waiting.

The members of a group are negotiated and executed together: the coordinator holds a group's
responses until all of them are there. A member refused when it was submitted (by the engine's
checks, a framework's, or a native kernel's) is negotiated all the same, as a refusal, so that the
rest of the group runs and every rank learns why; before, its partners waited forever, on every rank
alike, so that no stall was ever reported.
"""

from __future__ import annotations

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common import _core, state
from horovod.common.testing import cuda_runtime_works, run_cluster


def test_a_member_refused_on_every_rank_raises_there_and_the_rest_runs() -> None:
    def case() -> list:
        hvd.init()
        with pytest.raises(ValueError, match=r"'grp\.1'.*scalar"):
            hvd.grouped_reducescatter([np.zeros((2, 1)), np.array(float(hvd.rank()))], name="grp", op=hvd.Sum)
        after = hvd.allreduce(np.ones(1), name="after", op=hvd.Sum).tolist()
        # The group's names are free again: the same group, well formed, runs.
        again = hvd.grouped_reducescatter([np.ones((2, 1)), np.ones((2, 2))], name="grp", op=hvd.Sum)
        return [after, [a.tolist() for a in again]]

    for after, again in run_cluster(case, 2):
        assert after == [2.0] and again == [[[2.0]], [[2.0, 2.0]]]


def test_a_member_refused_on_one_rank_fails_it_on_every_rank_naming_that_rank() -> None:
    def case() -> str:
        hvd.init()
        second = np.array(1.0) if hvd.rank() == 1 else np.zeros((2, 1))
        try:
            hvd.grouped_reducescatter([np.zeros((2, 1)), second], name="lopsided", op=hvd.Sum)
        except Exception as error:  # rank 1: its ValueError; rank 0: the negotiated refusal
            return f"{type(error).__name__}: {error}"
        return "no error"

    refused_here, refused_there = run_cluster(case, 2)[::-1]
    assert refused_here.startswith("ValueError") and "scalar" in refused_here, refused_here
    assert "'lopsided.1'" in refused_there and "refused on rank 1" in refused_there, refused_there


def test_a_member_refused_before_the_engine_is_negotiated_as_a_refusal() -> None:
    def case() -> list:
        hvd.init()
        with pytest.raises(ValueError, match="dtype"):
            hvd.grouped_allreduce([np.ones(2), np.array(["text"])], name="mixed", op=hvd.Sum)
        return hvd.grouped_allreduce([np.ones(2), np.ones(3)], name="mixed", op=hvd.Sum)

    for results in run_cluster(case, 3):
        assert [r.tolist() for r in results] == [[3.0] * 2, [3.0] * 3]


@pytest.mark.skipif(cuda_runtime_works(), reason="CUDA tensors are accepted here")
def test_a_member_on_a_device_no_one_can_use_is_refused_in_its_group() -> None:
    def case() -> list:
        hvd.init()
        engine = state.context().engine
        host = np.ones(2, np.float32)
        group = {"group_id": 5, "group_size": 2, "inplace": True, "op": hvd.Sum}
        first = engine.enqueue(_core.OP_ALLREDUCE, "dev.0", host, _core.DTYPE_FLOAT32, [2], **group)
        with pytest.raises(ValueError, match="no CUDA device can be used"):
            engine.enqueue(
                _core.OP_ALLREDUCE,
                "dev.1",
                (1 << 20, 8),
                _core.DTYPE_FLOAT32,
                [2],
                device_kind=_core.DEVICE_CUDA,
                **group,
            )
        first.wait()  # its partner was negotiated as a refusal: it runs
        return host.tolist()

    assert run_cluster(case, 2, env={"HOROVOD_DEVICE": "cuda"}) == [[2.0, 2.0]] * 2


class RecordingEngine:
    """The engine, with its refuse() calls counted (the rest passes through)."""

    def __init__(self, engine: object) -> None:
        self._engine = engine
        self.refusals: list[str] = []

    def refuse(self, op_type: int, name: str, *rest: object) -> None:
        self.refusals.append(name)
        self._engine.refuse(op_type, name, *rest)

    def __getattr__(self, name: str) -> object:
        return getattr(self._engine, name)


def test_a_member_the_engine_refused_is_not_refused_again() -> None:
    """The engine queues its own refusal of a group member; a second one, queued by the caller
    after the group had completed, would hold the member's name for a group nobody completes (the
    group's next submission then failed as 'already in progress')."""

    def case() -> list:
        hvd.init()
        ctx = state.context()
        recording = ctx.engine = RecordingEngine(ctx.engine)
        with pytest.raises(ValueError, match="scalar") as refused:
            hvd.grouped_reducescatter([np.zeros((2, 1)), np.array(1.0)], name="once", op=hvd.Sum)
        assert getattr(refused.value, "refusal_queued", False)
        with pytest.raises(ValueError, match="dtype"):  # refused before the engine: the caller refuses it
            hvd.grouped_allreduce([np.ones(2), np.array(["text"])], name="twice", op=hvd.Sum)
        again = hvd.grouped_reducescatter([np.ones((2, 1)), np.ones((2, 1))], name="once", op=hvd.Sum)
        return [recording.refusals, [a.tolist() for a in again]]

    for refusals, again in run_cluster(case, 2):
        assert refusals == ["twice.1"] and again == [[[2.0]], [[2.0]]]
