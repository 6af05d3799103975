"""Patterns of the float graph that every target's rules read (shared by TOSA and CVM).

NNEF packed attributes as ints, the padding geometry of windowed operators (NNEF 2.0 4.4,
made exact for TOSA's output-size division), a batch norm folded into the layer before it,
and a relu/clamp fused into it. Each takes the lowering's float side (float_side.FloatSide)
or anything with its `unsupported` (rounding/adaptive.py probes layer geometry that way).
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ..params import annotated
from .float_side import FloatSide


INT32_MAX = 2 ** 31 - 1


def packed_ints(value, n: int, what: str, f: FloatSide) -> tuple[int, ...]:
    """An NNEF packed attribute (a scalar is a uniform pack) as n ints."""
    if value is None:
        raise f.unsupported(f"attribute {what} is missing")
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    values = tuple(int(v) for v in value)
    if len(values) == 1 and n > 1:
        values = values * n
    if len(values) != n:
        raise f.unsupported(f"attribute {what} has {len(values)} values, expected {n}")
    return values


def spatial_padding(f: FloatSide, op: ir.Op, ix, fx, stride, dilation):
    """(begin, end) padding per spatial axis as nn.conv / pooling define it (NNEF 2.0 4.4),
    adjusted so TOSA's exact output-size division holds (spec 2.3: idiv_check).

    Returns (begins, ends, crop) where crop[i] input rows/cols are dropped at the end
    (floor mode can leave trailing input unused, more than the end padding can absorb).
    """
    d = len(ix)
    # TOSA 0.30 gives stride, dilation and pad as int32 attributes (stride, dilation >= 1)
    for name, values in (("stride", stride), ("dilation", dilation)):
        if any(not 1 <= int(v) <= INT32_MAX for v in values):
            raise f.unsupported(f"{name} {list(values)} is outside TOSA's int32 attribute range "
                                  f"[1, {INT32_MAX}]")
    padding = op.attrs.get("padding")
    align = op.attrs.get("padding_align", "UPPER")
    ceil_mode = bool(op.attrs.get("ceil_mode", False))
    fd = [(f - 1) * dl + 1 for f, dl in zip(fx, dilation)]
    if padding is not None:
        pads = packed_ints(padding, 2 * d, "padding", f)
        begins, ends = list(pads[:d]), list(pads[d:])
    else:
        begins, ends = [], []
        for i in range(d):
            q = -(-ix[i] // stride[i]) if ceil_mode else ix[i] // stride[i]
            total = (q - 1) * stride[i] + fd[i] - ix[i]
            if total < 0:
                raise f.unsupported(f"automatic padding is negative ({total}) on spatial axis {i}")
            begin = total // 2 if align == "UPPER" else -(-total // 2)
            begins.append(begin)
            ends.append(total - begin)
    crop = [0] * d
    for i in range(d):
        if begins[i] < 0 or ends[i] < 0:
            raise f.unsupported(f"negative padding {begins[i], ends[i]} on spatial axis {i}")
        span = ix[i] + begins[i] + ends[i] - fd[i]
        if span < 0:
            raise f.unsupported("the padded input is smaller than the (dilated) filter")
        r = span % stride[i]
        if r:
            if ceil_mode:
                ends[i] += stride[i] - r      # one more output; the extra padding is unused
            elif ends[i] >= r:
                ends[i] -= r                  # the last r rows would not be read
            else:
                crop[i] = r - ends[i]
                ends[i] = 0
    if any(p > INT32_MAX for p in begins + ends):
        raise f.unsupported(f"padding {begins + ends} is outside TOSA's int32 attribute range")
    return begins, ends, crop


def is_annotated(f: FloatSide, name: str) -> bool:
    """An annotated tensor is materialized with its own parameters, never fused away."""
    return annotated(f.graph.tensor(name))


def relu_bounds(op: ir.Op) -> tuple[float, float | None] | None:
    """The real bounds (0, max) of nn.relu `op` (NNEF 2.0 nn.relu: `max` caps it, e.g. relu6), or
    None for a leaky relu (`alpha` > 0), which is no clamp."""
    alpha = op.attrs.get("alpha")
    if alpha is not None and float(alpha) != 0.0:
        return None
    cap = op.attrs.get("max")
    return 0.0, None if cap is None else float(cap)


def fused_activation(f: FloatSide, name: str):
    """The relu/clamp reading only `name`, as (op, real lo, real hi), else None (also when
    `name` carries an annotation, which must then appear in the integer graph)."""
    if is_annotated(f, name):
        return None
    op = f.only_consumer(name)
    if op is None:
        return None
    if op.kind.name == "nn.relu":
        bounds = relu_bounds(op)
        return None if bounds is None else (op, *bounds)
    if op.kind.name == "math.clamp" and op.inputs[0] == name:
        lo, hi = (f.constant(n) if f.is_constant(n) else None for n in op.inputs[1:3])
        if lo is not None and hi is not None and lo.size == 1 and hi.size == 1:
            return op, float(lo.reshape(-1)[0]), float(hi.reshape(-1)[0])
    return None


def take_fused_activation(f: FloatSide, name: str):
    """`fused_activation(f, name)` claimed by the caller, as (activation or None, the tensor
    the fused result is written to): the relu/clamp is marked fused so that no rule lowers it
    again, and its output (else `name`) is the tensor whose grid the result is rescaled to."""
    act = fused_activation(f, name)
    if act is None:
        return None, name
    f.fused.add(id(act[0]))
    return act, act[0].outputs[0]


def folded_batch_norm(f: FloatSide, name: str, channels: int):
    """A batch norm reading only `name` (channel axis 1), as (op, a, c) with bn(x) = a*x + c
    (None when `name` is annotated: folding would remove it)."""
    if is_annotated(f, name):
        return None
    op = f.only_consumer(name)
    if op is None or op.kind.name != "nn.batch_norm" or op.inputs[0] != name:
        return None
    if int(op.attrs.get("channel_axis", 1)) != 1:
        return None
    if not all(n == "" or f.is_constant(n) for n in op.inputs[1:]):
        return None
    a, c = batch_norm_affine(f, op, channels)
    return op, a, c


def batch_norm_affine(f: FloatSide, op: ir.Op, channels: int):
    mean, variance = f.constant(op.inputs[1]), f.constant(op.inputs[2])
    names = list(op.inputs) + ["", ""]
    bias = f.constant(names[3]) if names[3] else None
    scale = f.constant(names[4]) if names[4] else None
    eps = float(op.attrs.get("epsilon", 1e-5))
    inv = 1.0 / np.sqrt(variance.reshape(-1) + eps)
    a = inv * (scale.reshape(-1) if scale is not None else 1.0)
    c = (bias.reshape(-1) if bias is not None else 0.0) - mean.reshape(-1) * a
    return np.broadcast_to(a, (channels,)).copy(), np.broadcast_to(c, (channels,)).copy()


def fold_tail(f: FloatSide, op: ir.Op, channels: int):
    """Folds a following batch norm and finds a fused activation: (bn, act, last float name)."""
    last = op.outputs[0]
    bn = folded_batch_norm(f, last, channels)
    if bn is not None:
        f.fused.add(id(bn[0]))
        last = bn[0].outputs[0]
    act = fused_activation(f, last)
    if act is not None:
        f.fused.add(id(act[0]))
        last = act[0].outputs[0]
    return bn, act, last


def clamp_bounds(f: FloatSide, op: ir.Op) -> tuple[float, float]:
    """The real bounds (lo, hi) of math.clamp `op`, which must be scalar constants."""
    bounds = []
    for name in op.inputs[1:3]:
        data = f.constant(name) if f.is_constant(name) else None
        if data is None or data.size != 1:
            raise f.unsupported("clamp bounds must be scalar constants")
        bounds.append(float(data.reshape(-1)[0]))
    return bounds[0], bounds[1]


def conv_operands(f: FloatSide, op: ir.Op):
    """nn.conv `op`'s input shape, constant filter, constant bias (None when omitted), groups,
    stride and dilation, for a target that lowers 2-D NCX convolutions with constant weights
    (both targets do)."""
    if op.attrs.get("data_format", "NCX") != "NCX" or op.attrs.get("filter_format", "NCX") != "NCX":
        raise f.unsupported("only data_format='NCX' and filter_format='NCX' are lowered")
    xshape = f.float_shape(op.inputs[0])
    if len(xshape) != 4:
        raise f.unsupported(f"only 2-D convolutions are lowered (input rank {len(xshape)})")
    w = f.constant(op.inputs[1])
    bias = f.constant(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] else None
    groups = int(op.attrs.get("groups", 1)) or xshape[1]
    stride = packed_ints(op.attrs.get("stride", 1), 2, "stride", f)
    dilation = packed_ints(op.attrs.get("dilation", 1), 2, "dilation", f)
    return xshape, w, bias, groups, stride, dilation
