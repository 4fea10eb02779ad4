"""The job's rendezvous server, run by the Ray driver on the address its workers reach it by."""

from __future__ import annotations

from horovod.runner.rendezvous.job import JobRendezvous, interface_address


def driver_address(nics: list[str] | None) -> str:
    """Where the workers reach this process: the first of ``nics``'s address, else Ray's address
    of this node."""
    if nics:
        return interface_address(nics[0])
    import ray

    return str(ray.util.get_node_ip_address())


def start_rendezvous(
    nics: list[str] | None, gloo_timeout_s: int, extra_env: dict[str, str] | None = None
) -> JobRendezvous:
    return JobRendezvous(driver_address(nics), nics, gloo_timeout_s, extra_env, job_prefix="hvd-ray")
