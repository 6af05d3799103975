"""CVM lowering rules, one per float operator kind (see context.py for the arithmetic).

- nn.conv (groups 1, depthwise with one filter per channel, grouped via strided_slice +
  concatenate), nn.linear: batch norm folded into the weights, conv2d / dense with int32
  bias, cvm_right_shift to the output grid, fused relu → relu, fused clamp → clip.
- nn.batch_norm left unfused: a 1x1 depthwise conv2d.
- math.add / sub / max / min: operands brought to the finer of their two grids with
  cvm_left_shift, broadcast_add / sub / max (min as -max(-a, -b)), then to the output
  grid. math.mul: broadcast_mul, product grid 2^(e_a + e_b).
- nn.max_pool → max_pool2d (CVM pads with 0: padding only on tensors known >= 0).
- math.mean_reduce / nn.avg_pool: a sum (cvm.sum, or a depthwise conv2d with all-one
  weights for windows), then the division by the count n: exact for n = 2^m (the sum read
  on the grid 2^(e - m)); otherwise broadcast_mul by m = round(2^k / n) <= 2^(p-1) - 1
  with the largest such k, read on the grid 2^(e - k): a relative error
  |m * n / 2^k - 1| <= n / 2^(k+1) < 1 / (2^(p-1) - 1) (0.8 % at p = 8), documented in
  docs/cvm.md.
- image.nearest_upsample (same factor on H and W) → upsampling.
- layout.reshape / flatten / unflatten / squeeze / unsqueeze → reshape; transpose →
  transpose; concat → concatenate on the output grid; slice (positive strides) →
  strided_slice. CVM tensors are NCHW like NNEF's, so no layout changes are needed.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ... import ir
from ...numerics import nnef_round
from .context import CvmContext as Ctx
from .context import alpha
from ..lowering.float_patterns import (batch_norm_affine, clamp_bounds, conv_operands, fold_tail, packed_ints,
                                       relu_bounds, spatial_padding, take_fused_activation)
from ..lowering.float_side import Lowered
from ..rules import rule
from ..target import TargetKind


# ---- shared pieces ----------------------------------------------------------------------------
def _weights(ctx: Ctx, w: np.ndarray, hint: str) -> Lowered:
    return ctx.quantize_constant(hint, w, ctx.cvm.weight_precision)


def _bias(ctx: Ctx, bias, channels: int, e_acc: int, hint: str) -> Lowered | None:
    if bias is None:
        return None
    b = np.broadcast_to(np.asarray(bias, np.float64).reshape(-1), (channels,))
    q = nnef_round(b * 2.0 ** -e_acc)
    if np.any(np.abs(q) > (1 << 30)):
        raise ctx.f.unsupported(f"the bias needs more than 31 bits at the accumulator scale 2^{e_acc}",
                              hint="the layer's input or weight scale is extremely small")
    return ctx.constant_int(hint, q, e_acc)


def _activation(ctx: Ctx, acc: Lowered, act, last: str, hint: str) -> None:
    """Accumulator → output grid of float tensor `last`, then the fused relu / clamp; bind."""
    if act is None:
        out = ctx.to_activation(acc, last, last, exact=True)
    else:
        pre = ctx.to_activation(acc, last, f"{hint}.shifted")
        out = _bounded(ctx, pre, act[1], act[2], last)
    ctx.f.bind(last, out)


def _bounded(ctx: Ctx, v: Lowered, lo: float | None, hi: float | None, name: str) -> Lowered:
    """relu (lo = 0, no hi) or clip to the integers of [lo, hi] on v's grid."""
    e = ctx.exponent(v)
    if lo == 0.0 and hi is None:
        return ctx.emit("relu", [v.name], {}, hint=name, e=e, exact=True, nonneg=True)
    a = alpha(ctx.precision(v.name))
    step = 2.0 ** e
    qlo = -a if lo is None else int(min(a, max(-a, np.ceil(lo / step))))
    qhi = a if hi is None else int(min(a, max(-a, np.floor(hi / step))))
    if qlo > qhi:
        raise ctx.f.unsupported(f"clamp bounds [{lo}, {hi}] are empty on the grid 2^{e}")
    return ctx.emit("clip", [v.name], {"a_min": qlo, "a_max": qhi}, hint=name, e=e, exact=True,
                    nonneg=qlo >= 0 or v.name in ctx.nonneg)


