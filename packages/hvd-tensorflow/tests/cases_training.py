"""Gradients and training: each collective's gradient (Horovod's definitions), DistributedGradientTape
and DistributedOptimizer training against single-process training on the combined batch, and the
layers and options around them.

Every rank can compute every rank's data, so each case checks against a reference it computes alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from tf_testutil import expected_error_types, run_in_mode

# --- gradients ----------------------------------------------------------------------------------------


def _weighted_gradient(mode: str, forward: Any, x: tf.Tensor, weight: float) -> tf.Tensor:
    """d/dx of sum(forward(x) * weight): tf.GradientTape eagerly and in tf.function, tf.gradients
    in a tf.compat.v1 graph (both must see hvd's gradients)."""
    if mode == "graph":
        return tf.gradients(tf.reduce_sum(forward(x) * weight), x)[0]
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(forward(x) * weight)
    return tape.gradient(loss, x)


def case_gradients(mode: str) -> None:
    """Rank r weighs each collective's output by r + 1, so the incoming gradient differs per rank
    and the expected input gradient follows from Horovod's definition of each collective's gradient."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    weight = float(rank + 1)
    weights = np.arange(1, n + 1, dtype=np.float64)
    root = n - 1
    rows = 2 * n + 1
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]

    def build(x: tf.Tensor, gathered_in: tf.Tensor, scattered_in: tf.Tensor, a2a_in: tf.Tensor) -> dict[str, Any]:
        def grad(forward: Any, inp: tf.Tensor) -> tf.Tensor:
            return _weighted_gradient(mode, forward, inp, weight)

        def grouped(t: tf.Tensor) -> tf.Tensor:
            first, second = hvd.grouped_allreduce([t, t * 2], op=hvd.Sum, name="g.grouped")
            return first + second

        return {
            "sum": grad(lambda t: hvd.allreduce(t, op=hvd.Sum, name="g.sum"), x),
            "average": grad(lambda t: hvd.allreduce(t, op=hvd.Average, name="g.avg"), x),
            "scaled": grad(lambda t: hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0, name="g.scaled"), x),
            "grouped": grad(grouped, x),
            "allgather": grad(lambda t: hvd.allgather(t, name="g.ag"), gathered_in),
            "broadcast": grad(lambda t: hvd.broadcast(t, root_rank=root, name="g.bc"), x),
            "rs_sum": grad(lambda t: hvd.reducescatter(t, op=hvd.Sum, name="g.rs.sum"), scattered_in),
            "rs_avg": grad(lambda t: hvd.reducescatter(t, op=hvd.Average, name="g.rs.avg"), scattered_in),
            "alltoall": grad(lambda t: hvd.alltoall(t, name="g.a2a"), a2a_in),
        }

    x = np.ones((3, 2), np.float32)
    gathered_in = np.ones((rank + 1, 2), np.float32)
    scattered_in = np.ones((rows, 2), np.float32)
    a2a_in = np.ones((2 * n, 1), np.float32)
    got = run_in_mode(mode, build, x, gathered_in, scattered_in, a2a_in)
    per_row_owner = np.repeat(weights, counts)[:, None] * np.ones((rows, 2))
    expected = {
        "sum": np.full((3, 2), weights.sum()),
        "average": np.full((3, 2), weights.mean()),
        "scaled": np.full((3, 2), 2.0 * weights.sum()),
        "grouped": np.full((3, 2), 3.0 * weights.sum()),
        "allgather": np.full((rank + 1, 2), weights.mean()),
        "broadcast": np.full((3, 2), weights.mean() if rank == root else 0.0),
        "rs_sum": per_row_owner * n,
        "rs_avg": per_row_owner,
        "alltoall": np.repeat(weights, 2)[:, None],
    }
    for key, value in expected.items():
        actual = np.asarray(got[key], np.float64)
        assert actual.shape == value.shape and np.allclose(actual, value), f"{mode} {key}: {actual} != {value}"


# --- training -----------------------------------------------------------------------------------------

FEATURES, PER_RANK, STEPS, LR = 4, 6, 4, 0.1


def _data(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A regression problem whose combined batch is n * PER_RANK rows; rank r takes rows r::n."""
    generator = np.random.default_rng(7)
    x = generator.normal(size=(n * PER_RANK, FEATURES)).astype(np.float32)
    y = (x @ np.arange(1, FEATURES + 1, dtype=np.float32)[:, None] + 0.5).astype(np.float32)
    return x, y


def _gradient(w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The gradient of the mean squared error of x @ w + b against y, in float64."""
    error = x @ w + b - y
    return 2.0 / len(x) * x.T @ error, 2.0 / len(x) * error.sum(0)


def _reference_sgd(w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray, steps: int) -> tuple[Any, Any]:
    """Plain gradient descent on mean squared error over the whole batch, in float64."""
    w, b = w.astype(np.float64), b.astype(np.float64)
    for _ in range(steps):
        grad_w, grad_b = _gradient(w, b, x, y)
        w, b = w - LR * grad_w, b - LR * grad_b
    return w, b


def case_tape_training(mode: str) -> None:
    """DistributedGradientTape over shards equals one process training on the combined batch."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    x, y = _data(n)
    w = tf.Variable(np.full((FEATURES, 1), 0.1 * (rank + 1), np.float32))  # ranks start apart
    b = tf.Variable(np.zeros(1, np.float32))
    hvd.broadcast_variables([w, b], root_rank=0)
    start = (w.numpy(), b.numpy())
    local_x, local_y = tf.constant(x[rank::n]), tf.constant(y[rank::n])

    def step() -> None:
        with tf.GradientTape() as plain:
            loss = tf.reduce_mean(tf.square(tf.matmul(local_x, w) + b - local_y))
        tape = hvd.DistributedGradientTape(plain)
        for grad, var in zip(tape.gradient(loss, [w, b]), [w, b], strict=True):
            var.assign_sub(LR * grad)

    run = tf.function(step) if mode == "function" else step
    for _ in range(STEPS):
        run()
    expected_w, expected_b = _reference_sgd(*start, x, y, STEPS)
    assert np.allclose(w.numpy(), expected_w, atol=1e-4), (mode, w.numpy().ravel(), expected_w.ravel())
    assert np.allclose(b.numpy(), expected_b, atol=1e-4), (mode, b.numpy(), expected_b)


def case_keras_model_training(mode: str) -> None:
    """Horovod's TF2 recipe on a Keras 3 model: broadcast model and optimizer variables after the
    first step, DistributedGradientTape in the step; every rank ends with the same weights, those of
    training on the combined batch from rank 0's initial weights."""
    import keras

    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    x, y = _data(n)
    keras.utils.set_random_seed(100 + rank)  # different initial weights on every rank
    layer = keras.layers.Dense(1)
    model = keras.Sequential([keras.Input((FEATURES,)), layer])
    optimizer = keras.optimizers.SGD(LR)
    initial = hvd.allgather_object([v.numpy().astype(np.float64) for v in model.variables])
    local_x, local_y = tf.constant(x[rank::n]), tf.constant(y[rank::n])

    def step(first: bool) -> None:
        with tf.GradientTape() as plain:
            loss = tf.reduce_mean(tf.square(model(local_x, training=True) - local_y))
        tape = hvd.DistributedGradientTape(plain)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        if first:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables, root_rank=0)

    run = tf.function(step) if mode == "function" else step
    for i in range(STEPS):
        run(i == 0)
    # The first step averages the gradients each rank computed at its own initial weights, and
    # rank 0 applies that to its weights, which are then broadcast; later steps are plain steps on
    # the combined batch (the average of equal shards' gradients is the whole batch's).
    first = [_gradient(w, b, x[r::n], y[r::n]) for r, (w, b) in enumerate(initial)]
    expected_w = initial[0][0] - LR * np.mean([g[0] for g in first], axis=0)
    expected_b = initial[0][1] - LR * np.mean([g[1] for g in first], axis=0)
    expected_w, expected_b = _reference_sgd(expected_w, expected_b, x, y, STEPS - 1)
    assert np.allclose(layer.kernel.numpy(), expected_w, atol=1e-4), (mode, layer.kernel.numpy().ravel())
    assert np.allclose(layer.bias.numpy(), expected_b, atol=1e-4), (mode, layer.bias.numpy())
    digests = hvd.allgather_object([v.numpy().tobytes() for v in model.variables])
    assert all(d == digests[0] for d in digests), f"{mode}: ranks ended with different weights"


def case_partial_tape_and_options() -> None:
    """PartialDistributedGradientTape keeps a Keras layer's gradients local (scaled by 1/size);
    fp16 compression, predivision and groups give the averaged gradient; Adasum, the combination."""
    import keras

    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    shared, local = keras.layers.Dense(1, use_bias=False), keras.layers.Dense(1, use_bias=False)
    inputs = tf.constant([[float(rank + 1)]])
    shared(inputs), local(inputs)  # build both
    with tf.GradientTape(persistent=True) as plain:
        loss = tf.reduce_sum(shared(inputs)) + tf.reduce_sum(local(inputs))
    tape = hvd.PartialDistributedGradientTape(plain, local_layers=local)
    shared_grad, local_grad = tape.gradient(loss, [shared.kernel, local.kernel])
    mean = (n + 1) / 2
    assert np.allclose(shared_grad.numpy(), mean), shared_grad.numpy()
    assert np.allclose(local_grad.numpy(), (rank + 1) / n), local_grad.numpy()
    # Horovod's positional order: ..., gradient_predivide_factor, num_groups, groups, process_set,
    # local_layers, scale_local_gradients.
    positional = hvd.PartialDistributedGradientTape(
        plain, "", "", hvd.Compression.none, False, hvd.Average, 1.0, 1, None, hvd.global_process_set, local, False
    )
    shared_grad, local_grad = positional.gradient(loss, [shared.kernel, local.kernel])
    assert np.allclose(shared_grad.numpy(), mean) and np.allclose(local_grad.numpy(), rank + 1), local_grad.numpy()
    for options in (
        {"compression": hvd.Compression.fp16},
        {"gradient_predivide_factor": 2.0},
        {"num_groups": 1},
        {"groups": [[shared.kernel]]},
        {"sparse_as_dense": True},
    ):
        (grad,) = hvd.DistributedGradientTape(plain, **options).gradient(loss, [shared.kernel])
        assert grad.dtype == tf.float32 and np.allclose(grad.numpy(), mean), (options, grad.numpy())
    # The ranks' gradients (rank + 1) are parallel: Adasum gives their mean, pairwise down the tree.
    from horovod.common.testing.adasum import expected

    (grad,) = hvd.DistributedGradientTape(plain, op=hvd.Adasum).gradient(loss, [shared.kernel])
    want = expected([np.full((1, 1), r + 1.0, np.float32) for r in range(n)])
    assert np.allclose(grad.numpy(), want), (grad.numpy(), want)
    # Refused before anything is submitted, as a ValueError and as a RuntimeError alike.
    for caught in (ValueError, RuntimeError):
        try:
            hvd.reducescatter(tf.ones([n]), op=hvd.Min, name="refused.rs")
        except caught as error:
            assert "reducescatter supports" in str(error) and "got op=Min" in str(error), error
        else:
            raise AssertionError("a reducescatter with op=hvd.Min was accepted")
    fp16 = hvd.allreduce(tf.constant([1.0, 2.0]), op=hvd.Sum, compression=hvd.Compression.fp16, name="fp16")
    assert fp16.dtype == tf.float32 and fp16.numpy().tolist() == [n, 2.0 * n], fp16


def case_sparse_gradients(mode: str) -> None:
    """An embedding's gradient (IndexedSlices) is allgathered; with sparse_as_dense it is reduced
    densely; both give the average of every rank's dense gradient."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    table = tf.Variable(np.zeros((n + 2, 2), np.float32))
    ids = tf.constant([rank, n + 1])

    def grads(sparse_as_dense: bool) -> Any:
        with tf.GradientTape() as plain:
            loss = tf.reduce_sum(tf.nn.embedding_lookup(table, ids)) * float(rank + 1)
        gradient = hvd.DistributedGradientTape(plain, sparse_as_dense=sparse_as_dense).gradient(loss, [table])[0]
        return tf.convert_to_tensor(gradient)

    run = tf.function(grads) if mode == "function" else grads
    expected = np.zeros((n + 2, 2))
    for r in range(n):
        expected[r] += (r + 1) / n
        expected[n + 1] += (r + 1) / n
    for sparse_as_dense in (False, True):
        got = run(sparse_as_dense).numpy()
        assert np.allclose(got, expected), (mode, sparse_as_dense, got, expected)


def case_v1_optimizer(passes: int) -> None:
    """tf.compat.v1 training as Horovod users write it: DistributedOptimizer, MonitoredTrainingSession
    and BroadcastGlobalVariablesHook; with backward_passes_per_step the summed gradients of that many
    passes are applied every that many runs."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    x, y = _data(n)
    runs = 2 * passes
    with tf.Graph().as_default():
        w = tf.compat.v1.get_variable("w", initializer=np.full((FEATURES, 1), 0.1 * (rank + 1), np.float32))
        b = tf.compat.v1.get_variable("b", initializer=np.zeros(1, np.float32))
        loss = tf.reduce_mean(tf.square(tf.matmul(tf.constant(x[rank::n]), w) + b - tf.constant(y[rank::n])))
        optimizer = hvd.DistributedOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(LR), backward_passes_per_step=passes
        )
        train = optimizer.minimize(loss)
        hooks = [hvd.BroadcastGlobalVariablesHook(0)]
        with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as session:
            start = session.run([w, b])
            for _ in range(runs):
                session.run(train)
            final = session.run([w, b])
    assert np.allclose(start[0], 0.1), f"rank 0's initial weights were not broadcast: {start[0].ravel()}"
    # Each applied update is the summed gradient of `passes` identical passes (the variables do
    # not move between them): `passes` times one step's gradient.
    expected_w, expected_b = start
    for _ in range(runs // passes):
        step_w, step_b = _reference_sgd(expected_w, expected_b, x, y, 1)
        expected_w = expected_w + passes * (step_w - expected_w)
        expected_b = expected_b + passes * (step_b - expected_b)
    assert np.allclose(final[0], expected_w, atol=1e-4), (passes, final[0].ravel(), expected_w.ravel())
    assert np.allclose(final[1], expected_b, atol=1e-4), (passes, final[1], expected_b)


def case_sync_batch_norm(mode: str) -> None:
    """SyncBatchNormalization normalises with the statistics of every rank's batch together (ranks
    with batches of different sizes), and its moving statistics follow them."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    batches = [np.arange((r + 2) * 3, dtype=np.float32).reshape(r + 2, 3) * (r + 1) for r in range(n)]
    layer = hvd.SyncBatchNormalization(epsilon=1e-3, momentum=0.5)

    def apply(x: tf.Tensor) -> tf.Tensor:
        return layer(x, training=True)

    run = tf.function(apply) if mode == "function" else apply
    out = run(tf.constant(batches[rank])).numpy()
    combined = np.concatenate(batches).astype(np.float64)
    mean, variance = combined.mean(0), combined.var(0)
    expected = (batches[rank] - mean) / np.sqrt(variance + 1e-3)
    assert np.allclose(out, expected, atol=1e-4), (mode, out, expected)
    assert np.allclose(layer.moving_mean.numpy(), 0.5 * mean, atol=1e-3), layer.moving_mean.numpy()


def case_mismatched_gradients() -> None:
    """Gradients of different shapes on the ranks raise on every rank, naming what differs."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    v = tf.Variable(np.ones(2 if rank < n - 1 else 3, np.float32))
    with tf.GradientTape() as plain:
        loss = tf.reduce_sum(v * v)
    try:
        hvd.DistributedGradientTape(plain).gradient(loss, [v])
    except expected_error_types() as error:
        assert "shape" in str(error), error
    else:
        raise AssertionError("mismatched gradient shapes did not raise")


def case_v1_optimizer_local_variables() -> None:
    """DistributedOptimizer.register_local_var: the variable's gradient stays this rank's, divided
    by the ranks (scale_local_gradients=True, Horovod's default) or as it is (False)."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    for scale in (True, False):
        with tf.Graph().as_default():
            shared = tf.compat.v1.get_variable("shared", initializer=np.ones(2, np.float32))
            mine = tf.compat.v1.get_variable("mine", initializer=np.ones(2, np.float32))
            weight = float(rank + 1)  # each rank's gradient of both variables is its weight
            loss = weight * (tf.reduce_sum(shared) + tf.reduce_sum(mine))
            optimizer = hvd.DistributedOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(1.0), scale_local_gradients=scale
            )
            optimizer.register_local_var(mine)
            grads = optimizer.compute_gradients(loss, [shared, mine])
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                shared_grad, mine_grad = session.run([g for g, _ in grads])
        assert np.allclose(shared_grad, (n + 1) / 2), shared_grad  # averaged over the ranks
        assert np.allclose(mine_grad, weight / n if scale else weight), (scale, mine_grad)
