"""Horovod's tf.data service: input pipelines run by a compute job, read by training jobs
(compute_service.py says how)."""

from horovod.tensorflow.data.compute_service import (
    TfDataServiceConfig,
    compute_worker_fn,
    send_to_data_service,
    tf_data_service,
)

__all__ = ["TfDataServiceConfig", "compute_worker_fn", "send_to_data_service", "tf_data_service"]