def _symmetric_padding(ctx: Ctx, op: ir.Op, in_hw, kernel, stride, dilation, what: str):
    """CVM's (PH, PW) from NNEF's (begin, end) padding: the begins must be what CVM pads on
    both sides; CVM may then produce extra trailing outputs, cropped by the caller."""
    begins, _, _ = spatial_padding(ctx.f, op, in_hw, kernel, stride, dilation)
    if begins[0] >= 4096 or begins[1] >= 4096:
        raise ctx.f.unsupported(f"{what} padding {begins} is outside CVM's [0, 4096)")
    return tuple(begins)


def _crop_to(ctx: Ctx, v: Lowered, shape, hint: str, exact: bool) -> Lowered:
    """strided_slice away trailing extents beyond `shape` (an error if any is short)."""
    have = ctx.f.builder.tensor(v.name).shape
    if tuple(have) == tuple(shape):
        return v
    if any(h < s for h, s in zip(have, shape)):
        raise ctx.f.unsupported(f"CVM's symmetric padding yields {list(have)}, fewer outputs than "
                              f"the model's {list(shape)}",
                              hint="use symmetric padding, or padding with begin >= end")
    return ctx.emit("strided_slice", [v.name], {"begin": (0,) * len(shape), "end": tuple(shape)},
                    hint=hint, e=ctx.exponent(v), exact=exact, nonneg=v.name in ctx.nonneg)


def _divide_by_count(ctx: Ctx, total: Lowered, n: int, hint: str) -> Lowered:
    """A sum of n values read as their mean (see the module doc for the error bound)."""
    e = ctx.exponent(total)
    if n & (n - 1) == 0:
        m = n.bit_length() - 1
        return Lowered(total.name, dataclasses.replace(total.quant, scale=2.0 ** (e - m)), total.perm)
    a = alpha(ctx.cvm.precision)
    k = int(np.floor(np.log2((a + 0.5) * n)))
    while round(2 ** k / n) > a:
        k -= 1
    mult = ctx.constant_int(f"{hint}.reciprocal", np.array([int(nnef_round(2 ** k / n))]), 0)
    return ctx.emit("broadcast_mul", [total.name, mult.name], {}, hint=f"{hint}.scaled", e=e - k,
                    nonneg=total.name in ctx.nonneg)


# ---- MAC operators ---------------------------------------------------------------------------
@rule(TargetKind.CVM, "nn.conv")
def lower_conv(ctx: Ctx, op: ir.Op) -> None:
    xshape, w, bias, groups, stride, dilation = conv_operands(ctx.f, op)
    oc, icg, kh, kw = w.shape
    c = xshape[1]
    padding = _symmetric_padding(ctx, op, xshape[2:], (kh, kw), stride, dilation, "convolution")
    bn, act, last = fold_tail(ctx.f, op, oc)
    if bn is not None:
        _, a, cst = bn
        w = w * a.reshape(-1, 1, 1, 1)
        bias = (bias.reshape(-1) if bias is not None else 0.0) * a + cst
    x = ctx.f.value(op.inputs[0])
    hint = op.outputs[0]
    wq = _weights(ctx, w, f"{op.inputs[1]}.cvm")
    e_acc = ctx.exponent(x) + ctx.exponent(wq)
    bq = _bias(ctx, bias, oc, e_acc, f"{hint}.bias")
    attrs = {"padding": padding, "stride": stride, "dilation": dilation}
    if groups == 1 or (groups == c and icg == 1 and oc == c):
        acc = ctx.emit("conv2d", [x.name, wq.name] + ([bq.name] if bq else []),
                       dict(attrs, groups=groups), hint=f"{hint}.acc", e=e_acc)
    elif c % groups == 0 and oc % groups == 0 and icg == c // groups:
        acc = _grouped(ctx, x, wq, bq, groups, attrs, e_acc, hint)
    else:
        raise ctx.f.unsupported(f"groups = {groups} with filter {list(w.shape)}: CVM convolutions are "
                              "ordinary or depthwise with one filter per channel")
    acc = _crop_to(ctx, acc, ctx.f.float_shape(op.outputs[0]), f"{hint}.cropped", exact=False)
    _activation(ctx, acc, act, last, hint)


