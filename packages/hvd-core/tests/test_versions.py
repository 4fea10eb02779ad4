"""What horovod.__version__ and the packages' versions mean (documented in hvd-core's README)."""

from __future__ import annotations

from importlib import metadata

import pytest

import horovod
import horovod.common
from horovod.common import util
from horovod.common.version import HOROVOD_API_VERSION


def test_the_api_level_is_horovods_release() -> None:
    assert util.horovod_api_version == HOROVOD_API_VERSION == "0.28.1"


def test_version_is_the_api_level_with_hvd_cores_version_as_local_label() -> None:
    assert horovod.__version__ == f"{HOROVOD_API_VERSION}+hvd.{horovod.common.__version__}"
    assert horovod.common.__version__ == metadata.version("hvd-core")


@pytest.mark.parametrize("gate", ["0.21", "0.21.0", "0.20.3", "0.28", "0.28.1", "0.19"])
def test_gates_written_for_horovod_take_the_modern_branch(gate: str) -> None:
    from packaging.version import Version

    assert horovod.__version__ >= gate  # compared as strings, as many scripts do
    assert Version(horovod.__version__) >= Version(gate)


@pytest.mark.parametrize("gate", ["0.28.2", "0.29", "1.0"])
def test_gates_for_later_horovod_releases_stay_closed(gate: str) -> None:
    from packaging.version import Version

    assert not horovod.__version__ >= gate
    assert not Version(horovod.__version__) >= Version(gate)


def test_version_parses_as_pep_440_with_the_api_release() -> None:
    from packaging.version import Version

    version = Version(horovod.__version__)
    assert version.base_version == HOROVOD_API_VERSION and version.local == f"hvd.{horovod.common.__version__}"
    assert tuple(int(p) for p in horovod.__version__.split("+")[0].split(".")) == (0, 28, 1)
