"""Lowering rules for the MAC-heavy operators: nn.conv, nn.deconv, nn.linear, nn.batch_norm
(linalg.matmul: rules_matmul.py).

Pattern (TOSA 1.9.3): int8 input (zero point zp_x) and int8 weights (symmetric,
per output channel) → CONV2D / DEPTHWISE_CONV2D / FULLY_CONNECTED / MATMUL with an
int32 accumulator (int48 in 16x8 mode) and an int32 bias at scale s_x * s_w[c]
→ RESCALE by s_x * s_w[c] / s_y (per channel where the weights are) → CLAMP for
a fused relu/clamp. A batch norm right after a convolution is folded into its
weights and bias at compile time; a PReLU or leaky ReLU after it (int8) folds into the
output RESCALE, one per sign of the accumulator (rules_activation.rescale_with_slopes).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ... import ir
from ..lowering.float_patterns import (batch_norm_affine, conv_operands, fold_tail, packed_ints, spatial_padding,
                                       take_fused_activation)
from ..lowering.float_side import NHWC_FROM_NCHW, Lowered, identity
from ..params import bias_quant, quantize, quantize_bias
from ..rounding.adaptive import round_layer
from ..rules import rule
from .rules_activation import prelu_after, rescale_with_slopes
from ..target import TargetKind
from .context import TosaContext
from .tflite.arith import is_tflite




def _crop_input(ctx: TosaContext, x: Lowered, crop, hint: str) -> Lowered:
    """Drops trailing rows/cols (NHWC) that floor-mode windows never read."""
    if not any(crop):
        return x
    shape = ctx.f.builder.tensor(x.name).shape
    size = (shape[0], shape[1] - crop[0], shape[2] - crop[1], shape[3])
    out = ctx.emit("SLICE", [x.name], {"start": (0, 0, 0, 0), "size": size}, hint=hint,
                     label=ctx.f.where(), quant=x.quant)
    return Lowered(out, x.quant, x.perm)


def _weight_annotation(ctx: TosaContext, op: ir.Op, bn) -> ir.QuantInfo | None:
    """The filter's @quantize annotation, honoured unless a folded batch norm changed the values."""
    quant = ctx.f.graph.tensor(op.inputs[1]).quant
    if quant is not None and bn is not None:
        raise ctx.f.unsupported(f"filter {op.inputs[1]!r} is annotated with @quantize, but the batch "
                              f"norm {bn[0].label!r} after it would change the annotated values",
                              hint="annotate the folded weights instead, or remove the annotation")
    return quant


def _layer_tail(ctx: TosaContext, op: ir.Op, channels: int):
    """fold_tail, then a PReLU / leaky ReLU folded into the output RESCALE when no relu/clamp
    was fused: (bn, act, slopes or None, last float name)."""
    bn, act, last = fold_tail(ctx.f, op, channels)
    if act is not None:
        return bn, act, None, last
    prelu = prelu_after(ctx, last, channels)
    if prelu is None:
        return bn, None, None, last
    ctx.f.fused.add(id(prelu[0]))
    return bn, None, prelu[1], prelu[0].outputs[0]


