"""Integer softmax (nn.softmax) as a sequence of TOSA operators: int8 (below) and, for the
16x8 recipe, int16 (further below).

With x on an int8 grid of scale s, softmax(x)_i = e_i / sum_j e_j where
e_i = exp(s * (q_i - q_max)): the zero point cancels, and q_i - q_max lies in [-255, 0].

    m   = REDUCE_MAX(q)                          per softmax axis (kept, extent 1)
    d   = SUB(RESCALE32(q), RESCALE32(m))        int32 in [-255, 0]
    d7  = RESCALE(d -> int16, x 2^7)             in [-32640, 0]: table index 256 + d, fraction 0
    e   = TABLE(d7) (513 entries, int16)         (32767 * exp(s * d) rounded) << 7, <= 2^22
   [e   = ARITHMETIC_RIGHT_SHIFT(e, k, round)    only for L > 511: the least k with
                                                 L * (2^22 >> k) < 2^31, e.g. k = 1 for 1000]
    sum = REDUCE_SUM(e)                          < 2^31
    p   = INTDIV(255 * e + (sum >> 1), sum)      round(255 * e / sum), in [0, 255]
    out = RESCALE(p -> int8, output_zp -128)     p - 128: never saturates

The output grid is fixed to scale 1/255, zero point -128, whatever calibration saw: both
0 and 1 are on it. (TFLite's 1/256 cannot hold 1: a confident prediction saturates at
255/256, which cost MTCNN RNet's face probability 2-5 dB of SQNR against onnxruntime,
whose calibrated softmax output reaches 1.) Error: the table holds exp to 1/32767
relative (|error of e_i| <= 0.5 table step, i.e. <= 2^-16 of e_max), and the final
division rounds to nearest: |q_out - 255 * p_exact| <= 0.5 + 255 * L * 2^-16 — at most
1 LSB for L <= 128, and the rank of the largest probability is preserved. For L > 511 the right shift by k adds
at most half a unit of 2^(22-k) per element: L * 2^(k-23) relative to e_max in the sum
(under 2^-12 for L = 1000), far below the output step 1/255.

int16 (16x8: scores int16, symmetric): q - q_max lies in [-65534, 0], too wide for a table
index, so the difference is mapped onto the int16 TABLE's input range, with R = EXP16_RANGE
(exp(-12) * 32767 = 0.2 rounds to 0: nothing below -R adds to the sum):

    d   = SUB(RESCALE32(q), RESCALE32(m))        int32 in [-65534, 0]
    t   = RESCALE(d, s * 65408 / R -> int32)     the real difference in table input units
    t16 = RESCALE(ADD(t, 32640) -> int16)        saturating: x = 0 at 32640 (entry 511,
                                                 fraction 0: exactly 32767 << 7), -R at -32768
    e   = TABLE(t16)                             513 int16 entries, interpolated (2.5.17):
                                                 entry i = 32767 exp(-R (65408 - 128 i) / 65408)
    [e >> k]                                     the least k with L (32767 << 7 >> k) < 2^30
    sum = REDUCE_SUM(e)                          in [2^(22-k), 2^30)
    r,c = reciprocal(sum)                        1/sum = r 2^(c - 61) (integer_newton, 1.1e-8)
    y   = MUL(e, r, shift 22)                    e/sum 2^(61 - c - 22) (64-bit product)
    z   = MUL(y, 32767, shift 15)
    p   = ARITHMETIC_RIGHT_SHIFT(z, 24 - c, round) = round(32767 e / sum)
    out = RESCALE(p -> int16), grid 1/32767, zero point 0 (symmetric)

The table step is R/511 in the real difference; linear interpolation of exp over it is within
2.4 / 32767 of exp's value at 0 (measured over [-R, 0]), so |p - 32767 p_exact| stays within a
few steps of the 1/32767 grid (tests measure it), against 1/255 for int8.
"""
from __future__ import annotations

import math

import numpy as np

