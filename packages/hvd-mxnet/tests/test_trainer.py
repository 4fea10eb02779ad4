"""DistributedTrainer, DistributedOptimizer and broadcast_parameters with 2 and 3 ranks as processes
(horovod.run on Gloo): every rank ends with the same parameters, equal to single-process training
on the combined batch.

All the calls of one rank count run in one launch (hvd-core's batch kit); every call is still a
test of its own, failing with the traceback of each rank where it failed.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from horovod.common.testing import batch
from horovod.common.testing.batch import Call, Outcomes
from mx_testutil import run_batch

with warnings.catch_warnings():  # (rank processes import this module without pytest's filters)
    warnings.simplefilter("ignore", DeprecationWarning)
    import mxnet as mx
    from mxnet import autograd, gluon, nd

    import horovod.mxnet as hvd

pytestmark = pytest.mark.timeout(300)

FEATURES, HIDDEN, CLASSES, ROWS_PER_RANK, STEPS = 6, 5, 3, 4, 4
OPTIMIZERS = {"sgd": {"learning_rate": 0.1, "momentum": 0.9}, "adam": {"learning_rate": 0.01}}


# --- what every rank (and the reference) computes alike ------------------------------------------------


def make_net(extra_layers: int = 0) -> gluon.HybridSequential:
    """The same float64 MLP on every rank. ``extra_layers`` throwaway layers built first move this
    process's Gluon name counters (dense0_ becomes dense9_...): parameters must not be matched by name."""
    for _ in range(extra_layers):
        gluon.nn.Dense(1)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(HIDDEN, activation="tanh", in_units=FEATURES), gluon.nn.Dense(CLASSES, in_units=HIDDEN))
    net.initialize()
    net.cast("float64")
    rng = np.random.RandomState(1000)
    for p in net.collect_params().values():
        p.set_data(nd.array(rng.normal(scale=0.5, size=p.shape), dtype="float64"))
    return net


def global_batch(step: int, ranks: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(10_000 + step)
    rows = ranks * ROWS_PER_RANK
    return rng.normal(size=(rows, FEATURES)), rng.randint(0, CLASSES, size=rows).astype(np.float64)


def train(net: gluon.Block, trainer: Any, rank: int, ranks: int) -> list[np.ndarray]:
    """STEPS steps, each on ``rank``'s rows of the step's global batch (all of them: ranks=1)."""
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for step in range(STEPS):
        x, y = global_batch(step, ranks)
        mine = slice(rank * ROWS_PER_RANK, (rank + 1) * ROWS_PER_RANK) if rank >= 0 else slice(None)
        with autograd.record():
            loss = loss_fn(net(nd.array(x[mine], dtype="float64")), nd.array(y[mine], dtype="float64"))
        loss.backward()
        trainer.step(len(x[mine]))
    return [p.data().asnumpy() for p in net.collect_params().values()]


def reference(ranks: int, optimizer: str) -> list[np.ndarray]:
    """Plain Gluon training in this process on the whole of every global batch."""
    net = make_net()
    trainer = gluon.Trainer(net.collect_params(), optimizer, dict(OPTIMIZERS[optimizer]), kvstore=None)
    return train(net, trainer, -1, ranks)


# --- cases: run on every rank ---------------------------------------------------------------------------


def case_trainer(optimizer: str, options: dict[str, Any]) -> list[np.ndarray]:
    hvd.init()
    net = make_net(extra_layers=9 if hvd.rank() == 1 else 0)
    kwargs = dict(options)
    if kwargs.pop("fp16", False):
        kwargs["compression"] = hvd.Compression.fp16
    trainer = hvd.DistributedTrainer(net.collect_params(), optimizer, dict(OPTIMIZERS[optimizer]), **kwargs)
    return train(net, trainer, hvd.rank(), hvd.size())


def case_optimizer(optimizer: str, options: dict[str, Any]) -> dict[str, Any]:
    """DistributedOptimizer inside a plain Gluon Trainer: it reduces what the updater hands it,
    one gradient or, when the optimizer aggregates (SGD does by 4), tuples of them."""
    hvd.init()
    net = make_net()
    wrapped = hvd.DistributedOptimizer(mx.optimizer.create(optimizer, **OPTIMIZERS[optimizer]), **options)
    assert isinstance(wrapped, mx.optimizer.Optimizer)
    forms = set()
    reduce = wrapped._allreduce

    def spy(index: Any, grad: Any) -> None:
        forms.add("aggregated" if isinstance(index, (tuple, list)) else "single")
        reduce(index, grad)

    vars(wrapped)["_allreduce"] = spy  # (an instance attribute: not forwarded to the wrapped one)
    trainer = gluon.Trainer(net.collect_params(), wrapped, kvstore=None)
    params = train(net, trainer, hvd.rank(), hvd.size())
    return {"params": params, "forms": sorted(forms), "lr": wrapped.learning_rate}


def module_train(optimizer: Any, rank: int, ranks: int) -> dict[str, np.ndarray]:
    """The MLP as a symbolic Module (float32, the API DistributedOptimizer was made for): STEPS
    steps on ``rank``'s rows of every global batch (all of them: rank -1)."""
    rows = ROWS_PER_RANK if rank >= 0 else ranks * ROWS_PER_RANK
    data, label = mx.sym.Variable("data"), mx.sym.Variable("softmax_label")
    hidden = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=HIDDEN, name="fc1"), act_type="tanh")
    out = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(hidden, num_hidden=CLASSES, name="fc2"), label, name="softmax")
    module = mx.mod.Module(out, context=mx.cpu())
    module.bind(data_shapes=[("data", (rows, FEATURES))], label_shapes=[("softmax_label", (rows,))])
    rng = np.random.RandomState(1000)
    shapes = dict(zip(out.list_arguments(), out.infer_shape(data=(rows, FEATURES))[0], strict=True))
    names = [n for n in out.list_arguments() if n not in ("data", "softmax_label")]
    module.init_params(arg_params={n: nd.array(rng.normal(scale=0.5, size=shapes[n])) for n in names})
    module.init_optimizer(kvstore=None, optimizer=optimizer)
    for step in range(STEPS):
        x, y = global_batch(step, ranks)
        mine = slice(rank * ROWS_PER_RANK, (rank + 1) * ROWS_PER_RANK) if rank >= 0 else slice(None)
        module.forward_backward(mx.io.DataBatch([nd.array(x[mine])], [nd.array(y[mine])]))
        module.update()
    return {name: value.asnumpy() for name, value in module.get_params()[0].items()}


