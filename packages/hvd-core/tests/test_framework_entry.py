"""The C entry point for native framework code (horovod/hvd_framework.h), called as a framework's
kernel library calls it: through the capsule's table, from ctypes, with a C completion callback.

One rank in this process (the process's own init(), which publishes its engine to the entry);
hvd-tensorflow's tests drive the same entry with 2 and 3 ranks through its TensorFlow kernels.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common import _core
from horovod.common.framework_api import DTYPE_CODES, native_entry

OK, INVALID_ARGUMENT, MISMATCH, ABORTED = 0, 1, 2, 3
ALLREDUCE, ALLGATHER, BROADCAST, ALLTOALL, REDUCESCATTER, BARRIER, JOIN = range(7)


class Request(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("process_set_id", ctypes.c_int32),
        ("dtype", ctypes.c_uint32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("input", ctypes.c_void_p),
        ("output", ctypes.c_void_p),
        ("reduce_op", ctypes.c_uint32),
        ("root_rank", ctypes.c_int32),
        ("prescale", ctypes.c_double),
        ("postscale", ctypes.c_double),
        ("splits", ctypes.POINTER(ctypes.c_int64)),
        ("num_splits", ctypes.c_int32),
        ("group_id", ctypes.c_int64),
        ("group_size", ctypes.c_int32),
        ("device_kind", ctypes.c_uint32),
    ]


class Result(ctypes.Structure):
    _fields_ = [
        ("status", ctypes.c_uint32),
        ("message", ctypes.c_char_p),
        ("output", ctypes.c_void_p),
        ("output_ndim", ctypes.c_int32),
        ("output_shape", ctypes.POINTER(ctypes.c_int64)),
        ("received_splits", ctypes.POINTER(ctypes.c_int64)),
        ("num_received_splits", ctypes.c_int32),
        ("value", ctypes.c_int64),
    ]


DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(Result))
SUBMIT = ctypes.CFUNCTYPE(
    ctypes.c_uint32, ctypes.POINTER(Request), DONE, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
)
SET_QUERY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)


class Table(ctypes.Structure):
    _fields_ = [
        ("api_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("submit", SUBMIT),
        ("process_set_rank", SET_QUERY),
        ("process_set_size", SET_QUERY),
    ]


def _table() -> Table:
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    get_pointer.restype = ctypes.c_void_p
    return Table.from_address(get_pointer(native_entry(), b"horovod.hvd_framework_v1"))


class Completion:
    """What the engine reported to one submission's callback (copied while the result is valid)."""

    def __init__(self) -> None:
        self.calls = 0
        self.done = threading.Event()
        self.thread = ""
        self.status = -1
        self.message = ""
        self.output: np.ndarray | None = None
        self.received_splits: list[int] = []
        self.value = -1
        self.dtype = np.dtype(np.float32)

    def record(self, result: Any) -> None:
        r = result.contents
        self.calls += 1
        self.thread = threading.current_thread().name
        self.status, self.message, self.value = r.status, r.message.decode(), r.value
        if r.output:
            shape = [r.output_shape[d] for d in range(r.output_ndim)]
            count = int(np.prod(shape)) if shape else 1
            raw = ctypes.string_at(r.output, count * self.dtype.itemsize)
            self.output = np.frombuffer(raw, self.dtype).reshape(shape).copy()
        self.received_splits = [r.received_splits[i] for i in range(r.num_received_splits)]
        self.done.set()


class Entry:
    """Submits through the table, keeping every buffer and callback alive until completion."""

    def __init__(self) -> None:
        self.table = _table()
        self._keep: list[Any] = []

    def submit(
        self, kind: int, name: str, array: np.ndarray | None = None, **fields: Any
    ) -> tuple[int, str, Completion]:
        completion = Completion()
        request = Request(
            op=kind, name=name.encode(), group_id=-1, device_kind=_core.DEVICE_CPU, prescale=1.0, postscale=1.0
        )
        if array is not None:
            completion.dtype = array.dtype
            shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
            request.dtype = DTYPE_CODES[array.dtype.name]
            request.ndim, request.shape = array.ndim, shape
            request.input = array.ctypes.data
            self._keep += [array, shape]
        splits = fields.pop("splits", None)
        if splits is not None:
            values = (ctypes.c_int64 * len(splits))(*splits)
            request.splits, request.num_splits = values, len(splits)
            self._keep.append(values)
        output = fields.pop("output", None)
        if output is not None:
            request.output = output.ctypes.data
            self._keep.append(output)
        for key, value in fields.items():
            setattr(request, key, value)
        callback = DONE(lambda _user, result: completion.record(result))
        self._keep.append(callback)
        error = ctypes.create_string_buffer(512)
        status = self.table.submit(ctypes.byref(request), callback, None, error, len(error))
        return status, error.value.decode(), completion


@pytest.fixture
def entry() -> Iterator[Entry]:
    hvd.init()
    yield Entry()
    hvd.shutdown()


def _completed(c: Completion) -> Completion:
    assert c.done.wait(30), "the completion callback was not called"
    return c


def test_the_table_names_its_version_and_size() -> None:
    table = _table()
    assert table.api_version == 1 and table.struct_size == ctypes.sizeof(Table)


def test_an_allreduce_writes_the_callers_output_and_completes_once_on_the_engine_thread(entry: Entry) -> None:
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.zeros_like(data)
    status, error, c = entry.submit(ALLREDUCE, "ar", data, output=out, reduce_op=hvd.Sum, prescale=2.0, postscale=0.5)
    assert (status, error) == (OK, "")
    _completed(c)
    assert c.status == OK and c.message == "" and c.output is None
    assert out.tolist() == data.tolist()  # one rank: the sum of one contribution, scaled by 2 x 0.5
    assert c.thread != threading.current_thread().name
    in_place = np.full(4, 3.0, np.float64)
    status, _, c = entry.submit(ALLREDUCE, "ar.inplace", in_place, output=in_place, reduce_op=hvd.Sum, prescale=2.0)
    assert status == OK and _completed(c).status == OK and in_place.tolist() == [6.0] * 4
    assert c.calls == 1


