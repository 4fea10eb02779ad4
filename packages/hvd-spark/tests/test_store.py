"""The Stores (horovod.spark.common.store) over real files: bytes, Parquet datasets, checkpoints, run
syncs and pickling, for every store type. Pure pyarrow, no Spark; HDFS is a SubTreeFileSystem."""

from __future__ import annotations

import base64
import os
import pickle
from collections.abc import Callable
from pathlib import Path

import cloudpickle
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from horovod.spark.common.store import DBFSLocalStore, FilesystemStore, HDFSStore, LocalStore, Store

HDFS_PREFIX = "hdfs://namenode01:8020/user/test/horovod"


def _local(tmp_path: Path) -> FilesystemStore:
    return LocalStore(str(tmp_path / "store"))


def _local_uri(tmp_path: Path) -> FilesystemStore:
    return LocalStore(f"file://{tmp_path}/store")


def _local_custom(tmp_path: Path) -> FilesystemStore:
    return LocalStore(str(tmp_path / "store"), train_path=str(tmp_path / "elsewhere" / "train"))


def _hdfs(tmp_path: Path) -> FilesystemStore:
    return HDFSStore(HDFS_PREFIX, filesystem=pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()))


def _dbfs(tmp_path: Path) -> FilesystemStore:
    with pytest.warns(UserWarning, match="not under /dbfs/"):
        return DBFSLocalStore(str(tmp_path / "store"))


STORES: dict[str, Callable[[Path], FilesystemStore]] = {
    "local": _local,
    "local-file-uri": _local_uri,
    "local-custom-train-path": _local_custom,
    "hdfs-subtree": _hdfs,
    "dbfs-tmp": _dbfs,
}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> FilesystemStore:
    return STORES[request.param](tmp_path)


def on_disk(store: FilesystemStore, path: str, tmp_path: Path) -> Path:
    """Where a store path really is: HDFS-style paths live under tmp_path (the SubTreeFileSystem)."""
    local = store.get_localized_path(path)
    return tmp_path / local.lstrip("/") if isinstance(store, HDFSStore) else Path(local)


def write_parquet_parts(store: FilesystemStore, path: str, parts: int = 3) -> pa.Table:
    tables = [pa.table({"x": list(range(i * 4, i * 4 + 4)), "y": [float(i)] * 4}) for i in range(parts)]
    root = store.get_localized_path(path)
    store.filesystem.create_dir(root, recursive=True)
    for i, table in enumerate(tables):
        pq.write_table(table, f"{root}/part-{i:05d}.parquet", filesystem=store.filesystem)
    return pa.concat_tables(tables)


def test_write_read_overwrite_remove(store: FilesystemStore, tmp_path: Path) -> None:
    path = f"{store.prefix_path}/a/b/blob.bin"
    store.write(path, b"first")
    assert on_disk(store, path, tmp_path).read_bytes() == b"first"
    store.write(path, b"second, longer")
    assert store.read(path) == b"second, longer"
    assert store.read(store.get_localized_path(path)) == b"second, longer"  # localized paths work too
    # The temporary file of the atomic write is gone: only the target is left.
    assert store.list_files(f"{store.prefix_path}/a") == [store.get_localized_path(path)]
    store.remove(f"{store.prefix_path}/a")
    assert not store.exists(path)
    assert not on_disk(store, path, tmp_path).parent.exists()
    store.remove(f"{store.prefix_path}/a")  # missing: no error


def test_failed_write_keeps_old_contents(store: FilesystemStore) -> None:
    path = f"{store.prefix_path}/ckpt"
    store.write(path, b"good")
    with pytest.raises(TypeError):
        store.write(path, 12345)  # type: ignore[arg-type]
    assert store.read(path) == b"good"
    assert store.list_files(store.prefix_path) == [store.get_localized_path(path)]


