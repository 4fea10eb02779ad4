"""The native engine, ``horovod.common._core`` (private API; see _core.pyi for its interface).

The extension module itself lives in ``horovod/common/_native/`` (a directory with no Python
sources, so editable installs cannot shadow ``horovod.common``); this module re-exports it.
"""

import horovod.common._native._core as _native
from horovod.common._native._core import *  # noqa: F403  (the extension's names, as this module's)
from horovod.common._native._core import set_exception_types  # noqa: F401  (re-exported, named for readers)
from horovod.common.exceptions import install_exception_types as _install

_install(_native)