def _grouped(ctx: Ctx, x: Lowered, wq: Lowered, bq: Lowered | None, groups: int, attrs, e_acc, hint):
    """1 < groups < C: per group a strided_slice of channels, conv2d, then concatenate."""
    n, c, h, wd = ctx.f.builder.tensor(x.name).shape
    wdata, oc = ctx.f.builder.tensor(wq.name).data, ctx.f.builder.tensor(wq.name).shape[0]
    icg, ocg = c // groups, oc // groups
    bits = ctx.precision(wq.name)
    parts = []
    for g in range(groups):
        xs = ctx.emit("strided_slice", [x.name], {"begin": (0, g * icg), "end": (n, (g + 1) * icg)},
                      hint=f"{hint}.group{g}.in", e=ctx.exponent(x))
        wg = ctx.constant_int(f"{hint}.group{g}.w", wdata[g * ocg:(g + 1) * ocg], ctx.exponent(wq), bits)
        ins = [xs.name, wg.name]
        if bq is not None:
            ins.append(ctx.constant_int(f"{hint}.group{g}.b",
                                        ctx.f.builder.tensor(bq.name).data[g * ocg:(g + 1) * ocg], e_acc).name)
        parts.append(ctx.emit("conv2d", ins, dict(attrs, groups=1), hint=f"{hint}.group{g}.acc",
                              e=e_acc).name)
    return ctx.emit("concatenate", parts, {"axis": 1}, hint=f"{hint}.acc", e=e_acc)


@rule(TargetKind.CVM, "nn.linear")
def lower_linear(ctx: Ctx, op: ir.Op) -> None:
    w = ctx.f.constant(op.inputs[1])
    bias = ctx.f.constant(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] else None
    oc = w.shape[0]
    bn, act, last = fold_tail(ctx.f, op, oc)
    if bn is not None:
        _, a, cst = bn
        w = w * a.reshape(-1, 1)
        bias = (bias.reshape(-1) if bias is not None else 0.0) * a + cst
    x = ctx.f.value(op.inputs[0])
    wq = _weights(ctx, w, f"{op.inputs[1]}.cvm")
    e_acc = ctx.exponent(x) + ctx.exponent(wq)
    bq = _bias(ctx, bias, oc, e_acc, f"{op.outputs[0]}.bias")
    acc = ctx.emit("dense", [x.name, wq.name] + ([bq.name] if bq else []), {},
                   hint=f"{op.outputs[0]}.acc", e=e_acc)
    _activation(ctx, acc, act, last, op.outputs[0])


