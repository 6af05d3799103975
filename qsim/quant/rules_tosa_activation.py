"""Lowering rules for activations (TOSA 0.30): element-wise chains of one tensor, PReLU and
leaky ReLU.

- A chain of element-wise ops of one tensor X (float_chains.py: HardSwish, HardSigmoid,
  GELU's erf form, SiLU, quick-GELU, Mish, ...) is one function g of X, so one TABLE
  (2.5.17): int8: 256 entries, table[q + 128] = round(g((q - zp_in) s_in) / s_out) + zp_out
  (within 1/2 output step of g wherever g is inside the output range, 1.9.5); int16: 513
  entries interpolated, then the RESCALE of the 16.7 result (tables.py). A chain of one op
  that has its own rule keeps that rule.
- nn.prelu (slope per channel, `axis`) and nn.relu with `alpha` (leaky ReLU, slope in [0, 1]):
  y = x for x >= 0, slope·x below.
  int8 with one slope (and any relu `max`): TABLE, as a chain of one op.
  Otherwise (slopes per channel, or int16): the two halves of x, each rescaled once:
      p = CLAMP(x, zp_in, top)            max(x, zp_in): the non-negative half
      n = CLAMP(x, bottom, zp_in)         min(x, zp_in): the negative half
      P = RESCALE(p -> int32, r)          r = s_in / s_out: round((p - zp_in) r)
      N = RESCALE(n -> int32, |a_c| r)    per channel (channel axis last) [MUL by sign(a_c)
                                          when a slope is <= 0: RESCALE scales are > 0]
      y = RESCALE(ADD(P, N) -> act, 1, output_zp zp_out)
  For every element one of p - zp_in, n - zp_in is 0 and RESCALE maps 0 to 0, so y is the
  exactly rounded value (1/2 output step, saturated; a negative slope rounds its ties
  towards zero). Every op is a vector-unit op of the NPU.
  int16 with a relu `max`: the interpolated TABLE.
"""
from __future__ import annotations

import numpy as np

from .. import ir
from ..errors import UnsupportedError
from .float_chains import ElementwiseChain, elementwise_chain
from .float_side import Lowered
from .params import Precision
from .rules import RULES, pattern_rule, rule
from .tables import make_table
from .target import TargetKind
from .tosa_context import TosaContext


def _chain_table(ctx: TosaContext, chain: ElementwiseChain, what: str) -> None:
    """One TABLE for `chain` (the module doc); binds its output."""
    x = ctx.f.value(chain.input)
    quant = ctx.f.activation_quant(chain.output)
    table = make_table(chain.function(), x.quant, quant, what=what)
    out = ctx.table(x.name, table, hint=chain.output, quant=quant)
    ctx.f.bind(chain.output, Lowered(out, quant, x.perm))
    ctx.f.fused.update(id(op) for op in chain.ops)


@pattern_rule(TargetKind.TOSA)
def lower_elementwise_chain(ctx: TosaContext, op: ir.Op) -> bool:
    """A chain of element-wise ops starting at `op` as one TABLE (module doc). When the table
    cannot be built (an int16 table whose steps are too steep) and every op of the chain has
    a rule, the ops are lowered one by one instead."""
    chain = elementwise_chain(ctx.f, op)
    if chain is None:
        return False
    rules = RULES[TargetKind.TOSA]
    if len(chain.ops) == 1 and op.kind.name in rules:
        return False
    kinds = ", ".join(dict.fromkeys(o.kind.name for o in chain.ops))
    try:
        _chain_table(ctx, chain, f"element-wise chain of node(s) {chain.labels} ({kinds})")
    except UnsupportedError:
        if all(o.kind.name in rules for o in chain.ops):
            return False
        raise
    return True


