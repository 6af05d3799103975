"""`nn` pooling operators (NNEF 2.0 4.4.2) as numpy: windows of the input combined in place,
max pooling of float32 NCHW compiled (kernels/float_pool.h); the window arithmetic is nn.py's."""
from __future__ import annotations

import numpy as np

from .base import fail, norm_axes, pack, register
from ...kernels.cpu_features import current_isa
from ...kernels.extensions import extension
from ...threads import split_count, split_rows
from .nn import padded_windows, window_geometry

_float_ops = extension("_float_ops")   # raises KernelsUnavailableError when missing or broken


# ---- 4.4.2 pooling --------------------------------------------------------------------------

def _pool(op, x, at, fill, combine):
    axes = at.get("axes")
    axes = tuple(range(2, x.ndim)) if axes is None else norm_axes(axes, x.ndim, op)
    k = len(axes)
    size = pack(at["size"], k, op, "size")
    if min(size, default=1) <= 0:
        fail(op, f"'size' must be positive; got {list(size)}")
    stride = pack(at.get("stride", 1), k, op, "stride")
    dilation = pack(at.get("dilation", 1), k, op, "dilation")
    padding = pack(at.get("padding"), 2 * k, op, "padding")
    before, ox = window_geometry(op, [x.shape[a] for a in axes], size, stride, dilation, padding,
                                 at.get("padding_align", "UPPER"), bool(at.get("ceil_mode", False)))
    shape = list(x.shape)
    for a, o in zip(axes, ox):
        shape[a] = o
    acc = np.empty(shape, dtype=x.dtype)
    if combine is np.maximum and x.dtype == np.float32 and x.ndim == 4 and tuple(axes) == (2, 3) and \
            max(map(abs, (*size, *stride, *dilation, *before))) < 2 ** 31:
        # compiled (kernels/float_pool.h): the bits of the windows below, planes split over the
        # pool's threads (its geometry is int64: a window from a hostile model beyond that takes the
        # numpy windows, which index with Python ints)
        planes = x.shape[0] * x.shape[1]
        _float_ops.max_pool_f32(np.ascontiguousarray(x).reshape(planes, x.shape[2], x.shape[3]),
                                acc.reshape(planes, ox[0], ox[1]), *size, *stride, *dilation, *before,
                                split_count(planes, max(1, POOL_SPLIT_ELEMENTS // max(1, x.shape[2] * x.shape[3]))),
                                current_isa().code)
        return acc, size

    whole = 1 in axes or x.ndim < 2

    def part(c0: int, c1: int) -> None:
        """the channels [c0, c1) (all of acc when the channel axis is pooled too)"""
        xs, out = (x, acc) if whole else (x[:, c0:c1], acc[:, c0:c1])
        for k, win in enumerate(padded_windows(xs, axes, size, stride, dilation, before, ox, fill)):
            if k == 0:
                np.copyto(out, win)
            else:
                combine(out, win, out=out)

    # numpy's loops release the GIL, so the threads pool disjoint channels side by side (the
    # same element operations in the same order: the same values on any thread count)
    channels = 1 if whole else x.shape[1]
    split_rows(channels, part, min_rows=max(1, -(-POOL_SPLIT_ELEMENTS * channels // max(x.size, 1))))
    return acc, size


# Below this many input elements per thread a pooling runs on one thread (a Python thread
# hand-off costs ~20 us, a part on the compiled pool ~2 us; ResNet-18's 64 x 112 x 112 max pool
# took 2 ms on numpy's windows).
POOL_SPLIT_ELEMENTS = 1 << 16


@register("nn.max_pool")
def max_pool(ins, at):
    x = np.asarray(ins[0])
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return [_pool("nn.max_pool", x, at, fill, np.maximum)[0]]


@register("nn.sum_pool")
def sum_pool(ins, at):
    return [_pool("nn.sum_pool", np.asarray(ins[0]), at, 0, np.add)[0]]


def avg_pool_array(op, x, at):
    s, size = _pool(op, x, at, 0, np.add)
    if at.get("ignore_border", True):
        axes = at.get("axes")
        axes = tuple(range(2, x.ndim)) if axes is None else norm_axes(axes, x.ndim, op)
        ones = np.ones([x.shape[a] if a in axes else 1 for a in range(x.ndim)], dtype=x.dtype)
        cnt = _pool(op, ones, at, 0, np.add)[0]
    else:
        cnt = x.dtype.type(np.prod(size))
    return s / cnt


@register("nn.avg_pool")
def avg_pool(ins, at):
    return [avg_pool_array("nn.avg_pool", np.asarray(ins[0]), at)]


@register("nn.rms_pool")
def rms_pool(ins, at):
    x = np.asarray(ins[0])
    return [np.sqrt(avg_pool_array("nn.rms_pool", x * x, at))]


@register("nn.lp_pool")
def lp_pool(ins, at):
    x = np.asarray(ins[0])
    p = at.get("p")
    if p is None or p <= 0:
        fail("nn.lp_pool", f"'p' must be positive; got {p}")
    s = _pool("nn.lp_pool", np.power(np.abs(x), x.dtype.type(p)), at, 0, np.add)[0]
    return [np.power(s, x.dtype.type(1.0 / p))]
