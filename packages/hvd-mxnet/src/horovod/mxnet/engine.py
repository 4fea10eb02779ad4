"""Collectives as operations of MXNet's dependency engine, through MXNet's C API (ctypes).

MXNet runs NDArray operations asynchronously: an operation declares the arrays it reads and
writes, starts when their producers are done, and makes its readers wait until it completes. A
collective joins that order with ``MXEnginePushAsyncND``:

1. the caller pushes an operation reading the inputs and writing the outputs (returns at once);
2. when MXNet has finished the inputs' producers, it calls :func:`_entry` (on the pushing thread or
   an engine thread: FnProperty kAsync, so no engine worker is taken), which submits the collective
   to hvd's engine, with the arrays' memory, and returns;
3. one completer thread per process waits for the hvd operations in submission order (without the
   GIL) and tells MXNet each is done, which releases the readers of its outputs.

Errors reach whoever reads an output: MXNet's completion callback takes a ``const dmlc::Error*``,
which MXNet copies (``std::make_exception_ptr(*error)``) and rethrows as ``MXNetError`` from
``asnumpy()``, ``wait_to_read()`` or ``mx.nd.waitall()``, with our message as its text. dmlc::Error
is a ``std::runtime_error`` with no members of its own, so a ``std::runtime_error`` built with
libstdc++'s exported constructor has its layout. That, and the layout of MXNet's
``CallbackOnComplete`` (three pointers: function, engine, parameter), are ABI facts of MXNet 1.x
on libstdc++ (stable since GCC 5), checked by the tests. (MXNet's ``CustomOp``, the alternative
without C++ ABI facts, costs about 0.4 ms per operation, a Python thread per operation in flight,
and loses the error's message: MXNet prints it and raises a generic "Check failed".)

Under ``MXNET_ENGINE_TYPE=NaiveEngine``, which needs every operation complete when its function
returns, the entry waits for the collective itself.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from horovod.common.framework_api import synchronize
from horovod.mxnet.adapter import _LIB, check_call

__all__ = ["push"]

_EngineAsyncFunc = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_EngineFuncParamDeleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# CallbackOnComplete::callback_: void (*)(Engine*, void* param, const dmlc::Error*)
_CompleteFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


class _CallbackOnComplete(ctypes.Structure):
    """include/mxnet/engine.h: ``class CallbackOnComplete { callback_; engine_; param_; }``."""

    _fields_ = [("callback", ctypes.c_void_p), ("engine", ctypes.c_void_p), ("param", ctypes.c_void_p)]


class _Context(ctypes.Structure):
    """mxnet::Context: ``{DeviceType dev_type; int32_t dev_id;}`` (kCPU = 1)."""

    _fields_ = [("dev_type", ctypes.c_int), ("dev_id", ctypes.c_int32)]


_CPU = _Context(1, 0)
_K_ASYNC = ctypes.c_int(4)  # FnProperty::kAsync: run the entry where its dependencies complete


@functools.cache
def _push_async() -> Any:
    """``MXEnginePushAsyncND``, with a prototype of its own (not an attribute of mxnet.base._LIB,
    whose argtypes MXNet may set). Bound on first use: importing this module looks up no symbol,
    so that the docs build can document horovod.mxnet with MXNet mocked."""
    return ctypes.CFUNCTYPE(
        ctypes.c_int,
        _EngineAsyncFunc,  # async_func
        ctypes.c_void_p,  # func_param
        _EngineFuncParamDeleter,  # deleter
        ctypes.c_void_p,  # ctx_handle
        ctypes.POINTER(ctypes.c_void_p),  # const_nds_handle
        ctypes.c_int,  # num_const_nds
        ctypes.POINTER(ctypes.c_void_p),  # mutable_nds_handle
        ctypes.c_int,  # num_mutable_nds
        ctypes.c_void_p,  # prop_handle
        ctypes.c_int,  # priority
        ctypes.c_char_p,  # opr_name
        ctypes.c_bool,  # wait
    )(("MXEnginePushAsyncND", _LIB))


def _load_error_constructor() -> tuple[Any, Any]:
    libstdcxx = ctypes.CDLL("libstdc++.so.6")  # already loaded by libmxnet.so: the same library
    construct = libstdcxx._ZNSt13runtime_errorC1EPKc  # std::runtime_error::runtime_error(const char*)
    construct.argtypes, construct.restype = [ctypes.c_void_p, ctypes.c_char_p], None
    destroy = libstdcxx._ZNSt13runtime_errorD1Ev  # std::runtime_error::~runtime_error()
    destroy.argtypes, destroy.restype = [ctypes.c_void_p], None
    return construct, destroy


_construct_error, _destroy_error = _load_error_constructor()
_ERROR_BYTES = 64  # sizeof(std::runtime_error) is 16 on LP64 libstdc++; room to spare


def _complete(on_complete: _CallbackOnComplete, message: str | None) -> None:
    """Tells MXNet the operation is done, failed with ``message`` unless it is None."""
    callback = _CompleteFn(on_complete.callback)
    if message is None:
        callback(on_complete.engine, on_complete.param, None)
        return
    error = ctypes.create_string_buffer(_ERROR_BYTES)
    _construct_error(ctypes.addressof(error), message.encode("utf-8", "replace"))
    try:
        callback(on_complete.engine, on_complete.param, ctypes.addressof(error))  # MXNet copies it
    finally:
        _destroy_error(ctypes.addressof(error))


class _Operation:
    """One pushed collective: what submits it, what finishes it, and the arrays it uses."""

    __slots__ = ("arrays", "finish", "label", "start")

    def __init__(
        self, start: Callable[[], int], finish: Callable[[Any], None] | None, arrays: tuple[Any, ...], label: str
    ) -> None:
        self.start = start
        self.finish = finish
        self.arrays = arrays  # held until MXNet deletes the operation
        self.label = label


def _message(error: BaseException, operation: _Operation) -> str:
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text} (hvd {operation.label})"


# Pushed operations by key (the func_param MXNet hands back); the deleter removes them. Also holds the
# ctypes callbacks below alive, which MXNet calls until the last operation is deleted.
_operations: dict[int, _Operation] = {}
_keys = itertools.count(1)
_pending: queue.SimpleQueue[tuple[_Operation, int, _CallbackOnComplete]] = queue.SimpleQueue()
_completer: threading.Thread | None = None
_completer_lock = threading.Lock()
_NAIVE_ENGINE = os.environ.get("MXNET_ENGINE_TYPE") == "NaiveEngine"


def _wait_and_complete(operation: _Operation, handle: int, on_complete: _CallbackOnComplete) -> None:
    message = None
    try:
        result = synchronize(handle)  # waits without the GIL
        if operation.finish is not None:
            operation.finish(result)
    except BaseException as error:  # whatever it is, MXNet must hear of it, or readers hang
        message = _message(error, operation)
    _complete(on_complete, message)


def _complete_in_order() -> None:
    while True:
        _wait_and_complete(*_pending.get())


def _ensure_completer() -> None:
    global _completer
    if _completer is not None:
        return
    with _completer_lock:
        if _completer is None:
            thread = threading.Thread(target=_complete_in_order, name="hvd-mxnet-completer", daemon=True)
            thread.start()
            _completer = thread


def _entry(run_context: int, on_complete_address: int, key: int) -> None:
    # MXNet passes its CallbackOnComplete by address on its own stack: copy it before returning.
    source = _CallbackOnComplete.from_address(on_complete_address)
    on_complete = _CallbackOnComplete(source.callback, source.engine, source.param)
    try:
        operation = _operations[key]
        handle = operation.start()
    except BaseException as error:
        operation = _operations.get(key) or _Operation(lambda: 0, None, (), "collective")
        _complete(on_complete, _message(error, operation))
        return
    if _NAIVE_ENGINE:
        _wait_and_complete(operation, handle, on_complete)
    else:
        _pending.put((operation, handle, on_complete))


def _delete(key: int) -> None:
    _operations.pop(key, None)


# The C function pointers MXNet calls (ctypes' decorators are untyped, hence no decorator syntax).
_entry_pointer = _EngineAsyncFunc(_entry)
_delete_pointer = _EngineFuncParamDeleter(_delete)


def _handles(arrays: Sequence[Any]) -> tuple[Any, int]:
    values = [array.handle.value for array in arrays]
    return (ctypes.c_void_p * max(len(values), 1))(*values), len(values)


def push(
    reads: Sequence[Any],
    writes: Sequence[Any],
    start: Callable[[], int],
    finish: Callable[[Any], None] | None,
    label: str,
    priority: int = 0,
) -> None:
    """Pushes a collective reading ``reads`` and writing ``writes`` (NDArrays) to MXNet's engine.

    ``start()`` runs once the reads' producers are done, and returns the hvd handle of what it
    submitted; ``finish(result)`` (if given) runs on the completer thread with that handle's
    result, before the writes' readers are released. An array written must not also be read
    (an in-place collective only writes it): MXNet would wait for the operation on itself.
    """
    _ensure_completer()
    written = {array.handle.value for array in writes}
    unique_reads = list({array.handle.value: array for array in reads if array.handle.value not in written}.values())
    key = next(_keys)
    _operations[key] = _Operation(start, finish, (*reads, *writes), label)
    const_handles, num_const = _handles(unique_reads)
    mutable_handles, num_mutable = _handles(list({array.handle.value: array for array in writes}.values()))
    status = _push_async()(
        _entry_pointer,
        key,
        _delete_pointer,
        ctypes.addressof(_CPU),
        const_handles,
        num_const,
        mutable_handles,
        num_mutable,
        ctypes.addressof(_K_ASYNC),
        int(priority),
        label.encode("utf-8", "replace")[:200],
        False,
    )
    if status != 0:
        _operations.pop(key, None)
        check_call(status)  # raises MXNet's error