def _finish(ctx: TosaContext, acc: str, in_quant: ir.QuantInfo, w_quant: ir.QuantInfo,
            last_float: str, act, out_perm, hint: str, out_shape: tuple[int, ...] | None = None,
            slopes: np.ndarray | None = None, single_round: bool = False) -> None:
    """RESCALE the accumulator to the output's grid, CLAMP for a fused activation (or, with
    `slopes`, one RESCALE per sign of the accumulator: a folded PReLU), bind; then RESHAPE to
    `out_shape` when given (RESHAPE takes no int48 accumulator). `single_round`: the RESCALE
    rounds once (TFLite's int8 FULLY_CONNECTED)."""
    out_quant = ctx.f.activation_quant(last_float)
    s_x = float(in_quant.scales()[0])
    ratios = s_x * w_quant.scales() / float(out_quant.scales()[0])
    per_channel = w_quant.per_channel
    zp_out = int(out_quant.zero_points()[0])
    reshape = out_shape is not None and tuple(ctx.f.builder.tensor(acc).shape) != tuple(out_shape)
    final = f"{hint}.rows" if reshape else last_float
    if slopes is not None:
        out = rescale_with_slopes(ctx, acc, ratios, slopes, out_quant, final)
    elif act is None:
        out = ctx.rescale(acc, scale=ratios if per_channel else float(ratios[0]), input_zp=0,
                          output_zp=zp_out, out_dtype=ctx.act_dtype, hint=final,
                          quant=out_quant, exact=not reshape, per_channel=per_channel,
                          single_round=single_round)
    else:
        _, lo, hi = act
        pre = ctx.rescale(acc, scale=ratios if per_channel else float(ratios[0]), input_zp=0,
                          output_zp=zp_out, out_dtype=ctx.act_dtype, hint=f"{hint}.rescaled",
                          quant=out_quant, per_channel=per_channel, single_round=single_round)
        qlo, qhi = ctx.clamp_range(out_quant, lo, hi)
        out = ctx.emit("CLAMP", [pre], {"min_val": qlo, "max_val": qhi}, hint=final,
                         label=ctx.f.where(), quant=out_quant, exact=not reshape)
    if reshape:
        out = ctx.emit("RESHAPE", [out], {"new_shape": tuple(out_shape)}, hint=last_float,
                       label=ctx.f.where(), quant=out_quant, exact=True)
    ctx.f.bind(last_float, Lowered(out, out_quant, out_perm))


def tap_coverage(in_size, out_size, begins, stride, dilation, kernel) -> np.ndarray:
    """[KH, KW]: the fraction of output positions at which each filter tap reads a real
    input element rather than padding (padding reads the zero point: no rounding error)."""
    axes = []
    for i in range(2):
        o = np.arange(out_size[i])[:, None] * stride[i] - begins[i] + np.arange(kernel[i]) * dilation[i]
        axes.append(((o >= 0) & (o < in_size[i])).mean(axis=0))
    return axes[0][:, None] * axes[1][None, :]


def corrected_bias(ctx, bias, w, wq, w_quant, input_name: str, groups: int = 1,
                   coverage: np.ndarray | None = None, means: np.ndarray | None = None):
    """Bias correction: rounding the weights shifts each output's mean by
    sum_k (w_q[k] * s_w - w[k]) * E[x_k]; subtracting that shift (E[x] per input channel
    from calibration, ctx.channel_means) keeps the mean of every output where float has it.
    `coverage` ([KH, KW], tap_coverage) weights each tap of a convolution by how often it
    reads real input. `means` gives E[x] per input channel where calibration's channel
    means (axis 1) are not the layer's input channels. Returns the float bias unchanged when
    no means were collected."""
    means = ctx.channel_means.get(input_name) if means is None else means
    oc, icg = w.shape[0], w.shape[1]
    if means is None or means.shape != (icg * groups,):
        return bias
    err = wq.astype(np.float64) * w_quant.scales().reshape((-1,) + (1,) * (w.ndim - 1)) - w
    if coverage is not None:
        err = err * coverage                                         # taps on padding: no error
    err = err.reshape(oc, icg, -1).sum(axis=2)                      # [oc, icg]
    group_of = np.arange(oc) // (oc // groups)
    m = means.reshape(groups, icg)[group_of]                         # [oc, icg]
    shift = (err * m).sum(axis=1)
    base = np.broadcast_to(np.asarray(bias, np.float64).reshape(-1), (oc,)) if bias is not None else 0.0
    return base - shift


OWN_BIAS_SCALE_TOLERANCE = 2.0 ** -20   # float32 products: an exporter's s_x * s_w is within 2^-24


