"""Integer softmax (nn.softmax) as a sequence of TOSA operators.

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
"""
from __future__ import annotations

import math

import numpy as np

from .. import ir
from ..numerics import nnef_round
from .float_side import Lowered
from .rules import pattern_rule, rule
from .softmax_mask import MaskedSoftmax, match_masked_softmax
from .target import TargetKind
from .tosa_context import TosaContext

SOFTMAX_STEPS = 255              # output grid 1/255: p = 0 and p = 1 both representable
SOFTMAX_OUTPUT = ir.QuantInfo(scale=1.0 / SOFTMAX_STEPS, zero_point=-128, bits=8, signed=True,
                              source="derived")
MAX_SOFTMAX_EXTENT = 65535       # k = 7: e keeps 15 bits
EXP_TABLE_ONE = 32767


def softmax_exp_table(scale: float) -> np.ndarray:
    """513 int16 entries: entry i is exp(scale * (i - 256)) * 32767, for i <= 256 (d <= 0)."""
    d = np.arange(513, dtype=np.float64) - 256.0
    values = nnef_round(EXP_TABLE_ONE * np.exp(scale * np.minimum(d, 0.0)))
    return values.astype(np.int16)


@rule(TargetKind.TOSA, "nn.softmax")
def lower_softmax(ctx: TosaContext, op: ir.Op) -> None:
    _integer_softmax(ctx, op, op.inputs[0])


@pattern_rule(TargetKind.TOSA)
def lower_masked_softmax(ctx: TosaContext, op: ir.Op) -> bool:
    """Scores + a -inf mask (or masked_fill) → softmax (softmax_mask.py): the integer softmax of
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
    if ctx.act_dtype is not ir.DType.I8:
        raise ctx.f.unsupported("the integer softmax is lowered in int8 mode only")
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
        lowest = ctx.constant_tensor(f"{name}.lowest", np.full((1,) * rank, -128), ir.DType.I8)
        m = ctx.emit("SELECT", [keep, m, lowest], {}, hint=f"{name}.kept", label=where)
    for a in int_axes:
        m = ctx.emit("REDUCE_MAX", [m], {"axis": a}, hint=f"{name}.max", label=where)
    raw = Lowered(x.name, ir.QuantInfo(scale=1.0, zero_point=0), x.perm)
    xi = ctx.to_int32(raw, 1.0, f"{name}.q32")
    mi = ctx.to_int32(Lowered(m, raw.quant, x.perm), 1.0, f"{name}.max32")
    d = ctx.emit("SUB", [xi, mi], {}, hint=f"{name}.diff", label=where)
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
    ones = (1,) * rank
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
