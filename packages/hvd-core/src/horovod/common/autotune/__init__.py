"""Autotuning (``horovodrun --autotune``, ``HOROVOD_AUTOTUNE=1``): the engine's fusion threshold,
cycle time and, across hosts, hierarchical collectives, tuned while training runs.

- :mod:`.options`: the knobs;
- :mod:`.space`: what is searched, within which bounds (what the user set stays fixed);
- :mod:`.gaussian_process`: the Bayesian optimisation (a small GP and expected improvement);
- :mod:`.search`: the search itself, fed window scores, writing the log;
- :mod:`.tuner`: the thread on rank 0 that scores windows from the engine and proposes settings,
  which the engine carries to every rank in its negotiation.
"""

from horovod.common.autotune.options import AutotuneOptions
from horovod.common.autotune.search import COLUMNS, Search
from horovod.common.autotune.space import SearchSpace, Settings
from horovod.common.autotune.tuner import Autotuner, started_settings

__all__ = ["COLUMNS", "AutotuneOptions", "Autotuner", "Search", "SearchSpace", "Settings", "started_settings"]