def test_parquet_dataset_roundtrip(store: FilesystemStore, tmp_path: Path) -> None:
    path = store.get_train_data_path(0)
    assert not store.is_parquet_dataset(path)  # missing
    expected = write_parquet_parts(store, path)
    assert len(list(on_disk(store, path, tmp_path).glob("*.parquet"))) == 3
    assert store.is_parquet_dataset(path)
    table = store.get_parquet_dataset(path).read().sort_by("x")
    assert table.select(["x", "y"]).equals(expected)
    assert not store.is_parquet_dataset(f"{path}/part-00000.parquet")  # a file is no dataset root


def test_checkpoint_roundtrip(store: FilesystemStore, tmp_path: Path) -> None:
    ckpt = store.get_checkpoint_path("run-1")
    assert ckpt == f"{store.get_run_path('run-1')}/checkpoint"
    assert store.get_logs_path("run-1") == f"{store.get_run_path('run-1')}/logs"
    payload = bytes(range(256)) * 10
    store.write(ckpt, payload)
    assert on_disk(store, ckpt, tmp_path).read_bytes() == payload
    assert store.read(ckpt) == payload
    assert base64.b64decode(store.read_serialized_keras_model(ckpt, None, None)) == payload


def test_sync_fn_copies_tree_and_overwrites(store: FilesystemStore, tmp_path: Path) -> None:
    local = tmp_path / "rank-output"
    (local / "logs" / "train").mkdir(parents=True)
    (local / "checkpoint").write_bytes(b"epoch 1")
    (local / "logs" / "train" / "events").write_text("loss=1.0")
    sync = pickle.loads(pickle.dumps(store.sync_fn("run-7")))  # it travels to the ranks
    sync(str(local))
    run_path = store.get_run_path("run-7")
    run_local = store.get_localized_path(run_path)
    assert store.list_files(run_path) == [f"{run_local}/checkpoint", f"{run_local}/logs/train/events"]
    (local / "checkpoint").write_bytes(b"epoch 2")
    sync(str(local))
    assert store.read(store.get_checkpoint_path("run-7")) == b"epoch 2"
    assert (on_disk(store, run_path, tmp_path) / "logs" / "train" / "events").read_text() == "loss=1.0"
    with pytest.raises(ValueError, match="not one"):
        sync(str(local / "checkpoint"))


@pytest.mark.parametrize("dumps, loads", [(pickle.dumps, pickle.loads), (cloudpickle.dumps, cloudpickle.loads)])
def test_store_pickles_and_still_works(
    store: FilesystemStore, dumps: Callable[[object], bytes], loads: Callable[[bytes], object]
) -> None:
    store.write(f"{store.prefix_path}/from-driver", b"driver")  # the filesystem now exists on the original
    remote = store.to_remote("run-1", 0)
    copy = loads(dumps(remote))
    assert isinstance(copy, type(store))
    assert copy.get_train_data_path(0) == store.get_train_data_path(0)
    assert copy.read(f"{copy.prefix_path}/from-driver") == b"driver"
    copy.write(copy.get_checkpoint_path("run-1"), b"from rank")
    assert store.read(store.get_checkpoint_path("run-1")) == b"from rank"


def test_default_and_custom_paths(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path / "s"), val_path=str(tmp_path / "v"), runs_path=f"file://{tmp_path}/r")
    assert store.prefix_path == f"file://{tmp_path}/s"
    assert store.get_train_data_path() == f"file://{tmp_path}/s/intermediate_train_data"
    assert store.get_train_data_path(2) == f"file://{tmp_path}/s/intermediate_train_data.2"
    assert store.get_test_data_path(0) == f"file://{tmp_path}/s/intermediate_test_data.0"
    assert store.get_val_data_path(1) == f"file://{tmp_path}/v.1"
    assert store.get_runs_path() == f"file://{tmp_path}/r"
    assert store.get_run_path("abc") == f"file://{tmp_path}/r/abc"
    assert store.saving_runs() and not LocalStore(str(tmp_path), save_runs=False).saving_runs()
    custom = _local_custom(tmp_path)
    assert custom.get_train_data_path(3) == f"file://{tmp_path}/elsewhere/train.3"
    assert custom.get_val_data_path(3) == f"file://{tmp_path}/store/intermediate_val_data.3"


