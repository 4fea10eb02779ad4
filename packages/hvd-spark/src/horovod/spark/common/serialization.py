"""``save``/``load`` of the Estimators and Models: Spark ML's metadata, plus each param's value.

Spark ML's default writer keeps params as JSON, which models, optimizers and stores are not. The
metadata (class, uid, Spark version) is written by Spark's own ``DefaultParamsWriter``; each set
param's value is written beside it as a file ``params/<name>``, encoded by the class
(``_encode_param``: cloudpickle unless a framework knows better, e.g. a Keras model as a ``.keras``
file), through ``pyarrow.fs`` so the path may be local, ``file://`` or ``hdfs://``.
"""

from __future__ import annotations

import posixpath
from typing import Any

import cloudpickle
from pyspark.ml.util import DefaultParamsReader, DefaultParamsWriter, MLReader, MLWriter

#: Params that are runtime objects of this application, never saved (a Backend holds live streams).
NOT_SAVED = frozenset({"backend"})


def encode_param(name: str, value: Any) -> bytes:
    """The default encoding of a param's value."""
    return bytes(cloudpickle.dumps(value))


def decode_param(name: str, data: bytes) -> Any:
    import pickle

    return pickle.loads(data)


def _filesystem(path: str) -> tuple[Any, str]:
    from pyarrow import fs

    found: tuple[Any, str] = fs.FileSystem.from_uri(path if "://" in path else f"file://{posixpath.abspath(path)}")
    return found


class ParamsWriter(MLWriter):
    """Writes an Estimator or Model whose params are Python objects."""

    def __init__(self, instance: Any) -> None:
        super().__init__()
        self.instance = instance

    def saveImpl(self, path: str) -> None:
        names = [p.name for p in self.instance.params if self.instance.isSet(p) and p.name not in NOT_SAVED]
        DefaultParamsWriter.saveMetadata(self.instance, path, self.sparkSession, paramMap={"saved": names})
        filesystem, root = _filesystem(path)
        filesystem.create_dir(posixpath.join(root, "params"), recursive=True)
        for name in names:
            data = self.instance._encode_param(name, self.instance.getOrDefault(name))
            with filesystem.open_output_stream(posixpath.join(root, "params", name)) as f:
                f.write(data)


class ParamsReader(MLReader[Any]):
    """Reads what :class:`ParamsWriter` wrote, into an instance of ``cls``."""

    def __init__(self, cls: type) -> None:
        super().__init__()
        self.cls = cls

    def load(self, path: str) -> Any:
        metadata = DefaultParamsReader.loadMetadata(path, self.sparkSession)
        expected = f"{self.cls.__module__}.{self.cls.__name__}"
        if metadata["class"] != expected:
            raise ValueError(f"{path} holds a {metadata['class']}, not a {expected}")
        instance = self.cls()
        instance._resetUid(metadata["uid"])
        filesystem, root = _filesystem(path)
        for name in metadata["paramMap"]["saved"]:
            with filesystem.open_input_stream(posixpath.join(root, "params", name)) as f:
                instance._set(**{name: instance._decode_param(name, f.read())})
        return instance


class ParamsReadWrite:
    """``save``/``load``/``write``/``read`` for a Params class, with per-param encoding hooks."""

    def write(self) -> ParamsWriter:
        return ParamsWriter(self)

    def save(self, path: str) -> None:
        """Saves the params that were set to ``path`` (Spark ML persistence).

        :param path: where to write: a directory path or URI that Spark and pyarrow can write.
        """
        self.write().save(path)

    @classmethod
    def read(cls) -> ParamsReader:
        return ParamsReader(cls)

    @classmethod
    def load(cls, path: str) -> Any:
        """A new instance of this class with the params saved at ``path``.

        :param path: a directory ``save`` wrote (``ValueError`` when it holds another class).
        """
        return cls.read().load(path)

    def _encode_param(self, name: str, value: Any) -> bytes:
        return encode_param(name, value)

    def _decode_param(self, name: str, data: bytes) -> Any:
        return decode_param(name, data)