@rule(TargetKind.CVM, "nn.batch_norm")
def lower_batch_norm(ctx: Ctx, op: ir.Op) -> None:
    """Not folded into a convolution: a 1x1 depthwise conv2d with bias (NCHW, channel axis 1)."""
    shape = ctx.f.float_shape(op.inputs[0])
    if len(shape) != 4 or int(op.attrs.get("channel_axis", 1)) != 1:
        raise ctx.f.unsupported("an unfolded batch norm must be on an NCHW tensor, channel axis 1")
    c = shape[1]
    a, cst = batch_norm_affine(ctx.f, op, c)
    act, last = take_fused_activation(ctx.f, op.outputs[0])
    x = ctx.f.value(op.inputs[0])
    wq = _weights(ctx, a.reshape(c, 1, 1, 1), f"{op.outputs[0]}.scale")
    e_acc = ctx.exponent(x) + ctx.exponent(wq)
    bq = _bias(ctx, cst, c, e_acc, f"{op.outputs[0]}.bias")
    acc = ctx.emit("conv2d", [x.name, wq.name, bq.name], {"groups": c}, hint=f"{op.outputs[0]}.acc",
                   e=e_acc)
    _activation(ctx, acc, act, last, op.outputs[0])


# ---- elementwise -----------------------------------------------------------------------------
def _operand(ctx: Ctx, name: str) -> Lowered:
    if ctx.f.is_constant(name):
        return ctx.quantize_constant(f"{name}.cvm", ctx.f.constant(name), ctx.cvm.precision)
    return ctx.f.value(name)


def _aligned(ctx: Ctx, op: ir.Op) -> tuple[Lowered, Lowered, int]:
    """Both operands on the finer of their grids (cvm_left_shift of the coarser one)."""
    if op.attrs.get("lhs_align") is not None or op.attrs.get("rhs_align") is not None:
        raise ctx.f.unsupported("explicit broadcast alignment is not lowered (CVM aligns on the right)")
    a, b = _operand(ctx, op.inputs[0]), _operand(ctx, op.inputs[1])
    e = min(ctx.exponent(a), ctx.exponent(b))
    out = []
    for v, side in ((a, "lhs"), (b, "rhs")):
        p = ctx.precision(v.name) + ctx.exponent(v) - e
        out.append(ctx.requantize(v, e, p, f"{op.outputs[0]}.{side}"))
    return out[0], out[1], e


@rule(TargetKind.CVM, "math.add", "math.sub", "math.max", "math.min")
def lower_add_sub_max(ctx: Ctx, op: ir.Op) -> None:
    a, b, e = _aligned(ctx, op)
    hint = op.outputs[0]
    kind = op.kind.name
    if kind == "math.min":   # min(a, b) = -max(-a, -b): negation is exact on CVM's ranges
        na = ctx.emit("negative", [a.name], {}, hint=f"{hint}.neg_lhs", e=e)
        nb = ctx.emit("negative", [b.name], {}, hint=f"{hint}.neg_rhs", e=e)
        m = ctx.emit("broadcast_max", [na.name, nb.name], {}, hint=f"{hint}.neg_max", e=e)
        acc = ctx.emit("negative", [m.name], {}, hint=f"{hint}.acc", e=e)
    else:
        cvm_op = {"math.add": "broadcast_add", "math.sub": "broadcast_sub",
                  "math.max": "broadcast_max"}[kind]
        nonneg = kind == "math.max" and (a.name in ctx.nonneg or b.name in ctx.nonneg)
        acc = ctx.emit(cvm_op, [a.name, b.name], {}, hint=f"{hint}.acc", e=e, nonneg=nonneg)
    _elementwise_result(ctx, op, acc)


@rule(TargetKind.CVM, "math.mul")
def lower_mul(ctx: Ctx, op: ir.Op) -> None:
    if op.attrs.get("lhs_align") is not None or op.attrs.get("rhs_align") is not None:
        raise ctx.f.unsupported("explicit broadcast alignment is not lowered (CVM aligns on the right)")
    a, b = _operand(ctx, op.inputs[0]), _operand(ctx, op.inputs[1])
    acc = ctx.emit("broadcast_mul", [a.name, b.name], {}, hint=f"{op.outputs[0]}.acc",
                   e=ctx.exponent(a) + ctx.exponent(b))
    _elementwise_result(ctx, op, acc)


def _elementwise_result(ctx: Ctx, op: ir.Op, acc: Lowered) -> None:
    act, last = take_fused_activation(ctx.f, op.outputs[0])
    _activation(ctx, acc, act, last, op.outputs[0])