def test_local_relative_and_uri_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = LocalStore("rel/store")
    assert store.prefix_path == f"file://{tmp_path}/rel/store"
    assert store.get_localized_path(f"file:{tmp_path}/x") == f"{tmp_path}/x"  # Hadoop's file:/ form
    assert store.get_localized_path(f"file://localhost{tmp_path}/x") == f"{tmp_path}/x"
    with pytest.raises(ValueError, match="file:// URIs"):
        store.get_localized_path("hdfs://nn/x")


@pytest.mark.parametrize(
    "prefix, expected",
    [
        ("hdfs://namenode01:8020/user/test/horovod", HDFSStore),
        ("hdfs:///user/test/horovod", HDFSStore),
        ("dbfs:/horovod", DBFSLocalStore),
        ("/dbfs/horovod", DBFSLocalStore),
        ("file:///dbfs/horovod", DBFSLocalStore),
        ("/tmp/horovod", LocalStore),
        ("file:///tmp/horovod", LocalStore),
        ("relative/horovod", LocalStore),
    ],
)
def test_create_picks_the_store(prefix: str, expected: type) -> None:
    store = Store.create(prefix)
    assert type(store) is expected


def test_create_passes_arguments(tmp_path: Path) -> None:
    store = Store.create(str(tmp_path), train_path=str(tmp_path / "t"), save_runs=False)
    assert store.get_train_data_path(1) == f"file://{tmp_path}/t.1" and not store.saving_runs()


@pytest.mark.parametrize(
    "prefix, full, localized",
    [
        ("hdfs://namenode01:8020/user/test/horovod", "hdfs://namenode01:8020/user/test/horovod", "/user/test/horovod"),
        ("hdfs:///user/test/horovod", "hdfs:///user/test/horovod", "/user/test/horovod"),
        ("/user/test/horovod", "hdfs:///user/test/horovod", "/user/test/horovod"),
    ],
)
def test_hdfs_path_forms(prefix: str, full: str, localized: str) -> None:
    store = HDFSStore(prefix)  # no libhdfs here: the filesystem is only made on first use
    assert store.prefix_path == full
    assert store.get_localized_path(store.prefix_path) == localized
    assert store.get_train_data_path(1) == f"{full}/intermediate_train_data.1"
    assert store.get_localized_path(store.get_checkpoint_path("r")) == f"{localized}/runs/r/checkpoint"
    assert store.get_full_path(f"{localized}/x") == f"{full}/x"
    with pytest.raises(ValueError, match="absolute"):
        store.get_localized_path("relative/x")


def test_hdfs_rejects_other_drivers_and_schemes() -> None:
    with pytest.raises(ValueError, match="libhdfs3"):
        HDFSStore(HDFS_PREFIX, driver="libhdfs3")
    with pytest.raises(ValueError, match="s3://bucket/x"):
        HDFSStore("s3://bucket/x")


needs_no_hadoop = pytest.mark.skipif(
    any(os.environ.get(name) for name in ("HADOOP_HOME", "ARROW_LIBHDFS_DIR")),
    reason="libhdfs may be usable here: it would try to reach the namenode",
)