def _layer_bias(ctx, op: ir.Op, bias, bn, w, wq, w_quant, x_quant, channels: int,
                groups: int = 1, coverage=None) -> np.ndarray:
    """The accumulator bias. An annotated bias (a QDQ model's int32 bias through
    DequantizeLinear) whose scale is the accumulator's, input_scale * weight_scale, keeps its
    own integers: no bias correction, they are the model's (onnxruntime adds them as they are).
    Otherwise the float bias, corrected for the weight rounding, on the accumulator's grid."""
    what = f"{ctx.f.where()} bias"
    name = op.inputs[2] if len(op.inputs) > 2 else ""
    note = ctx.f.graph.tensor(name).quant if name and bn is None else None
    if note is not None and bias is not None:
        own = np.broadcast_to(note.scales(), (channels,))
        bq = bias_quant(x_quant, w_quant, ctx.acc_dtype)
        target = np.broadcast_to(bq.scales(), (channels,))
        if np.all(np.abs(own - target) <= OWN_BIAS_SCALE_TOLERANCE * target):
            q = ir.QuantInfo(own.copy(), np.zeros(channels, np.int64), 0, bq.bits, True, True, "annotation")
            return quantize_bias(np.broadcast_to(bias.reshape(-1), (channels,)), q, what=what).astype(
                ctx.acc_dtype.numpy)
    bias = corrected_bias(ctx, bias, w, wq, w_quant, op.inputs[0], groups, coverage)
    return _bias_values(ctx, bias, x_quant, w_quant, channels, what)


def _bias_values(ctx, bias_float, in_quant, w_quant, channels: int, what: str) -> np.ndarray:
    bq = bias_quant(in_quant, w_quant, ctx.acc_dtype)
    if bias_float is None:
        q = np.zeros(channels, dtype=np.int64)
    else:
        q = quantize_bias(np.broadcast_to(bias_float.reshape(-1), (channels,)), bq, what=what)
    return q.astype(ctx.acc_dtype.numpy)


MIN_RESCALE_RATIO = 2.0 ** -31   # TOSA RESCALE reaches 2^-32 with a normalized multiplier


def _fit_channel_scales(ctx, w, wq, w_quant, bias, x_quant, last, note, what):
    """Widens the weight scale of channels that TOSA cannot carry at their own scale (dead
    channels after batch-norm folding: weights ~1e-9, bias ~1):
    - the bias must fit the accumulator at input_scale * weight_scale, with room left for
      the products (|x - zp| <= 2^act_bits - 1, |w| <= 127, K of them per output);
    - the RESCALE ratio input_scale * weight_scale / output_scale must be >= 2^-31.
    Every other channel keeps its scale, so its results are unchanged. Annotated weights
    are never changed."""
    if note is not None:
        return wq, w_quant
    s_x = float(x_quant.scales()[0])
    s_y = float(ctx.f.activation_quant(last).scales()[0])
    need = np.full(w.shape[0], s_y * MIN_RESCALE_RATIO / s_x)
    if bias is not None:
        bq = bias_quant(x_quant, w_quant, ctx.acc_dtype)
        products = int(np.prod(w.shape[1:])) * 127 * ((1 << ctx.input_dtype.bits) - 1)
        limit = float((1 << (bq.bits - 1)) - 1 - products)
        b = np.abs(np.broadcast_to(np.asarray(bias, np.float64).reshape(-1), (w.shape[0],)))
        need = np.maximum(need, b / (s_x * limit))
    old = w_quant.scales()
    new = np.maximum(old, need) if w_quant.per_channel else np.array([max(old[0], need.max())])
    if np.array_equal(new, old):
        return wq, w_quant
    w_quant = dataclasses.replace(w_quant, scale=new if w_quant.per_channel else float(new[0]))
    return quantize(w, w_quant, what=what).astype(np.int8), w_quant


def _rounded(ctx, op: ir.Op, w, wq, w_quant, note):
    """The layer's int8 weights, adaptively rounded (qsim.quant.rounding.adaptive) when calibration
    collected its input moments; annotated weights keep their own rounding."""
    if note is not None:
        return wq
    return round_layer(ctx.input_moments, op.outputs[0], w, wq, w_quant,
                       centered=bool(ctx.channel_means))


