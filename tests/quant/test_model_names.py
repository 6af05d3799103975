"""Names the SkriptND text cannot hold (ONNX's 'input.1', '/block/Relu_output_0', '14'): the
integer graph is named with text-safe names from the start, so a saved quantized model reloads
with every tensor_map entry present and computes what the in-memory model computes."""
from __future__ import annotations

import numpy as np
import pytest
import onnx
from onnx import TensorProto, helper, numpy_helper

from qsim.kernels.backend import Backend
from qsim.quant.calibration.data import Samples
from qsim.quant.lowering.graph_builder import IntegerGraphBuilder, is_text_safe
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import quantize_graph
from qsim.quant.qmodel import integer_inputs, load_quantized_model, save_quantized_model
from qsim.quant.cvm.target import CvmTarget
from qsim.quant.tosa.target import TosaTarget
from qsim.runtime.executor import execute
from qsim.onnx.loader import load as load_onnx


def _onnx_model(tmp_path):
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("Conv", ["input.1", "conv.weight", "conv.bias"], ["/conv/Conv_output_0"],
                         name="/conv/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["/conv/Conv_output_0"], ["/Relu_output_0"], name="/Relu"),
        helper.make_node("MaxPool", ["/Relu_output_0"], ["14"], name="/pool/MaxPool",
                         kernel_shape=[2, 2], strides=[2, 2]),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3,
                                     "conv.weight"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32) * 0.1, "conv.bias")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input.1", TensorProto.FLOAT,
                                                                         [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("14", TensorProto.FLOAT, [1, 4, 4, 4])],
                              inits)
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return load_onnx(str(path))


@pytest.mark.parametrize("target", [TosaTarget(), CvmTarget()], ids=["tosa", "cvm"])
def test_onnx_names_survive_save_and_load(tmp_path, target):
    graph = _onnx_model(tmp_path)
    samples = Samples(np.random.default_rng(4).standard_normal((6, 1, 3, 8, 8)).astype(np.float32)[:, 0])
    result = quantize_graph(graph, samples, options=QuantizeOptions(show_progress=False), target=target)
    names = set(result.model.graph.tensors)
    assert all(is_text_safe(n) for n in names), sorted(n for n in names if not is_text_safe(n))
    folder = save_quantized_model(result.model, target, tmp_path / "q")
    loaded = load_quantized_model(folder)
    assert set(loaded.tensor_map) == set(result.model.tensor_map)
    for float_name, lowered in result.model.tensor_map.items():
        assert loaded.tensor_map[float_name].name == lowered.name
    x = samples.inputs[:1]
    feed_mem = integer_inputs(result.model, {result.model.graph.inputs[0]: x})
    feed_disk = integer_inputs(loaded, {loaded.graph.inputs[0]: x})
    got_mem = execute(result.model.graph, feed_mem, backend=Backend.REFERENCE)
    got_disk = execute(loaded.graph, feed_disk, backend=Backend.REFERENCE)
    for out_mem, out_disk in zip(result.model.graph.outputs, loaded.graph.outputs):
        np.testing.assert_array_equal(got_mem[out_mem], got_disk[out_disk])


def test_safe_names_are_fixed_per_name_and_never_collide():
    b = IntegerGraphBuilder()
    b.reserve(["input_1", "a_b"])
    assert b.safe("conv1.acc") == "conv1.acc"          # dotted identifier paths are kept
    assert b.safe("input.1") == "input_1_2"            # "input_1" is another float tensor's name
    assert b.safe("a/b") == "a_b_2" and b.safe("a/b") == "a_b_2"
    assert b.safe("a:b") == "a_b_3"
    assert b.safe("14") == "t_14"
    assert b.fresh("14") == "t_14" and b.fresh("14") == "t_14_2"
