"""Integer layer normalization (TOSA 0.30 operators only), for the pattern of
lowering/layer_norm_pattern.py; a math.mean_reduce that does not start one is a plain reduction.

With x on a grid (s_x, zp) and L = the number of normalized elements per row:

    xc  = RESCALE(q -> int32, input_zp zp)          q - zp, |xc| <= w = 2^bits - 1
    S   = REDUCE_SUM(xc)  over the axes             |S| <= L w
    D   = SUB(MUL(xc, L), S)                        = L (x - mean) / s_x exactly, |D| <= L w
    V   = REDUCE_SUM(MUL(D, D, shift s2))           sum of round(D^2 / 2^s2)
    W   = MAXIMUM(ADD(V, E), 1)                     E = round(eps L^3 / (s_x^2 2^s2)); W < 2^30

so that (x - mean) / sqrt(var + eps) = D sqrt(L) / (2^(s2/2) sqrt(W)). s2 is the least shift
with L^3 w^2 / 4 / 2^s2 + L/2 + E + 1 < 2^30 (Popoviciu: a row's sum of squared deviations
is at most L w^2 / 4, and each rounded square adds at most 1/2).

rsqrt(W), integer only (integer_newton.rsqrt: CLZ normalization, TABLE seed, one Newton
step in MUL-with-shift arithmetic): 1 / sqrt(W) = r 2^(e - 44), e = (CLZ(W) - 2) >> 1 in [0, 14],
to 1.3e-8 relative.

Normalized and scaled:
    P   = MUL(D, r, shift sA)                       sA = bit length of L w: |P| < 2^30
    N   = ARITHMETIC_RIGHT_SHIFT(P, 14 - e, round)  y_norm = N s_N, s_N = sqrt(L) 2^(sA - 30 - s2/2)
    G   = MUL(N, gamma_q, shift sg)                 gamma per element of the normalized axes
    B   = ADD(G, beta_q)                            at scale s_P = s_y 2^-k
    out = RESCALE(B, 2^-k, output_zp)               the output grid (calibrated)

k is the largest with (max|gamma| sqrt(L) + max|beta|) / s_P <= 2^29 (no int32 overflow for
any input); gamma_q = round(gamma s_N 2^sg / s_P) with its largest entry in [2^29, 2^30).
Every intermediate keeps at least 17 significant bits wherever D != 0, so the result is the
exact layer norm of the quantized input to within the output rounding (tests bound it by one
output step) except in rows whose variance is below what eps and the int8 grid resolve.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import ir
from ...numerics import nnef_round
from ..lowering.float_side import Lowered
from .integer_newton import MAX_RSQRT_EXPONENT, Emitter, rsqrt
from ..lowering.layer_norm_pattern import LayerNorm, match_layer_norm
from ..rules import rule
from .rules_layout import lower_mean_sum
from ..target import TargetKind
from .context import TosaContext

W_LIMIT = 1 << 30               # W < 2^30 keeps CLZ(W) >= 2
PRODUCT_LIMIT_BITS = 29         # |G + beta_q| <= 2^29: int32 with a factor 2 of margin


@dataclass(frozen=True)
class LayerNormPlan:
    """The integer constants of one layer norm (see the module docstring)."""
    count: int                  # L
    square_shift: int           # s2
    eps_q: int                  # E
    product_shift: int          # sA
    gamma_q: np.ndarray         # int32, the float layout of x, extent 1 outside the axes
    gamma_shift: int            # sg
    beta_q: np.ndarray | None   # int32, like gamma_q
    out_shift: int              # k: the final RESCALE multiplies by 2^-k


def layer_norm_plan(count: int, bits: int, s_x: float, eps: float, gamma: np.ndarray | None,
                    beta: np.ndarray | None, s_y: float, rank: int, what: str) -> LayerNormPlan:
    """The constants for L = `count`, `bits`-bit input at scale s_x, output scale s_y.
    Raises ValueError(message) when the row is too long for int32 arithmetic."""
    w = (1 << bits) - 1
    if count * (w + 1) > W_LIMIT:
        raise ValueError(f"{what}: rows of {count} int{bits} values overflow the int32 sums "
                         f"(L * 2^{bits} must stay within 2^30)")
    e_real = eps * count ** 3 / (s_x * s_x)
    bound = count ** 3 * w * w / 4.0
    s2 = 0
    while (bound + e_real) / 2.0 ** s2 + count / 2.0 + 1 >= W_LIMIT:
        s2 += 1
    if s2 > 62:
        raise ValueError(f"{what}: epsilon {eps} is too large against the input scale {s_x}")
    eps_q = int(nnef_round(np.float64(e_real / 2.0 ** s2)))
    s_a = max(1, (count * w).bit_length())
    s_n = math.sqrt(count) * 2.0 ** (s_a + MAX_RSQRT_EXPONENT - 44 - s2 / 2.0)
    ones = np.ones((1,) * rank)
    g = ones if gamma is None else np.asarray(gamma, np.float64)
    b = None if beta is None else np.asarray(beta, np.float64)
    g_max = max(float(np.abs(g).max()), 1e-30)
    reach = g_max * math.sqrt(count) + (0.0 if b is None else float(np.abs(b).max()))
    k = min(31, math.floor(math.log2(2.0 ** PRODUCT_LIMIT_BITS * s_y / reach)))
    s_p = s_y * 2.0 ** -k
    sg = math.floor(math.log2(2.0 ** 30 * s_p / (g_max * s_n)))
    if sg < 0:                  # N's step times gamma is coarser than s_P: widen s_P
        k += sg
        s_p = s_y * 2.0 ** -k
        sg = 0
    sg = min(sg, 62)
    gamma_q = nnef_round(g * s_n * 2.0 ** sg / s_p).astype(np.int64)
    beta_q = None if b is None else nnef_round(b / s_p).astype(np.int64)
    for arr in (gamma_q, beta_q):
        if arr is not None and np.abs(arr).max(initial=0) >= 1 << 31:
            raise ValueError(f"{what}: gamma/beta do not fit int32 at the output scale {s_y}")
    return LayerNormPlan(count, s2, eps_q, s_a, gamma_q.astype(np.int32), sg,
                         None if beta_q is None else beta_q.astype(np.int32), k)


def _int_layout(values: np.ndarray, perm: tuple[int, ...]) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(values, perm))


def lower_layer_norm(ctx: TosaContext, ln: LayerNorm) -> None:
    for op in ln.ops:
        ctx.f.fused.add(id(op))
    x = ctx.f.value(ln.x)
    shape = ctx.f.float_shape(ln.x)
    rank = len(shape)
    out_quant = ctx.f.activation_quant(ln.output)
    count = math.prod(shape[a] for a in ln.axes)
    try:
        plan = layer_norm_plan(count, x.quant.bits, float(x.quant.scales()[0]), ln.epsilon, ln.gamma,
                               ln.beta, float(out_quant.scales()[0]), rank, ctx.f.where())
    except ValueError as err:
        raise ctx.f.unsupported(f"layer norm over {list(ln.axes)}: {err}") from None
    name = ln.output
    int_axes = [x.perm.index(a) for a in ln.axes]
    emit = Emitter(ctx, name, rank)

    def reduce_sum(t, hint):
        for a in int_axes:
            t = emit("REDUCE_SUM", [t], {"axis": a}, hint)
        return t

    xc = ctx.to_int32(x, 1.0, f"{name}.xc")
    total = reduce_sum(xc, "sum")
    scaled = emit("MUL", [xc, emit.const("count", count)], {"shift": 0}, "lx")
    d = emit("SUB", [scaled, total], {}, "dev")
    sq = emit("MUL", [d, d], {"shift": plan.square_shift}, "sq")
    w = reduce_sum(sq, "var")
    if plan.eps_q:
        w = emit("ADD", [w, emit.const("eps", plan.eps_q)], {}, "var_eps")
    w = emit("MAXIMUM", [w, emit.const("one", 1)], {}, "var_pos")
    r, e = rsqrt(emit, w)
    p = emit("MUL", [d, r], {"shift": plan.product_shift}, "scaled_dev")
    amount = emit("SUB", [emit.const("k14", MAX_RSQRT_EXPONENT), e], {}, "norm_shift")
    n = emit("ARITHMETIC_RIGHT_SHIFT", [p, amount], {"round": True}, "normalized")
    gamma = ctx.constant_tensor(f"{name}.gamma_q", _int_layout(plan.gamma_q, x.perm), ir.DType.I32)
    acc = emit("MUL", [n, gamma], {"shift": plan.gamma_shift}, "affine")
    if plan.beta_q is not None:
        beta = ctx.constant_tensor(f"{name}.beta_q", _int_layout(plan.beta_q, x.perm), ir.DType.I32)
        acc = emit("ADD", [acc, beta], {}, "affine_beta")
    out = ctx.rescale(acc, scale=2.0 ** -plan.out_shift, input_zp=0,
                      output_zp=int(out_quant.zero_points()[0]), out_dtype=ctx.act_dtype, hint=name,
                      quant=out_quant, exact=True)
    ctx.f.bind(name, Lowered(out, out_quant, x.perm))


@rule(TargetKind.TOSA, "math.mean_reduce")
def lower_mean_reduce(ctx: TosaContext, op: ir.Op) -> None:
    """A layer norm starting here becomes the integer layer norm; else a plain mean."""
    ln = match_layer_norm(ctx.f, op)
    if ln is None:
        lower_mean_sum(ctx, op)
    else:
        lower_layer_norm(ctx, ln)
