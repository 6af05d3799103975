"""One small quantized TFLite model per operator (written in code), each with a single int8
input, for the per-operator parity tests against LiteRT's reference kernels. Every builder
returns (model bytes, input shape, input zero point)."""
from __future__ import annotations

import numpy as np

from tests.tflite.harness import (ADD_OPTIONS, CONCAT_OPTIONS, LEAKY_RELU_OPTIONS, MUL_OPTIONS, REDUCER_OPTIONS,
                                  RELU6, SOFTMAX_OPTIONS, SUB_OPTIONS, FC_OPTIONS, Net, act_options,
                                  conv_options, depthwise_options, pool_options)
from qsim.tflite.writer import ModelWriter, Options

SHAPE = [1, 8, 8, 4]
IN_SCALE, IN_ZP = 0.04, -5


def _start(seed=0, zp=IN_ZP, shape=SHAPE, scale=IN_SCALE, dtype=np.int8):
    n = Net(seed)
    return n, n.act(shape, scale, zp, dtype=dtype, name="x")


def conv(stride=1, padding=0, act=0, zp=IN_ZP, out_zp=3, kernel=3, seed=0):
    n, x = _start(seed, zp)
    k = n.weights([6, kernel, kernel, 4])
    b = n.bias(6, IN_SCALE, k)
    size = (8 + stride - 1) // stride if padding == 0 else (8 - kernel) // stride + 1
    y = n.act([1, size, size, 6], 0.09, out_zp, name="y")
    n.op("CONV_2D", [x, k, b], [y], conv_options((stride, stride), padding, act))
    return n.finish([x], [y]), SHAPE, zp


def depthwise(act=RELU6, multiplier=1, stride=1, zp=IN_ZP, seed=1):
    n, x = _start(seed, zp)
    c = 4 * multiplier
    k = n.weights([1, 3, 3, c], axis=3)
    b = n.bias(c, IN_SCALE, k)
    size = (8 + stride - 1) // stride
    y = n.act([1, size, size, c], 0.05, -128 if act == RELU6 else 1, name="y")
    n.op("DEPTHWISE_CONV_2D", [x, k, b], [y], depthwise_options((stride, stride), 0, act, multiplier), version=2)
    return n.finish([x], [y]), SHAPE, zp


def fully_connected(act=0, seed=2):
    n, x = _start(seed)
    k = n.weights([10, 256], per_channel=False)
    b = n.bias(10, IN_SCALE, k)
    y = n.act([1, 10], 0.2, -7, name="y")
    n.op("FULLY_CONNECTED", [x, k, b], [y], Options(FC_OPTIONS, [(0, "i8", act), (1, "i8", 0), (2, "bool", False)]))
    return n.finish([x], [y]), SHAPE, IN_ZP


def _residual(builtin, options, seed, out_scale=0.06, out_zp=-2, other_scale=0.07, other_zp=4):
    """x -> 1x1 conv (its own grid) -> builtin(conv, x): two operands on different grids."""
    n, x = _start(seed)
    k = n.weights([4, 1, 1, 4])
    b = n.bias(4, IN_SCALE, k)
    c = n.act(SHAPE, other_scale, other_zp, name="c")
    n.op("CONV_2D", [x, k, b], [c], conv_options())
    y = n.act(SHAPE, out_scale, out_zp, name="y")
    n.op(builtin, [c, x], [y], options)
    return n.finish([x], [y]), SHAPE, IN_ZP


def add(act=0):
    return _residual("ADD", act_options(ADD_OPTIONS, act), 3)


def sub():
    return _residual("SUB", act_options(SUB_OPTIONS), 4)


def mul():
    return _residual("MUL", act_options(MUL_OPTIONS), 5, out_scale=0.01, out_zp=0)


def pool(builtin, kernel=2, stride=2, padding=1, out_scale=IN_SCALE, out_zp=IN_ZP):
    n, x = _start(6)
    size = (8 - kernel) // stride + 1 if padding == 1 else (8 + stride - 1) // stride
    y = n.act([1, size, size, 4], out_scale, out_zp, name="y")
    n.op(builtin, [x], [y], pool_options((kernel, kernel), (stride, stride), padding))
    return n.finish([x], [y]), SHAPE, IN_ZP


def mean(keep=False, out_scale=0.02, out_zp=1, size=8, zp=IN_ZP):
    shape = [1, size, size, 4]
    n, x = _start(7, zp=zp, shape=shape)
    axes = n.const("axes", np.int32, [1, 2])
    y = n.act([1, 1, 1, 4] if keep else [1, 4], out_scale, out_zp, name="y")
    n.op("MEAN", [x, axes], [y], Options(REDUCER_OPTIONS, [(0, "bool", keep)]))
    return n.finish([x], [y]), shape, zp


