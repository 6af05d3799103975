"""1-D layers through the integer lowering (qsim/onnx/convert_unit_axis.py puts them on a unit
axis): a Conv1d + BatchNorm1d + ReLU + MaxPool1d + AvgPool1d stack and a BatchNorm1d on [N, C]
features quantize, replay bit-exact on the TOSA reference and the kernels, and stay close to the
float model (SQNR floors about 5 dB under the measured 38 and 47 dB)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from qsim.quant.calibration.data import Samples
from qsim.quant.evaluation.evaluate import quantize_feed
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import load_float_model, quantize_graph
from qsim.runtime.executor import execute

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "onnx"))
from onnx_helpers import init, make_model, save  # noqa: E402

RNG = np.random.default_rng(31)


def _w(*shape, scale=0.5):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def _bn(x: str, out: str, c: int, tag: str):
    inits = [init(f"g{tag}", 1 + _w(c, scale=0.1)), init(f"b{tag}", _w(c, scale=0.1)),
             init(f"m{tag}", _w(c, scale=0.1)), init(f"v{tag}", 1 + np.abs(_w(c, scale=0.1)))]
    return helper.make_node("BatchNormalization", [x, f"g{tag}", f"b{tag}", f"m{tag}", f"v{tag}"], [out]), inits


def conv1d_stack():
    bn, inits = _bn("c", "n", 8, "1")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3], pads=[1, 1]), bn,
             helper.make_node("Relu", ["n"], ["r"]), helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2], strides=[2]),
             helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=[2], strides=[2])]
    return make_model(nodes, [("x", [1, 4, 16])], [("y", None)], [init("w", _w(8, 4, 3)), init("b", _w(8))] + inits), (4, 16), 33.0


def features_bn():
    bn, inits = _bn("x", "h", 6, "2")
    nodes = [bn, helper.make_node("Relu", ["h"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["y"])]
    return make_model(nodes, [("x", [1, 6])], [("y", None)], inits + [init("w", _w(6, 3))]), (6,), 40.0


@pytest.mark.parametrize("build", [conv1d_stack, features_bn])
def test_one_dimensional_layers_quantize_bit_exact(tmp_path, build):
    model, shape, floor = build()
    graph = load_float_model(save(model, tmp_path))
    result = quantize_graph(graph, Samples(RNG.normal(size=(32, *shape)).astype(np.float32)), None,
                            QuantizeOptions(show_progress=False))
    kinds = {op.kind.name for op in result.model.graph.ops}
    assert not kinds & {"tosa.CONV3D"} and ("tosa.CONV2D" in kinds or "tosa.DEPTHWISE_CONV2D" in kinds)
    feed = quantize_feed(result.model, {"x": RNG.normal(size=(1, *shape)).astype(np.float32)})
    kernels, reference = execute(result.model.graph, feed, backend="kernels"), execute(result.model.graph, feed,
                                                                                         backend="reference")
    for name, value in reference.items():
        np.testing.assert_array_equal(kernels[name], value, err_msg=name)
    assert result.report.outputs[0].sqnr_db >= floor
