"""Errors of the launcher that are the user's to fix (horovodrun exits with status 2 for them)."""

from __future__ import annotations


class UsageError(ValueError):
    """Bad input: a malformed flag value, a missing host file, more ranks than slots..."""


class NotSupportedError(UsageError):
    """A Horovod feature hvd-runner accepts on the command line but does not implement yet."""

    def __init__(self, what: str, hint: str = "") -> None:
        message = f"{what} is not supported yet by hvd-runner"
        if hint:
            message += f"; {hint}"
        super().__init__(message)
