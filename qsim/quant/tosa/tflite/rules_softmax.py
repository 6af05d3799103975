"""SOFTMAX in TFLite's int8 form (reference softmax.h; the arithmetic in numpy:
fixedpoint.py), as TOSA 0.30 operators, for an input whose parameters came from a
.tflite model and TFLite's int8 output grid (scale 1/256, zero point -128).

Per row along the axis (extent N <= MAX_EXTENT):
    d     = x - max(x)                               in [-255, 0]
    e     = exp(d) in Q0.31 (0 below diff_min)       three int16 TABLEs on d * 128 (index d + 256,
                                                     no interpolation): bits 30..16, 15..1 and 0
                                                     (15-bit parts: TABLE REQUIREs every slope
                                                     between neighbouring entries to fit int16)
    S     = sum(round(e / 2^12))                     Q12.19, ARITHMETIC_RIGHT_SHIFT round (e >= 0)
    h     = CLZ(S)                                   S >= 2^19 (the row maximum has e = 2^31 - 1)
    a     = (S << h) - 2^31                          BITWISE_AND 0x7fffffff of the wrapped shift
    r     = 1 / (1 + a)                              three Newton steps in Q2.29 (MUL shift 31 is
                                                     SaturatingRoundingDoublingHighMul)
    out   = round(r e / 2^31 / 2^(35 - h)) - 128     MUL shift 31, ARITHMETIC_RIGHT_SHIFT round
Bounds: N <= 511 keeps S < 2^28, so h >= 4 and the final shift 35 - h <= 31 (TOSA's limit);
a Newton correction x (1 - x d/2) stays below 2^27 in Q4.27, so its << 2 never saturates.
"""
from __future__ import annotations

import numpy as np

from .... import ir
from ...lowering.float_side import Lowered
from ..context import TosaContext
from .fixedpoint import (FORTY_EIGHT_SEVENTEENTHS, INT32_MAX, MINUS_THIRTY_TWO_SEVENTEENTHS,
                                softmax_exp)

MAX_EXTENT = 511
OUTPUT_SCALE, OUTPUT_ZERO_POINT = 1.0 / 256.0, -128
TABLE_SIZE = 513


def applies(ctx: TosaContext, x: Lowered, out_quant: ir.QuantInfo, extent: int) -> bool:
    """TFLite's int8 form applies: int8 activations, TFLite's output grid, a short enough row."""
    return (ctx.act_dtype is ir.DType.I8 and extent <= MAX_EXTENT and not out_quant.per_channel
            and float(out_quant.scales()[0]) == OUTPUT_SCALE
            and int(out_quant.zero_points()[0]) == OUTPUT_ZERO_POINT)


# exp(d) = sum of part << shift over these (shift, bits) parts, each a table of values below 2^15
EXP_PARTS = ((16, 15), (1, 15), (0, 1))


def exp_tables(input_scale: float) -> list[np.ndarray]:
    """int16 tables of exp(d)'s parts (EXP_PARTS) for d = index - 256 (0 where d > 0)."""
    diff = np.arange(TABLE_SIZE, dtype=np.int64) - 256
    e = np.where(diff <= 0, softmax_exp(np.minimum(diff, 0), input_scale), 0)
    return [((e >> shift) & ((1 << bits) - 1)).astype(np.int16) for shift, bits in EXP_PARTS]


def lower_softmax(ctx: TosaContext, op: ir.Op, x: Lowered, axis: int, out_quant: ir.QuantInfo) -> None:
    name, where = op.outputs[0], ctx.f.where()
    rank = len(ctx.f.float_shape(op.inputs[0]))
    ones = (1,) * rank

    def const(what: str, value: int) -> str:
        return ctx.constant_tensor(f"{name}.{what}", np.full(ones, value), ir.DType.I32)

    def emit(kind: str, inputs, what: str, **attrs) -> str:
        return ctx.emit(kind, inputs, attrs, hint=f"{name}.{what}", label=where)

    peak = emit("REDUCE_MAX", [x.name], "max", axis=axis)
    raw = ir.QuantInfo(scale=1.0, zero_point=0)
    xi = ctx.to_int32(Lowered(x.name, raw, x.perm), 1.0, f"{name}.q32")
    mi = ctx.to_int32(Lowered(peak, raw, x.perm), 1.0, f"{name}.max32")
    d = emit("SUB", [xi, mi], "diff")
    d7 = ctx.rescale(d, scale=128.0, input_zp=0, output_zp=0, out_dtype=ir.DType.I16, hint=f"{name}.diff7")
    e = None
    for (shift, _), table in zip(EXP_PARTS, exp_tables(float(x.quant.scales()[0]))):
        looked = emit("TABLE", [d7], f"exp_part{shift}", table=table)       # part << 7
        if shift >= 7:
            part = emit("LOGICAL_LEFT_SHIFT", [looked, const(f"k{shift - 7}", shift - 7)], f"exp_bits{shift}")
        else:
            part = emit("ARITHMETIC_RIGHT_SHIFT", [looked, const(f"kr{7 - shift}", 7 - shift)],
                        f"exp_bits{shift}", round=False)
        e = part if e is None else emit("ADD", [e, part], f"exp_sum{shift}")
    terms = emit("ARITHMETIC_RIGHT_SHIFT", [e, const("k12", 12)], "exp_q12", round=True)
    total = emit("REDUCE_SUM", [terms], "sum", axis=axis)
    headroom = emit("CLZ", [total], "clz")
    shifted = emit("BITWISE_AND", [emit("LOGICAL_LEFT_SHIFT", [total, headroom], "normalized"),
                                   const("low31", INT32_MAX)], "sum_minus_one")
    half = emit("ADD", [emit("ARITHMETIC_RIGHT_SHIFT", [shifted, const("k1", 1)], "half_sum", round=False),
                        const("half_one", 1 << 30)], "half_denominator")
    r = emit("ADD", [emit("MUL", [half, const("c_32_17", MINUS_THIRTY_TWO_SEVENTEENTHS)], "seed_product", shift=31),
                     const("c_48_17", FORTY_EIGHT_SEVENTEENTHS)], "seed")
    for step in range(3):
        error = emit("SUB", [const(f"one_q29_{step}", 1 << 29),
                             emit("MUL", [half, r], f"newton{step}.product", shift=31)], f"newton{step}.error")
        correction = emit("MUL", [r, error], f"newton{step}.correction", shift=31)
        r = emit("ADD", [r, emit("LOGICAL_LEFT_SHIFT", [correction, const(f"k2_{step}", 2)],
                                 f"newton{step}.scaled")], f"newton{step}")
    saturated = emit("GREATER", [r, const("q29_max", (1 << 30) - 1)], "saturates")
    doubled = emit("LOGICAL_LEFT_SHIFT", [r, const("k1b", 1)], "reciprocal_q31")
    reciprocal = emit("SELECT", [saturated, const("int32_max", INT32_MAX), doubled], "reciprocal")
    p = emit("MUL", [e, reciprocal], "scaled", shift=31)
    exponent = emit("SUB", [const("k35", 35), headroom], "rounding_exponent")
    unsat = emit("ARITHMETIC_RIGHT_SHIFT", [p, exponent], "p256", round=True)
    out = ctx.rescale(unsat, scale=1.0, input_zp=0, output_zp=OUTPUT_ZERO_POINT, out_dtype=ir.DType.I8,
                      hint=name, quant=out_quant, exact=True)
    ctx.f.bind(name, Lowered(out, out_quant, x.perm))
