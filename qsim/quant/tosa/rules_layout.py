"""Lowering rules for layout, pooling and reduction operators.

Layout operators move values without changing them, so their outputs keep the
input's quantization (whatever calibration saw for them): reshape-like ops
become RESHAPE of the float-layout tensor, transpose only changes the lazy
layout (no op), pad pads with the zero point (real 0), slice and concat map
their axes through the layout. Max pooling commutes with quantization; average
pooling keeps the input's grid (an average stays within its inputs' range), unless the
output is annotated with its own grid (an ONNX QDQ model's QLinearGlobalAveragePool).
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ..lowering.float_patterns import is_annotated, packed_ints, spatial_padding
from ..lowering.float_side import NHWC_FROM_NCHW, Lowered, identity
from ..rules import pattern_rule, rule
from .rules_linear import _crop_input
from ..target import TargetKind
from .tflite import rules_pool as tflite_pool
from .tflite.arith import is_tflite, mean_multiplier
from .tflite.rules_add import rescale_fixed
from .context import TosaContext


def _norm_axes(axes, rank: int) -> tuple[int, ...]:
    return tuple(int(a) % rank for a in axes)


def _own_annotation(ctx: TosaContext, name: str, kept: ir.QuantInfo) -> ir.QuantInfo | None:
    """The annotation of output `name` (@quantize, graph.quant, an ONNX QDQ pair) when it is not
    the grid `kept` that a pooling keeps from its input; annotations are honoured exactly."""
    if not is_annotated(ctx.f, name):
        return None
    own = ctx.f.activation_quant(name)
    same = (float(own.scales()[0]) == float(kept.scales()[0])
            and int(own.zero_points()[0]) == int(kept.zero_points()[0]))
    return None if same else own


@rule(TargetKind.TOSA, "layout.reshape", "layout.flatten", "layout.unflatten", "layout.squeeze", "layout.unsqueeze")
def lower_reshape(ctx: TosaContext, op: ir.Op) -> None:
    x = ctx.to_float_layout(ctx.f.value(op.inputs[0]), f"{op.inputs[0]}.float")
    shape = ctx.f.float_shape(op.outputs[0])
    out = ctx.emit("RESHAPE", [x.name], {"new_shape": shape}, hint=op.outputs[0],
                     label=ctx.f.where(), quant=x.quant, exact=True)
    ctx.f.bind(op.outputs[0], Lowered(out, x.quant, identity(len(shape))))


def _full_perm(op: ir.Op, rank: int) -> tuple[int, ...]:
    """layout.transpose's permutation of all `rank` axes (its `perm` applies from `axis` on)."""
    axis = int(op.attrs.get("axis", 0)) % max(rank, 1)
    perm = op.attrs.get("perm")
    perm = tuple(range(rank - axis))[::-1] if perm is None else tuple(int(p) for p in perm)
    return tuple(range(axis)) + tuple(axis + p for p in perm) + tuple(range(axis + len(perm), rank))