from ... import ir
from ...numerics import nnef_round
from ..lowering.float_side import Lowered
from .integer_newton import Emitter, reciprocal
from ..rules import pattern_rule, rule
from ..lowering.softmax_mask import MaskedSoftmax, match_masked_softmax
from ..target import TargetKind
from .tflite import rules_softmax as tflite_softmax
from .tflite.arith import is_tflite
from .context import TosaContext

SOFTMAX_STEPS = 255              # output grid 1/255: p = 0 and p = 1 both representable
SOFTMAX_OUTPUT = ir.QuantInfo(scale=1.0 / SOFTMAX_STEPS, zero_point=-128, bits=8, signed=True,
                              source="derived")
MAX_SOFTMAX_EXTENT = 65535       # k = 7: e keeps 15 bits
EXP_TABLE_ONE = 32767


SOFTMAX16_STEPS = 32767          # int16 output grid 1/32767, zero point 0: p = 1 is 32767
SOFTMAX16_OUTPUT = ir.QuantInfo(scale=1.0 / SOFTMAX16_STEPS, zero_point=0, bits=16, signed=True,
                                symmetric=True, source="derived")
EXP16_RANGE = 12.0               # the int16 table spans real differences [-R, 0]
EXP16_ZERO = 32640               # table input of difference 0: entry 511, fraction 0
EXP16_SPAN = EXP16_ZERO + 32768  # table input units over [-R, 0]
SUM16_LIMIT = 2 ** 30            # integer_newton.reciprocal takes [1, 2^30)


def softmax_exp_table16() -> np.ndarray:
    """513 int16 entries: entry i (table input 128 i - 32768) holds 32767 exp(x_i), x_i the real
    difference R (128 i - 32768 - EXP16_ZERO) / EXP16_SPAN, clamped at x = 0 above entry 511."""
    x = EXP16_RANGE * (128.0 * np.arange(513) - 32768.0 - EXP16_ZERO) / EXP16_SPAN
    return nnef_round(EXP_TABLE_ONE * np.exp(np.minimum(x, 0.0))).astype(np.int16)


def softmax_exp_table(scale: float) -> np.ndarray:
    """513 int16 entries: entry i is exp(scale * (i - 256)) * 32767, for i <= 256 (d <= 0)."""
    d = np.arange(513, dtype=np.float64) - 256.0
    values = nnef_round(EXP_TABLE_ONE * np.exp(scale * np.minimum(d, 0.0)))
    return values.astype(np.int16)


@rule(TargetKind.TOSA, "nn.softmax")
def lower_softmax(ctx: TosaContext, op: ir.Op) -> None:
    x = ctx.f.value(op.inputs[0])
    shape = ctx.f.float_shape(op.inputs[0])
    axes = sorted({int(a) % len(shape) for a in op.attrs.get("axes", (1,))})
    out_quant = ctx.f.activation_quant(op.outputs[0])
    if is_tflite(x.quant) and len(axes) == 1 and \
            tflite_softmax.applies(ctx, x, out_quant, shape[axes[0]]):
        # TFLite's reference arithmetic, bit for bit (tflite/rules_softmax.py)
        tflite_softmax.lower_softmax(ctx, op, x, x.perm.index(axes[0]), out_quant)
        return
    _integer_softmax(ctx, op, op.inputs[0])


@pattern_rule(TargetKind.TOSA)
def lower_masked_softmax(ctx: TosaContext, op: ir.Op) -> bool:
    """Scores + a -inf mask (or masked_fill) → softmax (lowering/softmax_mask.py): the integer softmax of
    the scores with the mask as a boolean constant; masked positions get probability exactly 0."""
    match = match_masked_softmax(ctx.f.graph, op)
    if match is None:
        return False
    ctx.f.fused.add(id(match.softmax))
    _integer_softmax(ctx, match.softmax, match.scores, match)
    return True


