"""hvd's TensorFlow kernel library against the TensorFlow installed: its own declarations of the C
API (csrc/tf_c_api.h, so that building it needs no TensorFlow) must be TensorFlow's, and the
library must load and register its ops. The kernels' behaviour is tested by every graph-mode and
tf.function case of test_collectives.py, with 2 and 3 ranks."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

CSRC = pathlib.Path(__file__).parents[1] / "csrc"


def _compile_against_tensorflow(header_dir: pathlib.Path, tmp_path: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """Compiles TensorFlow's C API headers followed by ours: a prototype of ours that differs
    from TensorFlow's is a conflicting declaration of a C function, an error."""
    import tensorflow as tf

    source = tmp_path / "agree.cc"
    source.write_text(
        "#include <tensorflow/c/kernels.h>\n"
        "#include <tensorflow/c/ops.h>\n"
        "#include <tensorflow/c/tf_status.h>\n"
        "#include <tensorflow/c/tf_tensor.h>\n"
        '#include "tf_c_api.h"\n'
    )
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("no C++ compiler (g++) on PATH: this check needs one")
    return subprocess.run(
        [compiler, "-std=c++17", "-fsyntax-only", "-I", tf.sysconfig.get_include(), "-I", str(header_dir), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_our_c_api_declarations_are_tensorflows(tmp_path: pathlib.Path) -> None:
    result = _compile_against_tensorflow(CSRC, tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]


def test_the_declaration_check_catches_a_difference(tmp_path: pathlib.Path) -> None:
    altered = tmp_path / "altered"
    altered.mkdir()
    header = (CSRC / "tf_c_api.h").read_text()
    assert "int TF_NumInputs(TF_OpKernelContext* ctx);" in header
    (altered / "tf_c_api.h").write_text(header.replace("int TF_NumInputs(", "int64_t TF_NumInputs("))
    result = _compile_against_tensorflow(altered, tmp_path)
    assert result.returncode != 0 and "TF_NumInputs" in result.stderr, result.stderr[-2000:]


def test_every_op_is_stateful_and_only_the_collectives_run_unordered_in_a_function() -> None:
    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry

    from horovod.tensorflow import native

    module = native.ops()
    for op in [*native.COLLECTIVES, "HvdJoin", "HvdBarrier"]:
        op_def = op_def_registry.get(op)
        assert op_def is not None and op_def.is_stateful, op  # never folded by Grappler

    def collectives_and_joins(x: tf.Tensor) -> list[tf.Tensor]:
        names = {"names": ["a"], "reduce_op": 1}
        first, second = module.hvd_allreduce([x], **names)[0], module.hvd_allgather([x], names=["b"])[0]
        return [first, second, module.hvd_join(), module.hvd_join()]

    graph = tf.function(collectives_and_joins).get_concrete_function(tf.TensorSpec([2], tf.float32)).graph
    ours = [op for op in graph.get_operations() if op.type.startswith("Hvd")]
    collectives = [op for op in ours if op.type in native.COLLECTIVES]
    joins = [op for op in ours if op.type == "HvdJoin"]
    # The collectives wait for nothing but their inputs; the second join waits for the first.
    assert len(collectives) == 2 and all(not op.control_inputs for op in collectives), collectives
    assert len(joins) == 2 and joins[1].control_inputs == [joins[0]], [j.control_inputs for j in joins]
