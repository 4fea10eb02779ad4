"""horovod.common.basics.HorovodBasics: Horovod's class of the basic API, delegating to hvd's functions."""

from __future__ import annotations

import pytest

from horovod.common import basics, collectives
from horovod.common.basics import HorovodBasics

# The methods of Horovod 0.28's HorovodBasics that are its public API.
METHODS = [
    "init",
    "shutdown",
    "is_initialized",
    "start_timeline",
    "stop_timeline",
    "size",
    "local_size",
    "cross_size",
    "rank",
    "local_rank",
    "cross_rank",
    "is_homogeneous",
    "mpi_threads_supported",
    "mpi_enabled",
    "mpi_built",
    "gloo_enabled",
    "gloo_built",
    "nccl_built",
    "ddl_built",
    "ccl_built",
    "cuda_built",
    "rocm_built",
]


def test_it_has_horovods_methods_and_takes_horovods_arguments() -> None:
    hb = HorovodBasics(__file__, "mpi_lib")  # Horovod's: the framework's compiled extension; unused here
    missing = [name for name in METHODS if not callable(getattr(hb, name, None))]
    assert not missing
    assert callable(HorovodBasics().size)  # and without arguments


def test_reduction_ops_are_the_collectives() -> None:
    hb = HorovodBasics(__file__, "mpi_lib")
    for name in ("Average", "Sum", "Adasum", "Min", "Max", "Product"):
        assert getattr(hb, name) == getattr(collectives, name)
    with pytest.raises(AttributeError, match="no attribute 'Mean'"):
        hb.Mean  # noqa: B018


def test_methods_answer_as_the_functions_do() -> None:
    hb = HorovodBasics(__file__, "mpi_lib")
    assert not hb.is_initialized()
    with pytest.raises(ValueError, match="has not been initialized"):
        hb.rank()
    hb.init()
    try:
        assert hb.is_initialized()
        for name in ("size", "rank", "local_size", "local_rank", "cross_size", "cross_rank", "is_homogeneous"):
            assert getattr(hb, name)() == getattr(basics, name)()
        assert (hb.rank(), hb.size()) == (0, 1)
        # A lone process: the in-memory backend, or Gloo where hvd-backend-gloo is installed.
        assert hb.mpi_enabled() is basics.mpi_enabled() is False and hb.gloo_enabled() is basics.gloo_enabled()
        assert hb.mpi_threads_supported() is False
        for name in ("mpi", "gloo", "nccl", "ddl", "ccl", "cuda", "rocm"):
            assert getattr(hb, f"{name}_built")() == getattr(basics, f"{name}_built")()
    finally:
        hb.shutdown()
    assert not hb.is_initialized()
