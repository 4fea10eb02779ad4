"""horovod.spark.tensorflow.compute_worker: the tf.data service's compute job as Spark tasks (one
compute rank per task slot of the local cluster), serving a training job started by horovodrun."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")

TRAINING = """\
import sys
import tensorflow as tf
import horovod.tensorflow as hvd
from horovod.tensorflow.data import TfDataServiceConfig
hvd.init()
config = TfDataServiceConfig.read(sys.argv[1], wait_for_file_creation=True, timeout=120)
got = [int(x) for b in tf.data.Dataset.range(24).batch(4).send_to_data_service(config, hvd.rank(), hvd.size())
       for x in b.numpy()]
assert sorted(got) == list(range(24)), got
hvd.barrier()
if hvd.rank() == 0:
    config.compute_client(verbose=0).shutdown()
    print("received every element", flush=True)
"""


@pytest.mark.timeout(300)
def test_a_spark_compute_job_serves_a_horovodrun_training_job(spark: object, tmp_path: Path) -> None:
    from horovod.spark.tensorflow import compute_worker

    config = tmp_path / "compute.json"
    script = tmp_path / "train.py"
    script.write_text(TRAINING)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2")
    launcher = Path(sys.executable).parent / "horovodrun"
    with (tmp_path / "train.log").open("w") as log:  # the training job waits for the config
        training = subprocess.Popen(
            [str(launcher), "-np", "2", "-H", "localhost:2", sys.executable, str(script), str(config)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        # Here, on the thread of the test's Spark session: until the training job ends the compute job.
        assert compute_worker.main([str(config), "--timeout", "60"]) == 0
        assert training.wait(timeout=120) == 0, (tmp_path / "train.log").read_text()[-3000:]
        assert "received every element" in (tmp_path / "train.log").read_text()
    finally:
        if training.poll() is None:
            training.kill()
            training.wait()
