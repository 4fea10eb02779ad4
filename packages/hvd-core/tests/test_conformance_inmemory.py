"""The backend conformance suite on the in-memory backend, with 1 to 4 ranks."""

from horovod.common.testing.conformance import BackendConformance


class TestInMemoryConformance(BackendConformance):
    backend = "inmemory"
    world_sizes = (1, 2, 3, 4)
