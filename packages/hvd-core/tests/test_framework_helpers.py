"""The framework API's helpers for distributed optimizers, which every framework package shares."""

from __future__ import annotations

import pytest

from horovod.common.framework_api import Adasum, Average, Sum, check_gradient_options, gradient_groups, split_groups


@pytest.mark.parametrize(
    ("count", "parts", "sizes"),
    [(10, 3, [4, 3, 3]), (6, 3, [2, 2, 2]), (2, 4, [1, 1]), (0, 2, []), (5, 1, [5])],
)
def test_split_groups_cuts_consecutive_pieces_longer_first(count: int, parts: int, sizes: list[int]) -> None:
    pieces = split_groups(list(range(count)), parts)
    assert [len(p) for p in pieces] == sizes
    assert [i for piece in pieces for i in piece] == list(range(count))  # in order, nothing lost


def test_gradient_options_read_an_integer_groups_as_the_count() -> None:
    assert check_gradient_options(Average, 1.0, 0, 3, "opt") == (3, None)
    assert check_gradient_options(Sum, 1.0, 2, None, "opt") == (2, None)
    groups = [["a", "b"], ["c"]]
    assert check_gradient_options(Average, 2.0, 0, groups, "opt") == (0, groups)


@pytest.mark.parametrize(
    ("op", "predivide", "num_groups", "groups", "error", "fragment"),
    [
        (Adasum, 2.0, 0, None, ValueError, "only supported with op=hvd.Average"),
        (Sum, 2.0, 0, None, ValueError, "only supported with op=hvd.Average"),
        (Average, 1.0, 2, [["a"]], ValueError, "either num_groups or groups"),
        (Average, 1.0, 0, [["a"], "b"], ValueError, "a list of lists of variables"),
        (Average, 1.0, -1, None, ValueError, "non-negative integer, got -1"),
    ],
)
def test_gradient_options_refuse_misuse(
    op: int, predivide: float, num_groups: int, groups: object, error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        check_gradient_options(op, predivide, num_groups, groups, "opt")


def test_gradient_groups_by_count_or_by_variable_lists() -> None:
    variables = ["w1", "b1", None, "w2", "b2"]  # None: a variable without a gradient
    assert gradient_groups(variables, 2, None) == [[0, 1, 2], [3, 4]]
    # Members matched by key, positions in the order the gradients come (groups in first-seen order).
    by_layer = gradient_groups(variables, 0, [["b2", "w2"], ["w1"]], key=lambda v: v)
    assert by_layer == [[0], [3, 4]]
    assert gradient_groups(variables, 0, None) == []
