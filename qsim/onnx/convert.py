"""ONNX operators → NNEF 2.0 standard operators (the op kinds of stdlib/*.sknd), part one:
element-wise operators and activations (the registry and the shared helpers: convert_base.py).

A converter `fn(ctx) -> list[Value]` reads the node's inputs and attributes (NodeContext) and
emits standard operators with every attribute the float executor and the quantizer read, and
static output shapes computed by the ONNX rules. A folder `fn(ctx, arrays) -> list[array]`
computes the node with numpy when every input is a constant (constant sub-graphs fold at
import). Where the standard library has no operator (HardSigmoid, HardSwish,
LayerNormalization, ...), the converter composes standard ones and says how.

Broadcasting: ONNX aligns ranks on the right (numpy rules), which is the 2.0 default
(`lhs_align`/`rhs_align` None).
"""
from __future__ import annotations

import numpy as np

from .. import numerics
from ..limits import check_tensor_size
from .builder import BOOL, F32, NodeContext, Value
from .convert_base import binary, broadcast_shape, converter, folder, unary

# ---------------------------------------------------------------------- element-wise

_UNARY = {"Sigmoid": "nn.sigmoid", "Tanh": "math.tanh", "Exp": "math.exp", "Log": "math.log",
          "Sqrt": "math.sqrt", "Neg": "math.neg", "Abs": "math.abs", "Erf": "nn.erf",
          "Reciprocal": "math.rcp", "Floor": "math.floor", "Ceil": "math.ceil", "Softplus": "nn.softplus",
          "Not": "math.not", "Sin": "math.sin", "Cos": "math.cos", "Sign": "math.sign"}
_FLOAT_ONLY = {"Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf", "Reciprocal", "Softplus", "Sin", "Cos"}


@converter(*_UNARY)
def _unary(ctx: NodeContext) -> list:
    x = ctx.input(0, "X")
    if ctx.op_type in _FLOAT_ONLY:
        ctx.float_input(x, "X")
    return [unary(ctx, _UNARY[ctx.op_type], x, final=True)]


_UNARY_NUMPY = {"Sigmoid": lambda a: 1 / (1 + np.exp(-a)), "Tanh": np.tanh, "Exp": np.exp, "Log": np.log,
                "Sqrt": np.sqrt, "Neg": np.negative, "Abs": np.abs, "Erf": lambda a: numerics.erf(a).astype(a.dtype),
                "Reciprocal": lambda a: 1 / a, "Floor": np.floor, "Ceil": np.ceil,
                "Softplus": lambda a: np.logaddexp(a, 0), "Not": np.logical_not, "Sin": np.sin,
                "Cos": np.cos, "Sign": np.sign, "Relu": lambda a: np.maximum(a, 0)}


@folder(*_UNARY_NUMPY)
def _fold_unary(ctx: NodeContext, arrays: list) -> list:
    a = arrays[0]
    with np.errstate(all="ignore"):
        return [np.asarray(_UNARY_NUMPY[ctx.op_type](a)).astype(a.dtype)]


@converter("Relu")
def _relu(ctx: NodeContext) -> list:
    return [unary(ctx, "nn.relu", ctx.input(0, "X"), {"alpha": None, "max": None}, final=True)]


@converter("Identity", "Dropout")
def _identity(ctx: NodeContext) -> list:
    # Dropout at inference is the identity (its optional mask output is refused below)
    if ctx.op_type == "Dropout" and len(ctx.output_names) > 1 and ctx.output_names[1]:
        ctx.fail("the mask output of Dropout is used", unsupported=True,
                 hint="export the model in inference mode (model.eval()); the mask is for training")
    return [ctx.input(0, "input")]


@folder("Identity", "Dropout")
def _fold_identity(ctx: NodeContext, arrays: list) -> list:
    return [arrays[0]]


_BINARY = {"Add": "math.add", "Sub": "math.sub", "Mul": "math.mul", "Div": "math.div", "Pow": "math.pow",
           "Equal": "math.eq", "Less": "math.lt", "Greater": "math.gt", "LessOrEqual": "math.le",
           "GreaterOrEqual": "math.ge", "And": "math.and", "Or": "math.or", "Xor": "math.xor"}
