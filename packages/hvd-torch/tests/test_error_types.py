"""Errors for what hvd does not run: UnsupportedOperationError, a ValueError and a RuntimeError.

Horovod raised RuntimeError (NotImplementedError, or HorovodInternalError from its engine) for such
combinations, hvd used to raise ValueError: code catching either must keep working. The error is
raised on the calling rank before anything is submitted, so the job goes on.
"""

from __future__ import annotations

import pytest
import torch

import horovod.common.exceptions
import horovod.torch as hvd
from horovod.common import framework_api
from hvdtorch_testutil import cluster, expect_error

NP = [2, 3]


def test_the_error_is_both_kinds_and_exported_where_errors_are_imported_from() -> None:
    error = hvd.UnsupportedOperationError
    assert issubclass(error, ValueError) and issubclass(error, RuntimeError)
    assert issubclass(error, NotImplementedError)  # what Horovod raised for ops it lacked
    assert not issubclass(error, hvd.HorovodInternalError)  # not a lost peer: elastic must not retry
    assert error is horovod.common.exceptions.UnsupportedOperationError is framework_api.UnsupportedOperationError
    from horovod.torch.mpi_ops import UnsupportedOperationError

    assert UnsupportedOperationError is error and "UnsupportedOperationError" in hvd.__all__


def refused(call: object, *fragments: str) -> None:
    """`call` raises UnsupportedOperationError, caught alike as ValueError and as RuntimeError."""
    for kind in (ValueError, RuntimeError, hvd.UnsupportedOperationError):
        expect_error(kind, fragments, call)  # type: ignore[arg-type]


def case_unsupported_reductions() -> None:
    hvd.init()
    n = hvd.size()
    x = torch.ones(2 * n, 2)
    for op in (hvd.Adasum, hvd.Min, hvd.Max, hvd.Product):
        fragment = "supports op=Average and op=Sum"
        refused(lambda op=op: hvd.reducescatter(x, op=op), fragment, "reducescatter")
        refused(lambda op=op: hvd.reducescatter_async(x, op=op), fragment)
        refused(lambda op=op: hvd.grouped_reducescatter([x, x], op=op), fragment, "grouped_reducescatter")
        refused(lambda op=op: hvd.grouped_reducescatter_async([x, x], op=op), fragment)
    # Nothing was submitted: the ranks go on with the same collectives, unnamed ones numbered alike.
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).tolist() == [float(n)]
    assert hvd.reducescatter(torch.ones(n, 1), op=hvd.Sum).tolist() == [[float(n)]]


@pytest.mark.parametrize("np_", NP)
def test_unsupported_reductions(np_: int) -> None:
    cluster(case_unsupported_reductions, np_)


def case_unsupported_optimizer() -> None:
    hvd.init()
    model = torch.nn.Linear(2, 1)
    # What Horovod refuses with ValueError stays a ValueError only.
    with pytest.raises(ValueError, match="gradient_predivide_factor") as caught:
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Sum, gradient_predivide_factor=2.0)
    assert not isinstance(caught.value, RuntimeError)


def test_unsupported_optimizer_options() -> None:
    cluster(case_unsupported_optimizer, 2)


def test_the_framework_helpers_refuse_alike() -> None:
    refused(lambda: framework_api.check_gradient_options(7, 1.0, 0, None, "opt"), "opt supports", "got op=7")
    refused(
        lambda: framework_api.check_reduce_op(hvd.Max, "reducescatter", framework_api.REDUCESCATTER_OPS),
        "reducescatter supports op=Average and op=Sum, got op=Max",
    )
    for op in framework_api.ALLREDUCE_OPS:
        framework_api.check_reduce_op(op, "allreduce")  # no error
    with pytest.raises(ValueError) as caught:
        framework_api.check_gradient_options(hvd.Sum, 2.0, 0, None, "opt")
    assert not isinstance(caught.value, RuntimeError)


def case_numpy_api() -> None:
    import numpy as np

    import horovod.common as hc

    hc.init()
    refused(lambda: hc.reducescatter(np.ones((2, 1)), op=hc.Max), "supports op=Average and op=Sum")
    refused(lambda: hc.grouped_reducescatter([np.ones((2, 1))], op=hc.Adasum), "Adasum")
    assert hc.reducescatter(np.ones((hc.size(), 1)), op=hc.Sum).tolist() == [[float(hc.size())]]


def test_the_numpy_api_refuses_alike() -> None:
    cluster(case_numpy_api, 2)
