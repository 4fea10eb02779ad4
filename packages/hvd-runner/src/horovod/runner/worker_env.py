"""The environment contract between the launcher and each rank it starts.

Every name a rank is given is defined here, once. hvd-core reads the topology and ``HOROVOD_JOB_KEY``
(``horovod/common/config.py``); this package's ``hooks.py`` reads the rendezvous variables and
hands the engine a client of the launcher's server.
"""

from __future__ import annotations

from collections.abc import Mapping

# Topology (read by hvd-core's init()).
RANK = "HOROVOD_RANK"
SIZE = "HOROVOD_SIZE"
LOCAL_RANK = "HOROVOD_LOCAL_RANK"
LOCAL_SIZE = "HOROVOD_LOCAL_SIZE"
CROSS_RANK = "HOROVOD_CROSS_RANK"
CROSS_SIZE = "HOROVOD_CROSS_SIZE"
#: The host name the rank was placed on, as given to -H / --hostfile.
HOSTNAME = "HOROVOD_HOSTNAME"
#: Unique per job; hvd-core prefixes its store keys with it.
JOB_KEY = "HOROVOD_JOB_KEY"

# Rendezvous (read by horovod.runner.hooks).
RENDEZVOUS_ADDR = "HOROVOD_RENDEZVOUS_ADDR"
RENDEZVOUS_PORT = "HOROVOD_RENDEZVOUS_PORT"
#: The per-job HMAC secret, hex. Only ever passed through the environment; never logged.
RENDEZVOUS_SECRET = "HOROVOD_RENDEZVOUS_SECRET"
#: The server's limit on one value, so that a rank fails clearly before sending too much.
RENDEZVOUS_MAX_VALUE_BYTES = "HOROVOD_RENDEZVOUS_MAX_VALUE_BYTES"

# Backend selection and transport (read by hvd-core and the backends).
CPU_OPERATIONS = "HOROVOD_CPU_OPERATIONS"
CONTROLLER = "HOROVOD_CONTROLLER"
GLOO_IFACE = "HOROVOD_GLOO_IFACE"
NCCL_SOCKET_IFNAME = "NCCL_SOCKET_IFNAME"
START_TIMEOUT = "HOROVOD_START_TIMEOUT"

#: Variables whose values must never be shown (``--verbose`` prints them masked).
SECRET_VARIABLES = frozenset({RENDEZVOUS_SECRET})
MASK = "<hidden>"


def masked(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with every secret value replaced, for display."""
    return {k: (MASK if k in SECRET_VARIABLES else v) for k, v in env.items()}
