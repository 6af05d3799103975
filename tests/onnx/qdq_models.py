"""QDQ models for the tests: small float models built with onnx.helper, quantized by
onnxruntime.quantization.quantize_static (QuantFormat.QDQ) from seeded calibration inputs, and
the comparison of qsim's integer graph with onnxruntime's execution of the QDQ model.

onnxruntime runs a QDQ model two ways: with its graph optimizations (the default,
ORT_ENABLE_ALL) it fuses DequantizeLinear -> op -> QuantizeLinear groups into integer kernels
(QLinearConv, QLinearAdd, QGemm, QLinearConcat, QLinearGlobalAveragePool; MaxPool runs on the
uint8/int8 values); without them (ORT_DISABLE_ALL) it runs the float operators between
fake-quantizing pairs. Both are compared: `Agreement` counts, per output element, how many
integer results differ from each and by how much.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from qsim import ir
from qsim.quant.options import QuantizeOptions
from qsim.quant.pipeline import quantize_graph
from qsim.runtime.executor import execute
from qsim.onnx import load
from tests.onnx.onnx_helpers import init, make_model, save

QUIET = QuantizeOptions(show_progress=False)
ORT_LEVELS = ("ORT_ENABLE_ALL", "ORT_DISABLE_ALL")


def _weights(rng, shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def cnn_model(opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """conv+relu -> maxpool -> conv -> residual add -> flatten -> gemm."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             helper.make_node("Add", ["c2", "p1"], ["a1"], name="add1"),
             helper.make_node("Flatten", ["a1"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1, name="fc")]
    inits = [init("w1", _weights(rng, (6, 3, 3, 3))), init("b1", _weights(rng, (6,))),
             init("w2", _weights(rng, (6, 6, 3, 3), 0.2)), init("b2", _weights(rng, (6,))),
             init("w3", _weights(rng, (10, 6 * 4 * 4), 0.1)), init("b3", _weights(rng, (10,)))]
    return make_model(nodes, [("x", [1, 3, 8, 8])], [("y", [1, 10])], inits, opset=opset)


def depthwise_model(opset: int = 17, seed: int = 1) -> onnx.ModelProto:
    """pointwise conv -> depthwise conv (group = channels) + relu -> global average pool -> gemm
    with B not transposed (the filter is transposed at import)."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="expand"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "wd", "bd"], ["c2"], pads=[1, 1, 1, 1], group=8, name="dw"),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="fc")]
    inits = [init("w1", _weights(rng, (8, 4, 1, 1))), init("b1", _weights(rng, (8,))),
             init("wd", _weights(rng, (8, 1, 3, 3))), init("bd", _weights(rng, (8,))),
             init("w3", _weights(rng, (8, 5))), init("b3", _weights(rng, (5,)))]
    return make_model(nodes, [("x", [1, 4, 6, 6])], [("y", [1, 5])], inits, opset=opset)


def concat_model(opset: int = 17, seed: int = 2) -> onnx.ModelProto:
    """two conv branches (one with relu) concatenated along channels, then a 1x1 conv."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["ca"], pads=[1, 1, 1, 1], name="branch_a"),
             helper.make_node("Relu", ["ca"], ["ra"], name="relu_a"),
             helper.make_node("Conv", ["x", "wb", "bb"], ["cb"], name="branch_b"),
             helper.make_node("Concat", ["ra", "cb"], ["cat"], axis=1, name="cat"),
             helper.make_node("Conv", ["cat", "wc", "bc"], ["y"], name="mix")]
    inits = [init("wa", _weights(rng, (4, 3, 3, 3))), init("ba", _weights(rng, (4,))),
             init("wb", _weights(rng, (4, 3, 1, 1))), init("bb", _weights(rng, (4,))),
             init("wc", _weights(rng, (5, 8, 1, 1))), init("bc", _weights(rng, (5,)))]
    return make_model(nodes, [("x", [1, 3, 6, 6])], [("y", [1, 5, 6, 6])], inits, opset=opset)


def input_shape(model: onnx.ModelProto) -> tuple[int, ...]:
    return tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)


def samples(model: onnx.ModelProto, count: int, seed: int, spread: float = 1.0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(input_shape(model)) * spread).astype(np.float32) for _ in range(count)]