@needs_no_hadoop
@pytest.mark.parametrize(
    "prefix, kwargs, where",
    [
        ("hdfs://namenode01.invalid:8020/user/x", {}, "namenode01.invalid:8020"),
        ("hdfs:///user/x", {"host": "nn2.invalid", "port": 9000}, "nn2.invalid:9000"),
        ("/user/x", {}, "default:0"),
    ],
)
def test_hdfs_unreachable_is_a_clear_error(prefix: str, kwargs: dict[str, object], where: str) -> None:
    # Checked first in a subprocess: pyarrow raises OSError (no libjvm / libhdfs), it does not abort.
    store = HDFSStore(prefix, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not writable") as caught:
        store.check_writable()
    assert prefix in str(caught.value) and where in str(caught.value)
    with pytest.raises(OSError, match=f"cannot connect to HDFS at {where}"):
        _ = store.filesystem
    # Still picklable after the failure, and constructing it did not need Hadoop.
    assert pickle.loads(pickle.dumps(store)).prefix_path == store.prefix_path


def test_check_writable_creates_prefix_and_leaves_nothing(store: FilesystemStore, tmp_path: Path) -> None:
    store.check_writable()
    assert on_disk(store, store.prefix_path, tmp_path).is_dir()
    assert store.list_files(store.prefix_path) == []


def test_check_writable_under_a_regular_file(tmp_path: Path) -> None:
    # Tests run as root, where a read-only mode does not stop writes; a path under a regular file
    # cannot be created by anyone.
    (tmp_path / "blocker").write_text("a file, not a directory")
    local = LocalStore(str(tmp_path / "blocker" / "store"))
    with pytest.raises(ValueError, match="not writable") as caught:
        local.check_writable()
    assert f"{tmp_path}/blocker/store" in str(caught.value) and "directory" in str(caught.value)
    hdfs = HDFSStore("/blocker/store", filesystem=pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()))
    with pytest.raises(ValueError, match="hdfs:///blocker/store is not writable"):
        hdfs.check_writable()


def test_is_parquet_dataset_spark_layouts(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    table = pa.table({"x": [1, 2]})
    spark_parquet = tmp_path / "spark-parquet"
    spark_parquet.mkdir()
    (spark_parquet / "_SUCCESS").write_bytes(b"")
    pq.write_table(table, str(spark_parquet / "part-00000"))  # no extension: the magic number decides
    assert store.is_parquet_dataset(str(spark_parquet))
    assert store.get_parquet_dataset(str(spark_parquet)).read().equals(table)
    spark_csv = tmp_path / "spark-csv"
    spark_csv.mkdir()
    (spark_csv / "_SUCCESS").write_bytes(b"")
    (spark_csv / "part-00000.csv").write_text("x\n1\n2\n")
    assert not store.is_parquet_dataset(str(spark_csv))
    unfinished = tmp_path / "unfinished"
    (unfinished / "_temporary" / "0").mkdir(parents=True)
    pq.write_table(table, str(unfinished / "_temporary" / "0" / "part-00000.parquet"))
    assert not store.is_parquet_dataset(str(unfinished))  # only hidden files, as Parquet readers see it
    partitioned = tmp_path / "partitioned"
    pq.write_to_dataset(pa.table({"x": [1, 2, 3], "k": ["a", "b", "a"]}), str(partitioned), partition_cols=["k"])
    assert store.is_parquet_dataset(f"file://{partitioned}")
    assert store.get_parquet_dataset(str(partitioned)).read().num_rows == 3


def test_dbfs_paths(tmp_path: Path) -> None:
    assert DBFSLocalStore.normalize_path("dbfs:/ml/horovod") == "/dbfs/ml/horovod"
    assert DBFSLocalStore.normalize_path("file:///dbfs/ml/horovod") == "/dbfs/ml/horovod"
    assert DBFSLocalStore.normalize_path("/dbfs/ml/horovod") == "/dbfs/ml/horovod"
    assert DBFSLocalStore.normalize_path("/tmp/horovod") == "/tmp/horovod"
    assert DBFSLocalStore.normalize_path("hdfs:///x") == "hdfs:///x"
    store = DBFSLocalStore("dbfs:/ml/horovod")  # nothing is created until used
    assert store.prefix_path == "dbfs:/ml/horovod"
    assert store.get_train_data_path(0) == "dbfs:/ml/horovod/intermediate_train_data.0"
    assert store.get_localized_path(store.get_checkpoint_path("r")) == "/dbfs/ml/horovod/runs/r/checkpoint"
    assert store.get_full_path("file:///dbfs/ml/x") == "dbfs:/ml/x"
    assert store.get_full_path(str(tmp_path)) == f"file://{tmp_path}"
    assert store.get_checkpoint_filename() == "checkpoint"
    assert type(Store.create("file:///dbfs/ml/horovod")).__name__ == "DBFSLocalStore"
