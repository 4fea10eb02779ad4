"""hvd: distributed data-parallel training, Horovod's API on a modular engine.

This package is owned by hvd-core. Other hvd distributions (hvd-torch, hvd-runner, backends...)
install subpackages into the ``horovod`` namespace; extending ``__path__`` lets them be found
whether each is installed in site-packages or as an editable checkout.
"""

from __future__ import annotations

import pkgutil
from typing import Any

__path__ = pkgutil.extend_path(__path__, __name__)

from horovod.common.version import HOROVOD_API_VERSION as _API
from horovod.common.version import __version__ as _HVD_CORE_VERSION

#: What Horovod scripts compare against: the Horovod API level hvd implements, with hvd-core's own
#: version as the local label (``0.28.1+hvd.0.1.0``), so a gate such as
#: ``horovod.__version__ >= "0.21"`` (a string or a ``packaging.version`` comparison) takes the branch
#: it takes under that Horovod release. hvd-core's version alone is ``horovod.common.__version__``.
__version__ = f"{_API}+hvd.{_HVD_CORE_VERSION}"


def __getattr__(name: str) -> Any:
    # `horovod.run` comes from hvd-runner; resolved lazily so importing horovod stays cheap and
    # works without the launcher installed.
    if name == "run":
        try:
            from horovod.runner import run
        except ImportError as error:
            raise ImportError(
                "horovod.run is provided by the hvd-runner package, which is not installed: pip install hvd-runner"
            ) from error
        return run
    raise AttributeError(f"module 'horovod' has no attribute {name!r}")
