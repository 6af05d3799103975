"""The issue-29 edge operators (tests/onnx/test_onnx_valid_edge_ops.py checks them in float)
through `qsim quantize`: each small model lowers to TOSA 0.30, replays bit-exact on the numpy
reference and the kernels, and its output stays near the float one (SQNR floors about 5 dB under
the measured values)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from qsim.quant.calibration.data import Samples
from qsim.quant.evaluation.evaluate import quantize_feed
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import load_float_model, quantize_graph
from qsim.runtime.executor import execute

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "onnx"))
from onnx_helpers import init, make_model, save  # noqa: E402


def _i64(*values):
    return np.array(values, np.int64)


CASES = {
    "log_softmax": ([helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)], (1, 10), [], 43.0),
    "empty_slice_concat": ([helper.make_node("Slice", ["x", "s", "e", "a"], ["z"]),
                            helper.make_node("Concat", ["z", "x"], ["c"], axis=1), helper.make_node("Relu", ["c"], ["y"])],
                           (1, 10), [init("s", _i64(5)), init("e", _i64(5)), init("a", _i64(1))], 38.0),
    "cast_uint64_shape": ([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Cast", ["s"], ["u"], to=TensorProto.UINT64),
                           helper.make_node("Cast", ["u"], ["i"], to=TensorProto.INT64),
                           helper.make_node("Reshape", ["x", "i"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
                          (1, 10), [], 38.0),
    "resize_to_one": ([helper.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="linear",
                                        coordinate_transformation_mode="pytorch_half_pixel")],
                      (1, 2, 4, 4), [init("sz", _i64(1, 2, 1, 8))], 34.0),
    "repeated_reduce_axes": ([helper.make_node("ReduceMean", ["x"], ["y"], axes=[2, -1, 2], keepdims=1)],
                             (1, 3, 4), [], 35.0),
    "depth_to_space": ([helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
                        helper.make_node("DepthToSpace", ["c"], ["y"], blocksize=2, mode="DCR")],
                       (1, 3, 4, 4), [init("w", np.random.default_rng(3).normal(size=(8, 3, 1, 1)).astype(np.float32))], 33.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_edge_operator_quantizes_bit_exact(tmp_path, name):
    nodes, shape, inits, floor = CASES[name]
    model = make_model(nodes, [("x", list(shape))], [("y", None)], inits, opset=13)
    rng = np.random.default_rng(5)
    graph = load_float_model(save(model, tmp_path))
    result = quantize_graph(graph, Samples(rng.normal(size=(32, *shape[1:])).astype(np.float32)), None,
                            QuantizeOptions(show_progress=False))
    feed = quantize_feed(result.model, {"x": rng.normal(size=shape).astype(np.float32)})
    kernels = execute(result.model.graph, feed, backend="kernels")
    reference = execute(result.model.graph, feed, backend="reference")
    for tensor, value in reference.items():
        np.testing.assert_array_equal(kernels[tensor], value, err_msg=f"{name}: {tensor}")
    assert result.report.outputs[0].sqnr_db >= floor, result.report.outputs[0].sqnr_db