def softmax(scale=0.1):
    n, x = _start(8, shape=[1, 10], scale=scale)
    y = n.act([1, 10], 1 / 256, -128, name="y")
    n.op("SOFTMAX", [x], [y], Options(SOFTMAX_OPTIONS, [(0, "f32", 1.0)]))
    return n.finish([x], [y]), [1, 10], IN_ZP


def unary(builtin, out_scale, out_zp, options=None, version=1):
    n, x = _start(9)
    y = n.act(SHAPE, out_scale, out_zp, name="y")
    n.op(builtin, [x], [y], options, version)
    return n.finish([x], [y]), SHAPE, IN_ZP


def logistic():
    return unary("LOGISTIC", 1 / 256, -128)


def tanh():
    return unary("TANH", 1 / 128, 0)


def relu():
    return unary("RELU", 0.03, -128)


def relu6():
    return unary("RELU6", 0.03, -128)


def leaky_relu():
    return unary("LEAKY_RELU", 0.03, -20, Options(LEAKY_RELU_OPTIONS, [(0, "f32", 0.1)]), version=2)


def prelu():
    n, x = _start(10)
    alpha = n.w.tensor("alpha", np.int8, [1, 1, 4], data=np.array([[[20, 60, -30, 100]]], np.int8),
                       scale=0.005, zero_point=0)
    y = n.act(SHAPE, 0.035, -10, name="y")
    n.op("PRELU", [x, alpha], [y])
    return n.finish([x], [y]), SHAPE, IN_ZP


def hard_swish():
    return unary("HARD_SWISH", 0.025, -30)


def requantize():
    return unary("QUANTIZE", 0.05, 7)


def concat():
    """x concatenated on channels with a 1x1 conv of it (TFLite's int8 CONCATENATION wants its
    inputs on the output's grid: LiteRT refuses a model that requantizes)."""
    n, x = _start(11)
    k = n.weights([2, 1, 1, 4])
    b = n.bias(2, IN_SCALE, k)
    c = n.act([1, 8, 8, 2], IN_SCALE, IN_ZP, name="c")
    n.op("CONV_2D", [x, k, b], [c], conv_options())
    y = n.act([1, 8, 8, 6], IN_SCALE, IN_ZP, name="y")
    n.op("CONCATENATION", [x, c], [y], Options(CONCAT_OPTIONS, [(0, "i32", 3), (1, "i8", 0)]))
    return n.finish([x], [y]), SHAPE, IN_ZP


def reshape():
    """x -> RESHAPE [1, 16, 16] -> FULLY_CONNECTED: reshape reads TFLite's element order."""
    n, x = _start(12)
    shape = n.const("shape", np.int32, [1, 16, 16])
    r = n.act([1, 16, 16], IN_SCALE, IN_ZP, name="r")
    n.op("RESHAPE", [x, shape], [r])
    k = n.weights([5, 16], per_channel=False)
    y = n.act([1, 16, 5], 0.1, 0, name="y")
    n.op("FULLY_CONNECTED", [r, k, -1], [y], Options(FC_OPTIONS, [(0, "i8", 0), (1, "i8", 0), (2, "bool", True)]))
    return n.finish([x], [y]), SHAPE, IN_ZP


def pad():
    n, x = _start(13)
    pads = n.const("pads", np.int32, [[0, 0], [1, 2], [2, 1], [0, 0]])
    y = n.act([1, 11, 11, 4], IN_SCALE, IN_ZP, name="y")
    n.op("PAD", [x, pads], [y])
    return n.finish([x], [y]), SHAPE, IN_ZP


def transpose():
    n, x = _start(14)
    perm = n.const("perm", np.int32, [0, 3, 1, 2])
    y = n.act([1, 4, 8, 8], IN_SCALE, IN_ZP, name="y")
    n.op("TRANSPOSE", [x, perm], [y])
    return n.finish([x], [y]), SHAPE, IN_ZP


