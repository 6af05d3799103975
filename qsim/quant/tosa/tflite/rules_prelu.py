"""PRELU in TFLite's int8 form (reference prelu.h), as TOSA 0.30 operators, for an input whose
parameters came from a .tflite model and a slope tensor quantized per tensor:

    v    = x - zp_in                                   RESCALE to int32 (exact, |v| <= 255)
    pos  = MBQM(v, s_in / s_out) + zp_out              RESCALE, double rounding, int8 saturation
    neg  = MBQM(v (a_q - zp_a), s_in s_a / s_out) + zp_out
                                                       MUL (|product| <= 255^2), RESCALE
    out  = SELECT(v >= 0, pos, neg)
with the multipliers formed from the float32 scales in float32 arithmetic, as the kernel's
Prepare does, and rounded by QuantizeMultiplier (arith.py)."""
from __future__ import annotations

import numpy as np

from .... import ir
from ...lowering.float_side import Lowered
from ..context import TosaContext
from .arith import float32_ratio, quantize_multiplier
from .rules_add import rescale_fixed


def applies(ctx: TosaContext, slope_quant: ir.QuantInfo | None) -> bool:
    return ctx.act_dtype is ir.DType.I8 and slope_quant is not None and not slope_quant.per_channel


def lower_prelu(ctx: TosaContext, op: ir.Op, x: Lowered, axis: int, slope_quant: ir.QuantInfo) -> None:
    name, where = op.outputs[0], ctx.f.where()
    out_quant = ctx.f.activation_quant(name)
    rank = len(x.perm)
    if x.perm[-1] != axis:
        x = ctx.transpose_to(x, tuple(p for p in x.perm if p != axis) + (axis,), f"{name}.channels_last")
    s_in, zp_in = float(x.quant.scales()[0]), int(x.quant.zero_points()[0])
    s_a = float(slope_quant.scales()[0])
    s_out, zp_out = float(out_quant.scales()[0]), int(out_quant.zero_points()[0])
    slopes = np.asarray(ctx.f.constant(op.inputs[1]), np.float64).reshape(-1)
    centred = np.round(slopes / np.float32(s_a)).astype(np.int64)       # the stored a_q - zp_a
    v = rescale_fixed(ctx, x.name, 1 << 30, 30, zp_in, 0, ir.DType.I32, f"{name}.centred", False)
    identity = quantize_multiplier(float32_ratio(s_in, divisor=s_out))
    scaled = quantize_multiplier(float32_ratio(s_in, s_a, divisor=s_out))
    positive = rescale_fixed(ctx, v, *identity, 0, zp_out, ctx.act_dtype, f"{name}.positive", True, quant=out_quant)
    a = ctx.constant_tensor(f"{name}.slope_q", centred.reshape((1,) * (rank - 1) + (-1,)), ir.DType.I32)
    product = ctx.emit("MUL", [v, a], {"shift": 0}, hint=f"{name}.product", label=where)
    negative = rescale_fixed(ctx, product, *scaled, 0, zp_out, ctx.act_dtype, f"{name}.negative", True,
                             quant=out_quant)
    zero = ctx.constant_tensor(f"{name}.zero", np.zeros((1,) * rank), ir.DType.I32)
    sign = ctx.emit("GREATER_EQUAL", [v, zero], {}, hint=f"{name}.nonneg", label=where)
    out = ctx.emit("SELECT", [sign, positive, negative], {}, hint=name, label=where, quant=out_quant, exact=True)
    ctx.f.bind(name, Lowered(out, out_quant, x.perm))
