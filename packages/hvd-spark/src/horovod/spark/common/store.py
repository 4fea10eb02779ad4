"""Stores: where horovod.spark keeps materialized DataFrames (Parquet), runs, checkpoints and logs.

The API is Horovod's ``horovod.spark.common.store``: :class:`Store` (with :meth:`Store.create`),
:class:`FilesystemStore`, :class:`LocalStore`, :class:`HDFSStore` and :class:`DBFSLocalStore`. Every
store works over a :mod:`pyarrow.fs` filesystem (no petastorm) and pickles (pickle and cloudpickle),
because it travels to Spark tasks and to the training ranks.

Paths come in two forms. The getters (:meth:`~Store.get_train_data_path`, :meth:`~Store.get_run_path`,
...) and :attr:`~Store.prefix_path` give *full* paths, URIs that Spark's DataFrameWriter and
readers resolve (``file:///abs/x``, ``hdfs://nn:8020/x``, ``dbfs:/x``). The methods that touch data
(:meth:`~Store.read`, :meth:`~Store.exists`, ...) accept full or localized paths and localize them for
the pyarrow filesystem (:meth:`~Store.get_localized_path`).
"""

from __future__ import annotations

import base64
import contextlib
import os
import posixpath
import uuid
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from horovod.spark.common.fs_paths import as_absolute_like, join_path, short_reason, split_host_port, split_url

_PARQUET_MAGIC = b"PAR1"
_ARROW_ERRORS = (OSError, pa.ArrowException)


