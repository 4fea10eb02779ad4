"""One rank of the job test_every_python.py launches (``horovodrun -np 2 python dist_core_job.py``) in
an environment of hvd-core, hvd-backend-gloo and hvd-runner from ``dist/``: an allreduce of numpy
arrays on the engine alone (no framework), then one JSON line saying what this rank saw."""

from __future__ import annotations

import json
import sys

import numpy as np

import horovod.common as hvd

hvd.init()
total = hvd.allreduce(np.full(4, hvd.rank() + 1.0, np.float32), op=hvd.Sum, name="dist_core_job")
report = {
    "rank": hvd.rank(),
    "size": hvd.size(),
    "python": f"{sys.version_info.major}.{sys.version_info.minor}",
    "gloo_enabled": hvd.gloo_enabled(),
    "sum": [float(x) for x in total],
}
print("DIST_CORE_JOB " + json.dumps(report), flush=True)
hvd.shutdown()
