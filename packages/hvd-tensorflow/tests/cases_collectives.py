"""Every collective of horovod.tensorflow, in eager mode, inside tf.function and in a v1 graph.

Each case builds all of its collectives into one function of tensors (so inside tf.function and
in graph mode they are all in flight in one graph), runs it in the mode given, and checks every
result against a local reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tf_testutil import ALL_DTYPES, assert_close, contribution, reduce_reference, run_in_mode

OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max, "Product": hvd.Product}


def _ops_for(dtype: str) -> list[str]:
    if dtype == "bool":
        return ["Min", "Max", "Product"]
    return list(OPS)


def case_allreduce(mode: str) -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    plan: list[tuple[str, str, str, np.ndarray, dict[str, Any]]] = []
    for dtype in ALL_DTYPES:
        for op in _ops_for(dtype):
            inputs = [contribution(r, (3, 5), dtype, small=op == "Product") for r in range(n)]
            plan.append((f"ar.{dtype}.{op}", dtype, op, inputs[rank], {"reference": reduce_reference(op, inputs)}))
        if dtype != "bool":
            inputs = [contribution(r, (4,), dtype) for r in range(n)]
            for op in ("Sum", "Average"):
                reference = reduce_reference(op, inputs, 2.0, 0.5)
                scales = {"prescale_factor": 2.0, "postscale_factor": 0.5}
                plan.append((f"ar.scaled.{dtype}.{op}", dtype, op, inputs[rank], {"reference": reference, **scales}))

    def build(*tensors: tf.Tensor) -> list[tf.Tensor]:
        outs = []
        for (name, _, op, _, extra), t in zip(plan, tensors, strict=True):
            scales = {k: v for k, v in extra.items() if k != "reference"}
            outs.append(hvd.allreduce(t, op=OPS[op], name=name, **scales))
        return outs

    results = run_in_mode(mode, build, *[p[3] for p in plan])
    for (name, dtype, _, _, extra), result in zip(plan, results, strict=True):
        assert_close(result, extra["reference"].astype(np.float64), dtype, f"{mode} {name}")

    # The default op is Average; a Variable is read; a scalar and an empty tensor are legal.
    def build_misc(x: tf.Tensor) -> list[tf.Tensor]:
        return [
            hvd.allreduce(x, name="ar.default"),
            hvd.allreduce(tf.zeros([0, 4]), op=hvd.Sum, name="ar.empty"),
            hvd.allreduce(tf.reduce_sum(x), op=hvd.Sum, name="ar.scalar"),
        ]

    default, empty, scalar = run_in_mode(mode, build_misc, np.full([2], float(rank), np.float32))
    assert np.allclose(default, (n - 1) / 2), default
    assert empty.shape == (0, 4) and float(scalar) == 2 * sum(range(n))
    variable = tf.Variable([float(rank)] * 2)
    assert np.allclose(hvd.allreduce(variable, op=hvd.Sum, name="ar.variable").numpy(), sum(range(n)))


def case_grouped_and_sparse(mode: str) -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    ints = [contribution(r, (3,), "int32") for r in range(n)]
    floats = [contribution(r, (2, 2), "float64") for r in range(n)]

    def build(a: tf.Tensor, b: tf.Tensor) -> Any:
        grouped = hvd.grouped_allreduce([a, b], op=hvd.Sum, name="grouped")
        averaged = hvd.grouped_allreduce([b], name="grouped.avg")
        slices = tf.IndexedSlices(tf.cast(tf.reshape(b, [2, 2]), tf.float32), tf.constant([rank, n]), [n + 1, 2])
        sparse = hvd.allreduce(slices, op=hvd.Average, name="sparse")
        dense = hvd.allreduce(tf.convert_to_tensor(slices), op=hvd.Average, name="sparse.dense")
        return grouped, averaged, tf.convert_to_tensor(sparse), dense

    grouped, averaged, sparse, dense = run_in_mode(mode, build, ints[rank], floats[rank])
    assert_close(grouped[0], reduce_reference("Sum", ints), "int32", f"{mode} grouped int")
    assert_close(grouped[1], reduce_reference("Sum", floats), "float64", f"{mode} grouped float")
    assert_close(averaged[0], reduce_reference("Average", floats), "float64", f"{mode} grouped average")
    assert np.allclose(sparse, dense), f"{mode} IndexedSlices allreduce: {sparse} vs dense {dense}"


def case_allgather_broadcast(mode: str) -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    rows = [r + 1 for r in range(n)]  # ranks contribute different first dimensions
    for dtype in ALL_DTYPES:
        inputs = [contribution(r, (rows[r], 2), dtype) for r in range(n)]
        root = n - 1

        gathered, grouped, broadcast = run_in_mode(mode, _gather_and_broadcast(dtype, root), inputs[rank])
        assert_close(gathered, np.concatenate(inputs), dtype, f"{mode} allgather {dtype}")
        assert_close(grouped[1], np.concatenate([x[:1] for x in inputs]), dtype, f"{mode} grouped allgather")
        assert_close(broadcast, inputs[root][:1], dtype, f"{mode} broadcast {dtype}")


def _gather_and_broadcast(dtype: str, root: int) -> Any:
    """The collectives of case_allgather_broadcast for one dtype, named after it."""

    def build(x: tf.Tensor) -> Any:
        gathered = hvd.allgather(x, name=f"ag.{dtype}")
        grouped = hvd.grouped_allgather([x, x[:1]], name=f"gag.{dtype}")
        return gathered, grouped, hvd.broadcast(x[:1], root_rank=root, name=f"bc.{dtype}")

    return build


def case_alltoall_reducescatter(mode: str) -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    # Rank r sends (r + j + 1) rows to rank j; each row holds (sender, receiver).
    splits = [[r + j + 1 for j in range(n)] for r in range(n)]
    sent = np.concatenate([np.full((splits[rank][j], 2), [rank, j], np.float32) for j in range(n)])
    rows = 2 * n + 1  # reducescatter of an uneven first dimension
    inputs = [contribution(r, (rows, 3), "float32") for r in range(n)]

    def build(x: tf.Tensor, y: tf.Tensor) -> Any:
        received, received_splits = hvd.alltoall(x, splits=tf.constant(splits[rank]), name="a2a")
        even = hvd.alltoall(tf.reshape(tf.range(2 * n, dtype=tf.int64), [2 * n, 1]), name="a2a.even")
        scattered = hvd.reducescatter(y, op=hvd.Sum, name="rs")
        averaged = hvd.grouped_reducescatter([y, y * 2], "", hvd.Compression.none, hvd.Average, name="grs")
        return received, received_splits, even, scattered, averaged

    received, received_splits, even, scattered, averaged = run_in_mode(mode, build, sent, inputs[rank])
    expected_splits = [splits[r][rank] for r in range(n)]
    assert list(received_splits) == expected_splits, (mode, received_splits, expected_splits)
    expected = np.concatenate([np.full((splits[r][rank], 2), [r, rank], np.float32) for r in range(n)])
    assert np.array_equal(received, expected), (mode, received, expected)
    assert list(np.asarray(even).ravel()) == [2 * rank, 2 * rank + 1] * n, (mode, even)
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    start = sum(counts[:rank])
    total = reduce_reference("Sum", inputs)
    assert_close(scattered, total[start : start + counts[rank]], "float32", f"{mode} reducescatter")
    mean = reduce_reference("Average", inputs)
    assert_close(averaged[1], 2 * mean[start : start + counts[rank]], "float32", f"{mode} grouped reducescatter")


def case_variables_and_queries(mode: str) -> None:
    """broadcast_, broadcast_variables, the graph-time queries, barrier and join."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    root = 1 % n
    if mode == "graph":
        with tf.Graph().as_default():
            a = tf.compat.v1.Variable([float(rank)] * 3)
            b = tf.compat.v1.Variable(rank, dtype=tf.int64)
            bcast = hvd.broadcast_global_variables(root)
            queries = [hvd.size_op(), hvd.rank_op("rank"), hvd.local_size_op(), hvd.local_rank_op()]
            included = hvd.process_set_included_op()
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                session.run(bcast)
                values = session.run([a, b])
                assert session.run(queries) == [n, rank, n, rank] and session.run(included) == 1
                session.run(hvd.barrier())
        assert values[0].tolist() == [float(root)] * 3 and int(values[1]) == root, values
        return
    a = tf.Variable([float(rank)] * 3)
    b = tf.Variable(rank, dtype=tf.int64)
    c = tf.Variable(tf.fill([2], float(rank)))

    def run() -> Any:
        hvd.broadcast_variables([a, b], root_rank=root)
        new_c = hvd.broadcast_([c], root_rank=0)
        return new_c, [hvd.size_op(), hvd.rank_op(), hvd.local_size_op(), hvd.local_rank_op()]

    new_c, queries = tf.function(run)() if mode == "function" else run()
    assert a.numpy().tolist() == [float(root)] * 3 and int(b.numpy()) == root
    assert c.numpy().tolist() == [0.0, 0.0] and np.asarray(new_c[0]).tolist() == [0.0, 0.0]
    assert [int(q) for q in queries] == [n, rank, n, rank]
    hvd.barrier()
    with pytest_raises(RuntimeError, "eager"):
        hvd.broadcast_global_variables(0)


