"""The transport fixture: tests that use it run once over shared memory and once over TCP."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["shared memory", "tcp"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Members of one test are threads of this process: on one host, shared memory unless disabled."""
    monkeypatch.setenv("HOROVOD_GLOO_SHARED_MEMORY", "1" if request.param == "shared memory" else "0")
    return request.param