@rule(TargetKind.TOSA, "nn.conv")
def lower_conv(ctx: TosaContext, op: ir.Op) -> None:
    xshape, w, bias, groups, stride, dilation = conv_operands(ctx.f, op)
    oc, icg, kh, kw = w.shape
    ic = xshape[1]
    begins, ends, crop = spatial_padding(ctx.f, op, xshape[2:], (kh, kw), stride, dilation)

    bn, act, slopes, last = _layer_tail(ctx, op, oc)
    if bn is not None:
        _, a, c = bn
        w = w * a.reshape(-1, 1, 1, 1)
        bias = (bias.reshape(-1) if bias is not None else 0.0) * a + c
    note = _weight_annotation(ctx, op, bn)
    wq, w_quant = ctx.quantize_weights(w, 0, note, f"{op.inputs[1]!r}")

    x = ctx.transpose_to(ctx.f.value(op.inputs[0]), NHWC_FROM_NCHW, f"{op.inputs[0]}.nhwc")
    x = _crop_input(ctx, x, crop, f"{op.inputs[0]}.cropped")
    x_quant = x.quant
    common = {"pad": (begins[0], ends[0], begins[1], ends[1]), "stride": stride,
              "dilation": dilation, "input_zp": int(x_quant.zero_points()[0]), "weight_zp": 0}
    hint = op.outputs[0]
    wq, w_quant = _fit_channel_scales(ctx, w, wq, w_quant, bias, x_quant, last, note, op.inputs[1])
    wq = _rounded(ctx, op, w, wq, w_quant, note)
    out_hw = ctx.f.float_shape(op.outputs[0])[2:]
    coverage = tap_coverage(xshape[2:], out_hw, begins, stride, dilation, (kh, kw))
    bias_q = _layer_bias(ctx, op, bias, bn, w, wq, w_quant, x_quant, oc, groups, coverage)
    if groups == 1:
        acc = ctx.emit("CONV2D", [x.name], dict(common, weight=wq.transpose(0, 2, 3, 1).copy(),
                                                  bias=bias_q), hint=f"{hint}.acc", label=ctx.f.where())
    elif groups == ic and icg == 1:
        m = oc // ic   # depthwise: output channel ic*M + m reads input channel ic (both NNEF and TOSA)
        hwim = wq.reshape(ic, m, kh, kw).transpose(2, 3, 0, 1).copy()
        acc = ctx.emit("DEPTHWISE_CONV2D", [x.name], dict(common, weight=hwim, bias=bias_q),
                         hint=f"{hint}.acc", label=ctx.f.where())
    else:
        acc = _grouped_conv(ctx, x, wq, bias_q, groups, common, hint)
    _finish(ctx, acc, x_quant, w_quant, last, act, NHWC_FROM_NCHW, hint, slopes=slopes)