def module_optimizer(rows: int) -> Any:
    return mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9, rescale_grad=1.0 / rows)


def case_module() -> dict[str, np.ndarray]:
    """Horovod's Module recipe: the optimizer rescales by the rank's own batch; the wrapper averages."""
    hvd.init()
    wrapped = hvd.DistributedOptimizer(module_optimizer(ROWS_PER_RANK))
    return module_train(wrapped, hvd.rank(), hvd.size())


def case_broadcast_parameters(root_rank: int) -> dict[str, Any]:
    """Ranks seeded differently (fresh processes share MXNet's and numpy's default seeds)."""
    hvd.init()
    rank = hvd.rank()
    root = root_rank % hvd.size()
    out: dict[str, Any] = {}

    rng = np.random.RandomState(rank)
    arrays = {"w": nd.array(rng.normal(size=(3, 4))), "b": nd.array(rng.normal(size=(4,))), 7: nd.zeros((2,)) + rank}
    out["dict_before"] = {str(k): v.asnumpy() for k, v in arrays.items()}
    hvd.broadcast_parameters(arrays, root_rank=root, prefix="arrays.")
    out["dict_after"] = {str(k): v.asnumpy() for k, v in arrays.items()}

    mx.random.seed(100 + rank)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(4, in_units=3), gluon.nn.Dense(2, in_units=4))
    net.initialize(mx.init.Uniform())
    out["net_before"] = [p.data().asnumpy() for p in net.collect_params().values()]
    hvd.broadcast_parameters(net.collect_params(), root_rank=root)  # (no prefix: positions...)
    other = gluon.nn.Dense(4, in_units=3)
    other.initialize(mx.init.Uniform())
    hvd.broadcast_parameters(other.collect_params(), root_rank=root)  # (...the same names again: fine)
    out["net_after"] = [p.data().asnumpy() for p in [*net.collect_params().values(), *other.collect_params().values()]]

    # Deferred initialisation (input size unknown): the broadcast comes at the first forward, which
    # is recording and followed by a backward; a control net, not broadcast, stays rank-specific.
    deferred, control = gluon.nn.HybridSequential(), gluon.nn.Dense(3)
    deferred.add(gluon.nn.Dense(4, activation="relu"), gluon.nn.Dense(2))
    deferred.initialize(mx.init.Uniform())
    control.initialize(mx.init.Uniform())
    hvd.broadcast_parameters(deferred.collect_params(), root_rank=root, prefix="deferred.")
    x = nd.ones((2, 5))
    with autograd.record():
        loss = deferred(x).sum() + control(x).sum()
    loss.backward()
    params = list(deferred.collect_params().values())
    out["deferred_after"] = [p.data().asnumpy() for p in params]
    out["deferred_grads"] = [p.grad().asnumpy() for p in params]
    out["control"] = control.weight.data().asnumpy()
    out["hooks_left"] = [name for name, p in deferred.collect_params().items() if "_init_impl" in vars(p)]
    return out


