"""For test suites that start servers which listen on the machine's addresses (Ray, Spark): they
run only in a network namespace of their own with nothing but loopback (the package's
``tests-in-private-network`` in its pyproject.toml; nox runs them under ``unshare --net``)."""

from __future__ import annotations

import psutil


def only_loopback() -> bool:
    """Whether every network interface that is up is loopback."""
    return all(name == "lo" or not stat.isup for name, stat in psutil.net_if_stats().items())


def require_private_network(package: str, what: str) -> None:
    """Raises ``pytest.UsageError`` saying how to run ``package``'s tests, unless only loopback is up."""
    import pytest

    if not only_loopback():
        raise pytest.UsageError(
            f"{package}'s tests start {what}, which listen on this machine's network addresses: run them in a "
            f"network namespace with only loopback (./dev test -s tests-{package} does, as root), e.g. "
            "unshare --net sh -c 'ip link set lo up && python -m pytest tests'"
        )