def _integer_softmax(ctx: TosaContext, op: ir.Op, scores: str, mask: MaskedSoftmax | None = None) -> None:
    """The module doc's sequence over `scores` (the softmax's input, or the scores before its
    mask). With a mask, the maximum is taken over kept positions only (masked ones read as the
    int8 minimum) and the exp values of masked positions are replaced by 0 before the sum; a row
    with no kept position (possible only with such a mask) gets sum max(0, 1), so p = 0."""
    x = ctx.f.value(scores)
    shape = ctx.f.float_shape(scores)
    rank = len(shape)
    axes = sorted({int(a) % rank for a in op.attrs.get("axes", (1,))})
    extent = math.prod(shape[a] for a in axes)
    if extent > MAX_SOFTMAX_EXTENT:
        raise ctx.f.unsupported(f"softmax over {extent} elements; the integer softmax sums "
                              f"at most {MAX_SOFTMAX_EXTENT} exp values in int32")
    name = op.outputs[0]
    int_axes = [x.perm.index(a) for a in axes]
    where = ctx.f.where()
    keep = None
    if mask is not None:
        # the mask in the scores' integer layout, extent 1 where it broadcasts
        keep = ctx.constant_tensor(f"{name}.keep", np.ascontiguousarray(mask.keep.transpose(x.perm)),
                                   ir.DType.BOOL)

    m = x.name
    if keep is not None:
        lowest = ctx.constant_tensor(f"{name}.lowest", np.full((1,) * rank, -(1 << (ctx.act_dtype.bits - 1))),
                                     ctx.act_dtype)
        m = ctx.emit("SELECT", [keep, m, lowest], {}, hint=f"{name}.kept", label=where)
    for a in int_axes:
        m = ctx.emit("REDUCE_MAX", [m], {"axis": a}, hint=f"{name}.max", label=where)
    raw = Lowered(x.name, ir.QuantInfo(scale=1.0, zero_point=0), x.perm)
    xi = ctx.to_int32(raw, 1.0, f"{name}.q32")
    mi = ctx.to_int32(Lowered(m, raw.quant, x.perm), 1.0, f"{name}.max32")
    d = ctx.emit("SUB", [xi, mi], {}, hint=f"{name}.diff", label=where)
    ones = (1,) * rank
    if ctx.act_dtype is ir.DType.I16:
        _softmax16_tail(ctx, op, x, d, keep, extent, int_axes, mask is not None and
                        mask.fully_masked_rows(shape, tuple(axes)))
        return
    # masked positions may lie above the kept maximum (d up to 255): the table reads them as
    # d = 0 and the SELECT below zeroes them
    d7 = ctx.rescale(d, scale=128.0, input_zp=0, output_zp=0, out_dtype=ir.DType.I16,
                     hint=f"{name}.diff7", quant=ir.QuantInfo(
                         scale=float(x.quant.scales()[0]) / 128.0, zero_point=0, bits=16,
                         symmetric=True, source="derived"))
    e = ctx.emit("TABLE", [d7], {"table": softmax_exp_table(float(x.quant.scales()[0]))},
                   hint=f"{name}.exp", label=where)
    shift = 0
    while extent * ((EXP_TABLE_ONE << 7) >> shift) >= 2 ** 31 - extent:
        shift += 1
    if shift:
        k = ctx.constant_tensor(f"{name}.kshift", np.full((1,) * rank, shift), ir.DType.I32)
        e = ctx.emit("ARITHMETIC_RIGHT_SHIFT", [e, k], {"round": True}, hint=f"{name}.exp_k",
                       label=where)
    if keep is not None:
        zero = ctx.constant_tensor(f"{name}.zero", np.zeros(ones), ir.DType.I32)
        e = ctx.emit("SELECT", [keep, e, zero], {}, hint=f"{name}.exp_kept", label=where)
    total = e
    for a in int_axes:
        total = ctx.emit("REDUCE_SUM", [total], {"axis": a}, hint=f"{name}.sum", label=where)
    if mask is not None and mask.fully_masked_rows(shape, tuple(axes)):
        one = ctx.constant_tensor(f"{name}.one", np.ones(ones), ir.DType.I32)
        total = ctx.emit("MAXIMUM", [total, one], {}, hint=f"{name}.sum_nz", label=where)
    steps = ctx.constant_tensor(f"{name}.ksteps", np.full(ones, SOFTMAX_STEPS), ir.DType.I32)
    k1 = ctx.constant_tensor(f"{name}.k1", np.full(ones, 1), ir.DType.I32)
    scaled = ctx.emit("MUL", [e, steps], {"shift": 0}, hint=f"{name}.scaled", label=where)
    half = ctx.emit("ARITHMETIC_RIGHT_SHIFT", [total, k1], {"round": False},
                      hint=f"{name}.half", label=where)
    num = ctx.emit("ADD", [scaled, half], {}, hint=f"{name}.num", label=where)
    p = ctx.emit("INTDIV", [num, total], {}, hint=f"{name}.p255", label=where)
    out = ctx.rescale(p, scale=1.0, input_zp=0, output_zp=-128, out_dtype=ir.DType.I8,
                      hint=name, quant=SOFTMAX_OUTPUT, exact=True)
    ctx.f.bind(name, Lowered(out, SOFTMAX_OUTPUT, x.perm))


