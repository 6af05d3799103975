"""AVERAGE_POOL_2D in TFLite's int8 form (reference pooling.h), as TOSA 0.30 operators, for an
input whose parameters came from a .tflite model (TFLite pools on the input's grid: the output
parameters equal the input's, which the importer checks).

TFLite averages the raw codes and rounds half away from zero:
    out = sign(S) floor((|S| + floor(c / 2)) / c)       S = sum of the window's codes, c = count
TOSA AVG_POOL2D (zero points 0) rounds S / c half up. So, with the codes widened to int16 (the
negation of -128 must not saturate; the comparison and selection in int32, their only type):
    y = AVG_POOL2D(x), z = AVG_POOL2D(-x)               round_half_up(S / c), round_half_up(-S / c)
    out = z >= 1 ? -z : y
For S >= 0, z <= 0 and half up is TFLite's rounding (y). For S / c <= -1/2, -z is S / c rounded
half down, TFLite's rounding of a negative quotient; for -1/2 < S / c < 0 both are 0.
"""
from __future__ import annotations

import numpy as np

from .... import ir
from ...lowering.float_side import Lowered
from ..context import TosaContext
from .rules_add import rescale_fixed


def lower_average_pool(ctx: TosaContext, op: ir.Op, x: Lowered, attrs: dict, perm) -> Lowered:
    name, where = op.outputs[0], ctx.f.where()
    rank = len(ctx.f.builder.tensor(x.name).shape)
    pool = dict(attrs, input_zp=0, output_zp=0)

    def const(what: str, value: int, dtype: ir.DType) -> str:
        return ctx.constant_tensor(f"{name}.{what}", np.full((1,) * rank, value), dtype)

    wide = ctx.emit("CAST", [x.name], {}, hint=f"{name}.codes16", label=where, out_dtype=ir.DType.I16)
    negated = ctx.emit("NEGATE", [wide], {"input1_zp": 0, "output_zp": 0}, hint=f"{name}.negated", label=where)
    up = ctx.emit("CAST", [ctx.emit("AVG_POOL2D", [wide], pool, hint=f"{name}.half_up16", label=where)], {},
                  hint=f"{name}.half_up", label=where, out_dtype=ir.DType.I32)
    down = ctx.emit("CAST", [ctx.emit("AVG_POOL2D", [negated], pool, hint=f"{name}.negated_mean16", label=where)],
                    {}, hint=f"{name}.negated_mean", label=where, out_dtype=ir.DType.I32)
    negative = ctx.emit("GREATER_EQUAL", [down, const("one", 1, ir.DType.I32)], {}, hint=f"{name}.negative",
                        label=where)
    away = ctx.emit("NEGATE", [down], {"input1_zp": 0, "output_zp": 0}, hint=f"{name}.half_away", label=where)
    mean = ctx.emit("SELECT", [negative, away, up], {}, hint=f"{name}.mean32", label=where)
    out = ctx.emit("CAST", [mean], {}, hint=name, label=where, out_dtype=ctx.act_dtype, quant=x.quant, exact=True)
    return Lowered(out, x.quant, perm)


def divide_by_pot_half_away(ctx: TosaContext, acc: str, bits: int, hint: str, quant: ir.QuantInfo) -> str:
    """acc / 2^bits rounded half away from zero, to the activation type (TFLite's integer
    RESIZE_BILINEAR: add sign(acc) 2^19, divide by 2^20 truncating). Each half is one RESCALE
    by 2^(31 - bits) / 2^31: a shift of 31 takes no double rounding, so it rounds half up once;
    the negative half is rescaled negated. |acc| < 2^29 (REQUIRE of apply_scale_32, shift 31)."""
    where = ctx.f.where()
    rank = len(ctx.f.builder.tensor(acc).shape)
    multiplier = 1 << (31 - bits)

    def half_up(src: str, what: str) -> str:
        return rescale_fixed(ctx, src, multiplier, 31, 0, 0, ir.DType.I32, f"{hint}.{what}", False)

    up = half_up(acc, "half_up")
    negated = ctx.emit("NEGATE", [acc], {"input1_zp": 0, "output_zp": 0}, hint=f"{hint}.negated", label=where)
    down = ctx.emit("NEGATE", [half_up(negated, "negated_half_up")], {"input1_zp": 0, "output_zp": 0},
                    hint=f"{hint}.half_down", label=where)
    zero = ctx.constant_tensor(f"{hint}.zero", np.zeros((1,) * rank), ir.DType.I32)
    nonneg = ctx.emit("GREATER_EQUAL", [acc, zero], {}, hint=f"{hint}.nonneg", label=where)
    rounded = ctx.emit("SELECT", [nonneg, up, down], {}, hint=f"{hint}.rounded", label=where)
    return rescale_fixed(ctx, rounded, 1 << 30, 30, 0, 0, ctx.act_dtype, hint, False, quant=quant, exact=True)