class Store(ABC):
    """Storage for intermediate data (materialized DataFrames) and training artifacts (checkpoints, logs).

    Every Estimator run gets its own run directory (checkpoint and logs); every dataset variation gets
    its own intermediate data path, named in a deterministic sequence (``idx``) so that it can be
    reused by later fits and reclaimed by the user; nothing is deleted automatically.
    """

    prefix_path: str

    @staticmethod
    def create(prefix_path: str, *args: Any, **kwargs: Any) -> Store:
        """The store for ``prefix_path``: HDFS for ``hdfs://``, DBFS for ``dbfs:/`` and ``/dbfs/``, else local.

        :param prefix_path: the store's root: ``hdfs://...`` makes an :class:`HDFSStore`, ``dbfs:/...`` or ``/dbfs/...``
            a :class:`DBFSLocalStore`, anything else a :class:`LocalStore`.
        :param args: further positional arguments of that store's constructor.
        :param kwargs: further keyword arguments of that store's constructor.
        """
        if split_url(prefix_path).scheme == "hdfs":
            return HDFSStore(prefix_path, *args, **kwargs)
        if _is_dbfs(DBFSLocalStore.normalize_path(prefix_path)):
            return DBFSLocalStore(prefix_path, *args, **kwargs)
        return LocalStore(prefix_path, *args, **kwargs)

    @property
    @abstractmethod
    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow filesystem that localized paths refer to."""

    @abstractmethod
    def get_localized_path(self, path: str) -> str:
        """``path`` (full URI or already localized) as the pyarrow filesystem wants it.

        :param path: a full path (URI) or a localized one.
        """

    @abstractmethod
    def get_full_path(self, path: str) -> str:
        """``path`` as the URI that Spark reads and writes (``file:///x``, ``hdfs://nn:8020/x``, ``dbfs:/x``).

        :param path: a full path (URI) or a localized one.
        """

    @abstractmethod
    def exists(self, path: str) -> bool:
        """True if the path exists in the store.

        :param path: a full path (URI) or a localized one.
        """

    @abstractmethod
    def read(self, path: str) -> bytes:
        """The contents of the file at ``path``.

        :param path: a full path (URI) or a localized one.
        """

    @abstractmethod
    def write(self, path: str, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` to ``path`` (replacing it), creating parent directories.

        :param path: a full path (URI) or a localized one.
        :param data: the bytes to write.
        """

    @abstractmethod
    def remove(self, path: str) -> None:
        """Delete a file or a directory tree; nothing happens if it is missing.

        :param path: a full path (URI) or a localized one.
        """

    @abstractmethod
    def list_files(self, path: str) -> list[str]:
        """Localized paths of the plain files under ``path``, recursively, sorted.

        :param path: a full path (URI) or a localized one.
        """

    @abstractmethod
    def check_writable(self) -> None:
        """Raise ValueError, naming the prefix path and the reason, if the store cannot be written."""

    @abstractmethod
    def is_parquet_dataset(self, path: str) -> bool:
        """True if the path is the root of a Parquet dataset.

        :param path: a full path (URI) or a localized one.
        """

    @abstractmethod
    def get_parquet_dataset(self, path: str) -> pq.ParquetDataset:
        """A :class:`pyarrow.parquet.ParquetDataset` over ``path``.

        :param path: a full path (URI) or a localized one.
        """

    @abstractmethod
    def get_train_data_path(self, idx: int | str | None = None) -> str:
        """Full path of the (``idx``-th) training dataset.

        :param idx: the dataset's index in the sequence of dataset variations (``None``: the path without an index).
        """

    @abstractmethod
    def get_val_data_path(self, idx: int | str | None = None) -> str:
        """Full path of the (``idx``-th) validation dataset.

        :param idx: the dataset's index in the sequence of dataset variations (``None``: the path without an index).
        """

    @abstractmethod
    def get_test_data_path(self, idx: int | str | None = None) -> str:
        """Full path of the (``idx``-th) test dataset.

        :param idx: the dataset's index in the sequence of dataset variations (``None``: the path without an index).
        """

    @abstractmethod
    def saving_runs(self) -> bool:
        """True if run output (checkpoints, logs) should be saved during training."""

    @abstractmethod
    def get_runs_path(self) -> str:
        """Full path of the directory holding all runs."""

    @abstractmethod
    def sync_fn(self, run_id: str) -> Callable[[str], None]:
        """A picklable function that copies a local directory recursively into the run path of ``run_id``.

        :param run_id: the id of the run.
        """

    def get_run_path(self, run_id: str) -> str:
        """Full path of the run ``run_id``.

        :param run_id: the id of the run.
        """
        return join_path(self.get_runs_path(), run_id)

    def get_checkpoint_filename(self) -> str:
        """Basename of the checkpoint file; the framework writes its own bytes there."""
        return "checkpoint"

    def get_checkpoint_path(self, run_id: str) -> str:
        """Full path of the checkpoint file of the run ``run_id``.

        :param run_id: the id of the run.
        """
        return join_path(self.get_run_path(run_id), self.get_checkpoint_filename())

    def get_logs_subdir(self) -> str:
        """Name of the logs directory inside a run directory."""
        return "logs"

    def get_logs_path(self, run_id: str) -> str:
        """Full path of the logs directory of the run ``run_id``.

        :param run_id: the id of the run.
        """
        return join_path(self.get_run_path(run_id), self.get_logs_subdir())

    def to_remote(self, run_id: str, dataset_idx: int | str | None) -> Store:
        """A view of the store for executors and ranks: the store itself, which pickles.

        Its filesystem is created again where it is first used, so nothing from the driver is needed.

        :param run_id: the id of the run (unused: the store is the same everywhere).
        :param dataset_idx: the dataset's index (unused).
        """
        return self

    def read_serialized_keras_model(self, ckpt_path: str, model: Any = None, custom_objects: Any = None) -> str:
        """The checkpoint file's bytes, base64-encoded.

        hvd's Keras estimator writes whole ``.keras`` model files as checkpoints, so ``model`` and
        ``custom_objects`` (Horovod's way to rebuild a weights-only checkpoint) are accepted for
        compatibility and not needed.

        :param ckpt_path: the checkpoint file (a full or localized path).
        :param model: accepted for Horovod's signature (the model to load weights into); not needed.
        :param custom_objects: accepted for Horovod's signature; not needed.
        """
        return base64.b64encode(self.read(ckpt_path)).decode("ascii")


class FilesystemStore(Store):
    """A store over a :mod:`pyarrow.fs` filesystem; subclasses supply the filesystem and the path forms.

    ``train_path``, ``val_path``, ``test_path`` and ``runs_path`` override the default locations under
    ``prefix_path`` (``intermediate_train_data``, ..., ``runs``); a dataset index is appended to them as
    ``<path>.<idx>``.

    :param prefix_path: the store's root directory; the default locations of the data and the runs are under it.
    :param train_path: where training data is materialized (default ``<prefix_path>/intermediate_train_data``).
    :param val_path: where validation data is materialized (default ``<prefix_path>/intermediate_val_data``).
    :param test_path: where test data is materialized (default ``<prefix_path>/intermediate_test_data``).
    :param runs_path: where runs (checkpoints, logs) are kept (default ``<prefix_path>/runs``).
    :param save_runs: save checkpoints and logs of runs during training (default ``True``).
    """

    def __init__(
        self,
        prefix_path: str,
        train_path: str | None = None,
        val_path: str | None = None,
        test_path: str | None = None,
        runs_path: str | None = None,
        save_runs: bool = True,
    ) -> None:
        # The filesystem is created on first use: a HadoopFileSystem cannot be pickled to the ranks
        # usefully (it holds a JVM connection), so each process makes its own.
        self._fs: pafs.FileSystem | None = None
        self.prefix_path = self.get_full_path(prefix_path)
        self._train_path = self._full_or_default(train_path, "intermediate_train_data")
        self._val_path = self._full_or_default(val_path, "intermediate_val_data")
        self._test_path = self._full_or_default(test_path, "intermediate_test_data")
        self._runs_path = self._full_or_default(runs_path, "runs")
        self._save_runs = save_runs

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fs"] = None
        return state

    @abstractmethod
    def _create_filesystem(self) -> pafs.FileSystem:
        """The pyarrow filesystem, made on first use in each process."""

    @property
    def filesystem(self) -> pafs.FileSystem:
        if self._fs is None:
            self._fs = self._create_filesystem()
        return self._fs

    def _full_or_default(self, path: str | None, default_name: str) -> str:
        return self.get_full_path(path) if path else join_path(self.prefix_path, default_name)

    def _info(self, path: str) -> pafs.FileInfo:
        return self.filesystem.get_file_info(self.get_localized_path(path))

    def _make_dirs(self, local_dir: str) -> None:
        if local_dir not in ("", "/"):
            self.filesystem.create_dir(local_dir, recursive=True)

    def exists(self, path: str) -> bool:
        return bool(self._info(path).type != pafs.FileType.NotFound)

    def read(self, path: str) -> bytes:
        with self.filesystem.open_input_stream(self.get_localized_path(path)) as stream:
            return bytes(stream.read())

    def write(self, path: str, data: bytes | bytearray | memoryview) -> None:
        target = self.get_localized_path(path)
        parent, name = posixpath.split(target)
        self._make_dirs(parent)
        # Written beside the target and moved over it, so that a reader (the driver loading the
        # checkpoint, another rank) never sees half a file. The leading dot hides it from Parquet readers.
        temp = join_path(parent, f".{name}.{uuid.uuid4().hex}.tmp")
        try:
            with self.filesystem.open_output_stream(temp) as out:
                out.write(data)
            self._replace(temp, target)
        except BaseException:
            with contextlib.suppress(*_ARROW_ERRORS):
                self.filesystem.delete_file(temp)
            raise

    def _replace(self, source: str, target: str) -> None:
        try:
            self.filesystem.move(source, target)
        except _ARROW_ERRORS:
            # POSIX rename replaces the target; HDFS's rename refuses an existing one: delete, then move.
            if self.filesystem.get_file_info(target).type != pafs.FileType.File:
                raise
            self.filesystem.delete_file(target)
            self.filesystem.move(source, target)

    def remove(self, path: str) -> None:
        target = self.get_localized_path(path)
        kind = self.filesystem.get_file_info(target).type
        if kind == pafs.FileType.Directory:
            self.filesystem.delete_dir(target)
        elif kind != pafs.FileType.NotFound:
            self.filesystem.delete_file(target)

    def list_files(self, path: str) -> list[str]:
        root = self.get_localized_path(path)
        info = self.filesystem.get_file_info(root)
        if info.type != pafs.FileType.Directory:
            return [root] if info.type == pafs.FileType.File else []
        found = self.filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
        return sorted(as_absolute_like(root, f.path) for f in found if f.type == pafs.FileType.File)

    def check_writable(self) -> None:
        try:
            root = self.get_localized_path(self.prefix_path)
            self._make_dirs(root)
            probe = join_path(root, f".hvd-write-probe-{uuid.uuid4().hex}")
            with self.filesystem.open_output_stream(probe) as out:
                out.write(b"hvd")
            self.filesystem.delete_file(probe)
        except _ARROW_ERRORS as error:
            raise ValueError(f"store prefix path {self.prefix_path} is not writable: {short_reason(error)}") from error

    def is_parquet_dataset(self, path: str) -> bool:
        root = self.get_localized_path(path)
        if self.filesystem.get_file_info(root).type != pafs.FileType.Directory:
            return False
        files = self.list_files(root)
        # Parquet readers skip names starting with "_" or "." (Spark's _SUCCESS, _temporary, .crc).
        data = [f for f in files if not any(p[:1] in "_." for p in posixpath.relpath(f, root).split("/"))]
        if any(f.endswith(".parquet") for f in data):
            return True
        # Spark's parts are *.parquet, but a writer configured otherwise still leaves _SUCCESS; the
        # magic number then tells Parquet parts from CSV or JSON ones.
        return join_path(root, "_SUCCESS") in files and bool(data) and self._has_parquet_magic(data[0])

    def _has_parquet_magic(self, local_path: str) -> bool:
        with self.filesystem.open_input_stream(local_path) as stream:
            return bytes(stream.read(len(_PARQUET_MAGIC))) == _PARQUET_MAGIC

    def get_parquet_dataset(self, path: str) -> pq.ParquetDataset:
        return pq.ParquetDataset(self.get_localized_path(path), filesystem=self.filesystem)

    def get_train_data_path(self, idx: int | str | None = None) -> str:
        return _with_index(self._train_path, idx)

    def get_val_data_path(self, idx: int | str | None = None) -> str:
        return _with_index(self._val_path, idx)

    def get_test_data_path(self, idx: int | str | None = None) -> str:
        return _with_index(self._test_path, idx)

    def saving_runs(self) -> bool:
        return self._save_runs

    def get_runs_path(self) -> str:
        return self._runs_path

    def sync_fn(self, run_id: str) -> Callable[[str], None]:
        return _SyncToRunPath(self, self.get_run_path(run_id))


@dataclass(frozen=True)
class _SyncToRunPath:
    """What :meth:`FilesystemStore.sync_fn` returns: a class, not a closure, so that plain pickle works too."""

    store: FilesystemStore
    run_path: str

    def __call__(self, local_dir: str) -> None:
        if not os.path.isdir(local_dir):
            raise ValueError(f"sync_fn copies a directory into {self.run_path}; {local_dir!r} is not one")
        destination = self.store.get_localized_path(self.run_path)
        self.store._make_dirs(destination)
        # Copies the directory's contents, overwriting files already there (a newer checkpoint).
        pafs.copy_files(
            os.path.abspath(local_dir),
            destination,
            source_filesystem=pafs.LocalFileSystem(),
            destination_filesystem=self.store.filesystem,
        )


class LocalStore(FilesystemStore):
    """The local filesystem (or a shared mount such as NFS) as a store; ``/abs/path`` or ``file:///abs/path``.

    Relative paths are made absolute, since Spark's executors do not share the driver's working directory.

    :param prefix_path: the store's root: a local path or a ``file://`` URI, on a filesystem every executor sees at the
        same path.
    :param train_path: where training data is materialized (default ``<prefix_path>/intermediate_train_data``).
    :param val_path: where validation data is materialized (default ``<prefix_path>/intermediate_val_data``).
    :param test_path: where test data is materialized (default ``<prefix_path>/intermediate_test_data``).
    :param runs_path: where runs (checkpoints, logs) are kept (default ``<prefix_path>/runs``).
    :param save_runs: save checkpoints and logs of runs during training (default ``True``).
    """

    def _create_filesystem(self) -> pafs.FileSystem:
        return pafs.LocalFileSystem()

    def get_localized_path(self, path: str) -> str:
        parts = split_url(path)
        if parts.scheme is None:
            return os.path.abspath(path)
        if parts.scheme != "file" or parts.authority not in (None, "", "localhost"):
            raise ValueError(f"{type(self).__name__} takes local paths or file:// URIs, not {path!r}")
        return os.path.abspath(parts.path)

    def get_full_path(self, path: str) -> str:
        return "file://" + self.get_localized_path(path)


class DBFSLocalStore(LocalStore):
    """Databricks File System through its local file API (``/dbfs/...``) as a store.

    Takes ``/dbfs/...``, ``file:///dbfs/...`` or ``dbfs:/...``; full paths are ``dbfs:/...`` for Spark.

    :param prefix_path: the store's root on DBFS: ``/dbfs/...``, ``file:///dbfs/...`` or ``dbfs:/...`` (warns for a path
        outside ``/dbfs``).
    :param args: further positional arguments of :class:`LocalStore` (``train_path``...).
    :param kwargs: further keyword arguments of :class:`LocalStore`.
    """

    def __init__(self, prefix_path: str, *args: Any, **kwargs: Any) -> None:
        prefix_path = self.normalize_path(prefix_path)
        if not _is_dbfs(prefix_path):
            # Outside /dbfs a Databricks path is local to one node: the executors would not see the data.
            warnings.warn(f"DBFSLocalStore prefix path {prefix_path} is not under /dbfs/", stacklevel=2)
        super().__init__(prefix_path, *args, **kwargs)

    @staticmethod
    def normalize_path(path: str) -> str:
        """``dbfs:/x`` and ``file:///dbfs/x`` -> ``/dbfs/x``; anything else is returned unchanged.

        :param path: a DBFS path in any of its forms.
        """
        parts = split_url(path)
        if parts.scheme == "dbfs" and not parts.authority:
            return "/dbfs" + parts.path
        if parts.scheme == "file" and not parts.authority and _is_dbfs(parts.path):
            return parts.path
        return path

    def get_localized_path(self, path: str) -> str:
        return super().get_localized_path(self.normalize_path(path))

    def get_full_path(self, path: str) -> str:
        local = self.get_localized_path(path)
        return "dbfs:" + (local[len("/dbfs") :] or "/") if _is_dbfs(local) else "file://" + local


class HDFSStore(FilesystemStore):
    """HDFS as a store, from ``hdfs://namenode01:8020/user/x``, ``hdfs:///user/x`` or ``/user/x``.

    Full paths keep the URL's ``hdfs://host:port`` (``hdfs://`` when the URL has none); localized
    paths drop it. ``host``/``port`` (else the URL's, else ``"default"`` and 0: the cluster's
    fs.defaultFS) are used for :class:`pyarrow.fs.HadoopFileSystem`, which is made on first use, so a
    store can be built and its paths read without libhdfs. ``temp_dir`` is kept for compatibility.
    ``filesystem``, for tests and for other Hadoop-compatible filesystems, replaces the Hadoop one.

    :param prefix_path: the store's root: ``hdfs://host:port/path``, ``hdfs:///path`` or ``/path`` (``ValueError`` for
        another scheme).
    :param host: the namenode's host (default: the URL's, else ``default``, the cluster's ``fs.defaultFS``).
    :param port: the namenode's port (default: the URL's, else 0).
    :param user: the HDFS user to connect as.
    :param kerb_ticket: the path of a Kerberos ticket cache to authenticate with.
    :param driver: only ``libhdfs`` (pyarrow's); another raises ``ValueError``.
    :param extra_conf: extra Hadoop configuration, key to value, for the connection.
    :param temp_dir: kept for compatibility with Horovod; unused.
    :param args: further positional arguments of :class:`FilesystemStore` (``train_path``...).
    :param filesystem: a pyarrow filesystem used instead of the Hadoop one (tests, other Hadoop-compatible filesystems);
        keyword only.
    :param kwargs: further keyword arguments of :class:`FilesystemStore`.
    """

    def __init__(
        self,
        prefix_path: str,
        host: str | None = None,
        port: int | None = None,
        user: str | None = None,
        kerb_ticket: str | None = None,
        driver: str = "libhdfs",
        extra_conf: dict[str, str] | None = None,
        temp_dir: str | None = None,
        *args: Any,
        filesystem: pafs.FileSystem | None = None,
        **kwargs: Any,
    ) -> None:
        if driver != "libhdfs":
            raise ValueError(f"HDFSStore driver {driver!r} is not supported: pyarrow only has 'libhdfs'")
        parts = split_url(prefix_path)
        if parts.scheme not in (None, "hdfs"):
            raise ValueError(f"HDFSStore takes hdfs:// URIs or absolute paths, not {prefix_path!r}")
        url_host, url_port = split_host_port(parts.authority)
        self._url_prefix = f"hdfs://{parts.authority or ''}"
        self._host = host or url_host or "default"
        self._port = port or url_port or 0
        self._user, self._kerb_ticket, self._extra_conf = user, kerb_ticket, dict(extra_conf or {})
        self.temp_dir = temp_dir
        self._given_fs = filesystem
        super().__init__(prefix_path, *args, **kwargs)

    def _create_filesystem(self) -> pafs.FileSystem:
        if self._given_fs is not None:
            return self._given_fs
        try:
            return pafs.HadoopFileSystem(
                self._host, self._port, user=self._user, kerb_ticket=self._kerb_ticket, extra_conf=self._extra_conf
            )
        except _ARROW_ERRORS as error:
            raise OSError(
                f"cannot connect to HDFS at {self._host}:{self._port} for store {self.prefix_path}: "
                f"{short_reason(error)}. pyarrow's HadoopFileSystem needs JAVA_HOME, HADOOP_HOME and "
                "CLASSPATH=$(hadoop classpath --glob) (or ARROW_LIBHDFS_DIR)"
            ) from error

    def get_localized_path(self, path: str) -> str:
        parts = split_url(path)
        if parts.scheme not in (None, "hdfs") or not parts.path.startswith("/"):
            raise ValueError(f"HDFSStore takes hdfs:// URIs or absolute paths, not {path!r}")
        return posixpath.normpath(parts.path)

    def get_full_path(self, path: str) -> str:
        if split_url(path).scheme == "hdfs":
            return path
        return self._url_prefix + self.get_localized_path(path)


def _with_index(path: str, idx: int | str | None) -> str:
    return path if idx is None else f"{path}.{idx}"


def _is_dbfs(local_path: str) -> bool:
    return local_path == "/dbfs" or local_path.startswith("/dbfs/")
