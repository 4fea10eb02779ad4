# Prelude of docs/elastic.md's Keras fragment: a model, a data set and EPOCHS, as the page leaves
# them to the reader; the fragment's train(state) is called after it (snippets/elastic_keras_end.py).
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import keras
import numpy as np
import tensorflow as tf

import horovod.tensorflow.keras as hvd

hvd.init()
EPOCHS = 2
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
x, y = np.random.rand(64, 8).astype("float32"), np.random.rand(64, 2).astype("float32")
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).repeat()