@rule(TargetKind.CVM, "nn.relu")
def lower_relu(ctx: Ctx, op: ir.Op) -> None:
    x = ctx.f.value(op.inputs[0])
    ctx.f.bind(op.outputs[0], _bounded(ctx, x, *_relu_bounds(ctx, op), op.outputs[0]))


@rule(TargetKind.CVM, "math.clamp")
def lower_clamp(ctx: Ctx, op: ir.Op) -> None:
    bounds = clamp_bounds(ctx.f, op)
    x = ctx.f.value(op.inputs[0])
    ctx.f.bind(op.outputs[0], _bounded(ctx, x, bounds[0], bounds[1], op.outputs[0]))


@rule(TargetKind.CVM, "math.iden")
def lower_identity(ctx: Ctx, op: ir.Op) -> None:
    ctx.f.bind(op.outputs[0], ctx.f.value(op.inputs[0]))


# ---- pooling and reductions -------------------------------------------------------------------
def _window(ctx: Ctx, op: ir.Op):
    shape = ctx.f.float_shape(op.inputs[0])
    if len(shape) != 4:
        raise ctx.f.unsupported(f"CVM pools NCHW tensors only (rank {len(shape)})")
    axes = tuple(int(a) % 4 for a in op.attrs.get("axes", (2, 3)))
    size = dict(zip(axes, packed_ints(op.attrs.get("size"), len(axes), "size", ctx.f)))
    stride = dict(zip(axes, packed_ints(op.attrs.get("stride", 1), len(axes), "stride", ctx.f)))
    dilation = dict(zip(axes, packed_ints(op.attrs.get("dilation", 1), len(axes), "dilation", ctx.f)))
    if any(size.get(a, 1) != 1 or stride.get(a, 1) != 1 for a in (0, 1)):
        raise ctx.f.unsupported("pooling over the batch or channel axis is not lowered")
    if any(dilation.get(a, 1) != 1 for a in (2, 3)):
        raise ctx.f.unsupported("dilated pooling is not lowered (CVM pools have no dilation)")
    if op.attrs.get("padding") is not None and len(axes) != 2:
        raise ctx.f.unsupported("explicit pooling padding must list the two spatial axes")
    kernel = (size.get(2, 1), size.get(3, 1))
    strides = (stride.get(2, 1), stride.get(3, 1))
    padding = _symmetric_padding(ctx, op, shape[2:], kernel, strides, (1, 1), "pooling")
    return kernel, strides, padding


@rule(TargetKind.CVM, "nn.max_pool")
def lower_max_pool(ctx: Ctx, op: ir.Op) -> None:
    kernel, strides, padding = _window(ctx, op)
    x = ctx.f.value(op.inputs[0])
    if any(padding) and x.name not in ctx.nonneg:
        raise ctx.f.unsupported("CVM's max_pool2d pads with 0, which differs from NNEF's border on "
                              "tensors that can be negative", hint="pool after a relu, or without padding")
    y = ctx.emit("max_pool2d", [x.name], {"pool_size": kernel, "strides": strides, "padding": padding,
                                          "ceil_mode": bool(op.attrs.get("ceil_mode", False))},
                 hint=f"{op.outputs[0]}.pooled", e=ctx.exponent(x), nonneg=x.name in ctx.nonneg)
    ctx.f.bind(op.outputs[0], _crop_to(ctx, y, ctx.f.float_shape(op.outputs[0]), op.outputs[0], exact=True))


