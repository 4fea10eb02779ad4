"""``python -m horovod.runner.host_probe``: what horovodrun needs to know of a host before it starts
ranks there, printed as one JSON line (run over ssh by :mod:`horovod.runner.host_check`)."""

from __future__ import annotations

import json
import sys


def probe() -> dict[str, object]:
    from horovod.runner.interfaces import local_interfaces

    return {"python": sys.executable, "interfaces": local_interfaces()}


if __name__ == "__main__":
    print(json.dumps(probe()), flush=True)