_COMPARE = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"}


@converter(*_BINARY)
def _binary(ctx: NodeContext) -> list:
    x, y = ctx.input(0, "A"), ctx.input(1, "B")
    if x.dtype != y.dtype and ctx.op_type != "Pow":
        ctx.fail(f"inputs have different element types {x.dtype} and {y.dtype}",
                 hint="ONNX requires both inputs of the same type; insert a Cast")
    if ctx.op_type == "Pow" and y.is_constant and y.data.size == 1 and x.dtype is F32:
        exponent = float(y.data.reshape(-1)[0])
        shape = broadcast_shape(ctx, x.shape, y.shape)
        # x^2 and x^0.5 as the standard square and square root: exact in float32 (a product and
        # a correctly rounded root), and operators the quantizer has lowerings for
        if exponent == 2.0 and shape == x.shape:
            return [unary(ctx, "math.sqr", x, final=True)]
        if exponent == 0.5 and shape == x.shape:
            return [unary(ctx, "math.sqrt", x, final=True)]
        if exponent == 1.0 and shape == x.shape:
            return [x]
        y = Value(y.name, F32, y.shape, y.data.astype(np.float32))
    elif ctx.op_type == "Pow" and y.dtype != x.dtype:
        ctx.fail(f"exponent of type {y.dtype} for a {x.dtype} base", unsupported=True,
                 hint="qsim raises float32 to float32 powers")
    dtype = BOOL if ctx.op_type in _COMPARE else x.dtype
    return [binary(ctx, _BINARY[ctx.op_type], x, y, final=True, dtype=dtype)]


_BINARY_NUMPY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Pow": np.power,
                 "Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
                 "GreaterOrEqual": np.greater_equal, "And": np.logical_and, "Or": np.logical_or,
                 "Xor": np.logical_xor, "Min": np.minimum, "Max": np.maximum, "Sum": np.add}


def check_broadcast(ctx: NodeContext, arrays: list) -> tuple:
    shape = broadcast_shape(ctx, *[a.shape for a in arrays])
    check_tensor_size(shape, max(a.dtype.itemsize for a in arrays), f"result of {ctx.where}",
                      ctx.builder.location)
    return shape


@folder(*_BINARY, "Min", "Max", "Sum")
def _fold_binary(ctx: NodeContext, arrays: list) -> list:
    check_broadcast(ctx, arrays)
    out = arrays[0]
    with np.errstate(all="ignore"):
        for b in arrays[1:]:
            if ctx.op_type == "Div":
                if out.dtype.kind in "iu" and b.dtype.kind in "iu":
                    if np.any(b == 0):
                        ctx.fail("integer division by zero in a constant sub-graph")
                    # ONNX integer division truncates towards zero (C semantics)
                    out = np.asarray(numerics.trunc_div(out, b)).astype(np.result_type(out, b))
                else:
                    out = np.divide(out, b).astype(out.dtype)
            elif ctx.op_type == "Pow":
                out = np.power(out, b.astype(out.dtype) if out.dtype.kind == "f" else b).astype(out.dtype)
            else:
                out = np.asarray(_BINARY_NUMPY[ctx.op_type](out, b))
    return [out]


@converter("Mod")
def _mod(ctx: NodeContext) -> list:
    x, y = ctx.input(0, "A"), ctx.input(1, "B")
    if x.dtype != y.dtype:
        ctx.fail(f"inputs have different element types {x.dtype} and {y.dtype}")
    if ctx.attr("fmod", 0):
        # C fmod takes the dividend's sign, math.mod (Python's %) the divisor's; on |a| and |b|
        # the two agree exactly (no rounding: the remainder of positive operands is exact), so
        # fmod(a, b) = sign(a) * (|a| % |b|)
        rem = binary(ctx, "math.mod", unary(ctx, "math.abs", x), unary(ctx, "math.abs", y))
        return [binary(ctx, "math.mul", unary(ctx, "math.sign", x), rem, final=True)]
    return [binary(ctx, "math.mod", x, y, final=True)]