@rule(TargetKind.CVM, "nn.avg_pool")
def lower_avg_pool(ctx: Ctx, op: ir.Op) -> None:
    """Window sums by a depthwise conv2d with all-one weights (no padding: CVM's padded
    zeros would be counted), then the division by the window size."""
    kernel, strides, padding = _window(ctx, op)
    if any(padding):
        raise ctx.f.unsupported("padded average pooling is not lowered (the divisor would vary "
                              "at the border)")
    x = ctx.f.value(op.inputs[0])
    c = ctx.f.float_shape(op.inputs[0])[1]
    ones = ctx.constant_int(f"{op.outputs[0]}.ones", np.ones((c, 1) + kernel, np.int64), 0, 2)
    total = ctx.emit("conv2d", [x.name, ones.name], {"stride": strides, "groups": c},
                     hint=f"{op.outputs[0]}.sum", e=ctx.exponent(x), nonneg=x.name in ctx.nonneg)
    total = _crop_to(ctx, total, ctx.f.float_shape(op.outputs[0]), f"{op.outputs[0]}.cropped", False)
    mean = _divide_by_count(ctx, total, kernel[0] * kernel[1], op.outputs[0])
    ctx.f.bind(op.outputs[0], ctx.to_activation(mean, op.outputs[0], op.outputs[0], exact=True))


@rule(TargetKind.CVM, "math.mean_reduce", "math.sum_reduce", "math.max_reduce")
def lower_reduce(ctx: Ctx, op: ir.Op) -> None:
    in_shape = ctx.f.float_shape(op.inputs[0])
    out_shape = ctx.f.float_shape(op.outputs[0])
    rank = len(in_shape)
    axes = tuple(sorted(int(a) % rank for a in op.attrs.get("axes", range(rank))))
    squeeze = bool(op.attrs.get("squeeze", False))
    x = ctx.f.value(op.inputs[0])
    out = op.outputs[0]
    kind = op.kind.name
    if not out_shape:
        raise ctx.f.unsupported("a rank-0 result: CVM tensors have rank >= 1")
    y = ctx.emit("max" if kind == "math.max_reduce" else "sum", [x.name],
                 {"axis": axes, "keepdims": not squeeze}, hint=f"{out}.reduced", e=ctx.exponent(x),
                 nonneg=x.name in ctx.nonneg)
    if tuple(ctx.f.builder.tensor(y.name).shape) != out_shape:
        y = ctx.emit("reshape", [y.name], {"shape": out_shape}, hint=f"{out}.shaped",
                     e=ctx.exponent(y), nonneg=y.name in ctx.nonneg)
    if kind == "math.mean_reduce":
        y = _divide_by_count(ctx, y, int(np.prod([in_shape[a] for a in axes])), out)
    ctx.f.bind(out, ctx.to_activation(y, out, out, exact=True))


@rule(TargetKind.CVM, "image.nearest_upsample")
def lower_nearest_upsample(ctx: Ctx, op: ir.Op) -> None:
    """CVM upsampling repeats rows and columns by one scale: NCHW, the same factor on H and W."""
    shape = ctx.f.float_shape(op.inputs[0])
    axes = tuple(int(a) % len(shape) for a in op.attrs.get("axes", range(len(shape))))
    factor = dict(zip(axes, packed_ints(op.attrs.get("factor"), len(axes), "factor", ctx.f)))
    if len(shape) != 4 or any(factor.get(a, 1) != 1 for a in (0, 1)) or factor.get(2, 1) != factor.get(3, 1):
        raise ctx.f.unsupported(f"upsampling factors {[factor.get(a, 1) for a in range(len(shape))]}: "
                              "CVM upsampling scales H and W of an NCHW tensor by one factor")
    x = ctx.f.value(op.inputs[0])
    ctx.f.bind(op.outputs[0], ctx.emit("upsampling", [x.name], {"scale": factor.get(2, 1)},
                                     hint=op.outputs[0], e=ctx.exponent(x), exact=True,
                                     nonneg=x.name in ctx.nonneg))


