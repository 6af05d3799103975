"""Lowering of linalg.matmul (numpy semantics: [..., M, K] x [..., K, N], batch axes broadcast).

- A constant B without batch axes (B [K, N], or [1, ..., 1, K, N]) is a layer's weight:
  A of any rank is RESHAPEd to rows [M', K] → FULLY_CONNECTED (int8 weights per output
  channel, adaptively rounded, bias-corrected) → RESHAPE back → RESCALE per channel. A
  following `math.add` of a constant vector over N (ONNX MatMul + Add) becomes the
  FULLY_CONNECTED bias, and a relu/clamp after it a CLAMP.
- Otherwise (two computed operands, as attention's QKᵀ and AV; or a constant with batch
  axes) MATMUL (TOSA 2.3.8): each operand in its float layout (one TRANSPOSE for
  transA/transB or a lazy layout), batch axes broadcast by TILE and flattened to
  [N, H, C] x [N, C, W], int8 x int8 → int32 with A_zp/B_zp (int16 x int16 → int48 in
  16x8 mode, where TOSA requires both zero points 0), RESHAPE to the output, RESCALE by
  s_a * s_b / s_out. A constant operand is quantized symmetric (zero point 0); B per
  output channel (its last axis), which the per-channel RESCALE on the output's last axis
  carries.

Accumulator budget: the reference REQUIRES every running sum to fit the accumulator
(int32: K * (2^8 - 1)^2 < 2^31 bounds K <= 33025 for int8 operands; int48: K <= 32768 for
int16 operands); longer products are refused before emission.
"""
from __future__ import annotations

import math

import numpy as np

from ... import ir
from ..lowering.float_patterns import is_annotated, take_fused_activation
from ..lowering.float_side import Lowered, identity
from ..params import QuantScheme, params_from_range, quantize
from ..rules import rule
from .rules_linear import _bias_values, _finish, _rounded, corrected_bias
from ..target import TargetKind
from .context import TosaContext

MAX_TILE_RANK = 4          # TOSA 0.30 TILE takes ranks 1..4


def _last_two_swapped(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 2)) + (rank - 1, rank - 2)


def _bias_add(ctx: TosaContext, out: str, channels: int):
    """The `math.add` reading only `out` and a constant that is a vector over the last axis
    (shape [N] or [1, ..., 1, N]), as (op, bias [N]); else None."""
    if is_annotated(ctx.f, out):
        return None
    add = ctx.f.only_consumer(out)
    if add is None or add.kind.name != "math.add" or len(add.inputs) != 2:
        return None
    if add.attrs.get("lhs_align") is not None or add.attrs.get("rhs_align") is not None:
        return None
    other = add.inputs[1] if add.inputs[0] == out else add.inputs[0]
    if other == out or not ctx.f.is_constant(other):
        return None
    data = ctx.f.constant(other)
    if data.ndim == 0 or data.shape[-1] != channels or any(d != 1 for d in data.shape[:-1]):
        return None
    if data.ndim > len(ctx.f.float_shape(out)):
        return None
    return add, data.reshape(channels)


def _row_means(ctx: TosaContext, op: ir.Op, k: int) -> np.ndarray | None:
    """E[A] per reduction index k over the calibration rows, for bias correction: the
    calibrated channel means when A is [M, K] (axis 1 is K), else the row sums the
    adaptive rounding collected (A of higher rank: its axis 1 is not K)."""
    if len(ctx.f.float_shape(op.inputs[0])) == 2:
        return ctx.channel_means.get(op.inputs[0])
    moments = ctx.input_moments
    stats = None if moments is None else moments.moments.get(op.outputs[0])
    if not ctx.channel_means or stats is None or stats.patch != k or stats.count == 0:
        return None
    return stats.means()[0]


