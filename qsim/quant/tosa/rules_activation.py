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
- A PReLU or leaky ReLU right after a convolution or dense layer (int8) folds into the layer's
  output RESCALE (prelu_after, rescale_with_slopes; called by rules_linear): the same two
  halves, taken of the int32 accumulator instead of an int8 tensor,
      P = RESCALE(MAXIMUM(acc, 0) -> int32, r_c)        r_c = s_x s_w[c] / s_y
      N = RESCALE(MINIMUM(acc, 0) -> int32, |a_c| r_c)   [MUL by sign(a_c)]
      y = RESCALE(ADD(P, N) -> int8, 1, output_zp zp_out)
  so the layer's output is rounded once, on the PReLU output's grid: the convolution's own
  output is never rounded to int8 (unfolded, it costs ~4.5 dB on MTCNN's layers, a second
  rounding on a grid that also spans the negative half). A slope with |a_c| r_c < 2^-32
  gives |product| < 1/2 for every int32, i.e. 0: it is lowered as slope 0 (MUL by 0).
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...errors import UnsupportedError
from .float_chains import ElementwiseChain, elementwise_chain
from ..lowering.float_patterns import is_annotated
from ..lowering.float_side import Lowered
from ..params import Precision
from ..rules import RULES, pattern_rule, rule
from .tables import make_table
from .tflite import rules_prelu as tflite_prelu
from .tflite.arith import hard_swish_table, is_hard_swish, is_tflite, leaky_relu_table
from ..target import TargetKind
from .context import TosaContext


def _chain_table(ctx: TosaContext, chain: ElementwiseChain, what: str) -> None:
    """One TABLE for `chain` (the module doc); binds its output."""
    x = ctx.f.value(chain.input)
    quant = ctx.f.activation_quant(chain.output)
    function = chain.function()
    if is_tflite(x.quant) and ctx.config.precision is Precision.INT8 and is_hard_swish(function):
        # TFLite's 16-bit fixed-point hard swish, tabulated (tflite/fixedpoint.py)
        out = ctx.emit("TABLE", [x.name], {"table": hard_swish_table(x.quant, quant)}, hint=chain.output,
                       label=what, quant=quant, exact=True)
        ctx.f.bind(chain.output, Lowered(out, quant, x.perm))
        ctx.f.fused.update(id(op) for op in chain.ops)
        return
    table = make_table(function, x.quant, quant, what=what)
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
    slope_quant = ctx.f.graph.tensor(op.inputs[1]).quant
    if is_tflite(x.quant) and tflite_prelu.applies(ctx, slope_quant):
        tflite_prelu.lower_prelu(ctx, op, x, axis, slope_quant)     # TFLite's kernel (tflite/rules_prelu.py)
        return
    if np.all(slopes == slopes[0]) and ctx.config.precision is Precision.INT8:
        _one_op_table(ctx, op, {op.inputs[1]: float(slopes[0])})
        return
    _slope_halves(ctx, op, x, slopes, axis)


def lower_leaky_relu(ctx: TosaContext, op: ir.Op) -> None:
    """nn.relu with alpha > 0 (called by the nn.relu rule, rules_elementwise)."""
    alpha = float(op.attrs["alpha"])
    x = ctx.f.value(op.inputs[0])
    if is_tflite(x.quant) and ctx.config.precision is Precision.INT8 and op.attrs.get("max") is None:
        # TFLite's kernel: two multipliers by the input's sign (tflite/arith.py), one TABLE
        quant = ctx.f.activation_quant(op.outputs[0])
        table = leaky_relu_table(x.quant, quant, alpha, ctx.act_dtype.min, ctx.act_dtype.max)
        out = ctx.emit("TABLE", [x.name], {"table": table}, hint=op.outputs[0], label=ctx.f.where(),
                       quant=quant, exact=True)
        ctx.f.bind(op.outputs[0], Lowered(out, quant, x.perm))
        return
    if ctx.config.precision is Precision.INT8 or op.attrs.get("max") is not None:
        _one_op_table(ctx, op, {})
        return
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
    zp_in = int(x.quant.zero_points()[0])
    r = np.asarray([float(x.quant.scales()[0]) / float(quant.scales()[0])])
    positive = ctx.emit("CLAMP", [x.name], {"min_val": zp_in, "max_val": dt.max},
                        hint=f"{name}.nonneg", label=f.where(), quant=x.quant)
    negative = ctx.emit("CLAMP", [x.name], {"min_val": dt.min, "max_val": zp_in},
                        hint=f"{name}.neg", label=f.where(), quant=x.quant)
    out = _combine_halves(ctx, positive, negative, zp_in, r, slopes, float(dt.max - dt.min),
                          len(x.perm), quant, name)
    f.bind(name, Lowered(out, quant, x.perm))