def case_join(mode: str) -> int:
    """The last rank keeps reducing after the others joined: they contribute zeros to it."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    if rank == n - 1:
        extra = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="join.extra")
        assert extra.numpy().tolist() == [1.0, 1.0], extra
    if mode == "function":
        return int(tf.function(hvd.join)())
    return int(hvd.join())


def case_process_sets() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    odd = hvd.add_process_set([r for r in range(n) if r % 2 == 1])
    if odd.included():
        members = [r for r in range(n) if r % 2 == 1]
        result = hvd.allreduce(tf.constant([float(rank)]), op=hvd.Sum, process_set=odd, name="ps.sum")
        assert result.numpy().tolist() == [float(sum(members))]
        fn_result = tf.function(lambda: hvd.allgather(tf.constant([rank]), process_set=odd, name="ps.ag"))()
        assert fn_result.numpy().tolist() == members
        ps_id = odd.process_set_id
        assert int(hvd.size_op(process_set_id=ps_id)) == len(members)
        assert int(hvd.process_set_included_op(process_set_id=ps_id)) == 1
    else:
        assert int(hvd.process_set_included_op(process_set_id=odd.process_set_id)) == 0
    hvd.barrier()
    hvd.remove_process_set(odd)


def case_objects() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    assert hvd.broadcast_object({"from": rank, "fn": lambda x: x + rank}, root_rank=n - 1)["from"] == n - 1
    assert hvd.allgather_object(("rank", rank)) == [("rank", r) for r in range(n)]
    broadcast = hvd.broadcast_object_fn(root_rank=0)
    assert [broadcast(rank * i) for i in range(3)] == [0, 0, 0]


def case_any_order(mode: str) -> None:
    """Each rank builds the same 40 collectives in another order (reversed on odd ranks): in a graph
    nothing TensorFlow's executor does may make two ranks wait on each other. Inside a tf.function
    this also shows they are in flight together: run one after another in program order, opposite
    orders would deadlock, and the stall shutdown would fail the case."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    count = 40
    order = list(range(count)) if rank % 2 == 0 else list(reversed(range(count)))

    def build(x: tf.Tensor) -> list[tf.Tensor]:
        outs: dict[int, tf.Tensor] = {}
        for i in order:
            shifted = x + float(i)
            if i % 4 == 0:
                outs[i] = hvd.allgather(shifted, name=f"order.{i}")
            else:
                outs[i] = hvd.allreduce(shifted, op=hvd.Sum, name=f"order.{i}")
        return [outs[i] for i in range(count)]

    results = run_in_mode(mode, build, np.full([2], float(rank), np.float32))
    for i, result in enumerate(results):
        if i % 4 == 0:
            expected = np.concatenate([np.full([2], r + i, np.float64) for r in range(n)])
        else:
            expected = np.full([2], sum(range(n)) + n * i, np.float64)
        assert_close(result, expected, "float32", f"{mode} order.{i}")


