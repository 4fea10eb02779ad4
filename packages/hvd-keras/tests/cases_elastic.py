"""KerasState across ranks (run on every rank by tests/test_elastic.py, Keras on TensorFlow or torch):
``sync()`` gives a worker that has not trained yet rank 0's model and optimizer, and the ranks then
train on together."""

from __future__ import annotations

import numpy as np

from keras_testutil import dataset


def case_keras_state_sync_then_fit() -> None:
    import keras

    import horovod.keras as hvd

    hvd.init()
    rank = hvd.rank()
    keras.utils.set_random_seed(100 + rank)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(2)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9)), loss="mse")
    x, y = dataset(8, seed=rank)
    if rank == 0:  # rank 0 has trained (its momentum and step count say so); the others just joined
        model.optimizer.build(model.trainable_variables)
        for variable in model.optimizer.variables:
            if "momentum" in variable.path:
                variable.assign(np.full(variable.shape, 0.5, variable.dtype))
        model.optimizer.iterations.assign(3)
    else:
        assert not model.optimizer.built
    state = hvd.elastic.KerasState(model, batch=rank, epoch=rank)
    assert model.optimizer.built
    state.sync()
    assert (state.batch, state.epoch) == (0, 0)
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 3
    momentums = [v for v in model.optimizer.variables if "momentum" in v.path]
    assert momentums and all(np.all(keras.ops.convert_to_numpy(v) == 0.5) for v in momentums)
    _same_on_every_rank(model.variables + model.optimizer.variables, "synchronised")

    model.fit(x, y, batch_size=4, shuffle=False, verbose=0)
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 5
    _same_on_every_rank(model.variables + model.optimizer.variables, "trained")


def _same_on_every_rank(variables: list[object], what: str) -> None:
    import keras

    import horovod.keras as hvd

    values = [keras.ops.convert_to_numpy(v).tolist() for v in variables]
    gathered = hvd.allgather_object(values, name=f"same.{what}")
    assert all(g == gathered[0] for g in gathered), f"{what}: the variables differ between ranks"