def _lower_fully_connected(ctx: TosaContext, op: ir.Op, tb: bool) -> None:
    """A [..., M, K] x constant B [K, N] → FULLY_CONNECTED on [M', K] rows."""
    out = op.outputs[0]
    a_shape, out_shape = ctx.f.float_shape(op.inputs[0]), ctx.f.float_shape(out)
    w = ctx.f.constant(op.inputs[1])
    w = w.reshape(w.shape[-2:])
    w = w if tb else w.T                              # FULLY_CONNECTED weight is [OC, IC]
    oc, k = w.shape
    note = ctx.f.graph.tensor(op.inputs[1]).quant
    if note is not None and note.per_channel:
        # the annotation's axis refers to B's own layout, the output channels are B's
        # last axis (first when transB): re-express it on the [OC, IC] weight.
        axis = note.axis % 2
        if axis != (0 if tb else 1):
            raise ctx.f.unsupported(f"B {op.inputs[1]!r} is quantized per channel along its "
                                    "reduction axis; only per-output-channel weights are lowered")
        note = ir.QuantInfo(note.scale, note.zero_point, 0, note.bits, note.signed,
                            note.symmetric, note.source)
    last, bias = out, None
    fold = _bias_add(ctx, out, oc)
    if fold is not None:
        ctx.f.fused.add(id(fold[0]))
        last, bias = fold[0].outputs[0], fold[1]
    act, last = take_fused_activation(ctx.f, last)
    # an annotated per-tensor zero point (a QDQ model's constant operand quantized like an
    # activation) is FULLY_CONNECTED's weight_zp (TOSA 0.30: allowed for int8 weights)
    wq, w_quant = ctx.quantize_weights(w, 0, note, f"{op.inputs[1]!r}", zero_point_ok=True)
    weight_zp = 0 if w_quant.per_channel else int(w_quant.zero_points()[0])
    wq = _rounded(ctx, op, w, wq, w_quant, note)
    x = ctx.to_float_layout(ctx.f.value(op.inputs[0]), f"{op.inputs[0]}.float")
    rows = math.prod(a_shape[:-1])
    if len(a_shape) != 2:
        x = Lowered(ctx.emit("RESHAPE", [x.name], {"new_shape": (rows, k)}, hint=f"{op.inputs[0]}.rows",
                             label=ctx.f.where(), quant=x.quant), x.quant, identity(2))
    means = _row_means(ctx, op, k)
    if means is not None and note is None:
        bias = corrected_bias(ctx, bias, w, wq, w_quant, op.inputs[0], means=means)
    bias_q = _bias_values(ctx, bias, x.quant, w_quant, oc, f"{ctx.f.where()} bias")
    acc = ctx.emit("FULLY_CONNECTED", [x.name], {
        "weight": wq, "bias": bias_q, "input_zp": int(x.quant.zero_points()[0]), "weight_zp": weight_zp,
    }, hint=f"{out}.acc", label=ctx.f.where())
    _finish(ctx, acc, x.quant, w_quant, last, act, identity(len(out_shape)), out, out_shape)


def _constant_operand(ctx: TosaContext, name: str, trans: bool, per_channel: bool) -> Lowered:
    """A constant matmul operand as an integer tensor in its (transposed) float layout,
    symmetric (zero point 0), per channel along its last axis when `per_channel`."""
    data = ctx.f.constant(name)
    rank = data.ndim
    if trans:
        data = data.transpose(_last_two_swapped(rank))
    bits = ctx.input_dtype.bits
    if per_channel and ctx.config.weight_scheme(rank - 1).channel_axis is not None:
        moved = np.moveaxis(data, rank - 1, 0).reshape(data.shape[-1], -1)
        lo, hi = moved.min(axis=1), moved.max(axis=1)
        scheme = QuantScheme(bits=bits, signed=True, symmetric=True, channel_axis=rank - 1)
    else:
        lo, hi = data.min(), data.max()
        scheme = QuantScheme(bits=bits, signed=True, symmetric=True)
    quant = params_from_range(lo, hi, scheme, source="derived", what=repr(name))
    q = quantize(data, quant, what=repr(name)).reshape(data.shape)
    return Lowered(ctx.constant_tensor(f"{name}.q", q, ctx.input_dtype, quant), quant, identity(rank))


def _computed_operand(ctx: TosaContext, name: str, trans: bool) -> Lowered:
    """A computed operand in its float layout, or with the last two axes swapped (trans)."""
    v = ctx.f.value(name)
    rank = len(v.perm)
    if not trans:
        return ctx.to_float_layout(v, f"{name}.float")
    return ctx.transpose_to(v, _last_two_swapped(rank), f"{name}.t")


