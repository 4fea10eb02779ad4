"""NCCL communicators: made at a set's first collective, once, with the unique id exchanged through
the engine's store under the set's key prefix; process sets have their own."""

from __future__ import annotations

import ctypes
import threading

import numpy as np

import _abi


def test_the_function_tables(backend) -> None:
    from horovod.backends.nccl import __version__

    table, ext = backend.table, backend.ext
    assert table.abi_version == 1 and table.struct_size == ctypes.sizeof(_abi.Table)
    assert table.name == b"nccl" and table.version.decode() == __version__
    assert table.device_kinds == _abi.DEVICE_CUDA and table.capabilities == _abi.CAP_LOW_PRECISION
    assert not table.send and not table.recv
    assert ext.struct_size == ctypes.sizeof(_abi.Extensions)
    assert ext.allreduce_buffers and ext.async_error and ext.abort
    assert not any((ext.eager_open, ext.eager_send, ext.eager_receive, ext.eager_receive_into))


def test_comm_create_refuses_what_it_cannot_serve(backend, device) -> None:
    store = _abi.Store()
    ranks = (ctypes.c_int32 * 1)(0)
    error = ctypes.create_string_buffer(1024)
    handle = ctypes.c_void_p()

    def create(config: _abi.Config) -> int:
        return backend.table.comm_create(
            ctypes.byref(config), ctypes.byref(store.struct), ctypes.byref(handle), error, len(error)
        )

    cpu = _abi.Config(ctypes.sizeof(_abi.Config), 0, 1, ranks, b"p/", 1000, 1, -1, None, None)
    assert create(cpu) == _abi.UNSUPPORTED and b"CUDA tensors only" in error.value
    # An hvd-core that predates device communicators passes a shorter config.
    old = _abi.Config(_abi.Config.device.offset, 0, 1, ranks, b"p/", 1000, _abi.DEVICE_CUDA, 0, None, None)
    assert create(old) == _abi.INVALID_ARGUMENT and b"predates device communicators" in error.value
    no_table = _abi.Config(ctypes.sizeof(_abi.Config), 0, 1, ranks, b"p/", 1000, _abi.DEVICE_CUDA, 0, None, None)
    assert create(no_table) == _abi.INVALID_ARGUMENT and b"device table" in error.value


def test_made_at_the_first_collective_once_the_id_through_the_store(backend, device, fake) -> None:
    store = _abi.Store()
    created = threading.Barrier(3)

    def member(comm: _abi.Comm) -> None:
        created.wait(30)
        if comm.rank == 0:
            assert not fake.log(), "comm_create alone made an NCCL communicator"
        created.wait(30)
        buf = comm.upload(np.ones(4, np.float32))
        for _ in range(5):
            assert comm.allreduce(buf, buf, 4, "float32", _abi.SUM) == _abi.OK, comm.last_error
        np.testing.assert_array_equal(comm.download(buf, np.ones(4, np.float32)), np.full(4, 3.0**5))

    _abi.run_members(backend, device, 3, member, prefix="job/set-0/", store=store)
    calls = fake.log()
    inits = [c for c in calls if c.startswith("ncclCommInitRankConfig")]
    assert len(inits) == 3 and all("nranks=3 nonblocking" in c for c in inits), inits
    assert sum(c.startswith("ncclCommDestroy") for c in calls) == 3
    assert len(store.data[b"job/set-0/nccl/unique-id"]) == 128 and len(store.data) == 1
    assert fake.live_comms() == 0


def test_process_sets_have_their_own_communicators(backend, device, fake) -> None:
    """Members 0..3 in the world, and {1, 3} in a process set: one NCCL communicator each."""
    store = _abi.Store()
    errors: list[BaseException] = []

    def member(rank: int) -> None:
        stream = device.stream()
        comms = []
        try:
            world = _abi.create(backend, device, store, rank, [0, 1, 2, 3], "w/", 20000, stream)
            comms.append(world)
            pair = None
            if rank in (1, 3):
                pair = _abi.create(backend, device, store, [1, 3].index(rank), [1, 3], "w/set-1/", 20000, stream)
                comms.append(pair)
            buffers = [comm.upload(np.full(2, rank, np.int64)) for comm in comms]
            for _ in range(2):  # the world's and the set's collectives interleaved on one stream
                for comm, buf in zip(comms, buffers, strict=True):
                    assert comm.allreduce(buf, buf, 2, "int64", _abi.SUM) == _abi.OK, comm.last_error
            sums = [int(world.download(buf, np.zeros(2, np.int64))[0]) for buf in buffers]
            assert sums == ([6 * 4] if pair is None else [6 * 4, 4 * 2]), sums
        except BaseException as error:
            errors.append(error)
        finally:
            for comm in comms:
                comm.destroy()
            device.destroy_stream(stream)

    threads = [threading.Thread(target=member, args=(r,), daemon=True) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a member did not finish within 60 s"
    assert not errors, errors
    inits = [c for c in fake.log() if c.startswith("ncclCommInitRankConfig")]
    assert sorted(c.split(" nranks=")[1] for c in inits) == ["2 nonblocking"] * 2 + ["4 nonblocking"] * 4
    assert set(store.data) == {b"w/nccl/unique-id", b"w/set-1/nccl/unique-id"}