def _combine_halves(ctx: TosaContext, positive: str, negative: str, zp_in: int, ratios: np.ndarray,
                    slopes: np.ndarray, span: float, rank: int, quant, name: str) -> str:
    """RESCALE(positive, ratios) + sign·RESCALE(negative, |slopes|·ratios), rounded once, to the
    activation type on `quant`'s grid (module doc). `positive` - zp_in >= 0 and `negative` -
    zp_in <= 0, and one of them is 0 for every element; `ratios` and `slopes` hold one value
    or one per channel (the last axis); `span` bounds |negative - zp_in|."""
    f = ctx.f
    p32 = ctx.rescale(positive, scale=ratios if ratios.size > 1 else float(ratios[0]), input_zp=zp_in,
                      output_zp=0, out_dtype=ir.DType.I32, hint=f"{name}.nonneg32",
                      per_channel=ratios.size > 1)
    # a slope whose products all round to 0 over the whole span is a slope of 0
    channels = max(ratios.size, slopes.size)
    products = np.broadcast_to(np.abs(slopes) * ratios, (channels,))
    sign = np.where(products * span < 0.5, 0, np.broadcast_to(np.sign(slopes), (channels,))).astype(np.int64)
    magnitude = np.where(sign == 0, np.broadcast_to(ratios, (channels,)), products)
    n32 = ctx.rescale(negative, scale=magnitude if channels > 1 else float(magnitude[0]),
                      input_zp=zp_in, output_zp=0, out_dtype=ir.DType.I32, hint=f"{name}.neg32",
                      per_channel=channels > 1)
    if np.any(sign != 1):
        shape = (1,) * (rank - 1) + (sign.size,)
        signs = ctx.constant_tensor(f"{name}.slope_sign", sign.reshape(shape), ir.DType.I32)
        n32 = ctx.emit("MUL", [n32, signs], {"shift": 0}, hint=f"{name}.neg32_signed", label=f.where())
    total = ctx.emit("ADD", [p32, n32], {}, hint=f"{name}.acc", label=f.where())
    return ctx.rescale(total, scale=1.0, input_zp=0, output_zp=int(quant.zero_points()[0]),
                       out_dtype=ctx.act_dtype, hint=name, quant=quant, exact=True)


def prelu_after(ctx: TosaContext, name: str, channels: int) -> tuple[ir.Op, np.ndarray] | None:
    """The PReLU (slopes on axis 1) or leaky ReLU (no `max`) that alone reads `name`, the
    output of a layer with `channels` output channels on axis 1, as (op, slopes: one or one
    per channel), when it can fold into the layer's output RESCALE (module doc): int8 (an
    int32 accumulator), `name` not annotated (an annotated tensor must appear)."""
    f = ctx.f
    if ctx.config.precision is not Precision.INT8 or is_annotated(f, name):
        return None
    op = f.only_consumer(name)
    if op is None or op.inputs[0] != name:
        return None
    if op.kind.name == "nn.relu":
        alpha = op.attrs.get("alpha")
        if alpha is None or float(alpha) == 0.0 or op.attrs.get("max") is not None:
            return None
        return op, np.asarray([float(alpha)])
    if op.kind.name != "nn.prelu" or not f.is_constant(op.inputs[1]):
        return None
    if int(op.attrs.get("axis", 1)) % len(f.float_shape(name)) != 1:
        return None
    slopes = np.asarray(f.constant(op.inputs[1]), np.float64).reshape(-1)
    return (op, slopes) if slopes.size in (1, channels) else None


def rescale_with_slopes(ctx: TosaContext, acc: str, ratios: np.ndarray, slopes: np.ndarray,
                        quant, name: str) -> str:
    """The int32 accumulator `acc` (channels last) to the activation type on `quant`'s grid:
    ratios[c]·acc where acc >= 0, slopes[c]·ratios[c]·acc below (module doc: PReLU folded into
    the output RESCALE). Returns the output tensor (named after `name`)."""
    f = ctx.f
    rank = len(f.builder.tensor(acc).shape)
    zero = ctx.constant_tensor(f"{name}.zero", np.zeros((1,) * rank, np.int32), ir.DType.I32)
    positive = ctx.emit("MAXIMUM", [acc, zero], {}, hint=f"{name}.acc_nonneg", label=f.where())
    negative = ctx.emit("MINIMUM", [acc, zero], {}, hint=f"{name}.acc_neg", label=f.where())
    return _combine_halves(ctx, positive, negative, 0, np.asarray(ratios, np.float64).reshape(-1),
                           slopes, 2.0 ** 31, rank, quant, name)