# ---- layout ------------------------------------------------------------------------------------
@rule(TargetKind.CVM, "layout.reshape", "layout.flatten", "layout.unflatten", "layout.squeeze", "layout.unsqueeze")
def lower_reshape(ctx: Ctx, op: ir.Op) -> None:
    x = ctx.f.value(op.inputs[0])
    shape = ctx.f.float_shape(op.outputs[0])
    if not shape:
        raise ctx.f.unsupported("a rank-0 result: CVM tensors have rank >= 1")
    ctx.f.bind(op.outputs[0], ctx.emit("reshape", [x.name], {"shape": shape}, hint=op.outputs[0],
                                     e=ctx.exponent(x), exact=True, nonneg=x.name in ctx.nonneg))


@rule(TargetKind.CVM, "layout.transpose")
def lower_transpose(ctx: Ctx, op: ir.Op) -> None:
    x = ctx.f.value(op.inputs[0])
    rank = len(ctx.f.float_shape(op.inputs[0]))
    axis = int(op.attrs.get("axis", 0)) % max(rank, 1)
    perm = op.attrs.get("perm")
    perm = tuple(range(rank - axis))[::-1] if perm is None else tuple(int(p) for p in perm)
    full = tuple(range(axis)) + tuple(axis + p for p in perm) + tuple(range(axis + len(perm), rank))
    ctx.f.bind(op.outputs[0], ctx.emit("transpose", [x.name], {"axes": full}, hint=op.outputs[0],
                                     e=ctx.exponent(x), exact=True, nonneg=x.name in ctx.nonneg))


@rule(TargetKind.CVM, "layout.concat")
def lower_concat(ctx: Ctx, op: ir.Op) -> None:
    out = op.outputs[0]
    e = ctx.activation_exponent(out)
    rank = len(ctx.f.float_shape(out))
    parts = [ctx.requantize(_operand(ctx, n), e, ctx.cvm.precision, f"{out}.in{k}").name
             for k, n in enumerate(op.inputs)]
    axis = int(op.attrs.get("axis", 0)) % rank
    ctx.f.bind(out, ctx.emit("concatenate", parts, {"axis": axis}, hint=out, e=e, exact=True,
                           nonneg=all(p in ctx.nonneg for p in parts)))


@rule(TargetKind.CVM, "layout.slice")
def lower_slice(ctx: Ctx, op: ir.Op) -> None:
    x = ctx.f.value(op.inputs[0])
    in_shape = ctx.f.float_shape(op.inputs[0])
    out_shape = ctx.f.float_shape(op.outputs[0])
    rank = len(in_shape)
    axes = tuple(int(a) % rank for a in op.attrs.get("axes", range(rank)))
    stride = packed_ints(op.attrs.get("stride", 1), len(axes), "stride", ctx.f)
    if any(s <= 0 for s in stride):
        raise ctx.f.unsupported("slices with negative strides are not lowered")
    begin = packed_ints(op.attrs.get("begin"), len(axes), "begin", ctx.f)
    starts, ends, strides = [0] * rank, list(in_shape), [1] * rank
    for a, b, s in zip(axes, begin, stride):
        start = b + in_shape[a] if b < 0 else min(b, in_shape[a])
        starts[a], strides[a] = start, s
        ends[a] = start + (out_shape[a] - 1) * s + 1     # the output extent fixes the end
    ctx.f.bind(op.outputs[0], ctx.emit("strided_slice", [x.name],
                                     {"begin": tuple(starts), "end": tuple(ends), "strides": tuple(strides)},
                                     hint=op.outputs[0], e=ctx.exponent(x), exact=True,
                                     nonneg=x.name in ctx.nonneg))


def _relu_bounds(ctx, op: ir.Op) -> tuple[float, float | None]:
    """nn.relu's clamp bounds; a leaky relu (alpha > 0) is refused rather than lowered as a relu."""
    bounds = relu_bounds(op)
    if bounds is None:
        raise ctx.f.unsupported(f"nn.relu with alpha={op.attrs['alpha']} (a leaky relu) has no "
                                "integer lowering yet; it is not a clamp")
    return bounds