@rule(TargetKind.TOSA, "nn.deconv")
def lower_deconv(ctx: TosaContext, op: ir.Op) -> None:
    """nn.deconv (4.4.2) → TRANSPOSE_CONV2D. NNEF adds input[i] * filter[j] into output
    position stride * i + j - offset; TOSA into i * stride - out_pad_top + j (2.3.11): the
    same sum with out_pad = (offset, paddings - offset) per axis. TOSA has no dilation or
    groups here, and its output extent is exactly (IH - 1) * stride + KH - paddings."""
    if op.attrs.get("data_format", "NCX") != "NCX" or op.attrs.get("filter_format", "NCX") != "NCX":
        raise ctx.f.unsupported("only data_format='NCX' and filter_format='NCX' are lowered")
    xshape = ctx.f.float_shape(op.inputs[0])
    if len(xshape) != 4:
        raise ctx.f.unsupported(f"only 2-D deconvolutions are lowered (input rank {len(xshape)})")
    w = ctx.f.constant(op.inputs[1])                      # [IC, OC, KH, KW] (groups = 1)
    bias = ctx.f.constant(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] else None
    ic, oc, kh, kw = w.shape
    if int(op.attrs.get("groups", 1)) not in (1,) and not (int(op.attrs.get("groups", 1)) == 0 and ic == 1):
        raise ctx.f.unsupported("grouped deconvolution is not lowered (TRANSPOSE_CONV2D has no groups)")
    stride = packed_ints(op.attrs.get("stride", 1), 2, "stride", ctx.f)
    if packed_ints(op.attrs.get("dilation", 1), 2, "dilation", ctx.f) != (1, 1):
        raise ctx.f.unsupported("dilated deconvolution is not lowered (TRANSPOSE_CONV2D has no dilation)")
    ix = xshape[2:]
    fx = (kh, kw)
    padding = op.attrs.get("padding")
    if padding is not None:
        pads = packed_ints(padding, 4, "padding", ctx.f)
        begins, totals = pads[:2], tuple(pads[i] + pads[i + 2] for i in range(2))
    else:
        totals = tuple((ix[i] - 1) * stride[i] + fx[i] - ix[i] * stride[i] for i in range(2))
        upper = op.attrs.get("padding_align", "UPPER") == "UPPER"
        begins = tuple(t // 2 if upper else -(-t // 2) for t in totals)
    out_shape = ctx.f.float_shape(op.outputs[0])
    full = tuple((ix[i] - 1) * stride[i] + fx[i] - totals[i] for i in range(2))
    # an output longer than `full` (ONNX output_padding) keeps rows the end padding would crop:
    # the same sums, so the end crop shrinks by the extra rows while it can (TOSA's out_pad >= 0)
    extra = tuple(out_shape[2 + i] - full[i] for i in range(2))
    if any(e < 0 or e > t - b for e, b, t in zip(extra, begins, totals)):
        raise ctx.f.unsupported(f"output_size {list(out_shape[2:])} is not an extent TRANSPOSE_CONV2D "
                                f"computes: {list(full)} plus at most the end padding "
                                f"{[t - b for b, t in zip(begins, totals)]}",
                                hint="pad the deconvolution's input or output explicitly instead")
    totals = tuple(t - e for t, e in zip(totals, extra))
    exact = tuple(out_shape[2:])
    if any(b < 0 or t - b < 0 for b, t in zip(begins, totals)):
        raise ctx.f.unsupported(f"negative padding {list(begins)} / {list(totals)}")

    w = w.transpose(1, 0, 2, 3)                         # [OC, IC, KH, KW]
    bn, act, last = fold_tail(ctx.f, op, oc)
    if bn is not None:
        _, a, c = bn
        w = w * a.reshape(-1, 1, 1, 1)
        bias = (bias.reshape(-1) if bias is not None else 0.0) * a + c
    note = _weight_annotation(ctx, op, bn)
    if note is not None and note.per_channel:
        # the annotation's axis is the [IC, OC, KH, KW] filter's; w is [OC, IC, KH, KW] here
        if note.axis != 1:
            raise ctx.f.unsupported(f"filter {op.inputs[1]!r} is annotated per channel along axis "
                                    f"{note.axis}; deconvolution filters are quantized per output "
                                    "channel (axis 1 of [IC, OC, KH, KW])")
        note = dataclasses.replace(note, axis=0)
    wq, w_quant = ctx.quantize_weights(w, 0, note, f"{op.inputs[1]!r}")
    x = ctx.transpose_to(ctx.f.value(op.inputs[0]), NHWC_FROM_NCHW, f"{op.inputs[0]}.nhwc")
    n = ctx.f.builder.tensor(x.name).shape[0]
    bias_q = _bias_values(ctx, bias, x.quant, w_quant, oc, f"{ctx.f.where()} bias")
    acc = ctx.emit("TRANSPOSE_CONV2D", [x.name], {
        "weight": wq.transpose(0, 2, 3, 1).copy(), "bias": bias_q,
        "out_pad": (begins[0], totals[0] - begins[0], begins[1], totals[1] - begins[1]),
        "stride": stride, "out_shape": (n, exact[0], exact[1], oc),
        "input_zp": int(x.quant.zero_points()[0]), "weight_zp": 0,
    }, hint=f"{op.outputs[0]}.acc", label=ctx.f.where())
    _finish(ctx, acc, x.quant, w_quant, last, act, NHWC_FROM_NCHW, op.outputs[0])


def _grouped_conv(ctx, x: Lowered, wq, bias_q, groups: int, common, hint: str) -> str:
    """1 < groups < channels: one CONV2D per group on a channel SLICE, then CONCAT."""
    n, h, w_, c = ctx.f.builder.tensor(x.name).shape
    icg, ocg = c // groups, wq.shape[0] // groups
    parts = []
    for g in range(groups):
        xs = ctx.emit("SLICE", [x.name], {"start": (0, 0, 0, g * icg), "size": (n, h, w_, icg)},
                        hint=f"{hint}.group{g}.in", label=ctx.f.where())
        wg = wq[g * ocg:(g + 1) * ocg].transpose(0, 2, 3, 1).copy()
        parts.append(ctx.emit("CONV2D", [xs], dict(common, weight=wg,
                                                     bias=bias_q[g * ocg:(g + 1) * ocg].copy()),
                                hint=f"{hint}.group{g}.acc", label=ctx.f.where()))
    return ctx.emit("CONCAT", parts, {"axis": 3}, hint=f"{hint}.acc", label=ctx.f.where())


@rule(TargetKind.TOSA, "nn.linear")
def lower_linear(ctx: TosaContext, op: ir.Op) -> None:
    w = ctx.f.constant(op.inputs[1])
    bias = ctx.f.constant(op.inputs[2]) if len(op.inputs) > 2 else None
    oc = w.shape[0]
    bn, act, slopes, last = _layer_tail(ctx, op, oc)
    if bn is not None:
        _, a, c = bn
        w = w * a.reshape(-1, 1)
        bias = (bias.reshape(-1) if bias is not None else 0.0) * a + c
    note = _weight_annotation(ctx, op, bn)
    wq, w_quant = ctx.quantize_weights(w, 0, note, f"{op.inputs[1]!r}")
    x = ctx.to_float_layout(ctx.f.value(op.inputs[0]), f"{op.inputs[0]}.rows")
    wq, w_quant = _fit_channel_scales(ctx, w, wq, w_quant, bias, x.quant, last, note, op.inputs[1])
    wq = _rounded(ctx, op, w, wq, w_quant, note)
    bias_q = _layer_bias(ctx, op, bias, bn, w, wq, w_quant, x.quant, oc)
    acc = ctx.emit("FULLY_CONNECTED", [x.name], {
        "weight": wq, "bias": bias_q, "input_zp": int(x.quant.zero_points()[0]), "weight_zp": 0,
    }, hint=f"{op.outputs[0]}.acc", label=ctx.f.where())
    # LiteRT's int8 FULLY_CONNECTED (per-tensor and per-channel) rescales its accumulator in
    # 64 bits, rounding once ((acc m + 2^(s-1)) >> s), where its convolutions round twice
    # (measured against BUILTIN_REF on rounding ties: docs/tflite.md)
    single = is_tflite(x.quant) and ctx.act_dtype is ir.DType.I8
    _finish(ctx, acc, x.quant, w_quant, last, act, identity(2), op.outputs[0], slopes=slopes,
            single_round=single)


@rule(TargetKind.TOSA, "nn.batch_norm")
def lower_batch_norm(ctx: TosaContext, op: ir.Op) -> None:
    """A batch norm that could not be folded: a 1x1 DEPTHWISE_CONV2D with bias (NHWC)."""
    shape = ctx.f.float_shape(op.inputs[0])
    if len(shape) != 4 or int(op.attrs.get("channel_axis", 1)) != 1:
        raise ctx.f.unsupported("a batch norm that is not folded must be on an NCHW tensor, channel axis 1")
    c = shape[1]
    a, bias = batch_norm_affine(ctx.f, op, c)
    wq, w_quant = ctx.quantize_weights(a.reshape(c, 1, 1, 1), 0, what=f"{ctx.f.where()} scale")
    act, last = take_fused_activation(ctx.f, op.outputs[0])
    x = ctx.transpose_to(ctx.f.value(op.inputs[0]), NHWC_FROM_NCHW, f"{op.inputs[0]}.nhwc")
    bias_q = _bias_values(ctx, bias, x.quant, w_quant, c, f"{ctx.f.where()} bias")
    acc = ctx.emit("DEPTHWISE_CONV2D", [x.name], {
        "weight": wq.reshape(1, 1, c, 1), "bias": bias_q, "pad": (0, 0, 0, 0), "stride": (1, 1),
        "dilation": (1, 1), "input_zp": int(x.quant.zero_points()[0]), "weight_zp": 0,
    }, hint=f"{op.outputs[0]}.acc", label=ctx.f.where())
    _finish(ctx, acc, x.quant, w_quant, last, act, NHWC_FROM_NCHW, op.outputs[0])