@rule(TargetKind.TOSA, "nn.prelu")
def lower_prelu(ctx: TosaContext, op: ir.Op) -> None:
    x = ctx.f.value(op.inputs[0])
    rank = len(x.perm)
    axis = int(op.attrs.get("axis", 1)) % rank
    slopes = ctx.f.constant(op.inputs[1]).reshape(-1)
    if slopes.size not in (1, ctx.f.float_shape(op.inputs[0])[axis]):
        raise ctx.f.unsupported(f"{slopes.size} slopes for {ctx.f.float_shape(op.inputs[0])[axis]} "
                                f"channels on axis {axis}")
    if np.all(slopes == slopes[0]) and ctx.config.precision is Precision.INT8:
        _one_op_table(ctx, op, {op.inputs[1]: float(slopes[0])})
        return
    _slope_halves(ctx, op, x, slopes, axis)


def lower_leaky_relu(ctx: TosaContext, op: ir.Op) -> None:
    """nn.relu with alpha > 0 (called by the nn.relu rule, rules_tosa_elementwise)."""
    alpha = float(op.attrs["alpha"])
    if ctx.config.precision is Precision.INT8 or op.attrs.get("max") is not None:
        _one_op_table(ctx, op, {})
        return
    x = ctx.f.value(op.inputs[0])
    _slope_halves(ctx, op, x, np.asarray([alpha]), None)


def _one_op_table(ctx: TosaContext, op: ir.Op, constants: dict) -> None:
    chain = ElementwiseChain(op.inputs[0], (op,), op.outputs[0], constants)
    _chain_table(ctx, chain, ctx.f.where())


def _slope_halves(ctx: TosaContext, op: ir.Op, x: Lowered, slopes: np.ndarray,
                  axis: int | None) -> None:
    """y = x >= 0 ? x : slope·x by rescaling both halves of x (module doc). `slopes`: one
    value, or one per channel of float axis `axis` (moved last in the integer layout)."""
    f = ctx.f
    name = op.outputs[0]
    quant = f.activation_quant(name)
    per_channel = slopes.size > 1
    if per_channel and x.perm[-1] != axis:
        x = ctx.transpose_to(x, tuple(p for p in x.perm if p != axis) + (axis,), f"{name}.channels_last")
    dt = ctx.act_dtype
    zp_in, zp_out = int(x.quant.zero_points()[0]), int(quant.zero_points()[0])
    r = float(x.quant.scales()[0]) / float(quant.scales()[0])
    positive = ctx.emit("CLAMP", [x.name], {"min_val": zp_in, "max_val": dt.max},
                        hint=f"{name}.nonneg", label=f.where(), quant=x.quant)
    negative = ctx.emit("CLAMP", [x.name], {"min_val": dt.min, "max_val": zp_in},
                        hint=f"{name}.neg", label=f.where(), quant=x.quant)
    p32 = ctx.rescale(positive, scale=r, input_zp=zp_in, output_zp=0, out_dtype=ir.DType.I32,
                      hint=f"{name}.nonneg32")
    # a slope whose products all round to 0 over the input's whole span is a slope of 0
    span = float(dt.max - dt.min)
    sign = np.where(np.abs(slopes) * r * span < 0.5, 0, np.sign(slopes)).astype(np.int64)
    magnitude = np.where(sign == 0, 1.0, np.abs(slopes)) * r
    n32 = ctx.rescale(negative, scale=magnitude if per_channel else float(magnitude[0]),
                      input_zp=zp_in, output_zp=0, out_dtype=ir.DType.I32, hint=f"{name}.neg32",
                      per_channel=per_channel)
    if np.any(sign != 1):
        rank = len(x.perm)
        shape = (1,) * (rank - 1) + (sign.size,)
        signs = ctx.constant_tensor(f"{name}.slope_sign", sign.reshape(shape), ir.DType.I32)
        n32 = ctx.emit("MUL", [n32, signs], {"shift": 0}, hint=f"{name}.neg32_signed", label=f.where())
    total = ctx.emit("ADD", [p32, n32], {}, hint=f"{name}.acc", label=f.where())
    out = ctx.rescale(total, scale=1.0, input_zp=0, output_zp=zp_out, out_dtype=dt, hint=name,
                      quant=quant, exact=True)
    f.bind(name, Lowered(out, quant, x.perm))