def test_engine_allocated_results_are_handed_to_the_callback(entry: Entry) -> None:
    rows = np.arange(6, dtype=np.int32).reshape(3, 2)
    c = _completed(entry.submit(ALLGATHER, "ag", rows)[2])
    assert c.status == OK and c.output is not None and c.output.tolist() == rows.tolist()
    c = _completed(entry.submit(ALLTOALL, "a2a", np.arange(4, dtype=np.int64), splits=[4])[2])
    assert c.status == OK and c.output is not None and c.output.tolist() == [0, 1, 2, 3]
    assert c.received_splits == [4]
    c = _completed(entry.submit(REDUCESCATTER, "rs", np.ones((2, 2), np.float32), reduce_op=hvd.Sum)[2])
    assert c.status == OK and c.output is not None and c.output.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    c = _completed(entry.submit(BROADCAST, "bc", np.ones(2, np.uint8), output=np.zeros(2, np.uint8), root_rank=0)[2])
    assert c.status == OK


def test_join_reports_the_last_rank_and_barrier_completes(entry: Entry) -> None:
    assert _completed(entry.submit(JOIN, "join")[2]).value == 0
    assert _completed(entry.submit(BARRIER, "barrier")[2]).status == OK
    assert entry.table.process_set_rank(0) == 0 and entry.table.process_set_size(0) == 1
    assert entry.table.process_set_size(7) == -1  # no such set


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"dtype": 99}, "unknown dtype"),
        ({"reduce_op": 42}, "unknown reduce op 42"),
        ({"op": 99}, "unknown operation 99"),
        ({"ndim": -1}, "a shape of -1 dimensions"),
        ({"device_kind": _core.DEVICE_CUDA}, "only host memory"),
        ({"process_set_id": 5}, "process set 5 does not exist"),
    ],
)
def test_a_refused_request_says_why_and_never_calls_back(entry: Entry, fields: dict, fragment: str) -> None:
    data = np.ones(2, np.float32)
    request = {"reduce_op": hvd.Sum, **fields}
    kind = request.pop("op", ALLREDUCE)
    status, error, c = entry.submit(kind, "bad", data, output=np.zeros_like(data), **request)
    assert status == INVALID_ARGUMENT and fragment in error, error
    assert not c.done.wait(0.2) and c.calls == 0


def test_a_group_completes_together_and_a_name_in_flight_is_refused(entry: Entry) -> None:
    # The first member of a group of two stays in flight until the second is submitted.
    data = [np.full(2, float(i), np.float32) for i in range(2)]
    outs = [np.zeros(2, np.float32) for _ in range(2)]
    group = {"reduce_op": hvd.Sum, "group_id": 7, "group_size": 2}
    status, _, first = entry.submit(ALLREDUCE, "grp.0", data[0], output=outs[0], **group)
    assert status == OK and not first.done.wait(0.3)
    status, error, again = entry.submit(ALLREDUCE, "grp.0", data[0], output=np.zeros(2, np.float32), **group)
    assert status == INVALID_ARGUMENT and "'grp.0'" in error and "already in progress" in error, error
    status, _, second = entry.submit(ALLREDUCE, "grp.1", data[1], output=outs[1], **group)
    assert status == OK and _completed(first).status == OK and _completed(second).status == OK
    assert [o.tolist() for o in outs] == [[0.0, 0.0], [1.0, 1.0]] and again.calls == 0


@pytest.mark.parametrize(
    ("refused", "fragment"),
    [
        ({"dtype": 99}, "unknown dtype code"),  # refused by the native entry itself
        ({"ndim": 0, "op": REDUCESCATTER}, "got a scalar"),  # refused by the engine's checks
    ],
)
def test_a_refused_group_member_lets_the_rest_of_its_group_run(entry: Entry, refused: dict, fragment: str) -> None:
    # Each member is a kernel of its own (a graph's ops): the first is in flight when the second is
    # refused, and must complete, not wait for it forever.
    group = {"reduce_op": hvd.Sum, "group_id": 11, "group_size": 2}
    kind = refused.pop("op", ALLREDUCE)
    data = np.ones((2, 1), np.float32)
    output = np.zeros_like(data) if kind == ALLREDUCE else None
    status, _, first = entry.submit(kind, "part.0", data, output=output, **group)
    assert status == OK
    status, error, second = entry.submit(kind, "part.1", data, output=output, **group, **refused)
    assert status == INVALID_ARGUMENT and fragment in error, error
    assert _completed(first).status == OK and second.calls == 0
    # Its names are free again.
    status, _, again = entry.submit(kind, "part.1", data, output=np.zeros_like(data) if output is not None else None)
    assert status == OK and _completed(again).status == OK


def test_without_a_running_instance_submissions_are_refused_as_aborted() -> None:
    entry = Entry()
    data = np.ones(1, np.float32)
    status, error, _ = entry.submit(ALLREDUCE, "early", data, output=np.zeros_like(data), reduce_op=hvd.Sum)
    assert status == ABORTED and "not running" in error and "hvd.init()" in error
    hvd.init()
    assert entry.table.process_set_size(0) == 1
    hvd.shutdown()
    status, error, _ = entry.submit(ALLREDUCE, "late", data, output=np.zeros_like(data), reduce_op=hvd.Sum)
    assert status == ABORTED and "not running" in error
    assert entry.table.process_set_rank(0) == -1
