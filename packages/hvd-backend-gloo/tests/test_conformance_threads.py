"""hvd-core's backend conformance suite on the gloo backend, ranks as threads of one process.

The test kit runs each rank's engine in a thread, connected by the engine's in-memory store; each
rank's Gloo context still talks real TCP on loopback. Needs hvd-core (with ml-dtypes for bfloat16)
and this package installed.
"""

from horovod.common.testing.conformance import BackendConformance


class TestGlooConformanceThreads(BackendConformance):
    """Every collective, dtype and op with 1 to 4 ranks; odd sizes catch ring bugs."""

    backend = "gloo"
    world_sizes = (1, 2, 3, 4)
