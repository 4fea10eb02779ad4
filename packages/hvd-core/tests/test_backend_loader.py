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
    with pytest.raises(ValueError, match="'partial'.*does not implement comm_create"):
        _core.Backend.load(library)


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
        ctypes.CDLL(None).hvd_backend_v1_get
