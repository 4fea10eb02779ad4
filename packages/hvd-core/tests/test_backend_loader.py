"""Loading backend libraries through the C ABI: validation, and symbols kept local."""

from __future__ import annotations

import ctypes
import subprocess
import textwrap
from pathlib import Path

import pytest

import horovod.common as hvd
from horovod.common import _core


def _compile(tmp_path: Path, name: str, source: str) -> str:
    c_file = tmp_path / f"{name}.c"
    c_file.write_text(textwrap.dedent(source))
    library = tmp_path / f"lib{name}.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-I", hvd.get_include(), str(c_file), "-o", str(library)], check=True, timeout=120
    )
    return str(library)


def test_header_ships_with_the_package() -> None:
    assert (Path(hvd.get_include()) / "horovod" / "hvd_backend.h").is_file()
    assert (Path(hvd.get_include()) / "horovod" / "hvd_reduce.hpp").is_file()


def test_unknown_abi_version_is_refused(tmp_path: Path) -> None:
    library = _compile(
        tmp_path,
        "future",
        """
        #include "horovod/hvd_backend.h"
        static hvd_backend_v1 table = {7, sizeof(hvd_backend_v1), "future", "9.9"};
        HVD_BACKEND_EXPORT const hvd_backend_v1* hvd_backend_v1_get(void) { return &table; }
        """,
    )
    with pytest.raises(ValueError, match=r"'future'.*ABI version 7.*supports only version 1"):
        _core.Backend.load(library)


def test_missing_functions_are_named(tmp_path: Path) -> None:
    library = _compile(
        tmp_path,
        "partial",
        """
        #include "horovod/hvd_backend.h"
        static hvd_backend_v1 table = {HVD_BACKEND_ABI_VERSION, sizeof(hvd_backend_v1), "partial", "0"};
        HVD_BACKEND_EXPORT const hvd_backend_v1* hvd_backend_v1_get(void) { return &table; }
        """,
    )
    with pytest.raises(ValueError, match=r"'partial'.*does not implement comm_create"):
        _core.Backend.load(library)


_COMPLETE_V1_TABLE = """
    #include "horovod/hvd_backend.h"
    static int create(const hvd_comm_config_v1* c, const hvd_store_v1* s, hvd_comm** o, char* e, size_t n) {
      return HVD_ERR_UNSUPPORTED;
    }
    static void destroy(hvd_comm* c) {}
    static const char* last_error(const hvd_comm* c) { return ""; }
    static int allreduce(hvd_comm* c, const void* s, void* r, size_t n, hvd_dtype d, hvd_reduce_op o) { return 3; }
    static int allgatherv(hvd_comm* c, const void* s, void* r, const size_t* n, hvd_dtype d) { return 3; }
    static int broadcast(hvd_comm* c, void* b, size_t n, hvd_dtype d, int32_t root) { return 3; }
    static int alltoallv(hvd_comm* c, const void* s, const size_t* sn, void* r, const size_t* rn, hvd_dtype d) {
      return 3;
    }
    static int reducescatter(hvd_comm* c, const void* s, void* r, const size_t* n, hvd_dtype d, hvd_reduce_op o) {
      return 3;
    }
    static int barrier(hvd_comm* c) { return 3; }
    static hvd_backend_v1 table = {HVD_BACKEND_ABI_VERSION, sizeof(hvd_backend_v1), "stub", "0", HVD_DEVICE_CPU, 0, 0,
        create, destroy, last_error, allreduce, allgatherv, broadcast, alltoallv, reducescatter, barrier};
    HVD_BACKEND_EXPORT const hvd_backend_v1* hvd_backend_v1_get(void) { return &table; }
"""

_EXTENSIONS = """
    static int buffers(hvd_comm* c, const hvd_buffer_pair* b, size_t n, hvd_dtype d, hvd_reduce_op o, double s) {
      return 3;
    }
    static hvd_backend_ext_v1 extensions = {SIZE, 0, buffers};
    HVD_BACKEND_EXPORT const hvd_backend_ext_v1* hvd_backend_ext_v1_get(void) { return &extensions; }
"""


@pytest.mark.parametrize(
    ("extensions", "found"),
    [
        ("", []),  # a backend built before the extensions existed
        (_EXTENSIONS.replace("SIZE", "sizeof(hvd_backend_ext_v1)"), ["allreduce_buffers"]),
        (_EXTENSIONS.replace("SIZE", "8"), []),  # a table too short to hold the member: not there
    ],
)
def test_optional_extensions_are_used_where_present(tmp_path: Path, extensions: str, found: list) -> None:
    backend = _core.Backend.load(_compile(tmp_path, "stub", _COMPLETE_V1_TABLE + extensions))
    assert backend.name == "stub" and backend.extensions == found


def test_a_library_that_is_not_a_backend(tmp_path: Path) -> None:
    library = _compile(tmp_path, "plain", "int answer(void) { return 42; }\n")
    with pytest.raises(ValueError, match="not an hvd backend"):
        _core.Backend.load(library)
    with pytest.raises(ValueError, match="could not load"):
        _core.Backend.load(str(tmp_path / "missing.so"))


def test_backend_symbols_stay_local(tmp_path: Path) -> None:
    from horovod.common.plugins import get_plugin_manager

    backend = _core.Backend.load(get_plugin_manager().backend("inmemory").library_path())
    assert backend.name == "inmemory" and backend.device_kinds == _core.DEVICE_CPU
    # RTLD_LOCAL: the entry symbol must not be visible through the global namespace.
    with pytest.raises(AttributeError):
        _ = ctypes.CDLL(None).hvd_backend_v1_get
