"""Docstrings of hvd-tensorflow's public API say what each argument does (a ``:param name:`` for each)."""

from __future__ import annotations

from hvd_devtools.docstrings import assert_parameters_documented


def test_every_public_parameter_is_documented() -> None:
    assert_parameters_documented(
        [
            "horovod.tensorflow",
            "horovod.tensorflow.elastic",
        ]
    )
