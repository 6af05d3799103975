"""Lowering rules for elementwise operators (TOSA 1.9.4 and 1.9.5).

- add/sub: both operands RESCALEd to int32 on a common scale s_c = max(s_a, s_b) / 2^11
  (at most 2^11 per input step: within the 2^12 scale limit of 1.9.2, and
  255 * 2^11 * 2 < 2^31 leaves headroom), ADD/SUB, RESCALE by s_c / s_out.
- mul: (q - zp) of each operand in int32, MUL (shift 0: |product| <= 2^16, or
  2^30 in 16-bit mode), RESCALE by s_a * s_b / s_out.
- min/max, relu, clamp: rounding is monotone, so they commute with it: operands are
  RESCALEd to the output's scale (int32 for MINIMUM/MAXIMUM, which take int32 only),
  then MINIMUM/MAXIMUM/CLAMP.
- other unary functions: TABLE (256 entries for int8, 513 interpolated for int16).
- leaky relu (alpha > 0): rules_activation.
- softmax: an integer decomposition, see `lower_softmax`.
Constant operands are quantized per tensor at compile time and become CONST ops.
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ..lowering.float_patterns import clamp_bounds, relu_bounds, take_fused_activation
from ..lowering.float_side import Lowered, identity
from ..params import QuantScheme, annotated, params_from_range, quantize
from ..rules import rule
from .tflite import rules_add as tflite_add
from .tflite import rules_squared_difference as tflite_sqdiff
from .tflite import rules_unary as tflite_unary
from .rules_division import lower_division
from .tflite.arith import is_tflite
from .rules_activation import lower_leaky_relu
from .tables import UnaryFunction, make_table, operator_function
from ..target import TargetKind
from .context import TosaContext

COMMON_SCALE_BITS = 11


def _operand(ctx: TosaContext, name: str, out_rank: int, align, hint: str,
             transform=None) -> Lowered:
    """An operand as a computed or constant Lowered value, expanded to `out_rank`
    (`transform` maps a constant's float data first, e.g. to its reciprocal).

    NNEF broadcasting aligns the operand's dims at `align` (default: right-aligned,
    like numpy); TOSA needs equal ranks, so the operand is RESHAPEd (in its float
    layout) to insert the extents of size 1.
    """
    if ctx.f.is_constant(name):
        data = ctx.f.constant(name)
        if transform is not None:
            data = transform(data)
            name = f"{name}.{transform.__name__}"
        quant = None if transform is not None else ctx.f.graph.tensor(name).quant
        if not is_tflite(quant) or quant.per_channel or quant.bits != ctx.act_dtype.bits:
            scheme = QuantScheme(bits=ctx.act_dtype.bits, signed=True, symmetric=True)
            quant = params_from_range(data.min(), data.max(), scheme, source="derived", what=name)
        # (else a .tflite constant keeps its own grid: its codes are TFLite's, which its kernels read)
        q = np.reshape(quantize(data, quant, what=name), data.shape)   # rank 0 stays rank 0
        v = Lowered(ctx.constant_tensor(f"{name}.q", q, ctx.act_dtype, quant), quant,
                    identity(data.ndim))
    else:
        v = ctx.f.value(name)
    rank = len(v.perm)
    if rank == out_rank:
        return v
    v = ctx.to_float_layout(v, f"{hint}.float")
    shape = ctx.f.builder.tensor(v.name).shape
    lead = out_rank - rank if align is None else (align if align >= 0 else out_rank + align - rank + 1)
    new_shape = (1,) * lead + tuple(shape) + (1,) * (out_rank - rank - lead)
    out = ctx.emit("RESHAPE", [v.name], {"new_shape": new_shape}, hint=f"{hint}.expanded",
                     label=ctx.f.where(), quant=v.quant)
    return Lowered(out, v.quant, identity(out_rank))


def _binary_operands(ctx: TosaContext, op: ir.Op, rhs_transform=None) -> tuple[Lowered, Lowered]:
    out_rank = len(ctx.f.float_shape(op.outputs[0]))
    a = _operand(ctx, op.inputs[0], out_rank, op.attrs.get("lhs_align"), f"{op.outputs[0]}.lhs")
    b = _operand(ctx, op.inputs[1], out_rank, op.attrs.get("rhs_align"), f"{op.outputs[0]}.rhs",
                 rhs_transform)
    # one layout for both: that of a computed operand (constants are laid out freely)
    target = a.perm if not ctx.f.is_constant(op.inputs[0]) else b.perm
    return (ctx.transpose_to(a, target, f"{op.outputs[0]}.lhs.t"),
            ctx.transpose_to(b, target, f"{op.outputs[0]}.rhs.t"))


def _result(ctx: TosaContext, op: ir.Op, acc: str, acc_scale: float, perm) -> None:
    """RESCALE an int32 result at `acc_scale` to the output grid; CLAMP a fused activation."""
    act, last = take_fused_activation(ctx.f, op.outputs[0])
    quant = ctx.f.activation_quant(last)
    ratio = acc_scale / float(quant.scales()[0])
    zp = int(quant.zero_points()[0])
    if act is None:
        out = ctx.rescale(acc, scale=ratio, input_zp=0, output_zp=zp, out_dtype=ctx.act_dtype,
                          hint=last, quant=quant, exact=True)
    else:
        pre = ctx.rescale(acc, scale=ratio, input_zp=0, output_zp=zp, out_dtype=ctx.act_dtype,
                          hint=f"{op.outputs[0]}.rescaled", quant=quant)
        lo, hi = ctx.clamp_range(quant, act[1], act[2])
        out = ctx.emit("CLAMP", [pre], {"min_val": lo, "max_val": hi}, hint=last,
                         label=ctx.f.where(), quant=quant, exact=True)
    ctx.f.bind(last, Lowered(out, quant, perm))


@rule(TargetKind.TOSA, "math.add", "math.sub")
def lower_add_sub(ctx: TosaContext, op: ir.Op) -> None:
    a, b = _binary_operands(ctx, op)
    square = tflite_sqdiff.square_of(ctx, op) if is_tflite(a.quant, b.quant) else None
    if square is not None and ctx.act_dtype is ir.DType.I8:
        tflite_sqdiff.lower_squared_difference(ctx, op, square, a, b)    # TFLite's SQUARED_DIFFERENCE
        return
    if is_tflite(a.quant, b.quant) and ctx.act_dtype is ir.DType.I8 and not (a.quant.per_channel or b.quant.per_channel):
        tflite_add.lower_add_sub(ctx, op, a, b)      # TFLite's arithmetic (tflite/rules_add.py)
        return
    s_c = max(float(a.quant.scales()[0]), float(b.quant.scales()[0])) / (1 << COMMON_SCALE_BITS)
    ai = ctx.to_int32(a, float(a.quant.scales()[0]) / s_c, f"{op.outputs[0]}.lhs32")
    bi = ctx.to_int32(b, float(b.quant.scales()[0]) / s_c, f"{op.outputs[0]}.rhs32")
    tosa_op = "ADD" if op.kind.name == "math.add" else "SUB"
    acc = ctx.emit(tosa_op, [ai, bi], {}, hint=f"{op.outputs[0]}.acc", label=ctx.f.where())
    _result(ctx, op, acc, s_c, a.perm)


def reciprocal(data: np.ndarray) -> np.ndarray:
    return 1.0 / data.astype(np.float64)


@rule(TargetKind.TOSA, "math.mul", "math.div")
def lower_mul(ctx: TosaContext, op: ir.Op) -> None:
    """MUL of the int32-widened operands; a division by a constant is a MUL by its
    reciprocal (quantized like any constant operand); by a computed tensor, the integer
    reciprocal of rules_division.lower_division."""
    if op.kind.name == "math.div":
        if not ctx.f.is_constant(op.inputs[1]):
            lower_division(ctx, op, *_binary_operands(ctx, op))   # reciprocal: TABLE + Newton
            return
        if np.any(ctx.f.constant(op.inputs[1]) == 0):
            raise ctx.f.unsupported(f"division by a constant {op.inputs[1]!r} holding zero")
        a, b = _binary_operands(ctx, op, rhs_transform=reciprocal)
    else:
        a, b = _binary_operands(ctx, op)
    ai = ctx.to_int32(a, 1.0, f"{op.outputs[0]}.lhs32")
    bi = ctx.to_int32(b, 1.0, f"{op.outputs[0]}.rhs32")
    acc = ctx.emit("MUL", [ai, bi], {"shift": 0}, hint=f"{op.outputs[0]}.acc", label=ctx.f.where())
    _result(ctx, op, acc, float(a.quant.scales()[0]) * float(b.quant.scales()[0]), a.perm)


@rule(TargetKind.TOSA, "math.min", "math.max")
def lower_min_max(ctx: TosaContext, op: ir.Op) -> None:
    """MINIMUM/MAXIMUM take int32 only (TOSA 2.5.12/13): both operands go to int32 on the
    output's scale (rounding is monotone, so min/max commute with it), then back."""
    a, b = _binary_operands(ctx, op)
    s_out = float(ctx.f.activation_quant(op.outputs[0]).scales()[0])
    ai = ctx.to_int32(a, float(a.quant.scales()[0]) / s_out, f"{op.outputs[0]}.lhs32")
    bi = ctx.to_int32(b, float(b.quant.scales()[0]) / s_out, f"{op.outputs[0]}.rhs32")
    tosa_op = "MINIMUM" if op.kind.name == "math.min" else "MAXIMUM"
    acc = ctx.emit(tosa_op, [ai, bi], {}, hint=f"{op.outputs[0]}.acc", label=ctx.f.where())
    _result(ctx, op, acc, s_out, a.perm)


