"""The ``ssh`` command lines horovodrun uses to reach remote hosts (OpenSSH's client).

Nothing secret is ever put on these command lines: what a remote process needs (the job's
environment, the rendezvous secret among it) is written to its standard input
(:mod:`horovod.runner.remote_rank`).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class SshOptions:
    port: int | None = None
    identity_file: str | None = None
    #: Seconds ssh may take to connect (its ConnectTimeout).
    connect_timeout_s: int = 30

    def argv(self, host: str, remote_command: Sequence[str]) -> list[str]:
        """``ssh ... host 'remote command'``: never prompts (BatchMode), accepts a host it has not seen
        yet and refuses one whose key changed (accept-new), fails within the connect timeout."""
        options = [
            "ssh",
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=accept-new",
            "-o", f"ConnectTimeout={max(1, self.connect_timeout_s)}",
            # A host that stops answering mid-job is noticed within about 30 s.
            "-o", "ServerAliveInterval=10",
            "-o", "ServerAliveCountMax=3",
            "-o", "LogLevel=ERROR",  # ssh's own failures still show; its banners and warnings do not
        ]  # fmt: skip
        if self.port is not None:
            options += ["-p", str(self.port)]
        if self.identity_file:
            options += ["-i", self.identity_file]
        # ssh hands the remote shell one string: quote each word so it arrives as given.
        return [*options, "--", host, shlex.join(remote_command)]


#: ssh's exit status when it failed itself (could not connect, authentication refused...), as
#: opposed to the remote command's status, which it passes through.
SSH_FAILED = 255
