"""The `qdq` fuzz target: ONNX QDQ models (QuantizeLinear/DequantizeLinear pairs, as
onnxruntime.quantization writes them: per-tensor activations, per-channel int8 weights, int32
biases) built with onnx.helper, mutated where the QDQ reader (qsim/onnx/qdq.py) decides:
scales (0, negative, NaN, inf, huge, shapes), zero points (out of range, element types int4,
float8, int32, float), axis, block_size, output_dtype, a Q or DQ removed, a pair split between
two parameter sets, a Q read by a float operator, parameters computed at run time, weights as
Q(float) -> DQ. Run as `qsim check m.onnx`, `qsim run m.onnx --input x.npy` or
`qsim quantize m.onnx -o q` (no --calib: the model's own quantization)."""
from __future__ import annotations

import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .gen_onnx import model_command, serialized_variant
from .runner import Case

INPUT_SHAPE = [1, 2, 5, 5]
_ELEMENT_TYPES = (TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16, TensorProto.INT32,
                  TensorProto.INT4, TensorProto.UINT4, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT, TensorProto.INT64)
_SCALES = (0.0, -0.1, float("nan"), float("inf"), 1e-45, 1e38, 2.0 ** -30, 1.0)
_ZERO_POINTS = (-129, -128, 0, 127, 128, 255, 256, 2 ** 31 - 1, -(2 ** 31))


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _pair(tensor: str, scale: str, zp: str, out: str) -> list:
    return [helper.make_node("QuantizeLinear", [tensor, scale, zp], [f"{tensor}_q"], name=f"{tensor}_Q"),
            helper.make_node("DequantizeLinear", [f"{tensor}_q", scale, zp], [out], name=f"{tensor}_DQ")]


def qdq_model(rng: np.random.Generator, opset: int = 17, unsigned: bool = True) -> onnx.ModelProto:
    """A valid QDQ model: conv (per-channel weights, int32 bias) -> relu folded into the pair ->
    maxpool -> global average pool -> gemm, every activation through a pair."""
    zt = np.uint8 if unsigned else np.int8
    base = 128 if unsigned else 0
    wq = rng.integers(-127, 128, size=(3, 2, 3, 3)).astype(np.int8)
    sw = rng.uniform(0.002, 0.02, size=3).astype(np.float32)
    sx, sr, sg, sy = (np.float32(v) for v in rng.uniform(0.005, 0.05, size=4))
    fq = rng.integers(-127, 128, size=(3, 4)).astype(np.int8)
    sf = np.float32(rng.uniform(0.002, 0.02))
    n = helper.make_node
    nodes = [*_pair("x", "sx", "zx", "x_dq"),
             n("DequantizeLinear", ["wq", "sw", "zw"], ["w"], axis=0, name="w_DQ"),
             n("DequantizeLinear", ["bq", "sb"], ["b"], axis=0, name="b_DQ"),
             n("Conv", ["x_dq", "w", "b"], ["r"], pads=[1, 1, 1, 1], name="conv"),
             *_pair("r", "sr", "zr", "r_dq"),
             n("MaxPool", ["r_dq"], ["p"], kernel_shape=[2, 2], strides=[1, 1], name="pool"),
             *_pair("p", "sr", "zr", "p_dq"),
             n("GlobalAveragePool", ["p_dq"], ["g"], name="gap"),
             *_pair("g", "sg", "zg", "g_dq"),
             n("Flatten", ["g_dq"], ["f"], name="flat"),
             *_pair("f", "sg", "zg", "f_dq"),
             n("DequantizeLinear", ["fq", "sf"], ["fw"], name="fw_DQ"),
             n("Gemm", ["f_dq", "fw"], ["yf"], name="fc"),
             *_pair("yf", "sy", "zy", "y")]
    inits = [_init("sx", sx), _init("zx", zt(base + 3)), _init("wq", wq), _init("sw", sw),
             _init("zw", np.zeros(3, np.int8)), _init("bq", rng.integers(-500, 500, size=3).astype(np.int32)),
             _init("sb", (sx * sw).astype(np.float32)), _init("sr", sr), _init("zr", zt(base - 128 if unsigned else -128)),
             _init("sg", sg), _init("zg", zt(base - 128 if unsigned else -128)), _init("fq", fq), _init("sf", sf),
             _init("sy", sy), _init("zy", zt(base - 5))]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, INPUT_SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 9)
    return model


