"""Tests run ranks as threads of the test process (hvd-core's run_cluster); two cores here."""

import torch

torch.set_num_threads(1)
