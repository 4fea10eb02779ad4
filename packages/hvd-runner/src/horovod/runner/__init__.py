"""horovod.runner: the ``horovodrun`` launcher, its rendezvous server, and ``horovod.run``.

Importing it is cheap (hvd-core's plugin manager imports ``horovod.runner.hooks`` in every
process): ``run`` is loaded on first use.
"""

from __future__ import annotations

from typing import Any

from horovod.runner.version import __version__

__all__ = ["__version__", "run"]


def __getattr__(name: str) -> Any:
    if name == "run":
        from horovod.runner.api import run

        globals()["run"] = run
        return run
    raise AttributeError(f"module 'horovod.runner' has no attribute {name!r}")
