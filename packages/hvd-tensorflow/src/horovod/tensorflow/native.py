"""hvd's TensorFlow kernels (``_native/libhvd_tf_kernels.so``): asynchronous ops on TensorFlow's
stable C API that submit straight to hvd's engine, used wherever a graph runs collectives
(inside ``tf.function`` and in ``tf.compat.v1`` graphs).

Each op hands its tensors to the engine through hvd-core's C entry point and returns at once; the
engine completes it from its own thread. No thread waits and no Python runs per collective, so
every collective of a step is in flight together (the engine fuses them), and no order in which
TensorFlow runs them can make two ranks wait on each other.

The ops are stateful, as TensorFlow's own collectives are, so that Grappler never evaluates one
while optimising a graph (constant folding did, for a collective of constants: one at a time, on
each rank in its own order). Inside a ``tf.function``, automatic control dependencies would then
run them one after another in program order; the collectives are exempted from that, as
TensorFlow's collectives are (``ASYNC_STATEFUL_OPS``). Join and barrier keep their program order.

The library is loaded on first use: ``ops()`` returns the Python wrappers that
``tf.load_op_library`` generates for it (``hvd_allreduce``, ``hvd_allgather``, ``hvd_broadcast``,
``hvd_reducescatter``, ``hvd_alltoall``, ``hvd_join``, ``hvd_barrier``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import pathlib
from typing import Any

import tensorflow as tf

from horovod.common.framework_api import native_entry

LIBRARY = pathlib.Path(__file__).parent / "_native" / "libhvd_tf_kernels.so"
#: The ops that run concurrently inside a tf.function (the collectives).
COLLECTIVES = ("HvdAllreduce", "HvdAllgather", "HvdBroadcast", "HvdReducescatter", "HvdAlltoall")


@functools.cache
def ops() -> Any:
    """The ops' Python module, with the library loaded and attached to hvd-core's engine entry."""
    if not LIBRARY.exists():
        raise ImportError(
            f"hvd-tensorflow's kernel library is missing ({LIBRARY}): reinstall hvd-tensorflow from a wheel"
        )
    _share_tensorflow_c_api()
    module = tf.load_op_library(str(LIBRARY))
    # The same library TensorFlow has just opened (dlopen gives the loaded copy): hand it the entry.
    attach = ctypes.CDLL(str(LIBRARY)).hvd_tf_attach
    attach.argtypes = [ctypes.c_void_p]
    attach.restype = ctypes.c_int
    if attach(_capsule_address(native_entry())) != 0:
        raise ImportError(
            "hvd-tensorflow's kernels and hvd-core disagree on the engine entry's version: "
            "install matching releases of hvd-core and hvd-tensorflow"
        )
    _run_collectives_concurrently()
    return module


def _share_tensorflow_c_api() -> None:
    """Makes the symbols of TensorFlow's framework library global before the kernels load. The
    kernels call TensorFlow's C API (TF_DeleteTensor...) without linking any TensorFlow library by
    name, so that one build serves every release; TensorFlow 2.16 loads that library privately
    (RTLD_LOCAL), where the kernels' symbols would go unresolved. Opening the loaded copy again with
    RTLD_GLOBAL shares it (glibc promotes the copy in place; nothing is loaded twice)."""
    framework = pathlib.Path(tf.sysconfig.get_lib()) / "libtensorflow_framework.so.2"
    if framework.exists():
        ctypes.CDLL(str(framework), mode=os.RTLD_GLOBAL)


def _run_collectives_concurrently() -> None:
    """Adds the collectives to the op types that tf.function's automatic control dependencies
    leave unordered. TensorFlow has no public way to say so; its own collectives are listed in
    this module set. tests/cases_collectives.py's ``case_any_order`` fails (a stall) if the listing
    stops working and the collectives are chained again."""
    from tensorflow.python.framework import auto_control_deps

    listed = getattr(auto_control_deps, "ASYNC_STATEFUL_OPS", None)
    if not isinstance(listed, frozenset):
        raise ImportError(
            "this TensorFlow has no auto_control_deps.ASYNC_STATEFUL_OPS: hvd-tensorflow cannot run a "
            "tf.function's collectives concurrently (tested with TensorFlow 2.16 to 2.21)"
        )
    auto_control_deps.ASYNC_STATEFUL_OPS = listed | frozenset(COLLECTIVES)


def _capsule_address(capsule: Any) -> int:
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    get_pointer.restype = ctypes.c_void_p
    address: int = get_pointer(capsule, b"horovod.hvd_framework_v1")
    return address
