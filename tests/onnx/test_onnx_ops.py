"""qsim.onnx: one small model per operator and attribute variant, run by qsim's float executor
and by onnxruntime; outputs agree within the float32 bound each case states (onnx_helpers)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_helpers import EPS32, assert_within, gamma, init, magnitude, make_model, run_ort, run_qsim, save

R = np.random.default_rng(2024)


def normal(*shape, scale=1.0):
    return (R.normal(size=shape) * scale).astype(np.float32)


# ---- bounds (see onnx_helpers): each returns the allowed |qsim - onnxruntime| per element

def exact(ref, mag, feeds):
    """Data movement, max, relu, comparisons, exact products: no rounding, bound 0."""
    return 0.0


def ulps(k):
    """k·EPS32·|y| for a few correctly rounded operations (k = number of roundings, both sides)."""
    return lambda ref, mag, feeds: k * EPS32 * np.abs(ref)


def dot(terms):
    """Sums of `terms` products (+ bias): each side within γ_{terms+1}·Σ|a b|, so twice that."""
    return lambda ref, mag, feeds: 2 * gamma(terms + 1) * mag


def library(k):
    """Transcendental functions: numpy is within 1 ulp; onnxruntime's MLAS kernels use polynomial
    or rational approximations with absolute error of a few EPS32 on outputs of magnitude ≤ 1
    (measured ≤ 3 EPS32): bound k·EPS32·max(|y|, 1)."""
    return lambda ref, mag, feeds: k * EPS32 * np.maximum(np.abs(ref), 1.0)


@dataclass
class Case:
    id: str
    nodes: list
    inputs: list          # (name, shape[, dtype])
    feeds: dict
    bound: Callable
    initializers: list = None
    opset: int = 17
    outputs: list = None  # output names (default ["y"])
    out_dtype: type = np.float32


def unary_case(op, bound, x=None, opset=17, **attrs):
    x = normal(2, 3, 4, 5) if x is None else x
    return Case(f"{op}{'-' + '-'.join(f'{k}={v}' for k, v in attrs.items()) if attrs else ''}-op{opset}",
                [helper.make_node(op, ["x"], ["y"], **attrs)], [("x", list(x.shape))], {"x": x}, bound,
                opset=opset)


def binary_case(op, a_shape, b_shape, bound, b_const=False, b=None, a=None, opset=17):
    a = normal(*a_shape) if a is None else a
    b = normal(*b_shape) if b is None else b
    inputs = [("a", list(a.shape))]
    feeds = {"a": a}
    inits = []
    if b_const:
        inits.append(init("b", b))
    else:
        inputs.append(("b", list(b.shape)))
        feeds["b"] = b
    return Case(f"{op}-{a_shape}-{b_shape}{'-const' if b_const else ''}",
                [helper.make_node(op, ["a", "b"], ["y"])], inputs, feeds, bound, inits, opset)


def conv_case(id, x_shape, w_shape, bias=True, opset=17, op="Conv", **attrs):
    x, w = normal(*x_shape), normal(*w_shape, scale=0.3)
    out_c = w_shape[0] if op == "Conv" else w_shape[1] * attrs.get("group", 1)
    inits = [init("W", w)] + ([init("B", normal(out_c))] if bias else [])
    node = helper.make_node(op, ["x", "W"] + (["B"] if bias else []), ["y"], name=id, **attrs)
    terms = int(np.prod(w_shape[1:])) * (1 if op == "Conv" else w_shape[0])
    return Case(id, [node], [("x", list(x_shape))], {"x": x}, dot(terms), inits, opset)


def pool_case(id, op, x_shape, bound, **attrs):
    x = normal(*x_shape)
    return Case(id, [helper.make_node(op, ["x"], ["y"], **attrs)], [("x", list(x_shape))], {"x": x}, bound)


def const_i64(name, values):
    return init(name, np.asarray(values, dtype=np.int64))


CASES = [
    # convolution
    conv_case("conv3x3-pads", (2, 3, 8, 8), (4, 3, 3, 3), pads=[1, 1, 1, 1]),
    conv_case("conv-stride-dilation", (1, 3, 11, 9), (5, 3, 3, 2), strides=[2, 1], dilations=[2, 3],
              pads=[1, 0, 2, 1]),
    conv_case("conv-depthwise", (1, 6, 7, 7), (6, 1, 3, 3), group=6, pads=[1, 1, 1, 1]),
    conv_case("conv-groups2-nobias", (1, 4, 6, 6), (6, 2, 3, 3), bias=False, group=2),
    conv_case("conv-same-upper-s2", (1, 3, 9, 8), (4, 3, 3, 3), auto_pad="SAME_UPPER", strides=[2, 2]),
    conv_case("conv-same-lower-s2", (1, 3, 9, 8), (4, 3, 4, 4), auto_pad="SAME_LOWER", strides=[2, 2]),
    conv_case("conv-valid", (1, 3, 6, 6), (2, 3, 3, 3), auto_pad="VALID"),
    conv_case("conv1d", (2, 3, 10), (4, 3, 3), pads=[1, 1]),
    conv_case("convT-s2-p1-op1", (1, 4, 5, 5), (4, 3, 3, 3), op="ConvTranspose", strides=[2, 2],
              pads=[1, 1, 1, 1], output_padding=[1, 1]),
    conv_case("convT-groups2", (1, 4, 4, 4), (4, 2, 2, 2), op="ConvTranspose", group=2, strides=[2, 2]),
    conv_case("convT-output-shape", (1, 2, 4, 4), (2, 3, 3, 3), op="ConvTranspose", strides=[2, 2],
              output_shape=[8, 8]),
    # pooling
    pool_case("maxpool-k3s2p1", "MaxPool", (1, 3, 9, 9), exact, kernel_shape=[3, 3], strides=[2, 2],
              pads=[1, 1, 1, 1]),
    pool_case("maxpool-ceil", "MaxPool", (1, 2, 10, 7), exact, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    pool_case("maxpool-dilation", "MaxPool", (1, 2, 9, 9), exact, kernel_shape=[2, 2], dilations=[2, 2]),
    pool_case("maxpool-same-upper", "MaxPool", (1, 2, 7, 7), exact, kernel_shape=[3, 3], strides=[2, 2],
              auto_pad="SAME_UPPER"),
    pool_case("avgpool-exclude-pad", "AveragePool", (1, 2, 7, 7), dot(10), kernel_shape=[3, 3],
              pads=[1, 1, 1, 1]),
    pool_case("avgpool-include-pad", "AveragePool", (1, 2, 7, 7), dot(10), kernel_shape=[3, 3],
              pads=[1, 1, 1, 1], count_include_pad=1),
    pool_case("avgpool-ceil", "AveragePool", (1, 2, 8, 8), dot(10), kernel_shape=[3, 3], strides=[2, 2],
              ceil_mode=1),
    pool_case("globalavgpool", "GlobalAveragePool", (2, 3, 5, 6), dot(31)),
    pool_case("globalmaxpool", "GlobalMaxPool", (2, 3, 5, 6), exact),
    # activations
    unary_case("Relu", exact),
    unary_case("LeakyRelu", exact, alpha=0.1),
    unary_case("LeakyRelu", exact, alpha=1.5),
    unary_case("Sigmoid", library(4)),
    unary_case("Tanh", library(4)),
    unary_case("Exp", ulps(4)),
    unary_case("Log", library(4), x=np.abs(normal(2, 3, 4, 5)) + 0.1),
    unary_case("Sqrt", ulps(2), x=np.abs(normal(2, 3, 4, 5))),
    unary_case("Neg", exact),
    unary_case("Abs", exact),
    unary_case("Erf", library(4)),
    unary_case("Reciprocal", ulps(2)),
    unary_case("Softplus", library(4)),
    unary_case("Elu", library(4)),
    # HardSigmoid/HardSwish: alpha*x+beta, clamp, (x*) — three roundings
    unary_case("HardSigmoid", ulps(6), x=normal(2, 3, 4, 5, scale=4)),
    unary_case("HardSigmoid", ulps(6), x=normal(2, 3, 4, 5, scale=4), alpha=0.3, beta=0.4),
    unary_case("HardSwish", ulps(6), x=normal(2, 3, 4, 5, scale=4)),
    unary_case("Gelu", library(4), opset=20),
    unary_case("Gelu", library(8), opset=20, approximate="tanh"),
    Case("PRelu-per-channel", [helper.make_node("PRelu", ["x", "s"], ["y"])], [("x", [2, 3, 4, 4])],
         {"x": normal(2, 3, 4, 4)}, exact, [init("s", normal(3, 1, 1))]),
    Case("PRelu-scalar-slope", [helper.make_node("PRelu", ["x", "s"], ["y"])], [("x", [2, 3, 4, 4])],
         {"x": normal(2, 3, 4, 4)}, exact, [init("s", normal(1))]),
    Case("PRelu-full-slope", [helper.make_node("PRelu", ["x", "s"], ["y"])], [("x", [2, 3, 4])],
         {"x": normal(2, 3, 4)}, exact, [init("s", normal(3, 4))]),
    Case("Clip-both", [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], [("x", [2, 8])],
         {"x": normal(2, 8, scale=5)}, exact, [init("lo", np.float32(0)), init("hi", np.float32(6))]),
    Case("Clip-min-only", [helper.make_node("Clip", ["x", "lo"], ["y"])], [("x", [2, 8])],
         {"x": normal(2, 8, scale=5)}, exact, [init("lo", np.float32(-1))]),
    Case("Clip-max-only", [helper.make_node("Clip", ["x", "", "hi"], ["y"])], [("x", [2, 8])],
         {"x": normal(2, 8, scale=5)}, exact, [init("hi", np.float32(1))]),
    # element-wise binary (numpy broadcasting); one correctly rounded operation: bound 0 would also
    # hold when both sides round the same way, 1 ulp allows a different but faithful evaluation
    binary_case("Add", (2, 3, 4), (3, 1), ulps(1)),
    binary_case("Sub", (2, 3, 4), (4,), ulps(1), b_const=True),
    binary_case("Mul", (2, 1, 4), (3, 1), ulps(1)),
    binary_case("Div", (2, 3, 4), (2, 3, 4), ulps(1), b=np.abs(normal(2, 3, 4)) + 0.5),
    binary_case("Pow", (2, 3), (), exact, b_const=True, b=np.float32(2.0)),
    binary_case("Pow", (2, 3), (), ulps(2), b_const=True, b=np.float32(0.5), a=np.abs(normal(2, 3))),
    binary_case("Pow", (2, 3), (), library(4), b_const=True, b=np.float32(3.0)),
    binary_case("Max", (2, 3), (3,), exact),
    binary_case("Min", (2, 3), (2, 1), exact),
    binary_case("Sum", (2, 3), (3,), ulps(1)),
    Case("Equal-Where", [helper.make_node("Greater", ["a", "b"], ["c"]),
                         helper.make_node("Where", ["c", "a", "b"], ["y"])],
         [("a", [3, 4]), ("b", [4])], {"a": normal(3, 4), "b": normal(4)}, exact),
    Case("Equal-bool-out", [helper.make_node("Equal", ["a", "b"], ["y"])], [("a", [3, 4], np.int64)],
         {"a": R.integers(0, 3, size=(3, 4))}, exact, [const_i64("b", [1])], out_dtype=np.bool_),
    Case("Mod-int-dynamic", [helper.make_node("Mod", ["a", "b"], ["y"])], [("a", [6], np.int64)],
         {"a": np.asarray([-7, -1, 0, 3, 8, 9], np.int64)}, exact, [const_i64("b", [3])], out_dtype=np.int64),
    Case("Mod-folded", [helper.make_node("Mod", ["c", "d"], ["m"]), helper.make_node("Cast", ["m"], ["mf"], to=1),
                        helper.make_node("Add", ["x", "mf"], ["y"])], [("x", [4])], {"x": normal(4)}, ulps(1),
         [const_i64("c", [-7, 7, 5, -5]), const_i64("d", [3, -3, 5, 2])]),
    Case("Div-int-folded-truncates", [helper.make_node("Div", ["c", "d"], ["m"]),
                                      helper.make_node("Cast", ["m"], ["mf"], to=1),
                                      helper.make_node("Add", ["x", "mf"], ["y"])], [("x", [4])], {"x": normal(4)},
         ulps(1), [const_i64("c", [-7, 7, 5, -5]), const_i64("d", [2, -2, 5, -3])]),
    # normalization, softmax, reductions
    Case("Softmax-op13-last", [helper.make_node("Softmax", ["x"], ["y"])], [("x", [2, 3, 7])],
         {"x": normal(2, 3, 7, scale=3)}, library(4 + 2 * 8), opset=13),
    Case("Softmax-op11-axis1-coerced", [helper.make_node("Softmax", ["x"], ["y"], axis=1)], [("x", [2, 3, 4])],
         {"x": normal(2, 3, 4, scale=3)}, library(4 + 2 * 13), opset=11),
    Case("ReduceMean-op13", [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1, 2], keepdims=0)],
         [("x", [2, 3, 4])], {"x": normal(2, 3, 4)}, lambda r, m, f: 2 * gamma(13) * m, opset=13),
    Case("ReduceMean-op18-input", [helper.make_node("ReduceMean", ["x", "ax"], ["y"])], [("x", [2, 3, 4])],
         {"x": normal(2, 3, 4)}, lambda r, m, f: 2 * gamma(5) * m, [const_i64("ax", [-1])], opset=18),
    Case("ReduceSum-op13-input", [helper.make_node("ReduceSum", ["x", "ax"], ["y"], keepdims=0)],
         [("x", [2, 3, 4])], {"x": normal(2, 3, 4)}, dot(3), [const_i64("ax", [1])], opset=13),
    Case("ReduceMax-op11", [helper.make_node("ReduceMax", ["x"], ["y"], axes=[0])], [("x", [2, 3, 4])],
         {"x": normal(2, 3, 4)}, exact, opset=11),
    Case("ReduceMin-all", [helper.make_node("ReduceMin", ["x"], ["y"])], [("x", [2, 3, 4])],
         {"x": normal(2, 3, 4)}, exact),
    # matrix products
    Case("MatMul-2d", [helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", [3, 5]), ("b", [5, 4])],
         {"a": normal(3, 5), "b": normal(5, 4)}, dot(5)),
    Case("MatMul-batched-const", [helper.make_node("MatMul", ["a", "w"], ["y"])], [("a", [2, 4, 6])],
         {"a": normal(2, 4, 6)}, dot(6), [init("w", normal(6, 3))]),
    Case("MatMul-batched-both", [helper.make_node("MatMul", ["a", "b"], ["y"])],
         [("a", [2, 1, 3, 5]), ("b", [4, 5, 2])], {"a": normal(2, 1, 3, 5), "b": normal(4, 5, 2)}, dot(5)),
    Case("MatMul-vector", [helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", [5]), ("b", [2, 5, 3])],
         {"a": normal(5), "b": normal(2, 5, 3)}, dot(5)),
    Case("Gemm-linear", [helper.make_node("Gemm", ["a", "w", "c"], ["y"], transB=1)], [("a", [3, 6])],
         {"a": normal(3, 6)}, dot(6), [init("w", normal(4, 6)), init("c", normal(4))]),
    Case("Gemm-linear-noTransB", [helper.make_node("Gemm", ["a", "w", "c"], ["y"], beta=0.5)], [("a", [3, 6])],
         {"a": normal(3, 6)}, dot(7), [init("w", normal(6, 4)), init("c", normal(1, 4))]),
    Case("Gemm-general", [helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)],
         [("a", [6, 3]), ("b", [6, 4])], {"a": normal(6, 3), "b": normal(6, 4)}, dot(9),
         [init("c", normal(3, 4))]),
    # layout
    Case("Flatten-axis2", [helper.make_node("Flatten", ["x"], ["y"], axis=2)], [("x", [2, 3, 4, 5])],
         {"x": normal(2, 3, 4, 5)}, exact),
    Case("Flatten-axis0", [helper.make_node("Flatten", ["x"], ["y"], axis=0)], [("x", [2, 3])],
         {"x": normal(2, 3)}, exact),
    Case("Reshape-0-minus1", [helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", [2, 3, 4])],
         {"x": normal(2, 3, 4)}, exact, [const_i64("s", [0, -1, 2])]),
    Case("Transpose-default", [helper.make_node("Transpose", ["x"], ["y"])], [("x", [2, 3, 4])],
         {"x": normal(2, 3, 4)}, exact),
    Case("Transpose-perm", [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])],
         [("x", [2, 3, 4, 5])], {"x": normal(2, 3, 4, 5)}, exact),
    Case("Squeeze-op11-attr", [helper.make_node("Squeeze", ["x"], ["y"], axes=[1, -1])], [("x", [2, 1, 3, 1])],
         {"x": normal(2, 1, 3, 1)}, exact, opset=11),
    Case("Squeeze-op13-all", [helper.make_node("Squeeze", ["x"], ["y"])], [("x", [2, 1, 3, 1])],
         {"x": normal(2, 1, 3, 1)}, exact, opset=13),
    Case("Unsqueeze-op11-attr", [helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0, 3])], [("x", [2, 3])],
         {"x": normal(2, 3)}, exact, opset=11),
    Case("Unsqueeze-op13-input", [helper.make_node("Unsqueeze", ["x", "ax"], ["y"])], [("x", [2, 3])],
         {"x": normal(2, 3)}, exact, [const_i64("ax", [-1, 1])], opset=13),
    Case("Concat-neg-axis", [helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=-2)],
         [("a", [2, 3, 4]), ("b", [2, 1, 4])], {"a": normal(2, 3, 4), "b": normal(2, 1, 4)}, exact,
         [init("c", normal(2, 2, 4))]),
    Case("Split-op11-attr", [helper.make_node("Split", ["x"], ["y", "z"], axis=1, split=[1, 3])],
         [("x", [2, 4, 3])], {"x": normal(2, 4, 3)}, exact, opset=11, outputs=["y", "z"]),
    Case("Split-op13-equal", [helper.make_node("Split", ["x"], ["y", "z"], axis=-1)],
         [("x", [2, 4, 6])], {"x": normal(2, 4, 6)}, exact, opset=13, outputs=["y", "z"]),
    Case("Split-op18-num-outputs", [helper.make_node("Split", ["x"], ["y", "z", "w"], axis=0, num_outputs=3)],
         [("x", [7, 2])], {"x": normal(7, 2)}, exact, opset=18, outputs=["y", "z", "w"]),
    Case("Slice-steps-clamp", [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
         [("x", [4, 10, 6])], {"x": normal(4, 10, 6)}, exact,
         [const_i64("st", [1, -1, 0]), const_i64("en", [1000, -100, 5]), const_i64("ax", [1, 2, 0]),
          const_i64("sp", [3, -2, 2])]),
    Case("Gather-const-indices", [helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], [("x", [2, 5, 3])],
         {"x": normal(2, 5, 3)}, exact, [const_i64("i", [[0, -1], [2, 2]])]),
    Case("Gather-scalar-index", [helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], [("x", [3, 4])],
         {"x": normal(3, 4)}, exact, [const_i64("i", 2)]),
    Case("Gather-strided-as-slice", [helper.make_node("Gather", ["x", "i"], ["y"], axis=2)], [("x", [2, 3, 9])],
         {"x": normal(2, 3, 9)}, exact, [const_i64("i", [7, 4, 1])]),
    Case("Gather-step-1-negative", [helper.make_node("Gather", ["x", "i"], ["y"], axis=-1)], [("x", [2, 5])],
         {"x": normal(2, 5)}, exact, [const_i64("i", [-3, -2, -1])]),
    Case("Gather-embedding", [helper.make_node("Gather", ["e", "ids"], ["y"])], [("ids", [2, 5], np.int64)],
         {"ids": R.integers(0, 10, size=(2, 5))}, exact, [init("e", normal(10, 4))]),
    Case("Pad-constant-value", [helper.make_node("Pad", ["x", "p", "v"], ["y"])], [("x", [1, 2, 3, 3])],
         {"x": normal(1, 2, 3, 3)}, exact, [const_i64("p", [0, 0, 1, 2, 0, 1, 0, 1]), init("v", np.float32(1.5))],
         opset=13),
    Case("Pad-reflect", [helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")], [("x", [1, 2, 4, 4])],
         {"x": normal(1, 2, 4, 4)}, exact, [const_i64("p", [0, 0, 2, 1, 0, 0, 1, 3])]),
    Case("Pad-edge-op18-axes", [helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], mode="edge")],
         [("x", [1, 2, 4, 4])], {"x": normal(1, 2, 4, 4)}, exact,
         [const_i64("p", [1, 2, 3, 0]), const_i64("ax", [-1, 2])], opset=18),
    Case("Tile", [helper.make_node("Tile", ["x", "r"], ["y"])], [("x", [2, 3])], {"x": normal(2, 3)}, exact,
         [const_i64("r", [2, 3])]),
    Case("Expand-dynamic", [helper.make_node("Expand", ["x", "s"], ["y"])], [("x", [3, 1])],
         {"x": normal(3, 1)}, exact, [const_i64("s", [2, 1, 4])]),
    Case("Resize-nearest-asym-floor", [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest",
                                                        coordinate_transformation_mode="asymmetric",
                                                        nearest_mode="floor")],
         [("x", [1, 2, 3, 4])], {"x": normal(1, 2, 3, 4)}, exact,
         [init("sc", np.asarray([1, 1, 2, 2], np.float32))], opset=13),
    Case("Resize-nearest-halfpixel-sizes", [helper.make_node("Resize", ["x", "", "", "sz"], ["y"])],
         [("x", [1, 2, 4, 4])], {"x": normal(1, 2, 4, 4)}, exact, [const_i64("sz", [1, 2, 8, 6])], opset=13),
    Case("Resize-linear-halfpixel", [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear")],
         [("x", [1, 2, 3, 4])], {"x": normal(1, 2, 3, 4)}, dot(7),
         [init("sc", np.asarray([1, 1, 2, 2], np.float32))], opset=13),
    Case("Resize-linear-align-corners", [helper.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="linear",
                                                          coordinate_transformation_mode="align_corners")],
         [("x", [1, 1, 3, 3])], {"x": normal(1, 1, 3, 3)}, lambda r, m, f: 16 * EPS32 * np.abs(f["x"]).max(),
         [const_i64("sz", [1, 1, 5, 7])], opset=13),
    Case("Resize-cubic", [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="cubic")],
         [("x", [1, 1, 4, 4])], {"x": normal(1, 1, 4, 4)}, lambda r, m, f: 32 * EPS32 * np.abs(f["x"]).max(),
         [init("sc", np.asarray([1, 1, 2, 2], np.float32))], opset=13),
    Case("Cast-float-to-int64", [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64)], [("x", [6])],
         {"x": np.asarray([-2.7, -0.5, 0.0, 0.4, 1.9, 7.0], np.float32)}, exact, out_dtype=np.int64),
    Case("Identity-Dropout", [helper.make_node("Dropout", ["x"], ["d"]), helper.make_node("Identity", ["d"], ["e"]),
                              helper.make_node("Relu", ["e"], ["y"])], [("x", [2, 3])], {"x": normal(2, 3)}, exact),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_operator_matches_onnxruntime(case, tmp_path):
    outputs = [(n, None, case.out_dtype) for n in (case.outputs or ["y"])]
    model = make_model(case.nodes, case.inputs, outputs, case.initializers or [], case.opset)
    path = save(model, tmp_path)
    got = run_qsim(path, case.feeds)
    ref = run_ort(model, case.feeds)
    mag = magnitude(model, case.feeds)
    for name in case.outputs or ["y"]:
        assert_within(got[name], ref[name], case.bound(ref[name], mag[name], case.feeds), f"{case.id}:{name}")


@pytest.mark.parametrize("indices, kinds", [(2, ["layout.slice", "layout.squeeze"]), ([0, 2, 4], ["layout.slice"]),
                                            ([3, 1, 0], ["layout.gather"]), ([[0, 1]], ["layout.gather"])])
def test_constant_gather_with_even_steps_becomes_a_slice(tmp_path, indices, kinds):
    import qsim.onnx
    model = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], [("x", [2, 5, 3])], [("y", None)],
                       [const_i64("i", indices)])
    graph = qsim.onnx.load(save(model, tmp_path))
    assert [op.kind.name for op in graph.ops] == kinds
    x = normal(2, 5, 3)
    assert_within(run_qsim(save(model, tmp_path), {"x": x})["y"], run_ort(model, {"x": x})["y"], 0.0, "y")
