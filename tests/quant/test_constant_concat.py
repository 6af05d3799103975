"""Constant inputs of a concat (a ViT's class token, a learned prefix; qsim/quant/tosa/rules_layout.py
lower_concat): the constant is quantized onto the concat output's grid, joined without a RESCALE
or TRANSPOSE of its own, and the integer graph replays bit-exact on the reference and kernels."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from qsim.quant.calibration.data import Samples
from qsim.quant.options import QuantizeOptions
from qsim.quant.params import quantize
from qsim.quant.pipeline import load_float_model, quantize_graph
from qsim.runtime.executor import execute

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "onnx"))
from onnx_helpers import init, make_model, save  # noqa: E402


# 2: a trained token's size; 0: torchvision's VisionTransformer starts its class token at zeros
# (an untrained or freshly built model exports a constant of zeros: the concat's zero point)
@pytest.mark.parametrize("token_scale", [2.0, 0.0])
def test_class_token_is_quantized_onto_the_concat_grid(tmp_path, token_scale):
    rng = np.random.default_rng(7)
    token = rng.normal(size=(1, 1, 8)).astype(np.float32) * token_scale
    nodes = [helper.make_node("Concat", ["cls", "x"], ["cat"], axis=1),
             helper.make_node("Add", ["cat", "pos"], ["h"]),
             helper.make_node("MatMul", ["h", "w"], ["y"])]
    model = make_model(nodes, [("x", [1, 5, 8])], [("y", None)],
                       [init("cls", token), init("pos", rng.normal(size=(1, 6, 8)).astype(np.float32)),
                        init("w", rng.normal(size=(8, 3)).astype(np.float32))])
    graph = load_float_model(save(model, tmp_path))
    result = quantize_graph(graph, Samples(rng.normal(size=(16, 5, 8)).astype(np.float32)), None,
                            QuantizeOptions(show_progress=False))
    g = result.model.graph
    concat = next(op for op in g.ops if op.kind.name == "tosa.CONCAT")
    out_quant = g.tensor(concat.outputs[0]).quant
    constant = g.tensor(concat.inputs[0])
    assert constant.is_constant, "the class token enters the CONCAT as a constant, not through a TRANSPOSE/RESCALE"
    np.testing.assert_array_equal(constant.data, quantize(token, out_quant).astype(np.int8))
    step = float(out_quant.scales()[0])
    real = (constant.data.astype(np.float64) - int(out_quant.zero_points()[0])) * step
    assert np.all(np.abs(real - token) <= step / 2 + 1e-9)   # calibration covered the token's range
    feed = {"x": quantize(rng.normal(size=(1, 5, 8)), result.model.input_quant["x"]).astype(np.int8)}
    kernels, reference = execute(g, feed, backend="kernels"), execute(g, feed, backend="reference")
    for name, value in reference.items():
        np.testing.assert_array_equal(kernels[name], value, err_msg=name)
    assert result.report.outputs[0].sqnr_db > 30