def case_kernels_follow_shutdown_and_init() -> None:
    """A traced collective reaches whichever engine init() started last; between shutdown() and
    init() it raises, saying Horovod is not running, instead of reaching a stopped engine."""
    hvd.init()
    n = hvd.size()
    reduce_fn = tf.function(lambda x: hvd.allreduce(x, op=hvd.Sum, name="restart"))
    x = tf.ones([2])
    assert reduce_fn(x).numpy().tolist() == [float(n)] * 2
    hvd.barrier()
    hvd.shutdown()
    try:
        reduce_fn(x)
    except tf.errors.AbortedError as error:
        assert "not running" in str(error) and "hvd.init()" in str(error), error
    else:
        raise AssertionError("a collective after shutdown() did not raise")
    hvd.init()
    assert reduce_fn(x).numpy().tolist() == [float(n)] * 2


def case_mismatches(mode: str) -> None:
    """A disagreement raises on every rank (eagerly hvd's error; from a graph TensorFlow's OpError
    carrying hvd's message), naming the tensor; the engine stays healthy."""
    from tf_testutil import expected_error_types

    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    odd = rank == n - 1
    cases = {
        "mm.shape": (lambda: np.ones(3 if odd else 2, np.float32), "shapes", hvd.allreduce),
        "mm.dtype": (lambda: np.ones(2, np.float64 if odd else np.float32), "data types", hvd.allreduce),
        "mm.rs": (lambda: np.ones((n, 3 if odd else 2), np.float32), "shapes", hvd.reducescatter),
        "mm.ag": (lambda: np.ones((1, 3 if odd else 2), np.float32), "shapes", hvd.allgather),
    }
    for name, (make, fragment, op) in cases.items():
        try:
            run_in_mode(mode, lambda x, n_=name, op_=op: op_(x, name=n_), make())
        except expected_error_types() as error:
            message = str(error)
            assert name in message and fragment in message, message
            # What Horovod's ops raise, in every mode; eagerly also hvd's own error.
            assert isinstance(error, tf.errors.FailedPreconditionError), (mode, name, type(error))
            assert mode != "eager" or isinstance(error, hvd.CollectiveMismatchError), type(error)
        else:
            raise AssertionError(f"{mode}: {name} did not raise")
    # A member of a group refused on submission (a scalar cannot be scattered) raises, and its
    # partner, submitted by another op of the same graph, runs instead of waiting for it forever.
    try:
        run_in_mode(
            mode,
            lambda x, s: hvd.grouped_reducescatter([x, s], op=hvd.Sum, name="mm.group"),
            np.zeros((n, 1), np.float32),
            np.array(float(rank), np.float32),
        )
    except expected_error_types() as error:
        message = str(error)
        assert "scalar" in message or "rank 1" in message, message
    else:
        raise AssertionError(f"{mode}: a scalar in grouped_reducescatter did not raise")
    # Float splits would be truncated: refused (at graph construction in a graph), naming the dtype.
    try:
        run_in_mode(mode, lambda x: hvd.alltoall(x, splits=[1.0] * n, name="mm.splits"), np.ones((n, 1), np.float32))
    except ValueError as error:
        assert "splits must be integers" in str(error) and "float32" in str(error), error
    else:
        raise AssertionError(f"{mode}: float splits did not raise")
    assert run_in_mode("eager", lambda x: hvd.allreduce(x, op=hvd.Sum, name="mm.after"), np.ones(1, np.float32))[
        0
    ] == float(n)