def _find(model: onnx.ModelProto, name: str):
    """The initializer `name`, or None (an earlier mutation may have replaced it)."""
    return next((t for t in model.graph.initializer if t.name == name), None)


def _set(model: onnx.ModelProto, name: str, array) -> None:
    t = _find(model, name)
    if t is not None:
        t.CopyFrom(_init(name, array))


def mutate_qdq(rng: random.Random, model: onnx.ModelProto) -> str:
    """One QDQ-specific mutation of `model` (in place); returns its name."""
    g = model.graph
    nodes = list(g.node)
    qdq = [node for node in nodes if node.op_type in ("QuantizeLinear", "DequantizeLinear")]
    what = rng.choice(("scale", "scale-shape", "zero-point", "zp-type", "axis", "block", "output-dtype",
                       "drop", "split-pair", "q-read", "computed", "fake-quant-weight", "weight-type"))
    node = rng.choice(qdq)
    if what == "scale":
        _set(model, node.input[1], np.float32(rng.choice(_SCALES)))
    elif what == "scale-shape":
        _set(model, node.input[1], np.full(rng.choice(((2,), (3,), (1, 3), (0,))), 0.01, np.float32))
    elif what == "zero-point" and len(node.input) > 2:
        _set(model, node.input[2], np.asarray(rng.choice(_ZERO_POINTS)).astype(
            rng.choice((np.int8, np.uint8, np.int16, np.int32, np.int64))))
    elif what == "zp-type" and len(node.input) > 2 and _find(model, node.input[2]) is not None:
        _find(model, node.input[2]).data_type = rng.choice(_ELEMENT_TYPES)
    elif what == "axis":
        node.attribute.append(helper.make_attribute("axis", rng.choice((-5, -1, 0, 1, 3, 4, 2 ** 40))))
    elif what == "block":
        model.opset_import[0].version = 21
        node.attribute.append(helper.make_attribute("block_size", rng.choice((-1, 0, 1, 2, 3))))
    elif what == "output-dtype":
        model.opset_import[0].version = rng.choice((19, 21))
        node.attribute.append(helper.make_attribute("output_dtype", rng.choice(_ELEMENT_TYPES)))
    elif what == "drop":
        g.node.remove(node)
    elif what == "split-pair":
        node.input[1] = rng.choice(("sx", "sr", "sg", "sy", "sw", "sf"))
    elif what == "q-read":
        consumer = rng.choice([n for n in nodes if n.op_type not in ("QuantizeLinear", "DequantizeLinear")])
        quantized = rng.choice([n.output[0] for n in qdq if n.op_type == "QuantizeLinear"])
        consumer.input[0] = quantized
    elif what == "computed":
        g.node.insert(0, helper.make_node("Abs", [node.input[1]], [f"{node.input[1]}_abs"], name="abs"))
        node.input[1] = f"{node.input[1]}_abs"
    elif what == "fake-quant-weight" and _find(model, "wq") is not None:
        # the int8 weight becomes a float one quantized at run time (PyTorch QAT export)
        w = _find(model, "wq")
        data = rng.choice((0.01, 1e30, float("nan"))) * np.ones(list(w.dims), np.float32)
        w.CopyFrom(_init("wf", data))
        g.node.insert(0, helper.make_node("QuantizeLinear", ["wf", "sw", "zw"], ["wq"], axis=0, name="w_Q"))
    elif what == "weight-type" and _find(model, "wq") is not None:
        _find(model, "wq").data_type = rng.choice(_ELEMENT_TYPES)
    return what


def gen_qdq(rng: random.Random, corpus) -> Case:
    model = qdq_model(np.random.default_rng(rng.randrange(2 ** 32)), rng.choice((13, 17, 19, 21)),
                      rng.random() < 0.5)
    blob, kind = serialized_variant(rng, model, mutate_qdq, structured=0.7, max_structural=2, max_byte=3,
                                    truncated=0.0)
    files = {"m.onnx": blob}
    argv = model_command(rng, files, "m.onnx", INPUT_SHAPE, ((0.4, "check"), (0.7, "run"), (1.0, "quantize")))
    return Case("qdq", kind, files, argv=argv, timeout_s=60)
