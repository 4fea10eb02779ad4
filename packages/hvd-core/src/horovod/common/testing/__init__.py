"""hvd-core's test kit: N ranks in one process, and the backend conformance suite."""

from horovod.common.testing.cluster import ClusterError, run_cluster
from horovod.common.testing.device import cuda_runtime_works, device_table_capsule, simulated_device_races

__all__ = ["ClusterError", "cuda_runtime_works", "device_table_capsule", "run_cluster", "simulated_device_races"]