class pytest_raises:
    """``pytest.raises`` without importing pytest in the ranks."""

    def __init__(self, kind: type[BaseException], fragment: str) -> None:
        self.kind, self.fragment = kind, fragment

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
        if kind is None:
            raise AssertionError(f"expected {self.kind.__name__} mentioning {self.fragment!r}")
        return issubclass(kind, self.kind) and self.fragment in str(error)


def case_basics_and_timeline() -> None:
    """The job questions Horovod's TF users ask, and a timeline that records a named allreduce."""
    import json
    import os
    import tempfile

    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    assert (hvd.local_size(), hvd.local_rank()) == (n, rank), (hvd.local_size(), hvd.local_rank())
    assert (hvd.cross_size(), hvd.cross_rank(), hvd.is_homogeneous()) == (1, 0, True)
    assert hvd.gloo_built() and hvd.gloo_enabled() and not hvd.nccl_built() and not hvd.cuda_built()
    assert isinstance(hvd.mpi_threads_supported(), bool) and not hvd.mpi_enabled()
    with tempfile.TemporaryDirectory() as directory:  # rank 0 writes the timeline, into its own
        path = os.path.join(directory, "timeline.json")
        hvd.start_timeline(path)
        hvd.allreduce(tf.ones([4]), name="timeline.tensor")
        hvd.stop_timeline()
        if rank == 0:
            with open(path) as f:
                events = json.load(f)
            assert any(event.get("args", {}).get("name") == "timeline.tensor" for event in events), events[:5]