@folder("Mod")
def _fold_mod(ctx: NodeContext, arrays: list) -> list:
    a, b = arrays
    check_broadcast(ctx, arrays)
    if b.dtype.kind in "iu" and np.any(b == 0):
        ctx.fail("integer modulo by zero in a constant sub-graph")
    with np.errstate(all="ignore"):
        return [np.asarray(np.fmod(a, b) if ctx.attr("fmod", 0) else numerics.floor_mod(a, b)).astype(a.dtype)]


@converter("Min", "Max", "Sum")
def _variadic(ctx: NodeContext) -> list:
    values = [v for v in ctx.inputs if v is not None]
    if not values:
        ctx.fail("has no inputs")
    kind = {"Min": "math.min", "Max": "math.max", "Sum": "math.add"}[ctx.op_type]
    if len(values) == 1:
        return [values[0]]
    out = values[0]
    for i, v in enumerate(values[1:]):
        out = binary(ctx, kind, out, v, final=i == len(values) - 2)
    return [out]


@converter("Where")
def _where(ctx: NodeContext) -> list:
    c, x, y = ctx.input(0, "condition"), ctx.input(1, "X"), ctx.input(2, "Y")
    if c.dtype is not BOOL:
        ctx.fail(f"condition is {c.dtype}, expected bool")
    shape = broadcast_shape(ctx, c.shape, x.shape, y.shape)
    attrs = {"cond_align": None, "lhs_align": None, "rhs_align": None}
    return [ctx.emit1("math.select", [c, x, y], attrs, x.dtype, shape, final=True)]


@folder("Where")
def _fold_where(ctx: NodeContext, arrays: list) -> list:
    check_broadcast(ctx, arrays)
    return [np.where(arrays[0].astype(bool), arrays[1], arrays[2])]


# ---------------------------------------------------------------------- activations

@converter("LeakyRelu")
def _leaky_relu(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "X"), "X")
    alpha = float(ctx.attr("alpha", 0.01))
    if 0.0 <= alpha <= 1.0:      # nn.relu's alpha is a slope in [0, 1]
        return [unary(ctx, "nn.relu", x, {"alpha": alpha, "max": None}, final=True)]
    return [_select_negative(ctx, x, ctx.scalar(alpha))]


def _select_negative(ctx: NodeContext, x: Value, slope: Value) -> Value:
    """y = x < 0 ? slope * x : x, composed from math.lt, math.mul and math.select."""
    negative = binary(ctx, "math.lt", x, ctx.scalar(0.0), dtype=BOOL)
    scaled = binary(ctx, "math.mul", x, slope)
    shape = broadcast_shape(ctx, x.shape, scaled.shape)
    return ctx.emit1("math.select", [negative, scaled, x], {"cond_align": None, "lhs_align": None,
                                                            "rhs_align": None}, x.dtype, shape, final=True)


@converter("PRelu")
def _prelu(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "X"), "X")
    slope = ctx.float_input(ctx.input(1, "slope"), "slope")
    channels = x.shape[1] if x.rank >= 2 else None
    if slope.is_constant and channels is not None and slope.rank <= x.rank:
        data = slope.data
        # right-aligned against x: every extent but the channel axis (1) must be 1
        padded = (1,) * (x.rank - slope.rank) + slope.shape
        if data.size == 1 or (padded[1] == channels and all(e == 1 for i, e in enumerate(padded) if i != 1)):
            vector = np.broadcast_to(data.reshape(-1), (channels,)).astype(np.float32)
            alpha = Value(ctx.builder.fresh(f"{slope.name}.vector"), F32, (channels,), vector)
            ctx.builder.reserved.add(alpha.name)
            return [ctx.emit1("nn.prelu", [x, alpha], {"axis": 1}, F32, x.shape, final=True)]
    broadcast_shape(ctx, x.shape, slope.shape)
    return [_select_negative(ctx, x, slope)]


