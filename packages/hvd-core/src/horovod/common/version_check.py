"""Horovod's framework-version mismatch error, kept for code that imports or raises it.

Horovod compiled each framework extension against the framework installed at build time and
refused (or warned) when a different version was imported later. hvd's framework packages are pure
Python and never compile against a framework, so hvd-core itself never detects a mismatch; the
names exist so that code written for Horovod imports, raises and catches them unchanged.
"""

from __future__ import annotations

__all__ = ["HorovodVersionMismatchError", "get_version_mismatch_message"]


def get_version_mismatch_message(name: str, version: str, installed_version: str | None) -> str:
    """The message of :class:`HorovodVersionMismatchError`: framework ``name`` is at ``version``
    now, but was at ``installed_version`` when the Horovod build it is used with was made."""
    return (
        f"Framework {name} installed with version {installed_version} but found version {version}. "
        "This can result in unexpected behavior including runtime errors. "
        "hvd's framework packages are not compiled against a framework: upgrade the hvd framework "
        "package (e.g. pip install -U hvd-torch) if it does not support this version yet."
    )


class HorovodVersionMismatchError(ImportError):
    """A framework's version differs from the one a Horovod build was made against.

    An ``ImportError``, as in Horovod, carrying ``name``, ``version`` and ``installed_version``.
    """

    def __init__(self, name: str, version: str, installed_version: str | None) -> None:
        super().__init__(get_version_mismatch_message(name, version, installed_version))
        self.name = name
        self.version = version
        self.installed_version = installed_version