def _clamp_to(ctx: TosaContext, op: ir.Op, lo: float | None, hi: float | None) -> None:
    x = ctx.f.value(op.inputs[0])
    quant = ctx.f.activation_quant(op.outputs[0])
    x = ctx.requantize(x, quant, f"{op.outputs[0]}.rq")
    qlo, qhi = ctx.clamp_range(quant, lo, hi)
    out = ctx.emit("CLAMP", [x.name], {"min_val": qlo, "max_val": qhi}, hint=op.outputs[0],
                     label=ctx.f.where(), quant=quant, exact=True)
    ctx.f.bind(op.outputs[0], Lowered(out, quant, x.perm))


@rule(TargetKind.TOSA, "nn.relu")
def lower_relu(ctx: TosaContext, op: ir.Op) -> None:
    bounds = relu_bounds(op)
    if bounds is None:                   # a leaky relu (alpha > 0) is no clamp
        lower_leaky_relu(ctx, op)
        return
    _clamp_to(ctx, op, *bounds)


@rule(TargetKind.TOSA, "math.clamp")
def lower_clamp(ctx: TosaContext, op: ir.Op) -> None:
    bounds = clamp_bounds(ctx.f, op)
    _clamp_to(ctx, op, bounds[0], bounds[1])


@rule(TargetKind.TOSA, "math.iden")
def lower_identity(ctx: TosaContext, op: ir.Op) -> None:
    """The input itself; or, where the output is annotated with other per-tensor parameters
    (a TFLite QUANTIZE between two integer grids), the input requantized to them."""
    x = ctx.f.value(op.inputs[0])
    out_t = ctx.f.graph.tensor(op.outputs[0])
    out = out_t.quant
    if annotated(out_t) and x.quant is not None and not out.per_channel and not x.quant.per_channel \
            and (float(out.scale), int(out.zero_point)) != (float(x.quant.scale), int(x.quant.zero_point)):
        ctx.f.bind(op.outputs[0], ctx.requantize(x, out, hint=op.outputs[0], exact=True))
        return
    ctx.f.bind(op.outputs[0], x)


@rule(TargetKind.TOSA, *(f.value for f in UnaryFunction if "." in f.value))
def lower_table(ctx: TosaContext, op: ir.Op) -> None:
    x = ctx.f.value(op.inputs[0])
    quant = ctx.f.activation_quant(op.outputs[0])
    own = tflite_unary.tflite_table(op.kind.name, x.quant, quant)      # TFLite's RSQRT / NEG kernels
    if own is not None:
        out = ctx.emit("TABLE", [x.name], {"table": own}, hint=op.outputs[0], label=ctx.f.where(),
                       quant=quant, exact=True)
        ctx.f.bind(op.outputs[0], Lowered(out, quant, x.perm))
        return
    table = make_table(operator_function(op.kind.name, op.attrs), x.quant, quant, what=ctx.f.where())
    out = ctx.table(x.name, table, hint=op.outputs[0], quant=quant)
    ctx.f.bind(op.outputs[0], Lowered(out, quant, x.perm))
