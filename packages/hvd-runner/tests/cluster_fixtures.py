"""The ``netns_cluster`` fixture: three ssh hosts on this machine, for multi-host tests.

conftest.py makes it available to every test module (``pytest_plugins``). The cluster
is shared by the whole session: a test that pauses a host or stops its sshd puts it back
(``cluster.restore()`` in a ``finally``). Without root the tests skip; as root, a machine that lacks
what the cluster needs (ip, sshd, ssh-keygen) fails them, saying what is missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from horovod.runner.testing.netns_cluster import NetnsCluster, cluster_for_tests


@pytest.fixture(scope="session")
def netns_cluster() -> Iterator[NetnsCluster]:
    """Hosts hvdt-h0..hvdt-h2 (198.18.0.10-12 on hvd0), each answering ``ssh <host>`` from any other."""
    yield from cluster_for_tests(hosts=3, prefix="hvdt", subnet=0)