def _softmax16_tail(ctx: TosaContext, op: ir.Op, x: Lowered, d: str, keep: str | None, extent: int,
                    int_axes: list[int], fully_masked: bool) -> None:
    """The int16 softmax from the differences d = q - q_max (module doc)."""
    name = op.outputs[0]
    emit = Emitter(ctx, name, len(x.perm))
    s = float(x.quant.scales()[0])
    t = ctx.rescale(d, scale=s * EXP16_SPAN / EXP16_RANGE, input_zp=0, output_zp=0, out_dtype=ir.DType.I32,
                    hint=f"{name}.diff_t")
    t = emit("ADD", [t, emit.const("zero_at", EXP16_ZERO)], {}, "diff_t0")
    t16 = ctx.rescale(t, scale=1.0, input_zp=0, output_zp=0, out_dtype=ir.DType.I16, hint=f"{name}.diff16")
    e = emit("TABLE", [t16], {"table": softmax_exp_table16()}, "exp")
    shift = 0
    while extent * ((EXP_TABLE_ONE << 7) >> shift) >= SUM16_LIMIT:
        shift += 1
    if shift:
        e = emit("ARITHMETIC_RIGHT_SHIFT", [e, emit.const("kshift", shift)], {"round": True}, "exp_k")
    if keep is not None:
        e = emit("SELECT", [keep, e, emit.const("zero", 0)], {}, "exp_kept")
    total = e
    for a in int_axes:
        total = emit("REDUCE_SUM", [total], {"axis": a}, "sum")
    if fully_masked:
        total = emit("MAXIMUM", [total, emit.const("one", 1)], {}, "sum_nz")
    r, c = reciprocal(emit, total)
    y = emit("MUL", [e, r], {"shift": 22}, "ratio")
    z = emit("MUL", [y, emit.const("ksteps", SOFTMAX16_STEPS)], {"shift": 15}, "scaled")
    # c <= 9 whenever a row keeps a position (its maximum gives e = 32767 << 7 >> k, k <= 8);
    # a row with none has e = 0 and c = 31: the shift is held at 0 and p stays 0
    k = emit("MAXIMUM", [emit("SUB", [emit.const("k24", 24), c], {}, "p_shift"), emit.const("zero_s", 0)], {},
             "p_shift0")
    p = emit("ARITHMETIC_RIGHT_SHIFT", [z, k], {"round": True}, "p32767")
    out = ctx.rescale(p, scale=1.0, input_zp=0, output_zp=0, out_dtype=ir.DType.I16, hint=name,
                      quant=SOFTMAX16_OUTPUT, exact=True)
    ctx.f.bind(name, Lowered(out, SOFTMAX16_OUTPUT, x.perm))
