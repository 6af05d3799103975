"""Lowerings in TFLite's integer form, for operators whose operands' parameters came from a
.tflite model (QuantInfo.source "tflite", arith.is_tflite): TOSA 0.30 operators whose
results are LiteRT's reference kernels' bit for bit (docs/tflite.md). The rules of qsim's own
form call these when their operands are TFLite's.

ADD / SUB (TFLite add.cc, sub.cc, int8): each input centred and shifted left by 20 bits
(exact: a RESCALE by 2^30 / 2^10), rescaled to twice the larger input scale (RESCALE, double
rounding), added or subtracted in int32, rescaled to the output grid (RESCALE, double
rounding, output zero point, int8 saturation) and clamped for a fused activation. Bounds:
|x - zp| <= 255, so a shifted input is below 2^28 and the int32 sum below 2^29.
"""
from __future__ import annotations

import numpy as np

from .... import ir
from ...lowering.float_patterns import take_fused_activation
from ...lowering.float_side import Lowered
from ..context import TosaContext
from .arith import add_multipliers

ADD_LEFT_SHIFT = {8: 20, 16: 15}
# RESCALE by 2^LIFT_MULTIPLIER_BITS / 2^(LIFT_MULTIPLIER_BITS - left_shift): exact, and its
# shift (10) admits any centred int8 value (apply_scale_32: |v| <= 255 < 2^(shift - 2))
LIFT_MULTIPLIER_BITS = 30


def rescale_fixed(ctx: TosaContext, src: str, multiplier: int, shift: int, input_zp: int, output_zp: int,
             out_dtype: ir.DType, hint: str, double_round: bool, quant=None, exact=False) -> str:
    """RESCALE by an explicit (multiplier, shift), per tensor."""
    return ctx.emit("RESCALE", [src], {
        "input_zp": int(input_zp), "output_zp": int(output_zp),
        "multiplier": np.array([multiplier], np.int32), "shift": np.array([shift], np.int8),
        "scale32": True, "double_round": double_round, "per_channel": False},
        hint=hint, label=ctx.f.where(), out_dtype=out_dtype, quant=quant, exact=exact)


def lower_add_sub(ctx: TosaContext, op: ir.Op, a: Lowered, b: Lowered) -> None:
    act, last = take_fused_activation(ctx.f, op.outputs[0])
    out_quant = ctx.f.activation_quant(last)
    left_shift = ADD_LEFT_SHIFT[8 if ctx.act_dtype.bits == 8 else 16]
    scales = [float(v.quant.scales()[0]) for v in (a, b)]
    m1, m2, mo = add_multipliers(scales[0], scales[1], float(out_quant.scales()[0]), left_shift)
    operands = []
    for v, (m, s), side in ((a, m1, "lhs"), (b, m2, "rhs")):
        lifted = rescale_fixed(ctx, v.name, 1 << LIFT_MULTIPLIER_BITS, LIFT_MULTIPLIER_BITS - left_shift,
                          int(v.quant.zero_points()[0]), 0, ir.DType.I32, f"{op.outputs[0]}.{side}.shifted", False)
        operands.append(rescale_fixed(ctx, lifted, m, s, 0, 0, ir.DType.I32, f"{op.outputs[0]}.{side}32", True))
    tosa_op = "ADD" if op.kind.name == "math.add" else "SUB"
    acc = ctx.emit(tosa_op, operands, {}, hint=f"{op.outputs[0]}.acc", label=ctx.f.where())
    zp = int(out_quant.zero_points()[0])
    if act is None:
        out = rescale_fixed(ctx, acc, *mo, 0, zp, ctx.act_dtype, last, True, quant=out_quant, exact=True)
    else:
        pre = rescale_fixed(ctx, acc, *mo, 0, zp, ctx.act_dtype, f"{op.outputs[0]}.rescaled", True, quant=out_quant)
        lo, hi = ctx.clamp_range(out_quant, act[1], act[2])
        out = ctx.emit("CLAMP", [pre], {"min_val": lo, "max_val": hi}, hint=last, label=ctx.f.where(),
                       quant=out_quant, exact=True)
    ctx.f.bind(last, Lowered(out, out_quant, a.perm))
