"""TFLite → NNEF 2.0 standard operators, part two: element-wise arithmetic (ADD, SUB, MUL with
numpy broadcasting and fused activations), activations, QUANTIZE and DEQUANTIZE."""
from __future__ import annotations

import numpy as np

from .context import NHWC_TO_NCHW, OpContext, Value, activation, converter, fused_activation
from .flatbuf import FLOAT32 as F32_OPT, INT8 as I8_OPT


def _aligned_nchw(ctx: OpContext, v: Value, rank: int) -> str:
    """A constant operand of a 4-D element-wise op, right-aligned to rank 4 and laid out NCHW."""
    real, quant = ctx.float_constant(v)
    if quant is not None and quant.axis is not None:
        ctx.fail(f"operand '{v.name}' is quantized per channel", unsupported=True)
    expanded = real.reshape((1,) * (rank - real.ndim) + real.shape).transpose(NHWC_TO_NCHW)
    return ctx.add_constant(f"{v.name}.nchw", np.ascontiguousarray(expanded), quant)


def _operands(ctx: OpContext, values: list[Value]) -> tuple[list[str], bool]:
    """ir names of the operands and whether the op runs NCHW: when the output is 4-D and every
    computed operand is a 4-D tensor (constants are laid out to match); else in TFLite order."""
    out = ctx.out_def()
    computed = [v for v in values if v.data is None]
    if out.rank == 4 and computed and all(v.rank == 4 for v in computed):
        return [ctx.nchw(v) if v.data is None or v.rank == 4 else _aligned_nchw(ctx, v, 4) for v in values], True
    return [ctx.nhwc(v) for v in values], False


_BINARY = {"ADD": "math.add", "SUB": "math.sub", "MUL": "math.mul"}


@converter(*_BINARY)
def _binary(ctx: OpContext) -> None:
    a, b = ctx.input(0, "x"), ctx.input(1, "y")
    names, nchw = _operands(ctx, [a, b])
    attrs = {"lhs_align": None, "rhs_align": None}
    fused_activation(ctx, _BINARY[ctx.op.builtin], names, attrs, ctx.option(0, I8_OPT, 0), nchw=nchw)


def _unary_operand(ctx: OpContext) -> tuple[str, bool]:
    x = ctx.input(0, "input")
    if x.rank == 4:
        return ctx.nchw(x), True
    return ctx.nhwc(x), False


@converter("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1")
def _relu(ctx: OpContext) -> None:
    x, nchw = _unary_operand(ctx)
    lo, hi = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0),
              "RELU_0_TO_1": (0.0, 1.0)}[ctx.op.builtin]
    activation(ctx, x, lo, hi, nchw=nchw)


@converter("LEAKY_RELU")
def _leaky_relu(ctx: OpContext) -> None:
    x, nchw = _unary_operand(ctx)
    alpha = float(ctx.option(0, F32_OPT, 0.0))
    if not 0.0 <= alpha <= 1.0:
        ctx.fail(f"alpha {alpha} outside [0, 1]", unsupported=True)
    ctx.result("nn.relu", [x], {"alpha": alpha, "max": None}, nchw=nchw)


@converter("PRELU")
def _prelu(ctx: OpContext) -> None:
    x = ctx.input(0, "input")
    alpha = ctx.input(1, "alpha")
    channels = x.shape[-1]
    if alpha.data is None or alpha.data.size not in (1, channels) or \
            any(e != 1 for e in alpha.shape[:-1]):
        ctx.fail(f"alpha {list(alpha.shape)} must be a constant per channel ([{channels}] right-aligned)",
                 unsupported=True)
    real, quant = ctx.float_constant(alpha)
    vector = np.broadcast_to(real.reshape(-1), (channels,)).astype(np.float32)
    if quant is not None and quant.axis is not None:
        quant = type(quant)(quant.scale, quant.zero_point, 0, quant.bits, quant.signed, quant.symmetric,
                            quant.source)
    slope = ctx.add_constant(f"{alpha.name}.vector", vector, quant)
    src, nchw = _unary_operand(ctx)
    ctx.result("nn.prelu", [src, slope], {"axis": 1 if nchw else x.rank - 1}, nchw=nchw)


_UNARY = {"LOGISTIC": "nn.sigmoid", "TANH": "math.tanh"}


@converter(*_UNARY)
def _unary(ctx: OpContext) -> None:
    x, nchw = _unary_operand(ctx)
    ctx.result(_UNARY[ctx.op.builtin], [x], {}, nchw=nchw)


@converter("QUANTIZE", "DEQUANTIZE")
def _quantize(ctx: OpContext) -> None:
    """QUANTIZE of a float tensor: the same real values, so the output is the input, which
    takes the QUANTIZE output's parameters (a float graph input: qsim quantizes its inputs
    itself). DEQUANTIZE: a math.iden to an unannotated tensor, the integer values themselves
    in the integer graph (its output parameters say what they mean), keeping TFLite's name.
    QUANTIZE between two integer grids (requantization): a math.iden that the lowering rescales."""
    x = ctx.input(0, "input")
    if ctx.op.builtin == "QUANTIZE" and x.quant is None:
        ctx.alias(0, _requantized_input(ctx, x))
        return
    if ctx.op.builtin == "DEQUANTIZE" and x.data is not None:
        ctx.alias(0, x)            # a dequantized constant (weights stored int8): its real values
        return
    src, nchw = _unary_operand(ctx)
    ctx.result("math.iden", [src], {}, nchw=nchw)


def _requantized_input(ctx: OpContext, x: Value) -> Value:
    quant = ctx.out_quant()
    b = ctx.builder
    t = b.tensors.get(x.name)
    if t is not None and t.data is None:
        b.tensors[x.name] = type(t)(t.name, t.dtype, t.shape, data=None, quant=quant)
    return Value(x.name, x.shape, x.nchw, quant)


_MATH_UNARY = {"NEG": "math.neg", "RSQRT": "math.rsqrt"}


@converter(*_MATH_UNARY)
def _math_unary(ctx: OpContext) -> None:
    """NEG and RSQRT: int8 ones lower to a TABLE of TFLite's kernel (quant/tosa/tflite/
    rules_unary.py); a float NEG between DEQUANTIZE and QUANTIZE (the converter's form inside
    LayerNormalization) joins the two grids as one table."""
    x, nchw = _unary_operand(ctx)
    ctx.result(_MATH_UNARY[ctx.op.builtin], [x], {}, nchw=nchw)


@converter("SQUARED_DIFFERENCE")
def _squared_difference(ctx: OpContext) -> None:
    """(x - y)^2 as math.sub to an unannotated tensor read only by math.sqr: the TOSA lowering
    takes the pair as TFLite's one int8 kernel (quant/tosa/tflite/rules_squared_difference.py)."""
    a, b = ctx.input(0, "x"), ctx.input(1, "y")
    names, nchw = _operands(ctx, [a, b])
    shape = ctx.held_out_shape(nchw)
    diff = ctx.intermediate("math.sub", names, {"lhs_align": None, "rhs_align": None}, shape,
                            f"{ctx.out_def().name}.diff", None)
    ctx.result("math.sqr", [diff], {}, nchw=nchw)
