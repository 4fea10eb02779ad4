import keras
import pytest

from test_keras_estimator import LocalStore, accuracy, digits_frames, make_estimator


@pytest.mark.parametrize("epochs,lr", [(10, 0.01), (10, 0.005)])
def test_peek(spark, tmp_path, epochs, lr):
    train, test = digits_frames(spark)
    m = make_estimator(LocalStore(str(tmp_path)), epochs=epochs, optimizer=keras.optimizers.Adam(lr)).fit(train)
    print(
        epochs, lr, [round(h["val_accuracy"], 3) for h in m.getHistory()], "test accuracy", accuracy(m.transform(test))
    )