@converter("Clip")
def _clip(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "input"), "input")
    if ctx.since < 11:
        lo, hi = ctx.attr("min"), ctx.attr("max")
    else:
        lo_a, hi_a = ctx.constant(1, "min", required=False), ctx.constant(2, "max", required=False)
        for what, a in (("min", lo_a), ("max", hi_a)):
            if a is not None and a.size != 1:
                ctx.fail(f"'{what}' has {a.size} values, expected a scalar")
        lo = None if lo_a is None else float(lo_a.reshape(-1)[0])
        hi = None if hi_a is None else float(hi_a.reshape(-1)[0])
    if lo is None and hi is None:
        return [x]
    if lo == 0.0 and hi is None:
        return [unary(ctx, "nn.relu", x, {"alpha": None, "max": None}, final=True)]
    if lo is None:
        return [binary(ctx, "math.min", x, ctx.scalar(hi), final=True)]
    if hi is None:
        return [binary(ctx, "math.max", x, ctx.scalar(lo), final=True)]
    return [clamp(ctx, x, lo, hi, final=True)]


def clamp(ctx: NodeContext, x: Value, lo: float, hi: float, final: bool = False) -> Value:
    attrs = {"val_align": None, "min_align": None, "max_align": None}
    return ctx.emit1("math.clamp", [x, ctx.scalar(lo), ctx.scalar(hi)], attrs, x.dtype, x.shape, final)


@folder("Clip")
def _fold_clip(ctx: NodeContext, arrays: list) -> list:
    x = arrays[0]
    lo = arrays[1] if len(arrays) > 1 and arrays[1] is not None else ctx.attr("min")
    hi = arrays[2] if len(arrays) > 2 and arrays[2] is not None else ctx.attr("max")
    if lo is not None:
        x = np.maximum(x, np.asarray(lo, dtype=x.dtype).reshape(()))
    if hi is not None:
        x = np.minimum(x, np.asarray(hi, dtype=x.dtype).reshape(()))
    return [x]


def _hard_sigmoid(ctx: NodeContext, x: Value, alpha: float, beta: float, final: bool) -> Value:
    """max(0, min(1, alpha * x + beta)) as math.mul, math.add, math.clamp (no standard operator)."""
    scaled = binary(ctx, "math.mul", x, ctx.scalar(alpha))
    shifted = binary(ctx, "math.add", scaled, ctx.scalar(beta))
    return clamp(ctx, shifted, 0.0, 1.0, final)


@converter("HardSigmoid")
def _hardsigmoid(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "X"), "X")
    return [_hard_sigmoid(ctx, x, float(ctx.attr("alpha", 0.2)), float(ctx.attr("beta", 0.5)), True)]


@converter("HardSwish")
def _hardswish(ctx: NodeContext) -> list:
    # HardSwish(x) = x * HardSigmoid(x) with alpha = 1/6, beta = 0.5 (ONNX operator definition)
    x = ctx.float_input(ctx.input(0, "X"), "X")
    gate = _hard_sigmoid(ctx, x, 1.0 / 6.0, 0.5, False)
    return [binary(ctx, "math.mul", x, gate, final=True)]


@converter("Gelu")
def _gelu(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "X"), "X")
    approximate = ctx.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        ctx.fail(f"approximate={approximate!r} is not 'none' or 'tanh'")
    attrs = {"approximate": None if approximate == "none" else "TANH"}
    return [unary(ctx, "nn.gelu", x, attrs, final=True)]


@converter("Elu")
def _elu(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "X"), "X")
    return [unary(ctx, "nn.elu", x, {"alpha": float(ctx.attr("alpha", 1.0))}, final=True)]


@converter("Selu")
def _selu(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "X"), "X")
    attrs = {"alpha": float(ctx.attr("alpha", 1.67326319217681884765625)),
             "lambda": float(ctx.attr("gamma", 1.05070102214813232421875))}
    return [unary(ctx, "nn.selu", x, attrs, final=True)]
