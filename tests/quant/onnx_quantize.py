"""Quantizing small ONNX models built in code (onnx.helper) in memory, and replaying their
integer graphs on the TOSA 0.30 reference (qsim.tosa) and the kernels, which must agree on
every tensor, bit for bit.

The route is the one `qsim quantize model.onnx --calib X.npy` takes: qsim's ONNX loader, min-max
calibration over the given samples, the TOSA target's lowering.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qsim.quant.calibration.data import Samples
from qsim.quant.calibration.observers import ObserverKind
from qsim.quant.params import Precision, dequantize, quantize
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import calibrate_model, load_float_model
from qsim.quant.tosa.target import TosaTarget
from qsim.runtime.executor import execute

PRECISIONS = {"int8": Precision.INT8, "16x8": Precision.INT16X8}


def node(op: str, inputs, outputs, name: str | None = None, **attrs):
    """An ONNX node named `name` (default: its first output), as exporters name them."""
    return helper.make_node(op, list(inputs), list(outputs), name=name or outputs[0], **attrs)


def init(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def onnx_model(nodes, x_shape, outputs=("y",), initializers=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 9)
    return model


def quantize_onnx(tmp_path, model: onnx.ModelProto, calib: np.ndarray, precision: str = "int8"):
    """(float graph, LoweredModel) of `model` calibrated (min-max) on `calib` [N, *x_shape]."""
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    graph = load_float_model(str(path))
    options = QuantizeOptions(observer=ObserverKind.MINMAX, precision=PRECISIONS[precision],
                              show_progress=False)
    target = TosaTarget(options.config)
    calibration = calibrate_model(graph, Samples(np.asarray(calib, np.float32)), graph.inputs[0], options, target)
    return graph, target.lower(graph, calibration)


def replay(lowered, codes: np.ndarray) -> dict:
    """The integer graph on input codes `codes`, on the reference; asserts the kernels give the
    same bits on every tensor."""
    g = lowered.graph
    name = g.inputs[0]
    feed = {name: np.asarray(codes).astype(g.tensors[name].dtype.numpy)}
    ref = execute(g, feed, backend="reference")
    fast = execute(g, feed, backend="kernels")
    for t in ref:
        assert np.array_equal(ref[t], fast[t]), f"kernels and reference differ on {t}"
    return ref


def run_quantized(lowered, x: np.ndarray, output: str = "y") -> np.ndarray:
    """Float input x → quantized → integer graph (replay) → the dequantized output."""
    name = lowered.graph.inputs[0]
    ints = replay(lowered, quantize(x, lowered.input_quant[name]))
    v = lowered.tensor_map[output]
    return dequantize(ints[v.name], v.quant).transpose(np.argsort(v.perm))


def tosa_kinds(lowered) -> list[str]:
    return [op.kind.name for op in lowered.graph.ops]


def sqnr_db(ref, got) -> float:
    ref = np.asarray(ref, np.float64)
    err = np.asarray(got, np.float64) - ref
    return float(10 * np.log10(np.sum(ref ** 2) / max(np.sum(err ** 2), 1e-30)))
