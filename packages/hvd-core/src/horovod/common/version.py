# hatchling reads hvd-core's own version from the first line (see pyproject.toml).
__version__ = "0.2.0"

#: The Horovod release whose documented API hvd-core and its sibling packages match (the contract:
#: scripts written for it run unchanged). ``horovod.__version__`` is built from both numbers.
HOROVOD_API_VERSION = "0.28.1"