def case_adasum(mode: str) -> None:
    """allreduce and grouped_allreduce with op=Adasum, against hvd-core's numpy reference; and
    DistributedGradientTape(op=Adasum), whose gradients are the Adasum of the ranks' gradients."""
    from horovod.common.testing.adasum import assert_close, expected

    hvd.init()
    n, rank = hvd.size(), hvd.rank()

    def rank_vector(r: int, size: int, seed: int, dtype: Any) -> np.ndarray:
        return np.random.default_rng(100 * seed + r).standard_normal(size).astype(dtype)

    dtypes = (np.float16, np.float32, np.float64)
    inputs = {dt: [rank_vector(r, 301, i, dt) for r in range(n)] for i, dt in enumerate(dtypes)}
    grouped = [[rank_vector(r, size, 10 + size, np.float32) for r in range(n)] for size in (3, 1000)]
    x_all = [rank_vector(r, 6, 99, np.float32).reshape(2, 3) for r in range(n)]

    def build(*tensors: tf.Tensor) -> list[Any]:
        singles = [hvd.allreduce(t, op=hvd.Adasum, name=f"ada.{t.dtype.name}") for t in tensors[:3]]
        group = hvd.grouped_allreduce(list(tensors[3:5]), op=hvd.Adasum, name="ada.group")
        w = tf.ones((3,), tf.float32)
        with tf.GradientTape() as tape:
            tape.watch(w)
            loss = tf.reduce_sum(tf.linalg.matvec(tensors[5], w) ** 2)
        [gradient] = hvd.DistributedGradientTape(tape, op=hvd.Adasum).gradient(loss, [w])
        return [*singles, *group, gradient]

    mine = [inputs[dt][rank] for dt in dtypes] + [each[rank] for each in grouped] + [x_all[rank]]
    results = run_in_mode(mode, build, *mine)
    for dt, got in zip(dtypes, results[:3], strict=True):
        assert_close(got, expected(inputs[dt]), dt)
    for each, got in zip(grouped, results[3:5], strict=True):
        assert_close(got, expected(each), np.float32)
    local_gradients = [2 * x.T @ (x @ np.ones(3, np.float32)) for x in x_all]  # d/dw |x w|^2
    assert_close(results[5], expected(local_gradients), np.float32)


def case_mpi_ops(mode: str) -> None:
    """Horovod's horovod.tensorflow.mpi_ops as scripts and Keras layers written for Horovod use it:
    the job's questions, the ops, and its raw collectives (Sum by default, Horovod's order)."""
    from horovod.tensorflow import mpi_ops

    mpi_ops.init()
    n, rank = mpi_ops.size(), mpi_ops.rank()
    assert mpi_ops.is_initialized() and mpi_ops.local_size() == n and mpi_ops.cross_size() == 1
    assert mpi_ops.gloo_enabled() and mpi_ops.gloo_built() and not mpi_ops.ddl_built()
    assert {mpi_ops.Adasum, mpi_ops.Min, mpi_ops.Max, mpi_ops.Product} == {hvd.Adasum, hvd.Min, hvd.Max, hvd.Product}
    assert mpi_ops.global_process_set is hvd.global_process_set
    rows = 2 * n
    inputs = [contribution(r, (rows, 2), "float32") for r in range(n)]

    def build(x: tf.Tensor) -> Any:
        total = mpi_ops._allreduce(x, name="mo.ar")
        grouped = mpi_ops._grouped_allreduce([x, 2 * x], name="mo.gar", op=mpi_ops.Average)
        gathered = mpi_ops.allgather(x, name="mo.ag")
        broadcast = mpi_ops.broadcast(x, 0, name="mo.bc")
        scattered = mpi_ops.reducescatter(x, "mo.rs")
        grouped_scattered = mpi_ops.grouped_reducescatter([x], "mo.grs", mpi_ops.Average)
        return total, grouped, gathered, broadcast, scattered, grouped_scattered

    total, grouped, gathered, broadcast, scattered, grouped_scattered = run_in_mode(mode, build, inputs[rank])
    summed, mean = reduce_reference("Sum", inputs), reduce_reference("Average", inputs)
    assert_close(total, summed, "float32", f"{mode} mpi_ops._allreduce (Sum by default)")
    assert_close(grouped[1], 2 * mean, "float32", f"{mode} mpi_ops._grouped_allreduce")
    assert_close(gathered, np.concatenate(inputs), "float32", f"{mode} mpi_ops.allgather")
    assert_close(broadcast, inputs[0], "float32", f"{mode} mpi_ops.broadcast")
    mine = slice(2 * rank, 2 * rank + 2)
    assert_close(scattered, summed[mine], "float32", f"{mode} mpi_ops.reducescatter (Sum by default)")
    assert_close(grouped_scattered[0], mean[mine], "float32", f"{mode} mpi_ops.grouped_reducescatter")