def quantize_qdq(model: onnx.ModelProto, folder, *, per_channel: bool, activations: str = "QUInt8",
                 weights: str = "QInt8", name: str = "model", **extra) -> str:
    """The QDQ model onnxruntime.quantization writes for `model` (calibrated on 16 seeded inputs,
    min-max), saved in `folder`; returns its path."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{model.graph.input[0].name: x} for x in samples(model, 16, seed=100)])

        def get_next(self):
            return next(self.feeds, None)

    float_path = save(model, folder, f"{name}_float.onnx")
    qdq_path = f"{folder}/{name}_qdq.onnx"
    quantize_static(float_path, qdq_path, Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=getattr(QuantType, activations), weight_type=getattr(QuantType, weights),
                    **extra)
    return qdq_path


def ort_session(path: str, level: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3       # errors only (not its notes on unused initializers)
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def quantize_linear(x: np.ndarray, quant: ir.QuantInfo) -> np.ndarray:
    """ONNX QuantizeLinear on `quant`'s own (possibly unsigned) grid: saturate(round_half_even(x / s) + zp)
    in float32, as onnxruntime computes it."""
    lo, hi = (-(1 << (quant.bits - 1)), (1 << (quant.bits - 1)) - 1) if quant.signed else (0, (1 << quant.bits) - 1)
    return np.clip(np.rint(x / np.float32(quant.scale)) + int(quant.zero_point), lo, hi).astype(np.int64)


def on_signed_grid(q: np.ndarray, quant: ir.QuantInfo) -> np.ndarray:
    """Values of `quant`'s grid on TOSA's signed grid (uint8 q -> q - 128: the same reals)."""
    return q - (0 if quant.signed else 1 << (quant.bits - 1))


@dataclass
class Agreement:
    """Integer outputs of qsim vs onnxruntime over some inputs, per onnxruntime mode."""
    elements: int
    differing: dict[str, int]     # ORT level -> output elements that differ
    max_lsb: dict[str, int]       # ORT level -> largest difference in steps of the output scale
    per_output: dict = field(default_factory=dict)   # output -> ORT level -> [differing, max LSB, elements]


def compare_with_ort(path: str, inputs: list[np.ndarray], calib=None, backend: str = "kernels",
                     options: QuantizeOptions = QUIET) -> Agreement:
    """qsim quantizes the QDQ model at `path` (its annotations; `calib` Samples if given) and runs
    the integer graph on the inputs onnxruntime's QuantizeLinear gives the model; its integer
    outputs are compared with onnxruntime's (its float outputs are (q - zp) * s exactly, so q is
    recovered exactly)."""
    graph = load(path)
    result = quantize_graph(graph, calib, None, options)
    model = result.model
    float_in, float_out = graph.inputs[0], graph.outputs
    in_quant = graph.tensor(float_in).quant
    int_in = model.tensor_map[float_in].name
    sessions = {level: ort_session(path, level) for level in ORT_LEVELS}
    differing = {level: 0 for level in ORT_LEVELS}
    max_lsb = {level: 0 for level in ORT_LEVELS}
    per_output: dict = {}
    elements = 0
    for x in inputs:
        xq = on_signed_grid(quantize_linear(x, in_quant), in_quant)
        values = execute(model.graph, {int_in: xq.astype(model.graph.tensor(int_in).dtype.numpy)}, backend)
        for level, session in sessions.items():
            ort_out = dict(zip([o.name for o in session.get_outputs()], session.run(None, {float_in: x})))
            for name, int_name in zip(float_out, model.graph.outputs):   # (in the float layout)
                out_quant = graph.tensor(name).quant
                theirs = on_signed_grid(quantize_linear(ort_out[name], out_quant), out_quant)
                ours = values[int_name].astype(np.int64)
                diff = np.abs(ours - theirs)
                differing[level] += int(np.count_nonzero(diff))
                max_lsb[level] = max(max_lsb[level], int(diff.max()))
                tally = per_output.setdefault(name, {}).setdefault(level, [0, 0, 0])
                tally[0] += int(np.count_nonzero(diff))
                tally[1] = max(tally[1], int(diff.max()))
                tally[2] += diff.size
        elements += sum(int(np.prod(graph.tensor(n).shape)) for n in float_out)
    return Agreement(elements, differing, max_lsb, per_output)


# ---------------------------------------------------------------------- hand-written QDQ models

def scalar_constant(name: str, value, dtype) -> onnx.NodeProto:
    """A Constant node (PyTorch's exporter writes quantization parameters this way)."""
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.asarray(value, dtype), name),
                            name=f"{name}_const")


def q_dq(tensor: str, scale: str, zero_point: str, out: str, **attrs) -> list[onnx.NodeProto]:
    return [helper.make_node("QuantizeLinear", [tensor, scale, zero_point], [f"{tensor}_q"], name=f"{tensor}_Q", **attrs),
            helper.make_node("DequantizeLinear", [f"{tensor}_q", scale, zero_point], [out], name=f"{tensor}_DQ",
                             **attrs)]


TIE_SHIFT = {"x": -4, "w": -5, "y": -8}   # s_x * s_w / s_y = 2^-4 * 2^-5 / 2^-8 = 1/2


