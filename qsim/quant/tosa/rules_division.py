"""math.div by a computed tensor, integer only (the elementwise rule calls it for a divisor
that is not a constant). With a, b on grids (s_a, zp_a), (s_b, zp_b), bits-bit, and
F = 29 - bits fraction bits:

    ac, bc = RESCALE(q - zp -> int32)              |ac|, |bc| <= 2^bits
    num    = SELECT(bc < 0, 0 - ac, ac)            the sign moves to the numerator
    r, c   = reciprocal(MAXIMUM(ABS(bc), 1))       1/|bc| = r 2^(c - 61) (integer_newton)
    N      = ARITHMETIC_RIGHT_SHIFT(MUL(num, r, shift bits), 32 - c, round)
                                                   = round(2^F ac / bc), |N| <= 2^29
    N      = SELECT(bc == 0, MUL(ac, 2^(30 - bits)), N)
                                                   x / 0: beyond the rail with the sign of x
                                                   (0 / 0 is 0: an integer pipeline has no NaN)
    out    = RESCALE(N, s_a / (s_b 2^F s_out), output_zp)

The quotient keeps F = 21 fraction bits (int8) before the final rounding, so the result is the
exact quotient of the quantized inputs to within the output rounding (tests bound it by one
output step).
"""
from __future__ import annotations

from ... import ir
from ..lowering.float_side import Lowered
from .integer_newton import Emitter, reciprocal
from .context import TosaContext

QUOTIENT_BITS = 29              # |N| <= 2^(bits + F) = 2^29


def lower_division(ctx: TosaContext, op: ir.Op, a: Lowered, b: Lowered) -> None:
    """Binds op's output to a / b (both computed or constant Lowered values, one layout)."""
    name = op.outputs[0]
    bits = ctx.act_dtype.bits
    fraction = QUOTIENT_BITS - bits
    emit = Emitter(ctx, name, len(a.perm))
    ac = ctx.to_int32(a, 1.0, f"{name}.num32")
    bc = ctx.to_int32(b, 1.0, f"{name}.den32")
    zero = emit.const("zero", 0)
    negative = emit("GREATER", [zero, bc], {}, "den_neg")
    num = emit("SELECT", [negative, emit("SUB", [zero, ac], {}, "num_neg"), ac], {}, "num_signed")
    magnitude = emit("MAXIMUM", [emit("ABS", [bc], {}, "den_abs"), emit.const("one", 1)], {}, "den_pos")
    r, c = reciprocal(emit, magnitude)
    p = emit("MUL", [num, r], {"shift": bits}, "scaled")
    shift = emit("SUB", [emit.const("k32", 61 - fraction - bits), c], {}, "quot_shift")
    quotient = emit("ARITHMETIC_RIGHT_SHIFT", [p, shift], {"round": True}, "quot")
    railed = emit("MUL", [ac, emit.const("rail", 1 << (30 - bits))], {"shift": 0}, "div0")
    quotient = emit("SELECT", [emit("EQUAL", [bc, zero], {}, "den_zero"), railed, quotient], {}, "quot_safe")
    out_quant = ctx.f.activation_quant(name)
    ratio = float(a.quant.scales()[0]) / (float(b.quant.scales()[0]) * 2.0 ** fraction
                                          * float(out_quant.scales()[0]))
    out = ctx.rescale(quotient, scale=ratio, input_zp=0, output_zp=int(out_quant.zero_points()[0]),
                      out_dtype=ctx.act_dtype, hint=name, quant=out_quant, exact=True)
    ctx.f.bind(name, Lowered(out, out_quant, a.perm))
