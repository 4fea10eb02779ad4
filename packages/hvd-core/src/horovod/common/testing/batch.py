"""Many test calls in one multi-process job: a framework's ranks take seconds to start (importing
TensorFlow or Keras), so a package's tests run every call of one rank count in one job, and each
call is still reported as a test of its own, with each rank's traceback where it failed.

Used by the framework packages' tests (hvd-tensorflow, hvd-keras): ``run_batch(calls, np, env)``
launches ``np`` ranks through ``horovod.run`` (hvd-runner, which the tests install) and returns the
:class:`Outcomes`; ``Outcomes.check(key)`` fails unless that call succeeded on every rank.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the kit runs where pytest does, but does not import it
    import pytest

#: One call of a batch: (key, case, arguments). The case runs on every rank.
Call = tuple[str, Callable[..., Any], tuple[Any, ...]]


class Outcomes:
    """What every rank reported for every call of a batch."""

    def __init__(self, per_rank: list[dict[str, tuple[str, Any]]]) -> None:
        self.per_rank = per_rank

    def check(self, key: str) -> list[Any]:
        """Fails with the ranks' tracebacks unless ``key`` succeeded on every rank; the results by rank."""
        failures = [f"rank {r}:\n{out[key][1]}" for r, out in enumerate(self.per_rank) if out[key][0] != "ok"]
        assert not failures, f"{key} failed\n" + "\n".join(failures)
        return [outcome[key][1] for outcome in self.per_rank]


def selected(request: pytest.FixtureRequest, param: str = "key") -> set[Any]:
    """The values that parameter ``param`` takes in the tests this pytest run selected (``-k``, node
    ids): a batch fixture runs only the calls whose tests will be reported."""
    return {item.callspec.params.get(param) for item in request.session.items if hasattr(item, "callspec")}


def run_batch(
    calls: Sequence[Call],
    np: int,
    env: Mapping[str, str],
    setup: Callable[[], None] | None = None,
    start_timeout: float = 120,
) -> Outcomes:
    """Runs every call, in order, in one job of ``np`` ranks (``setup()`` first on each rank), each
    rank recording each call's result or traceback.

    After each call the ranks exchange how it went (an allgather), so every rank finishes a call
    before any starts the next. A rank that failed part-way leaves its peers in a collective it
    never submits: give ``env`` a stall shutdown (``HOROVOD_STALL_SHUTDOWN_TIME_SECONDS``), which
    turns that into an error on every rank; with Horovod stopped, the calls left are reported as not run.
    """
    import horovod

    return Outcomes(
        horovod.run(_run_calls, args=(list(calls), setup), np=np, env=dict(env), start_timeout=start_timeout)
    )


def _run_calls(calls: list[Call], setup: Callable[[], None] | None) -> dict[str, tuple[str, Any]]:
    from horovod.common.framework_api import allgather_object

    if setup is not None:
        setup()
    outcomes: dict[str, tuple[str, Any]] = {}
    for number, (key, case, args) in enumerate(calls):
        try:
            outcomes[key] = ("ok", case(*args))
        except Exception:  # recorded for the test of this call; the next call goes on
            outcomes[key] = ("error", traceback.format_exc())
        try:
            allgather_object(outcomes[key][0], name=f"batch.{number}")
        except Exception:
            stopped = traceback.format_exc()
            for later, _, _ in calls[number + 1 :]:
                outcomes[later] = ("error", f"not run: Horovod stopped after {key}:\n{stopped}")
            break
    return outcomes