def strided_slice():
    n, x = _start(15)
    begin = n.const("begin", np.int32, [0, 1, 0, 3])
    end = n.const("end", np.int32, [1, 7, 8, 0])
    strides = n.const("strides", np.int32, [1, 2, 3, 1])
    y = n.act([1, 3, 3], IN_SCALE, IN_ZP, name="y")
    # shrink axis 3 (channel 3), begin_mask/end_mask on axis 2
    n.op("STRIDED_SLICE", [x, begin, end, strides], [y],
         Options(32, [(0, "i32", 4), (1, "i32", 4), (2, "i32", 0), (3, "i32", 0), (4, "i32", 8)]), version=2)
    return n.finish([x], [y]), SHAPE, IN_ZP


def split():
    n, x = _start(16)
    axis = n.const("axis", np.int32, [3])
    a = n.act([1, 8, 8, 2], IN_SCALE, IN_ZP, name="a")
    b = n.act([1, 8, 8, 2], IN_SCALE, IN_ZP, name="b")
    n.op("SPLIT", [axis, x], [a, b], Options(35, [(0, "i32", 2)]), version=2)
    return n.finish([x], [a, b]), SHAPE, IN_ZP


def gather():
    n, x = _start(17)
    idx = n.const("idx", np.int32, [2, 0, 7])
    y = n.act([1, 3, 8, 4], IN_SCALE, IN_ZP, name="y")
    n.op("GATHER", [x, idx], [y], Options(23, [(0, "i32", 1), (1, "i32", 0)]), version=2)
    return n.finish([x], [y]), SHAPE, IN_ZP


def batch_matmul():
    """x [1, 8, 8, 4] reshaped to [8, 8, 4]: x^T x per batch (both operands computed)."""
    n, x = _start(18)
    shape = n.const("shape", np.int32, [8, 8, 4])
    r = n.act([8, 8, 4], IN_SCALE, IN_ZP, name="r")
    n.op("RESHAPE", [x, shape], [r])
    y = n.act([8, 4, 4], 0.3, -6, name="y")
    n.op("BATCH_MATMUL", [r, r], [y], Options(101, [(0, "bool", True), (1, "bool", False)]), version=2)
    return n.finish([x], [y]), SHAPE, IN_ZP


def transpose_conv(padding=0, stride=2):
    n, x = _start(19)
    k = n.weights([3, 3, 3, 4])
    b = n.bias(3, IN_SCALE, k)
    size = 8 * stride if padding == 0 else (8 - 1) * stride + 3
    shape = n.const("out_shape", np.int32, [1, size, size, 3])
    y = n.act([1, size, size, 3], 0.1, 4, name="y")
    n.op("TRANSPOSE_CONV", [shape, k, x, b], [y],
         Options(49, [(0, "i8", padding), (1, "i32", stride), (2, "i32", stride), (3, "i8", 0)]), version=3)
    return n.finish([x], [y]), SHAPE, IN_ZP


def space_to_depth():
    n, x = _start(20)
    y = n.act([1, 4, 4, 16], IN_SCALE, IN_ZP, name="y")
    n.op("SPACE_TO_DEPTH", [x], [y], Options(19, [(0, "i32", 2)]), version=2)
    return n.finish([x], [y]), SHAPE, IN_ZP


def depth_to_space():
    n, x = _start(21)
    y = n.act([1, 16, 16, 1], IN_SCALE, IN_ZP, name="y")
    n.op("DEPTH_TO_SPACE", [x], [y], Options(94, [(0, "i32", 2)]))
    return n.finish([x], [y]), SHAPE, IN_ZP


def resize(builtin, align=False, half=False, size=16):
    n, x = _start(22)
    hw = n.const("size", np.int32, [size, size])
    y = n.act([1, size, size, 4], IN_SCALE, IN_ZP, name="y")
    fields = [(0, "bool", align), (1, "bool", half)]
    if builtin == "RESIZE_BILINEAR":
        fields = [(0, "i32", 0), (1, "i32", 0), (2, "bool", align), (3, "bool", half)]
    n.op(builtin, [x, hw], [y], Options(15 if builtin == "RESIZE_BILINEAR" else 74, fields), version=3)
    return n.finish([x], [y]), SHAPE, IN_ZP


def conv_16x8():
    """16x8: int16 activations (zero point 0), int8 weights, int64 bias; conv + RELU, then ADD."""
    n = Net(3)
    x = n.act([1, 6, 6, 3], 0.001, 0, dtype=np.int16, name="x")
    k = n.weights([4, 3, 3, 3])
    scale = (np.float32(0.001) * n.w.tensors[k].scale).astype(np.float32)
    b = n.w.tensor("b", np.int64, [4], data=n.rng.integers(-30000, 30000, 4), scale=scale, zero_point=0)
    c = n.act([1, 6, 6, 4], 0.002, 0, dtype=np.int16, name="c")
    n.op("CONV_2D", [x, k, b], [c], conv_options(act=1), version=4)
    y = n.act([1, 6, 6, 4], 0.003, 0, dtype=np.int16, name="y")
    n.op("ADD", [c, c], [y], act_options(ADD_OPTIONS), version=3)
    return n.finish([x], [y]), [1, 6, 6, 3], 0


