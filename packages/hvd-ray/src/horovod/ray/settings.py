"""The settings objects of RayExecutor and ElasticRayExecutor (Horovod's ``create_settings``)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class RaySettings:
    """``RayExecutor.create_settings(...)``: how long to wait, and which interface to use.

    ``ssh_identity_file`` and ``ssh_str`` are accepted for Horovod's signature: Ray starts the
    workers, so no ssh is used.
    """

    #: Seconds Horovod's collectives may wait for a peer (HOROVOD_GLOO_TIMEOUT_SECONDS), and the
    #: workers' start-up (node information, environment) may take.
    timeout_s: int = 30
    ssh_identity_file: str | None = None
    ssh_str: str | None = None
    #: Seconds to wait for Ray to place every worker (its placement group).
    placement_group_timeout_s: int = 100
    #: Network interfaces for the workers' traffic (the first one's address serves the rendezvous).
    nics: list[str] | None = None
    verbose: bool = False


@dataclasses.dataclass
class ElasticRaySettings(RaySettings):
    """``ElasticRayExecutor.create_settings(...)``, Horovod's ``ElasticSettings`` attributes."""

    min_np: int = 1
    max_np: int | None = None
    reset_limit: int | None = None
    elastic_timeout: int = 600
    cooldown_range: tuple[int, int] | None = None
