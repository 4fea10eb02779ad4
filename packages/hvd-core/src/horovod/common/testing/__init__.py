"""hvd-core's test kit: N ranks in one process, and the backend conformance suite."""

from horovod.common.testing.cluster import ClusterError, run_cluster

__all__ = ["ClusterError", "run_cluster"]