@pattern_rule(TargetKind.TOSA)
def lower_channel_shuffle(ctx: TosaContext, op: ir.Op) -> bool:
    """ShuffleNet's channel shuffle on an NHWC integer tensor, with one TRANSPOSE:
    reshape [N, C, H, W] → [N, g, C/g, H, W], transpose (0, 2, 1, 3, 4), reshape → [N, C, H, W]
    moves channel i·C/g + j to j·g + i. In NHWC that is RESHAPE [N, H, W, g, C/g], TRANSPOSE
    (0, 1, 2, 4, 3), RESHAPE [N, H, W, C], with no change of layout (the rules op by op
    would TRANSPOSE to NCHW and back around the 5-D permutation)."""
    f = ctx.f
    if op.kind.name != "layout.reshape" or op.inputs[0] not in f.values:
        return False
    x = f.value(op.inputs[0])
    swap, last = f.only_consumer(op.outputs[0]), None
    if swap is not None and swap.kind.name == "layout.transpose":
        last = f.only_consumer(swap.outputs[0])
    if last is None or last.kind.name != "layout.reshape" or x.perm != NHWC_FROM_NCHW:
        return False
    if any(is_annotated(f, name) for name in (op.outputs[0], swap.outputs[0])):
        return False
    n, c, h, w = f.float_shape(op.inputs[0])
    grouped = f.float_shape(op.outputs[0])
    if (len(grouped) != 5 or grouped[0] != n or grouped[1] * grouped[2] != c or grouped[3:] != (h, w)
            or _full_perm(swap, 5) != (0, 2, 1, 3, 4) or f.float_shape(last.outputs[0]) != (n, c, h, w)):
        return False
    g = grouped[1]
    split = ctx.emit("RESHAPE", [x.name], {"new_shape": (n, h, w, g, c // g)}, hint=f"{op.outputs[0]}.nhwc",
                     label=f.where(), quant=x.quant)
    swapped = ctx.emit("TRANSPOSE", [split], {"perms": (0, 1, 2, 4, 3)}, hint=f"{swap.outputs[0]}.nhwc",
                       label=f.where(swap), quant=x.quant)
    out = ctx.emit("RESHAPE", [swapped], {"new_shape": (n, h, w, c)}, hint=last.outputs[0],
                   label=f.where(last), quant=x.quant, exact=True)
    f.bind(last.outputs[0], Lowered(out, x.quant, NHWC_FROM_NCHW))
    f.fused.update((id(swap), id(last)))
    return True


@rule(TargetKind.TOSA, "layout.transpose")
def lower_transpose(ctx: TosaContext, op: ir.Op) -> None:
    """No op: the output is the same integer tensor seen through a composed layout."""
    x = ctx.f.value(op.inputs[0])
    rank = len(x.perm)
    full = _full_perm(op, rank)
    # float_out = transpose(float_in, full); int = transpose(float_in, x.perm)
    # = transpose(float_out, q) with full[q[i]] = x.perm[i].
    q = tuple(full.index(p) for p in x.perm)
    ctx.f.bind(op.outputs[0], Lowered(x.name, x.quant, q))


@rule(TargetKind.TOSA, "layout.pad")
def lower_pad(ctx: TosaContext, op: ir.Op) -> None:
    if op.attrs.get("method", "CONSTANT") != "CONSTANT":
        raise ctx.f.unsupported(f"pad method {op.attrs.get('method')!r}; only CONSTANT is lowered")
    x = ctx.f.value(op.inputs[0])
    pad_code = int(x.quant.zero_points()[0])            # padding with 0: the zero point exactly
    if len(op.inputs) > 1 and op.inputs[1]:
        value = ctx.f.constant(op.inputs[1])
        steps = None if value is None else float(value.reshape(-1)[0]) / float(x.quant.scales()[0])
        # another constant: only one that lies on the input's grid (a TFLite PADV2 constant is
        # stored on it), so that padding with its code is exact
        if steps is None or abs(steps - round(steps)) > 1e-3 or \
                not ctx.act_dtype.min <= pad_code + round(steps) <= ctx.act_dtype.max:
            raise ctx.f.unsupported("only padding with 0 or a value on the input's grid is lowered")
        pad_code += int(round(steps))
    rank = len(x.perm)
    axes = _norm_axes(op.attrs.get("axes", range(rank)), rank)
    pads = packed_ints(op.attrs.get("padding"), 2 * len(axes), "padding", ctx.f)
    before, after = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        before[a], after[a] = pads[k], pads[len(axes) + k]
    padding = tuple((before[p], after[p]) for p in x.perm)      # in the integer layout
    out = ctx.emit("PAD", [x.name], {"padding": np.array(padding, dtype=np.int32),
                                       "pad_const": pad_code},
                     hint=op.outputs[0], label=ctx.f.where(), quant=x.quant, exact=True)
    ctx.f.bind(op.outputs[0], Lowered(out, x.quant, x.perm))


@rule(TargetKind.TOSA, "layout.slice")
def lower_slice(ctx: TosaContext, op: ir.Op) -> None:
    x = ctx.f.value(op.inputs[0])
    in_shape = ctx.f.float_shape(op.inputs[0])
    out_shape = ctx.f.float_shape(op.outputs[0])
    rank = len(in_shape)
    axes = _norm_axes(op.attrs.get("axes", range(rank)), rank)
    stride = packed_ints(op.attrs.get("stride", 1), len(axes), "stride", ctx.f)
    if any(s != 1 for s in stride):
        raise ctx.f.unsupported("strided slices are not lowered (TOSA SLICE has no stride)")
    begin = packed_ints(op.attrs.get("begin"), len(axes), "begin", ctx.f)
    start = [0] * rank
    for a, bgn in zip(axes, begin):
        start[a] = bgn + in_shape[a] if bgn < 0 else min(bgn, in_shape[a])
    out = ctx.emit("SLICE", [x.name], {"start": tuple(start[p] for p in x.perm),
                                         "size": tuple(out_shape[p] for p in x.perm)},
                     hint=op.outputs[0], label=ctx.f.where(), quant=x.quant, exact=True)
    ctx.f.bind(op.outputs[0], Lowered(out, x.quant, x.perm))


@rule(TargetKind.TOSA, "layout.split")
def lower_split(ctx: TosaContext, op: ir.Op) -> None:
    """One SLICE per output, at the running offset along the split axis (channel shuffle
    units split the channels in two)."""
    x = ctx.f.value(op.inputs[0])
    rank = len(x.perm)
    axis = int(op.attrs.get("axis", 0)) % rank
    offset = 0
    for name in op.outputs:
        shape = ctx.f.float_shape(name)
        start = [0] * rank
        start[axis] = offset
        out = ctx.emit("SLICE", [x.name], {"start": tuple(start[p] for p in x.perm),
                                             "size": tuple(shape[p] for p in x.perm)},
                       hint=name, label=ctx.f.where(), quant=x.quant, exact=True)
        ctx.f.bind(name, Lowered(out, x.quant, x.perm))
        offset += shape[axis]


@rule(TargetKind.TOSA, "layout.concat")
def lower_concat(ctx: TosaContext, op: ir.Op) -> None:
    quant = ctx.f.activation_quant(op.outputs[0])
    first = ctx.f.value(op.inputs[0])
    rank = len(first.perm)
    axis = int(op.attrs.get("axis", 0)) % rank
    parts = []
    for k, name in enumerate(op.inputs):
        v = ctx.transpose_to(ctx.f.value(name), first.perm, f"{op.outputs[0]}.in{k}.t")
        parts.append(ctx.requantize(v, quant, f"{op.outputs[0]}.in{k}.rq").name)
    out = ctx.emit("CONCAT", parts, {"axis": first.perm.index(axis)}, hint=op.outputs[0],
                     label=ctx.f.where(), quant=quant, exact=True)
    ctx.f.bind(op.outputs[0], Lowered(out, quant, first.perm))


def _pool_args(ctx: TosaContext, op: ir.Op):
    shape = ctx.f.float_shape(op.inputs[0])
    if len(shape) != 4:
        raise ctx.f.unsupported(f"only 2-D pooling on NCHW tensors is lowered (rank {len(shape)})")
    axes = _norm_axes(op.attrs.get("axes", (2, 3)), 4)
    size = packed_ints(op.attrs.get("size"), len(axes), "size", ctx.f)
    full = dict(zip(axes, size))
    if sorted(axes) != [2, 3] and any(full.get(a, 1) != 1 for a in (0, 1)):
        raise ctx.f.unsupported("pooling over the batch or channel axis is not lowered")
    kernel = (full.get(2, 1), full.get(3, 1))
    stride_map = dict(zip(axes, packed_ints(op.attrs.get("stride", 1), len(axes), "stride", ctx.f)))
    dil_map = dict(zip(axes, packed_ints(op.attrs.get("dilation", 1), len(axes), "dilation", ctx.f)))
    stride = (stride_map.get(2, 1), stride_map.get(3, 1))
    if dil_map.get(2, 1) != 1 or dil_map.get(3, 1) != 1:
        raise ctx.f.unsupported("dilated pooling is not lowered (TOSA pools have no dilation)")
    if op.attrs.get("padding") is not None and len(axes) != 2:
        raise ctx.f.unsupported("explicit pooling padding must list the two spatial axes")
    begins, ends, crop = spatial_padding(ctx.f, op, shape[2:], kernel, stride, (1, 1))
    return kernel, stride, (begins[0], ends[0], begins[1], ends[1]), crop


@rule(TargetKind.TOSA, "nn.max_pool", "nn.avg_pool")
def lower_pool(ctx: TosaContext, op: ir.Op) -> None:
    kernel, stride, pad, crop = _pool_args(ctx, op)
    x = ctx.transpose_to(ctx.f.value(op.inputs[0]), NHWC_FROM_NCHW, f"{op.inputs[0]}.nhwc")
    x = _crop_input(ctx, x, crop, f"{op.inputs[0]}.cropped")
    attrs = {"kernel": kernel, "stride": stride, "pad": pad}
    if op.kind.name == "nn.avg_pool":
        if not op.attrs.get("ignore_border", True) and any(pad):
            raise ctx.f.unsupported("avg_pool with ignore_border=false and padding: TOSA AVG_POOL2D "
                                  "divides by the count of valid elements only")
        zp = int(x.quant.zero_points()[0])
        attrs.update(input_zp=zp, output_zp=zp)
    own = _own_annotation(ctx, op.outputs[0], x.quant)
    if op.kind.name == "nn.avg_pool" and is_tflite(x.quant) and own is None and ctx.act_dtype is ir.DType.I8:
        # TFLite rounds the raw codes' mean half away from zero (tflite/rules_pool.py)
        ctx.f.bind(op.outputs[0], tflite_pool.lower_average_pool(ctx, op, x, attrs, NHWC_FROM_NCHW))
        return
    tosa_op = "MAX_POOL2D" if op.kind.name == "nn.max_pool" else "AVG_POOL2D"
    out = ctx.emit(tosa_op, [x.name], attrs, hint=op.outputs[0] if own is None else f"{op.outputs[0]}.pooled",
                   label=ctx.f.where(), quant=x.quant, exact=own is None)
    v = Lowered(out, x.quant, NHWC_FROM_NCHW)
    if own is not None:    # then RESCALE to the output's own grid (a second rounding for averages)
        v = ctx.requantize(v, own, op.outputs[0], exact=True)
    ctx.f.bind(op.outputs[0], v)


@rule(TargetKind.TOSA, "math.sum_reduce")     # math.mean_reduce: rules_norm (layer norms)
def lower_mean_sum(ctx: TosaContext, op: ir.Op) -> None:
    in_shape = ctx.f.float_shape(op.inputs[0])
    rank = len(in_shape)
    axes = sorted(_norm_axes(op.attrs.get("axes", range(rank)), rank))
    squeeze = bool(op.attrs.get("squeeze", False))
    mean = op.kind.name == "math.mean_reduce"
    x = ctx.f.value(op.inputs[0])
    tflite = mean and is_tflite(x.quant)     # TFLite's MEAN: one multiplier with 1/count folded in
    if (mean and not tflite and rank == 4 and axes == [2, 3] and in_shape[2] * in_shape[3] > 1
            and _own_annotation(ctx, op.outputs[0], x.quant) is None):
        # global average pooling: one AVG_POOL2D over the whole plane (an output annotated on
        # another grid takes the general path below: one rounding, not AVG_POOL2D's and a RESCALE's)
        x = ctx.transpose_to(x, NHWC_FROM_NCHW, f"{op.inputs[0]}.nhwc")
        zp = int(x.quant.zero_points()[0])
        pooled = ctx.emit("AVG_POOL2D", [x.name], {
            "kernel": (in_shape[2], in_shape[3]), "stride": (1, 1), "pad": (0, 0, 0, 0),
            "input_zp": zp, "output_zp": zp}, hint=op.outputs[0] if not squeeze else
            f"{op.outputs[0]}.pooled", label=ctx.f.where(), quant=x.quant, exact=not squeeze)
        v = Lowered(pooled, x.quant, NHWC_FROM_NCHW)
        if squeeze:
            out = ctx.emit("RESHAPE", [pooled], {"new_shape": ctx.f.float_shape(op.outputs[0])},
                             hint=op.outputs[0], label=ctx.f.where(), quant=x.quant, exact=True)
            v = Lowered(out, x.quant, identity(rank - 2))
        ctx.f.bind(op.outputs[0], v)
        return
    # general case: REDUCE_SUM axis by axis in int32, then one RESCALE (count folded in)
    count = int(np.prod([in_shape[a] for a in axes])) if mean else 1
    acc = ctx.to_int32(x, 1.0, f"{op.outputs[0]}.in32")
    for a in axes:
        acc = ctx.emit("REDUCE_SUM", [acc], {"axis": x.perm.index(a)}, hint=f"{op.outputs[0]}.sum",
                         label=ctx.f.where())
    quant = ctx.f.activation_quant(op.outputs[0])
    ratio = float(x.quant.scales()[0]) / (count * float(quant.scales()[0]))
    out_hint = f"{op.outputs[0]}.kept" if squeeze else op.outputs[0]
    if tflite:
        multiplier, shift = mean_multiplier(float(x.quant.scales()[0]), float(quant.scales()[0]), count)
        out = rescale_fixed(ctx, acc, multiplier, shift, 0, int(quant.zero_points()[0]), ctx.act_dtype,
                            out_hint, True, quant=quant, exact=not squeeze)
    else:
        out = ctx.rescale(acc, scale=ratio, input_zp=0, output_zp=int(quant.zero_points()[0]),
                          out_dtype=ctx.act_dtype, hint=out_hint, quant=quant, exact=not squeeze)
    v = Lowered(out, quant, x.perm)
    if squeeze:
        v = ctx.to_float_layout(v, f"{op.outputs[0]}.float")
        out = ctx.emit("RESHAPE", [v.name], {"new_shape": ctx.f.float_shape(op.outputs[0])},
                         hint=op.outputs[0], label=ctx.f.where(), quant=quant, exact=True)
        v = Lowered(out, quant, identity(len(ctx.f.float_shape(op.outputs[0]))))
    ctx.f.bind(op.outputs[0], v)


@rule(TargetKind.TOSA, "math.max_reduce", "math.min_reduce")
def lower_max_min_reduce(ctx: TosaContext, op: ir.Op) -> None:
    in_shape = ctx.f.float_shape(op.inputs[0])
    rank = len(in_shape)
    axes = sorted(_norm_axes(op.attrs.get("axes", range(rank)), rank))
    x = ctx.f.value(op.inputs[0])
    name = x.name
    tosa_op = "REDUCE_MAX" if op.kind.name == "math.max_reduce" else "REDUCE_MIN"
    squeeze = bool(op.attrs.get("squeeze", False))
    for k, a in enumerate(axes):
        last = k == len(axes) - 1 and not squeeze
        name = ctx.emit(tosa_op, [name], {"axis": x.perm.index(a)},
                          hint=op.outputs[0] if last else f"{op.outputs[0]}.part", label=ctx.f.where(),
                          quant=x.quant, exact=last)
    v = Lowered(name, x.quant, x.perm)
    if squeeze:
        v = ctx.to_float_layout(v, f"{op.outputs[0]}.float")
        out = ctx.emit("RESHAPE", [v.name], {"new_shape": ctx.f.float_shape(op.outputs[0])},
                         hint=op.outputs[0], label=ctx.f.where(), quant=x.quant, exact=True)
        v = Lowered(out, x.quant, identity(len(ctx.f.float_shape(op.outputs[0]))))
    ctx.f.bind(op.outputs[0], v)