def float_cnn(seed: int = 0):
    """A float model (no quantization): conv (RELU6), MEAN, SOFTMAX, input [1, 8, 8, 3]."""
    rng = np.random.default_rng(seed)
    w = ModelWriter()
    x = w.tensor("x", np.float32, [1, 8, 8, 3])
    k = w.tensor("k", np.float32, [4, 3, 3, 3], data=rng.normal(size=(4, 3, 3, 3)) * 0.3)
    b = w.tensor("b", np.float32, [4], data=rng.normal(size=4) * 0.1)
    c = w.tensor("c", np.float32, [1, 8, 8, 4])
    w.operator("CONV_2D", [x, k, b], [c], conv_options(act=RELU6))
    axes = w.tensor("axes", np.int32, [2], data=[1, 2])
    m = w.tensor("m", np.float32, [1, 4])
    w.operator("MEAN", [c, axes], [m], Options(REDUCER_OPTIONS, [(0, "bool", False)]))
    y = w.tensor("y", np.float32, [1, 4])
    w.operator("SOFTMAX", [m], [y], Options(SOFTMAX_OPTIONS, [(0, "f32", 1.0)]))
    return w.finish([x], [y])


def float_io(seed: int = 5):
    """float32 input -> QUANTIZE -> conv (RELU6) -> DEQUANTIZE -> float32 output (what TFLite's
    converter writes without int8 input/output types)."""
    n = Net(seed)
    xf = n.w.tensor("image", np.float32, [1, 8, 8, 3])
    xq = n.act([1, 8, 8, 3], 0.03, 4, name="image_q")
    n.op("QUANTIZE", [xf], [xq])
    k = n.weights([4, 3, 3, 3])
    c = n.act([1, 8, 8, 4], 0.07, -9, name="conv")
    n.op("CONV_2D", [xq, k, n.bias(4, 0.03, k)], [c], conv_options(act=RELU6))
    y = n.w.tensor("scores", np.float32, [1, 8, 8, 4])
    n.op("DEQUANTIZE", [c], [y])
    return n.finish([xf], [y])


def padv2():
    """PADV2 with a constant of real value 0.4 (code 5 on the input's grid)."""
    n, x = _start(23)
    pads = n.const("pads", np.int32, [[0, 0], [2, 0], [0, 1], [0, 0]])
    value = n.w.tensor("value", np.int8, [], data=np.array(5, np.int8), scale=IN_SCALE, zero_point=IN_ZP)
    y = n.act([1, 10, 9, 4], IN_SCALE, IN_ZP, name="y")
    n.op("PADV2", [x, pads, value], [y])
    return n.finish([x], [y]), SHAPE, IN_ZP


def squeeze():
    """MEAN keeping dims to [1, 1, 1, 4], then SQUEEZE to [1, 4]."""
    n, x = _start(24)
    axes = n.const("axes", np.int32, [1, 2])
    m = n.act([1, 1, 1, 4], 0.02, 3, name="m")
    n.op("MEAN", [x, axes], [m], Options(REDUCER_OPTIONS, [(0, "bool", True)]))
    y = n.act([1, 4], 0.02, 3, name="y")
    n.op("SQUEEZE", [m], [y], Options(30, [(0, "vi32", [1, 2])]))
    return n.finish([x], [y]), SHAPE, IN_ZP