def tie_model(opset: int = 19, seed: int = 3, out_zero_point: int = -3) -> tuple[onnx.ModelProto, dict]:
    """One convolution whose requantization ratio s_x * s_w / s_y is exactly 1/2, so every odd
    accumulator is a rounding tie: int8 activations, parameters in Constant nodes, a
    fake-quantized float weight (float initializer -> QuantizeLinear -> DequantizeLinear, per
    channel) and an int32 bias through DequantizeLinear. Returns the model and its integers
    (xscale, weights, bias, zero point) for an independent evaluation."""
    rng = np.random.default_rng(seed)
    wq = rng.integers(-6, 7, size=(3, 2, 3, 3)).astype(np.int8)     # small: few results saturate
    wq[0, 0, 0, 0] = -127                                              # the int8 extremes still occur
    wq[1, 1, 2, 2] = 127
    bq = rng.integers(-60, 61, size=(3,)).astype(np.int32)
    sx, sw, sy = (2.0 ** TIE_SHIFT[k] for k in ("x", "w", "y"))
    nodes = [scalar_constant("sx", sx, np.float32), scalar_constant("zx", 0, np.int8),
             scalar_constant("sy", sy, np.float32), scalar_constant("zy", out_zero_point, np.int8),
             *q_dq("x", "sx", "zx", "x_dq"),
             helper.make_node("QuantizeLinear", ["wf", "sw", "zw"], ["wf_q"], axis=0, name="w_Q"),
             helper.make_node("DequantizeLinear", ["wf_q", "sw", "zw"], ["w_dq"], axis=0, name="w_DQ"),
             helper.make_node("DequantizeLinear", ["bq", "sb"], ["b_dq"], name="b_DQ"),
             helper.make_node("Conv", ["x_dq", "w_dq", "b_dq"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             *q_dq("c", "sy", "zy", "y")]
    inits = [init("wf", (wq.astype(np.float32) * np.float32(sw))), init("sw", np.full(3, sw, np.float32)),
             init("zw", np.zeros(3, np.int8)), init("bq", bq), init("sb", np.float32(sx * sw))]
    model = make_model(nodes, [("x", [1, 2, 5, 5])], [("y", [1, 3, 5, 5])], inits, opset=opset)
    return model, {"wq": wq, "bq": bq, "zy": out_zero_point}


def tie_accumulators(xq: np.ndarray, wq: np.ndarray, bq: np.ndarray) -> np.ndarray:
    """int64 convolution (pads 1, stride 1) of integer input and weights plus the int32 bias:
    the accumulator both executions round, computed directly."""
    n, c, h, w = xq.shape
    padded = np.pad(xq.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = np.zeros((n, wq.shape[0], h, w), np.int64)
    for i in range(3):
        for j in range(3):
            patch = padded[:, :, i:i + h, j:j + w]
            acc += np.einsum("nchw,oc->nohw", patch, wq[:, :, i, j].astype(np.int64))
    return acc + bq.astype(np.int64).reshape(1, -1, 1, 1)


def prelu_model(opset: int = 17, seed: int = 5) -> onnx.ModelProto:
    """MTCNN's pattern: conv -> PRelu -> MaxPool, conv -> PRelu -> Transpose -> Flatten -> gemm.
    onnxruntime's quantize_static quantizes neither PRelu output (it has no QDQ PRelu), only the
    MaxPool and Flatten outputs after them."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1"),
             helper.make_node("PRelu", ["c1", "a1"], ["p1"], name="prelu1"),
             helper.make_node("MaxPool", ["p1"], ["m1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
             helper.make_node("Conv", ["m1", "w2", "b2"], ["c2"], name="conv2"),
             helper.make_node("PRelu", ["c2", "a2"], ["p2"], name="prelu2"),
             helper.make_node("Transpose", ["p2"], ["t"], perm=[0, 3, 2, 1], name="permute"),
             helper.make_node("Flatten", ["t"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1, name="fc")]
    inits = [init("w1", _weights(rng, (4, 3, 3, 3))), init("b1", _weights(rng, (4,))),
             init("a1", np.full((4, 1, 1), 0.25, np.float32)),
             init("w2", _weights(rng, (6, 4, 2, 2))), init("b2", _weights(rng, (6,))),
             init("a2", rng.uniform(0.05, 0.4, (6, 1, 1)).astype(np.float32)),
             init("w3", _weights(rng, (5, 6 * 3 * 3), 0.2)), init("b3", _weights(rng, (5,)))]
    return make_model(nodes, [("x", [1, 3, 10, 10])], [("y", [1, 5])], inits, opset=opset)


def attention_model(opset: int = 17, seed: int = 6, d: int = 8, tokens: int = 6) -> onnx.ModelProto:
    """A self-attention core: q/k/v projections (MatMul by constants), q·kᵀ (two computed
    operands), softmax, ·v, residual add."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    nodes = [n("MatMul", ["x", "wq"], ["q"], name="q_proj"), n("MatMul", ["x", "wk"], ["k"], name="k_proj"),
             n("MatMul", ["x", "wv"], ["v"], name="v_proj"), n("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="kt"),
             n("MatMul", ["q", "kt"], ["s"], name="scores"), n("Softmax", ["s"], ["p"], axis=-1, name="softmax"),
             n("MatMul", ["p", "v"], ["a"], name="mix"), n("Add", ["a", "x"], ["y"], name="residual")]
    inits = [init(name, _weights(rng, (d, d))) for name in ("wq", "wk", "wv")]
    return make_model(nodes, [("x", [1, tokens, d])], [("y", [1, tokens, d])], inits, opset=opset)
