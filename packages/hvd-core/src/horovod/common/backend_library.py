"""Finding a backend package's shared library: one helper for every backend (third parties too).

A backend package installs its library beside its Python code (in a subdirectory holding no Python
source, since an editable install turns a directory holding a native file into a namespace
package). An editable install may put it elsewhere; the distribution's RECORD then knows where.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def find_backend_library(directory: str, names: Sequence[str], distribution: str, install_hint: str) -> str:
    """The absolute path of the first of ``names`` in ``directory``, else where ``distribution``'s
    installed files put it.

    :param directory: the directory the backend package installs its library into (beside its Python
        code, in a subdirectory holding no Python source).
    :param names: the file names the library may have, in the order to look for them (e.g.
        ``("libhvd_backend_gloo.so", "libhvd_backend_gloo.dylib")``).
    :param distribution: the backend package's distribution name (``"hvd-backend-gloo"``), whose
        installed files (its RECORD) are searched when ``directory`` has none of ``names``, as after
        an editable install; it also prefixes the error message.
    :param install_hint: how to install the package, for the error message, e.g.
        ``"install the package (pip install hvd-backend-gloo)"``.

    Raises:
        FileNotFoundError: naming the files looked for and ``install_hint`` (e.g. the package was
            imported from a source tree instead of an installed wheel).
    """
    for name in names:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    found = _recorded_in(distribution, names)
    if found is not None:
        return found
    raise FileNotFoundError(
        f"{distribution}: the backend library ({' or '.join(names)}) is missing from {directory}; "
        f"{install_hint} rather than importing it from a source tree (Python: {sys.executable})"
    )


def _recorded_in(distribution: str, names: Sequence[str]) -> str | None:
    from importlib import metadata

    try:
        files = metadata.distribution(distribution).files or ()
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name in names:
            path = os.path.abspath(str(f.locate()))
            if os.path.isfile(path):
                return path
    return None