# --- the jobs -------------------------------------------------------------------------------------------

TRAINER_OPTIONS = {
    "sgd": {},
    "sgd-num_groups_2": {"num_groups": 2},
    "sgd-predivide_2.5": {"gradient_predivide_factor": 2.5},
    "sgd-fp16": {"fp16": True},
    "adam": {},
    "adam-num_groups_3-predivide_2": {"num_groups": 3, "gradient_predivide_factor": 2.0},
}
OPTIMIZER_OPTIONS = {
    "sgd": {},
    "sgd-num_groups_2": {"num_groups": 2},
    "sgd-predivide_4": {"gradient_predivide_factor": 4.0},
    "adam": {},
}


def calls() -> list[Call]:
    found: list[Call] = []
    for key, options in TRAINER_OPTIONS.items():
        found.append((f"trainer-{key}", case_trainer, (key.split("-")[0], options)))
    for key, options in OPTIMIZER_OPTIONS.items():
        found.append((f"optimizer-{key}", case_optimizer, (key.split("-")[0], options)))
    found.append(("optimizer-module", case_module, ()))
    found.append(("broadcast-root_0", case_broadcast_parameters, (0,)))
    found.append(("broadcast-root_last", case_broadcast_parameters, (-1,)))
    return found


@pytest.fixture(scope="module", params=[2, 3], ids=lambda np_: f"np{np_}")
def outcomes(request: pytest.FixtureRequest) -> tuple[int, Outcomes]:
    np_ = request.param
    selected = batch.selected(request)
    return np_, run_batch([c for c in calls() if c[0] in selected], np_)


def assert_params(got: list[np.ndarray], want: list[np.ndarray], atol: float, rtol: float = 0.0) -> None:
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.shape == b.shape and np.allclose(a, b, atol=atol, rtol=rtol), (
            f"parameter {i}: max difference {np.abs(a - b).max()}"
        )


def tolerance(key: str) -> float:
    """float64 training matches to rounding where the gradient scale is computed as the
    reference's is. MXNet's optimizers take that scale as a float32: a predivide factor's path to
    1 / 12, or DistributedOptimizer's postscale 1 / 3 times the optimizer's 1 / 4, rounds differently."""
    return 1e-10 if key.startswith("trainer") and "predivide" not in key else 1e-6


def assert_identical_on_every_rank(per_rank: list[list[np.ndarray]]) -> None:
    for rank, params in enumerate(per_rank[1:], start=1):
        for i, (a, b) in enumerate(zip(per_rank[0], params, strict=True)):
            assert np.array_equal(a, b), f"rank {rank} differs from rank 0 in parameter {i}"


@pytest.mark.parametrize("key", [f"trainer-{k}" for k in TRAINER_OPTIONS])
def test_trainer_matches_single_process(outcomes: tuple[int, Outcomes], key: str) -> None:
    np_, results = outcomes
    per_rank = results.check(key)
    assert_identical_on_every_rank(per_rank)
    optimizer = key.split("-")[1]
    if "fp16" in key:  # gradients travel as float16: about three significant digits
        assert_params(per_rank[0], reference(np_, optimizer), atol=2e-3, rtol=1e-2)
    else:
        assert_params(per_rank[0], reference(np_, optimizer), atol=tolerance(key))


