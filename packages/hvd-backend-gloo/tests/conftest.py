"""The transport fixture: tests that use it run once over shared memory and once over TCP."""

from __future__ import annotations

import pytest

import _abi


@pytest.fixture(params=["shared memory", "tcp"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Members of one test are threads of this process: on one host, shared memory unless disabled."""
    monkeypatch.setenv("HOROVOD_GLOO_SHARED_MEMORY", "1" if request.param == "shared memory" else "0")
    # The transport really is the one asked for (no silent fallback to TCP).
    assert _abi.run_members(2, lambda comm: comm.transport, prefix="transport") == [request.param] * 2
    return request.param
