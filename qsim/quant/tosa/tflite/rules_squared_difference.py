"""SQUARED_DIFFERENCE in TFLite's int8 form (squared_difference.cc), as TOSA 0.30 operators.
The front end imports it as math.sub to an unannotated tensor read only by math.sqr; the
pair lowers here:

    x1, x2  = (x - zp) << 7                RESCALE by 2^30 / 2^23 (exact, no rounding)
    y1, y2  = x * m_i (twice the larger    RESCALE, double rounding (MultiplyByQuantized-
              input scale)                 MultiplierSmallerThanOneExp)
    d       = y1 - y2                      SUB (broadcast), |d| <= 255 * 2^7
    p       = d * d                        MUL int32, shift 0: below 2^30
    out     = p * m_out + zp_out           RESCALE, double rounding, int8 saturation
with m_i = s_i / (2 max(s1, s2)) and m_out = (2 max(s1, s2))^2 / (2^14 s_out): the doubled
maximum in float32, the ratios in double, as the kernel's Prepare forms them.
"""
from __future__ import annotations

import numpy as np

from .... import ir
from ...lowering.float_patterns import is_annotated
from ...lowering.float_side import Lowered
from ..context import TosaContext
from .arith import quantize_multiplier
from .rules_add import LIFT_MULTIPLIER_BITS, rescale_fixed

LEFT_SHIFT = 7


def multipliers(s1: float, s2: float, s_out: float):
    """(m1, m2, m_out) as TOSA (multiplier, shift) pairs."""
    twice_max = float(np.float32(2.0) * max(np.float32(s1), np.float32(s2)))
    real1 = float(np.float32(s1)) / twice_max
    real2 = float(np.float32(s2)) / twice_max
    real_out = twice_max * twice_max / float(np.float32((1 << 2 * LEFT_SHIFT) * np.float32(s_out)))
    return quantize_multiplier(real1), quantize_multiplier(real2), quantize_multiplier(real_out)


def square_of(ctx: TosaContext, op: ir.Op):
    """The math.sqr reading math.sub `op`'s unannotated output alone, else None."""
    name = op.outputs[0]
    if op.kind.name != "math.sub" or is_annotated(ctx.f, name):
        return None
    user = ctx.f.only_consumer(name)
    return user if user is not None and user.kind.name == "math.sqr" else None


def lower_squared_difference(ctx: TosaContext, op: ir.Op, square: ir.Op, a: Lowered, b: Lowered) -> None:
    name = square.outputs[0]
    out_quant = ctx.f.activation_quant(name)
    (m1, m2, mo) = multipliers(float(a.quant.scales()[0]), float(b.quant.scales()[0]),
                               float(out_quant.scales()[0]))
    scaled = []
    for v, (m, s), side in ((a, m1, "lhs"), (b, m2, "rhs")):
        lifted = rescale_fixed(ctx, v.name, 1 << LIFT_MULTIPLIER_BITS, LIFT_MULTIPLIER_BITS - LEFT_SHIFT,
                               int(v.quant.zero_points()[0]), 0, ir.DType.I32, f"{name}.{side}.shifted", False)
        scaled.append(rescale_fixed(ctx, lifted, m, s, 0, 0, ir.DType.I32, f"{name}.{side}32", True))
    diff = ctx.emit("SUB", scaled, {}, hint=f"{name}.diff", label=ctx.f.where())
    square_raw = ctx.emit("MUL", [diff, diff], {"shift": 0}, hint=f"{name}.square", label=ctx.f.where())
    out = rescale_fixed(ctx, square_raw, *mo, 0, int(out_quant.zero_points()[0]), ctx.act_dtype, name, True,
                        quant=out_quant, exact=True)
    ctx.f.fused.add(id(square))
    ctx.f.bind(name, Lowered(out, out_quant, a.perm))