@pytest.mark.parametrize("key", [f"optimizer-{k}" for k in OPTIMIZER_OPTIONS])
def test_optimizer_matches_single_process(outcomes: tuple[int, Outcomes], key: str) -> None:
    np_, results = outcomes
    per_rank = results.check(key)
    assert_identical_on_every_rank([r["params"] for r in per_rank])
    optimizer = key.split("-")[1]
    assert_params(per_rank[0]["params"], reference(np_, optimizer), atol=tolerance(key))
    # SGD aggregates its updates (MXNet's default of 4 per call); Adam updates one at a time.
    assert per_rank[0]["forms"] == (["aggregated"] if optimizer == "sgd" else ["single"])
    assert per_rank[0]["lr"] == OPTIMIZERS[optimizer]["learning_rate"]


@pytest.mark.parametrize("key", ["optimizer-module"])
def test_module_matches_single_process(outcomes: tuple[int, Outcomes], key: str) -> None:
    np_, results = outcomes
    per_rank = results.check(key)
    for other in per_rank[1:]:
        assert all(np.array_equal(other[name], value) for name, value in per_rank[0].items())
    want = module_train(module_optimizer(np_ * ROWS_PER_RANK), -1, np_)
    assert_params([per_rank[0][n] for n in sorted(want)], [want[n] for n in sorted(want)], atol=1e-5)


@pytest.mark.parametrize("key", ["broadcast-root_0", "broadcast-root_last"])
def test_broadcast_parameters(outcomes: tuple[int, Outcomes], key: str) -> None:
    np_, results = outcomes
    per_rank = results.check(key)
    root = 0 if key.endswith("_0") else np_ - 1
    # The ranks started different...
    assert not np.array_equal(per_rank[0]["dict_before"]["w"], per_rank[1]["dict_before"]["w"])
    assert not np.array_equal(per_rank[0]["net_before"][0], per_rank[1]["net_before"][0])
    assert not np.array_equal(per_rank[0]["control"], per_rank[1]["control"])
    # ...and end with the root's values, also where initialisation was deferred.
    for out in per_rank:
        for name, value in out["dict_after"].items():
            assert np.array_equal(value, per_rank[root]["dict_before"][name]), name
        for a, b in zip(out["net_after"][:4], per_rank[root]["net_before"], strict=True):
            assert np.array_equal(a, b)
        assert_identical_on_every_rank([o["net_after"] for o in (per_rank[root], out)])
        assert_identical_on_every_rank([o["deferred_after"] for o in (per_rank[root], out)])
        assert_identical_on_every_rank([o["deferred_grads"] for o in (per_rank[root], out)])
        assert out["hooks_left"] == []


def test_single_process_options() -> None:
    """Checks that need no peers: argument errors, and the proxy's delegation."""
    sgd = mx.optimizer.create("sgd", learning_rate=0.5)
    wrapped = hvd.DistributedOptimizer(sgd)
    wrapped.set_learning_rate(0.25)  # forwarded: the wrapped optimizer's own method and attribute
    wrapped.rescale_grad = 0.125
    assert (sgd.lr, sgd.rescale_grad, wrapped.lr, wrapped.learning_rate) == (0.25, 0.125, 0.25, 0.25)
    assert wrapped.aggregate_num == sgd.aggregate_num
    with pytest.raises(ValueError, match="num_groups"):
        hvd.DistributedOptimizer(mx.optimizer.create("sgd"), num_groups=-1)
    with pytest.raises(ValueError, match="prefix"):
        hvd.broadcast_parameters({}, prefix=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid params"):
        hvd.broadcast_parameters([nd.zeros((1,))])


def test_fp16_compression_round_trip() -> None:
    grad = nd.array([1.0, -2.5, 1e-3], dtype="float64")
    sent, ctx = hvd.Compression.fp16.compress(grad)
    assert sent.dtype == np.float16
    back = hvd.Compression.fp16.decompress(sent, ctx)
    assert back.dtype == np.float64 and np.allclose(back.asnumpy(), grad.asnumpy(), rtol=1e-3)
    ints = nd.array([1, 2], dtype="int32")
    assert hvd.Compression.fp16.compress(ints)[0] is ints
    assert hvd.Compression.none.compress(grad)[0] is grad
