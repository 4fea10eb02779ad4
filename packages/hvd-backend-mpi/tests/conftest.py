"""Shared by this package's tests: the pools of MPI ranks end with the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import _mpirun


@pytest.fixture(scope="session", autouse=True)
def _close_rank_pools() -> Iterator[None]:
    yield
    _mpirun.close_pools()
