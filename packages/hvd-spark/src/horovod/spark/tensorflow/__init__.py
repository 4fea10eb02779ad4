"""Horovod's TensorFlow helpers on Spark: the tf.data service's compute job (compute_worker)."""