OPERATORS = {
    "CONV_2D": conv, "CONV_2D stride 2 relu6": lambda: conv(2, 0, RELU6, zp=-128, out_zp=-128),
    "CONV_2D 1x1 valid": lambda: conv(1, 1, 0, kernel=1, out_zp=127),
    "DEPTHWISE_CONV_2D relu6": depthwise, "DEPTHWISE_CONV_2D x2 stride 2": lambda: depthwise(0, 2, 2),
    "FULLY_CONNECTED": fully_connected, "ADD": add, "ADD relu": lambda: add(1), "SUB": sub, "MUL": mul,
    "MAX_POOL_2D": lambda: pool("MAX_POOL_2D"),
    "AVERAGE_POOL_2D": lambda: pool("AVERAGE_POOL_2D", 3, 1, 0),
    "AVERAGE_POOL_2D 2x2": lambda: pool("AVERAGE_POOL_2D", 2, 2, 1),
    "MEAN": mean, "MEAN keep_dims": lambda: mean(True), "MEAN 7x7 same grid": lambda: mean(False, IN_SCALE, IN_ZP, 7),
    "MEAN 5x5 zp -128": lambda: mean(True, 0.011, -100, 5, -128), "MEAN 3x3 coarser": lambda: mean(False, 0.3, 0, 3), "SOFTMAX": softmax, "LOGISTIC": logistic,
    "TANH": tanh, "RELU": relu, "RELU6": relu6, "LEAKY_RELU": leaky_relu, "PRELU": prelu,
    "QUANTIZE (requantize)": requantize, "CONCATENATION": concat,
    "RESHAPE": reshape, "PAD": pad, "TRANSPOSE": transpose, "STRIDED_SLICE": strided_slice, "SPLIT": split,
    "GATHER": gather, "BATCH_MATMUL": batch_matmul, "TRANSPOSE_CONV": transpose_conv,
    "TRANSPOSE_CONV valid stride 1": lambda: transpose_conv(1, 1), "SPACE_TO_DEPTH": space_to_depth,
    "DEPTH_TO_SPACE": depth_to_space, "RESIZE_BILINEAR": lambda: resize("RESIZE_BILINEAR"),
    "RESIZE_BILINEAR half-pixel": lambda: resize("RESIZE_BILINEAR", half=True),
    "RESIZE_NEAREST_NEIGHBOR": lambda: resize("RESIZE_NEAREST_NEIGHBOR"),
    "RESIZE_NEAREST_NEIGHBOR half-pixel": lambda: resize("RESIZE_NEAREST_NEIGHBOR", half=True),
    "HARD_SWISH": hard_swish, "RELU_N1_TO_1": lambda: unary("RELU_N1_TO_1", 0.01, 0),
    "RELU_0_TO_1": lambda: unary("RELU_0_TO_1", 0.005, -128), "PADV2": padv2, "SQUEEZE": squeeze,
}


def small_cnn(seed: int = 20):
    """The issue's small int8 CNN: conv (relu), depthwise (relu6), 1x1 conv, residual add, max
    pool, global mean pool, fully connected, softmax; int8 input [1, 16, 16, 3]."""
    n = Net(seed)
    x = n.act([1, 16, 16, 3], 0.02, -1, name="input")
    k1 = n.weights([8, 3, 3, 3])
    c1 = n.act([1, 8, 8, 8], 0.05, -128, name="conv1")
    n.op("CONV_2D", [x, k1, n.bias(8, 0.02, k1)], [c1], conv_options((2, 2), 0, 1))
    k2 = n.weights([1, 3, 3, 8], axis=3)
    c2 = n.act([1, 8, 8, 8], 0.03, -128, name="dw")
    n.op("DEPTHWISE_CONV_2D", [c1, k2, n.bias(8, 0.05, k2)], [c2], depthwise_options(act=RELU6), version=2)
    k3 = n.weights([8, 1, 1, 8])
    c3 = n.act([1, 8, 8, 8], 0.06, 5, name="pw")
    n.op("CONV_2D", [c2, k3, n.bias(8, 0.03, k3)], [c3], conv_options())
    r = n.act([1, 8, 8, 8], 0.08, -10, name="residual")
    n.op("ADD", [c3, c1], [r], act_options(ADD_OPTIONS))
    p = n.act([1, 4, 4, 8], 0.08, -10, name="pool")
    n.op("MAX_POOL_2D", [r], [p], pool_options((2, 2), (2, 2)))
    axes = n.const("mean_axes", np.int32, [1, 2])
    m = n.act([1, 8], 0.04, -20, name="gap")
    n.op("MEAN", [p, axes], [m], Options(REDUCER_OPTIONS, [(0, "bool", False)]))
    k4 = n.weights([10, 8], per_channel=False)
    f = n.act([1, 10], 0.15, 3, name="logits")
    n.op("FULLY_CONNECTED", [m, k4, n.bias(10, 0.04, k4)], [f],
         Options(FC_OPTIONS, [(0, "i8", 0), (1, "i8", 0), (2, "bool", False)]))
    y = n.act([1, 10], 1 / 256, -128, name="probabilities")
    n.op("SOFTMAX", [f], [y], Options(SOFTMAX_OPTIONS, [(0, "f32", 1.0)]))
    return n.finish([x], [y]), [1, 16, 16, 3], -1

