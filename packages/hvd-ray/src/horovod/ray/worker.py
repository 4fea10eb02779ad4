"""The Ray actor that is one Horovod worker: its environment, an optional object of the user's, and
the functions the executor runs in it."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any

#: What a worker's intra-op threads are by default (horovod.runner.threads), as the executors say.
THREADS_DEFAULT = "each worker's CPUs in Ray (its num_cpus), at least 1"

#: What an elastic worker's run ends with when the driver told it to leave (it raised SystemExit(0)).
LEFT = "left"


@contextlib.contextmanager
def _shutdown_on_failure() -> Iterator[None]:
    """A function that raises ends Horovod in this worker, as a failing horovodrun rank's exit does:
    its peers' collectives then fail at once, naming it, instead of waiting for it (the actor lives
    on, and a later run's init() starts Horovod again)."""
    try:
        yield
    except BaseException:
        from horovod.common import shutdown

        shutdown()
        raise


class BaseHorovodWorker:
    """One worker (a Ray actor). The executor sets its Horovod environment before anything runs."""

    def __init__(self) -> None:
        self.executable: Any = None

    def node_info(self) -> tuple[str, str, int]:
        """(Ray node id, host name, pid): the node decides the worker's local rank."""
        import ray

        return ray.get_runtime_context().get_node_id(), socket.gethostname(), os.getpid()

    def update_env_vars(self, env_vars: Mapping[str, str]) -> None:
        """Adds ``env_vars`` to this worker's environment; the intra-op thread variables the user has
        not set become this worker's CPUs in Ray (horovodrun's ``--num-threads-per-rank`` rule).

        :param env_vars: the variables to set (keys and values made strings).
        """
        import ray
        from horovod.runner import threads

        os.environ.update({str(k): str(v) for k, v in env_vars.items()})
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1)
        os.environ.update(threads.with_default(os.environ, max(1, int(cpus))))

    def env_vars(self) -> dict[str, str]:
        return dict(os.environ)

    def start_executable(
        self,
        executable_cls: Callable[..., Any] | None = None,
        executable_args: list[Any] | None = None,
        executable_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """Makes ``executable_cls(*executable_args, **executable_kwargs)``, kept for :meth:`execute`.

        :param executable_cls: a class (or callable) to make in this worker, or ``None`` for none.
        :param executable_args: its positional arguments.
        :param executable_kwargs: its keyword arguments.
        """
        if executable_cls is not None:
            self.executable = executable_cls(*(executable_args or []), **(executable_kwargs or {}))

    def execute(self, func: Callable[[Any], Any]) -> Any:
        """``func(executable)``: the object ``start`` made, or None.

        :param func: called with the object ``start_executable`` made (or ``None``).
        """
        with _shutdown_on_failure():
            return func(self.executable)

    def run(self, func: Callable[..., Any], args: list[Any] | None = None, kwargs: dict[str, Any] | None = None) -> Any:
        """``func(*args, **kwargs)`` in this worker; Horovod is shut down here if it raises.

        :param func: the function to run in this worker.
        :param args: its positional arguments.
        :param kwargs: its keyword arguments.
        """
        with _shutdown_on_failure():
            return func(*(args or []), **(kwargs or {}))

    def run_elastic(self, func: Callable[[], Any]) -> tuple[str, int, Any]:
        """An elastic worker's whole life: ``("done", rank, result)``, or ``(LEFT, -1, None)`` when the
        driver told it to leave (init() raised SystemExit(0), which would otherwise end the actor).

        :param func: the elastic worker function, without arguments.
        """
        try:
            result = func()
        except SystemExit as leaving:
            if leaving.code in (0, None):
                return LEFT, -1, None
            raise
        from horovod.common import is_initialized, rank

        return "done", rank() if is_initialized() else -1, result