def _to_batch3(ctx: TosaContext, v: Lowered, batch: tuple[int, ...], hint: str) -> str:
    """An operand [..., R, C] as [prod(batch), R, C]: its batch axes broadcast to `batch`
    (TILE where an extent is 1), then flattened."""
    shape = tuple(ctx.f.builder.tensor(v.name).shape)
    rows = shape[-2:]
    lead = (1,) * (len(batch) - (len(shape) - 2)) + shape[:-2]
    name = v.name
    multiples = tuple(b // e for b, e in zip(batch, lead))
    if any(m != 1 for m in multiples):
        if len(batch) + 2 > MAX_TILE_RANK:
            raise ctx.f.unsupported(f"broadcasting batch axes {list(lead)} to {list(batch)} needs a "
                                    f"TILE of rank {len(batch) + 2}; TOSA 0.30 TILE takes rank "
                                    f"{MAX_TILE_RANK} at most", hint="give both operands the same batch axes")
        if tuple(shape) != lead + rows:
            name = ctx.emit("RESHAPE", [name], {"new_shape": lead + rows}, hint=f"{hint}.lead",
                            label=ctx.f.where(), quant=v.quant)
        name = ctx.emit("TILE", [name], {"multiples": multiples + (1, 1)}, hint=f"{hint}.tiled",
                        label=ctx.f.where(), quant=v.quant)
    target = (math.prod(batch),) + rows
    if tuple(ctx.f.builder.tensor(name).shape) != target:
        name = ctx.emit("RESHAPE", [name], {"new_shape": target}, hint=f"{hint}.3d",
                        label=ctx.f.where(), quant=v.quant)
    return name


def _accumulator_budget(ctx: TosaContext, k: int) -> None:
    bits = ctx.input_dtype.bits
    acc_bits = 32 if bits == 8 else 48
    if k * ((1 << bits) - 1) ** 2 >= 1 << (acc_bits - 1):
        raise ctx.f.unsupported(
            f"a product over K = {k} int{bits} values can overflow MATMUL's int{acc_bits} "
            f"accumulator (K * (2^{bits} - 1)^2 >= 2^{acc_bits - 1})",
            hint="split the reduction, or use int8 activations for long products")


def _lower_batched(ctx: TosaContext, op: ir.Op, ta: bool, tb: bool) -> None:
    out = op.outputs[0]
    out_shape = ctx.f.float_shape(out)
    a_shape, b_shape = ctx.f.float_shape(op.inputs[0]), ctx.f.float_shape(op.inputs[1])
    if ctx.f.is_constant(op.inputs[0]) and ctx.f.is_constant(op.inputs[1]):
        raise ctx.f.unsupported("both operands are constants (the product is a constant: fold it)")
    a = (_constant_operand(ctx, op.inputs[0], ta, per_channel=False) if ctx.f.is_constant(op.inputs[0])
         else _computed_operand(ctx, op.inputs[0], ta))
    b = (_constant_operand(ctx, op.inputs[1], tb, per_channel=True) if ctx.f.is_constant(op.inputs[1])
         else _computed_operand(ctx, op.inputs[1], tb))
    for v, role in ((a, "A"), (b, "B")):
        if v.quant.bits != ctx.input_dtype.bits:
            raise ctx.f.unsupported(f"operand {role} is quantized to {v.quant.bits} bits; MATMUL "
                                    f"takes two int{ctx.input_dtype.bits} operands in this mode")
    zps = [int(a.quant.zero_points()[0]), int(b.quant.zero_points()[0])]
    if ctx.input_dtype is not ir.DType.I8 and any(zps):
        raise ctx.f.unsupported(f"int16 MATMUL operands need zero point 0 (TOSA 2.3.8), got {zps}")
    k = a_shape[-2] if ta else a_shape[-1]
    _accumulator_budget(ctx, k)
    batch = tuple(out_shape[:-2])
    names = [_to_batch3(ctx, a, batch, f"{out}.A"), _to_batch3(ctx, b, batch, f"{out}.B")]
    acc = ctx.emit("MATMUL", names, {"A_zp": zps[0], "B_zp": zps[1]}, hint=f"{out}.acc",
                   label=ctx.f.where())
    act, last = take_fused_activation(ctx.f, out)
    s_a = float(a.quant.scales()[0])
    _finish(ctx, acc, ir.QuantInfo(scale=s_a, zero_point=0, source="derived"), b.quant, last, act,
            identity(len(out_shape)), out, out_shape)


@rule(TargetKind.TOSA, "linalg.matmul")
def lower_matmul(ctx: TosaContext, op: ir.Op) -> None:
    """Constant B without batch axes → FULLY_CONNECTED; otherwise MATMUL (module docstring)."""
    if len(op.inputs) > 2 and op.inputs[2]:
        raise ctx.f.unsupported("matmul with an added C input is not lowered; use a separate add")
    ta, tb = bool(op.attrs.get("transA", False)), bool(op.attrs.get("transB", False))
    a_shape, b_shape = ctx.f.float_shape(op.inputs[0]), ctx.f.float_shape(op.inputs[1])
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise ctx.f.unsupported(f"matrix-vector products are not lowered (A {list(a_shape)}, "
                                f"B {list(b_shape)})", hint="reshape the vector to a matrix")
    b_batchless = all(d == 1 for d in b_shape[:-2]) and len(b_shape) <= len(a_shape)
    if ctx.f.is_constant(op.inputs[1]) and not ctx.f.is_constant(op.inputs[0]) and not ta and b_batchless:
        _lower_fully_connected(ctx, op, tb)
    else:
        _lower_batched(ctx, op, ta, tb)
