"""Docstrings of hvd-core's public API say what each argument does (a ``:param name:`` for each)."""

from __future__ import annotations

from hvd_devtools.docstrings import assert_parameters_documented


def test_every_public_parameter_is_documented() -> None:
    assert_parameters_documented(
        [
            "horovod.common",
            "horovod.common.framework_api",
            "horovod.common.job_report",
            "horovod.common.timelines",
            "horovod.common.elastic",
            "horovod.common.plugin_api",
        ]
    )
