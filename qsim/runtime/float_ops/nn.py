"""`nn` module operators (NNEF 2.0 4.4) as numpy: convolution and pooling by strided
window views and batched matmul (BLAS), activations, normalizations, LSTM."""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import numpy as np

from ...limits import max_tensor_bytes
from ...numerics import ceil_div
from .base import check_alloc, fail, norm_axes, norm_axis, pack, register
from ...kernels import float_conv
from ...kernels.extensions import extension
from ...kernels.cache import PerAttrs   # an op's attrs mapping is never changed in place
from ...threads import apply_blas_threads, split_count, split_rows, thread_count, use_one_blas_thread
from .bounds import BOUND_ONLY, THEN_BOUND, bounded
from .conv_gemm import PackedFor, conv_gemm, conv_im2col_gemm, gemm_layer
from .math import erf

_float_ops = extension("_float_ops")   # raises KernelsUnavailableError when missing or broken


# ---- padding arithmetic shared by conv and pooling (the @using blocks of 4.4.1/4.4.2) --------

def window_geometry(op, ix, fx, stride, dilation, padding, align, ceil_mode):
    """Returns (before, ox): the lower padding (offset) and the output extents per axis.

    fd = (fx - 1) * dilation + 1
    paddings = padding[:d] + padding[d:] ?? ((ceil_mode ? ix \\ stride : ix / stride) - 1) * stride + fd - ix
    offset = padding[:d] ?? (align == 'UPPER' ? paddings / 2 : paddings \\ 2)
    ox = ceil_mode ? (ix + paddings - fd) \\ stride + 1 : (ix + paddings - fd) / stride + 1
    """
    d = len(ix)
    if align not in ("LOWER", "UPPER"):
        fail(op, f"'padding_align' must be one of ['LOWER', 'UPPER']; got {align!r}")
    if min(stride, default=1) <= 0 or min(dilation, default=1) <= 0:
        fail(op, f"'stride' {list(stride)} and 'dilation' {list(dilation)} must be positive")
    before, ox = [], []
    for a in range(d):
        fd = (fx[a] - 1) * dilation[a] + 1
        if padding is not None:
            total = padding[a] + padding[d + a]
            off = padding[a]
        else:
            n = ceil_div(ix[a], stride[a]) if ceil_mode else ix[a] // stride[a]
            total = (n - 1) * stride[a] + fd - ix[a]
            off = total // 2 if align == "UPPER" else ceil_div(total, 2)
        if ix[a] + total < fd:
            fail(op, f"padded input-size must be greater than (dilated) filter-size: "
                 f"input-size={ix[a]}, filter-size={fx[a]}, dilation={dilation[a]}, "
                 f"total-padding={total}")
        span = ix[a] + total - fd
        ox.append((ceil_div(span, stride[a]) if ceil_mode else span // stride[a]) + 1)
        before.append(off)
    return before, ox


def padded_windows(x, axes, fx, stride, dilation, before, ox, fill):
    """Yields, per kernel offset j (row-major over fx), the strided view of `x` along `axes`
    holding x[stride * i + dilation * j - before] for i < ox; out-of-range entries are `fill`
    (the guarded index |...| of the @lower skips them; fill is the null element)."""
    widths = [(0, 0)] * x.ndim
    start = []
    for a, ax in enumerate(axes):
        last = stride[a] * (ox[a] - 1) + dilation[a] * (fx[a] - 1) - before[a]
        lo, hi = max(before[a], 0), max(last - (x.shape[ax] - 1), 0)
        widths[ax] = (lo, hi)
        start.append(lo - before[a])
    xp = np.pad(x, widths, mode="constant", constant_values=fill) if any(w != (0, 0) for w in widths) else x
    for j in itertools.product(*[range(f) for f in fx]):
        index = [slice(None)] * x.ndim
        for a, ax in enumerate(axes):
            b = start[a] + dilation[a] * j[a]
            index[ax] = slice(b, b + stride[a] * (ox[a] - 1) + 1, stride[a])
        yield xp[tuple(index)]


# ---- 4.4.1 linear operators -----------------------------------------------------------------

# Below this many multiply-adds a linear layer runs on one BLAS thread: waking OpenBLAS's
# threads costs more than they save there (EfficientNet-Lite0's 1280 x 1000 classifier took
# 3-8 ms of CPU at 2 threads on a loaded machine, 0.2 ms on one). OpenBLAS splits a product's
# outputs, never its sums, over threads: the bits do not depend on the choice.
SINGLE_THREAD_LINEAR_MACS = 1 << 23


@register("nn.linear")
def linear(ins, at):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    if np.size(x) * np.shape(w)[0] < SINGLE_THREAD_LINEAR_MACS:
        use_one_blas_thread()
        y = x @ w.T
    else:
        apply_blas_threads()
        y = x @ w.T
    return [y + b if b is not None else y]


def _to_ncx(x, fmt, d, op, what="data_format"):
    if fmt == "NCX":
        return x
    if fmt == "NXC":
        return np.moveaxis(x, -1, 1)
    if fmt == "XCN":
        return np.transpose(x, [d + 1, d] + list(range(d)))
    if fmt == "CXB" and what == "filter_format":
        return np.transpose(x, [d + 1, 0] + list(range(1, d + 1)))
    fail(op, f"'{what}' must be one of {['NCX', 'NXC', 'XCN'] + (['CXB'] if what == 'filter_format' else [])}; "
         f"got {fmt!r}")


def _from_ncx(y, fmt, d):
    if fmt == "NCX":
        return y
    if fmt == "NXC":
        return np.moveaxis(y, 1, -1)
    return np.transpose(y, list(range(2, d + 2)) + [1, 0])   # XCN


def _conv_setup(op, ins, at):
    x, w, bias, d = _conv_arrays(op, ins, at)
    return (x, w, bias, d) + _conv_attrs(op, d, at)


def _conv_arrays(op, ins, at):
    """(x, w, bias, d): input and filter as NCX arrays, the number of spatial axes."""
    x, w = np.asarray(ins[0]), np.asarray(ins[1])
    bias = ins[2] if len(ins) > 2 else None
    d = x.ndim - 2
    if d < 0 or w.ndim != x.ndim:
        fail(op, f"input rank {x.ndim} and filter rank {w.ndim} must be equal and at least 2")
    x = _to_ncx(x, at.get("data_format", "NCX"), d, op)
    w = _to_ncx(w, at.get("filter_format", "NCX"), d, op, "filter_format")
    return x, w, bias, d


def _conv_attrs(op, d, at):
    """(stride, dilation, padding, groups) packed and checked."""
    stride = pack(at.get("stride", 1), d, op, "stride")
    dilation = pack(at.get("dilation", 1), d, op, "dilation")
    padding = pack(at.get("padding"), 2 * d, op, "padding")
    groups = int(at.get("groups", 1))
    if groups < 0:
        fail(op, f"'groups' must not be negative; got {groups}")
    return stride, dilation, padding, groups


@dataclasses.dataclass(frozen=True)
class _ConvGeometry:
    d: int
    stride: tuple
    dilation: tuple
    g: int
    m: int
    fc: int
    fx: tuple
    before: tuple
    ox: tuple
    K: int
    X: int


_GEOMETRY_ATTRS = ("stride", "dilation", "padding", "groups", "padding_align", "ceil_mode")


@functools.lru_cache(maxsize=1024)
def _conv_geometry(x_shape: tuple, w_shape: tuple, bias_shape, attrs: tuple) -> _ConvGeometry:
    """The checked geometry of a conv from its (NCX) shapes and attributes, cached: a model runs
    the same few dozen layers on every inference, and working this out took ~10 us a call."""
    op, at = "nn.conv", dict(attrs)
    d = len(x_shape) - 2
    stride, dilation, padding, groups = _conv_attrs(op, d, at)
    ic, (n, fc) = x_shape[1], w_shape[:2]
    g = ic if groups == 0 else groups
    if n % g or ic != fc * g:
        fail(op, f"input-channels ({ic}) must equal filter-channels ({fc}) * groups ({g}) "
             f"and output-channels ({n}) be divisible by groups")
    if bias_shape is not None and bias_shape != (n,):
        fail(op, f"bias-size {list(bias_shape)} must equal output-channels {n}")
    fx = tuple(w_shape[2:])
    before, ox = window_geometry(op, x_shape[2:], fx, stride, dilation, padding,
                                 at.get("padding_align", "UPPER"), bool(at.get("ceil_mode", False)))
    return _ConvGeometry(d, stride, dilation, g, n // g, fc, fx, tuple(before), tuple(ox), math.prod(fx),
                         math.prod(ox))


def _hashable(value):
    if type(value) in (list, tuple) and all(type(v) is int for v in value):
        return tuple(value)               # the common case (strides, paddings), without recursion
    return tuple(_hashable(v) for v in value) if isinstance(value, (list, tuple, np.ndarray)) else value


_geometry_keys = PerAttrs()     # the hashable geometry attributes (_conv_geometry's key)
_fast_convs = PerAttrs()        # the float32 NCHW calls worked out once per op and input shape


def _geometry_key(at) -> tuple:
    """The hashable form of a conv's geometry attributes (_conv_geometry's key): building it took
    a fifth of the Python time of a conv call, for the same few dozen mappings every inference."""
    return _geometry_keys.get(at, None, lambda: tuple((k, _hashable(at[k])) for k in _GEOMETRY_ATTRS if k in at))


@dataclasses.dataclass(frozen=True)
class _FastConv:
    """A float32 2-D NCHW convolution of one op and shape, worked out once: what conv() decides
    and checks on each call, so that a call is the kernel's own (a tenth of a small layer's time
    went to the deciding). The same kernels with the same arguments as conv()'s general path:
    the same bits."""
    depthwise: bool
    pointwise: bool            # 1x1, stride 1, no padding: x is its own im2col
    geo: _ConvGeometry
    shape: tuple               # the output's
    bound: tuple | None
    only: bool
    packs: PackedFor = dataclasses.field(default_factory=PackedFor, compare=False)

    def _gemm_layer(self, image_shape, w_shape):
        geo = self.geo
        if self.pointwise:
            return gemm_layer(image_shape, w_shape, (1, 1), (1, 1), (1, 1), (0, 0), (1, geo.X), self.bound, self.only,
                              thread_count())
        return gemm_layer(image_shape, w_shape, tuple(geo.fx), tuple(geo.stride), tuple(geo.dilation),
                          tuple(geo.before), tuple(geo.ox), self.bound, self.only, thread_count())

    def __call__(self, x, w, bias):
        geo, bound, only = self.geo, self.bound, self.only
        if self.depthwise:
            made = float_conv.depthwise2d(x, w, geo.m, geo.stride, geo.dilation, geo.before, geo.ox, bias, bound,
                                          only)
            out, y = made if bound is not None else (made, None)
        else:
            b, n = self.shape[:2]
            w3 = w.reshape(geo.g, geo.m, geo.fc * geo.K)
            image = np.ascontiguousarray(x)
            if self.pointwise:
                image = image.reshape(b, geo.g * geo.fc, 1, geo.X)
            out, y = self._gemm_layer(image.shape, w3.shape).run(image, w3, bias, self.packs.get(w, w3))
        outs = [None if out is None or only else np.ascontiguousarray(out.reshape(self.shape))]
        if bound is not None:
            outs.append(np.ascontiguousarray(y.reshape(self.shape)))
        return outs


def _fast_conv(ins, at) -> _FastConv | None:
    """The _FastConv of this call, or None where conv()'s general path runs: other dtypes or
    layouts, not 2-D, a geometry beyond int64 comfort, a bias of another shape."""
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    if type(x) is not np.ndarray or type(w) is not np.ndarray or x.dtype != np.float32 or w.dtype != np.float32 \
            or (bias is not None and (type(bias) is not np.ndarray or bias.dtype != np.float32)):
        return None
    key = (x.shape, w.shape, None if bias is None else bias.shape, max_tensor_bytes())
    return _fast_convs.get(at, key, lambda: _plan_fast_conv(x, w, bias, at))


def _plan_fast_conv(x, w, bias, at) -> _FastConv | None:
    op = "nn.conv"
    if x.ndim != 4 or w.ndim != 4 or at.get("data_format", "NCX") != "NCX" or \
            at.get("filter_format", "NCX") != "NCX":
        return None
    geo = _conv_geometry(x.shape, w.shape, None if bias is None else bias.shape, _geometry_key(at))
    if max(map(abs, (*geo.stride, *geo.dilation, *geo.before))) >= 2 ** 31 or \
            (bias is not None and bias.shape != (geo.g * geo.m,)):
        return None
    b, ic = x.shape[:2]
    n = geo.g * geo.m
    bound = at.get(THEN_BOUND)
    only = bound is not None and bool(at.get(BOUND_ONLY, False))
    depthwise = geo.g > 1 and geo.fc == 1
    pointwise = geo.K == 1 and all(s == 1 for s in geo.stride) and not any(geo.before) and \
        list(geo.ox) == list(x.shape[2:])
    if not depthwise and not pointwise:
        check_alloc(op, (b, ic, geo.K) + tuple(geo.ox), np.float32, "im2col buffer")
    check_alloc(op, (b, n) + tuple(geo.ox), np.float32)
    return _FastConv(depthwise, pointwise, geo, (b, n) + tuple(geo.ox), bound, only)


@register("nn.conv")
def conv(ins, at):
    fast = _fast_conv(ins, at)
    if fast is not None:
        return fast(ins[0], ins[1], ins[2] if len(ins) > 2 else None)
    op = "nn.conv"
    x, w, bias, d = _conv_arrays(op, ins, at)
    geo = _conv_geometry(x.shape, w.shape, None if bias is None else np.shape(bias), _geometry_key(at))
    stride, dilation, g, m, fc, fx = geo.stride, geo.dilation, geo.g, geo.m, geo.fc, geo.fx
    before, ox, K, X = list(geo.before), list(geo.ox), geo.K, geo.X
    b, ic = x.shape[:2]
    n = g * m
    bound = at.get(THEN_BOUND)        # (lo, hi): a relu/clamp after this conv (fusion.py)
    only = bound is not None and bool(at.get(BOUND_ONLY, False))     # the conv's own output unread
    if g > 1 and fc == 1:
        out, y = _depthwise(x, w, bias, m, fx, stride, dilation, before, ox, bound, only)
        return _conv_outputs(out, y, bound, at.get("data_format", "NCX"), d, only)
    dtype = np.result_type(x, w)
    one_by_one = K == 1 and all(s == 1 for s in stride) and not any(before) and \
        list(ox) == list(x.shape[2:]) and x.dtype == dtype
    if not one_by_one:
        # im2col copies each input element once per kernel offset: it can outgrow every tensor.
        # Checked at its whole size even where it is built tile by tile (a bound on every tile)
        check_alloc(op, (b, ic, K) + tuple(ox), dtype, "im2col buffer")
    fused_bias = bias is not None and np.result_type(dtype, bias) == dtype
    tile_bound = bound if fused_bias or bias is None else None
    w3 = w.reshape(g, m, fc * K).astype(dtype, copy=False)
    # cols[b, g, c*k, X]: im2col with the kernel offsets in row-major order like the filter
    if one_by_one:
        cols = np.ascontiguousarray(x).reshape(b, g, fc, X)     # 1x1, stride 1: x is its im2col
        out, y = conv_gemm(w3, cols, bias if fused_bias else None, dtype, tile_bound, only)
    elif d == 2 and x.dtype == w.dtype == np.float32 and (bias is None or bias.dtype == np.float32) and \
            max(map(abs, (*stride, *dilation, *before))) < 2 ** 31:
        # compiled im2col, one cache-sized tile at a time: the same columns as the windows below
        # (the compiled copy takes its geometry as int64; a stride beyond that, from a hostile
        # model, takes the numpy windows, which index with Python ints)
        check_alloc(op, (b, n) + tuple(ox), dtype)
        out, y = conv_im2col_gemm(np.ascontiguousarray(x), w3, fx, stride, dilation, before, ox, bias, bound, only)
    else:
        cols = np.empty((b, ic, K) + tuple(ox), dtype=dtype)
        for k, win in enumerate(padded_windows(x, range(2, d + 2), fx, stride, dilation, before, ox, 0)):
            cols[:, :, k] = win
        out, y = conv_gemm(w3, cols.reshape(b, g, fc * K, X), bias if fused_bias else None, dtype, tile_bound,
                           only)
    shape = (b, n) + tuple(ox)
    if bias is not None and not fused_bias:
        out = out.reshape(shape) + bias.reshape((n,) + (1,) * d)  # a wider bias widens the result
        y = None                                                  # (the tiles had no bound then)
    return _conv_outputs(out, y, bound, at.get("data_format", "NCX"), d, only, shape)


def _conv_outputs(out, y, bound, fmt, d, only=False, shape=None):
    """[conv result] in the data format, and with a fused bound also the bounded result: y when
    the kernels made it, else numpy's maximum/minimum on the float32 result (what the
    relu/clamp op would have received from the executor). `only` (BOUND_ONLY): None in place of
    the conv result, which nobody reads (out is None when the kernels made just y)."""
    shape = shape or (y if out is None else out).shape
    outs = [None if out is None else np.ascontiguousarray(_from_ncx(out.reshape(shape), fmt, d))]
    if bound is not None:
        if y is not None and y.dtype == np.float32:
            outs.append(np.ascontiguousarray(_from_ncx(y.reshape(shape), fmt, d)))
        else:
            lo, hi = bound
            outs.append(bounded(outs[0].astype(np.float32, copy=False), np.float32(lo),
                                None if hi is None else np.float32(hi)))
        if only:
            outs[0] = None
    return outs


def _depthwise(x, w, bias, m, fx, stride, dilation, before, ox, bound=None, only=False):
    """One input channel per group (depthwise): a multiply-add per kernel offset over strided
    window views, out[b, c*m + i] = sum_k w[c*m + i, 0, k] * window_k[b, c] (k in row-major
    order), then + bias. A batched GEMM would be g products of 1 x K by K x X, far from BLAS speed.
    Returns (out, y): y is the bounded result when the compiled loop made it (bound given), else None;
    with `only` the compiled loop makes just y (out None)."""
    b, ic = x.shape[:2]
    dtype = np.result_type(x, w)
    check_alloc("nn.conv", (b, ic * m) + tuple(ox), dtype)
    compiled = _float_conv() if x.ndim == 4 and dtype == np.float32 and \
        max(map(abs, (*stride, *dilation, *before))) < 2 ** 31 else None     # int64 geometry in C
    if compiled is not None and (bias is None or bias.dtype == np.float32):
        # the same operations in the same order as the loop below, compiled (same bits)
        made = compiled.depthwise2d(x.astype(np.float32, copy=False), w.astype(np.float32, copy=False),
                                    m, stride, dilation, before, ox, bias, bound, only)
        return made if bound is not None else (made, None)
    if compiled is not None:
        out = compiled.depthwise2d(x.astype(np.float32, copy=False), w.astype(np.float32, copy=False),
                                   m, stride, dilation, before, ox)
    else:
        out = np.zeros((b, ic, m) + tuple(ox), dtype=dtype)
        term = np.empty_like(out)
        wk = w.reshape(ic, m, -1).astype(dtype, copy=False)            # [c, i, K]
        spatial = (1,) * len(ox)
        for k, win in enumerate(padded_windows(x, range(2, x.ndim), fx, stride, dilation, before, ox, 0)):
            np.multiply(wk[None, :, :, k].reshape((1, ic, m) + spatial), win[:, :, None], out=term)
            out += term
        out = out.reshape((b, ic * m) + tuple(ox))
    return (out if bias is None else out + bias.reshape((ic * m,) + (1,) * len(ox))), None


def _float_conv():
    """qsim.kernels.float_conv (compiled loops); a missing build is an error, as for every kernel."""
    return float_conv


@register("nn.deconv")
def deconv(ins, at):
    op = "nn.deconv"
    x, w, bias, d, stride, dilation, padding, groups = _conv_setup(op, ins, at)
    b, ic = x.shape[:2]
    n, fc = w.shape[:2]
    g = ic if groups == 0 else groups
    if n % g or n != ic:
        fail(op, f"input-channels ({ic}) must equal the filter's first extent ({n}) and be "
             f"divisible by groups ({g})")
    m, oc = n // g, fc * g
    if bias is not None and bias.shape != (oc,):
        fail(op, f"bias-size {list(bias.shape)} must equal output-channels {oc}")
    ix, fx = x.shape[2:], w.shape[2:]
    align = at.get("padding_align", "UPPER")
    out_size = pack(at.get("output_size"), d, op, "output_size")
    full = [(ix[a] - 1) * stride[a] + (fx[a] - 1) * dilation[a] + 1 for a in range(d)]
    offset, ox = [], []
    for a in range(d):
        fd = (fx[a] - 1) * dilation[a] + 1
        if padding is not None:
            total, off = padding[a] + padding[d + a], padding[a]
        else:
            total = (ix[a] - 1) * stride[a] + fd - ix[a] * stride[a]
            off = total // 2 if align == "UPPER" else ceil_div(total, 2)
        o = out_size[a] if out_size is not None else (ix[a] - 1) * stride[a] + fd - total
        if out_size is not None and (o + total - fd) // stride[a] + 1 != ix[a]:
            fail(op, f"'output_size' {list(out_size)} is incompatible with input-size {list(ix)}, "
                 f"filter-size {list(fx)}, stride {list(stride)}, dilation {list(dilation)}")
        offset.append(off)
        ox.append(o)
    check_alloc(op, (b, g, fc) + tuple(full), np.result_type(x, w), "accumulator")
    check_alloc(op, (b, oc) + tuple(ox), np.result_type(x, w))
    acc = np.zeros((b, g, fc) + tuple(full), dtype=np.result_type(x, w))
    xg = x.reshape(b, g, m, -1)                                  # [b, g, m, X]
    wg = w.reshape(g, m, fc, -1)                                 # [g, m, fc, K]
    for k, j in enumerate(itertools.product(*[range(f) for f in fx])):
        contrib = np.matmul(wg[:, :, :, k].transpose(0, 2, 1)[None], xg)   # [b, g, fc, X]
        index = (slice(None),) * 3 + tuple(
            slice(dilation[a] * j[a], dilation[a] * j[a] + stride[a] * (ix[a] - 1) + 1, stride[a])
            for a in range(d))
        acc[index] += contrib.reshape((b, g, fc) + tuple(ix))
    acc = acc.reshape((b, oc) + tuple(full))
    # output[q] = acc[q + offset]; positions outside acc received nothing (guarded index)
    out = np.zeros((b, oc) + tuple(ox), dtype=acc.dtype)
    src, dst = [slice(None)] * 2, [slice(None)] * 2
    for a in range(d):
        lo, hi = max(offset[a], 0), min(offset[a] + ox[a], full[a])
        src.append(slice(lo, max(hi, lo)))
        dst.append(slice(lo - offset[a], lo - offset[a] + max(hi - lo, 0)))
    out[tuple(dst)] = acc[tuple(src)]
    if bias is not None:
        out = out + bias.reshape((oc,) + (1,) * d)
    return [np.ascontiguousarray(_from_ncx(out, at.get("data_format", "NCX"), d))]


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
                                split_count(planes, max(1, POOL_SPLIT_ELEMENTS // max(1, x.shape[2] * x.shape[3]))))
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


# ---- 4.4.3 activations ----------------------------------------------------------------------

@register("nn.relu")
def relu(ins, at):
    x = np.asarray(ins[0])
    alpha, mx = at.get("alpha"), at.get("max")
    if alpha is not None and not 0.0 <= alpha <= 1.0:
        fail("nn.relu", f"'alpha' must be between 0 and 1 (inclusive); got {alpha}")
    if mx is not None and mx <= 0.0:
        fail("nn.relu", f"'max' must be positive; got {mx}")
    if alpha is None:           # max(x, 0) and min(., max): numpy's values, one pass
        return [bounded(x, x.dtype.type(0), None if mx is None else x.dtype.type(mx))]
    lo = x * x.dtype.type(alpha)
    if mx is None:
        return [np.maximum(x, lo)]
    t = np.minimum(x, x.dtype.type(mx))
    return [np.maximum(t, lo, out=t)]                 # t is ours: no second fresh array


@register("nn.prelu")
def prelu(ins, at):
    x, alpha = np.asarray(ins[0]), np.asarray(ins[1])
    axis = norm_axis(at.get("axis", 1), x.ndim, "nn.prelu")
    a = alpha.reshape([-1 if d == axis else 1 for d in range(x.ndim)])
    return [np.where(x < 0, a * x, x)]


def _act(name, fn):
    register("nn." + name)(lambda ins, at: [fn(np.asarray(ins[0]), at)])


def _t(x, v):
    return x.dtype.type(v)


_act("thresholded_relu", lambda x, at: np.where(x > _t(x, at.get("theta", 0.0)), x, _t(x, 0)))
_act("elu", lambda x, at: np.where(x < 0, _t(x, at.get("alpha", 1.0)) * np.expm1(x), x))
_act("selu", lambda x, at: _t(x, at.get("lambda", 1.05070102)) *
     np.where(x < 0, _t(x, at.get("alpha", 1.67326319)) * np.expm1(x), x))
_act("silu", lambda x, at: x / (1 + np.exp(-x)))
_act("sigmoid", lambda x, at: 1 / (1 + np.exp(-x)))
_act("softplus", lambda x, at: np.logaddexp(x, _t(x, 0)))
_act("erf", lambda x, at: erf(x))


@register("nn.gelu")
def gelu(ins, at):
    x = np.asarray(ins[0])
    mode = at.get("approximate")
    if mode == "TANH":
        return [0.5 * x * (1 + np.tanh(_t(x, np.sqrt(2 / np.pi)) * (x + _t(x, 0.044715) * x ** 3)))]
    if mode == "SIGMOID":
        return [x / (1 + np.exp(_t(x, -1.702) * x))]
    if mode is not None:
        fail("nn.gelu", f"'approximate' must be one of ['TANH', 'SIGMOID']; got {mode!r}")
    return [0.5 * x * (1 + erf(x / _t(x, np.sqrt(2.0))))]


# ---- 4.4.4 normalization --------------------------------------------------------------------

def _along(v, axis, rank):
    return v.reshape([-1 if d == axis else 1 for d in range(rank)])


@register("nn.batch_norm")
def batch_norm(ins, at):
    x, mean, var = (np.asarray(v) for v in ins[:3])
    bias = ins[3] if len(ins) > 3 else None
    scale = ins[4] if len(ins) > 4 else None
    axis = norm_axis(at.get("channel_axis", 1), x.ndim, "nn.batch_norm")
    eps = at.get("epsilon", 1e-5)
    if x.shape[axis] != mean.shape[0]:
        fail("nn.batch_norm", f"input shape {list(x.shape)} at channel axis {axis} must match "
             f"size of mean and variance ({mean.shape[0]})")
    denom = np.sqrt(var + _t(var, eps))
    if _affine_in_one_pass(x, mean, denom, scale, bias):
        return [_channel_affine(x, axis, mean, denom, scale, bias)]
    y = x - _along(mean, axis, x.ndim)           # a new array: the steps below may reuse it
    y = _into(np.divide, y, _along(denom, axis, x.ndim))
    if scale is not None:
        y = _into(np.multiply, y, _along(scale, axis, x.ndim))
    if bias is not None:
        y = _into(np.add, y, _along(bias, axis, x.ndim))
    return [y]


def _affine_in_one_pass(x, mean, denom, scale, bias) -> bool:
    """Whether batch_norm's four float32 passes may run as one compiled pass: every operand
    float32 (so numpy computes each step in float32 too) and each channel vector 1-D of the
    channel count (numpy would broadcast anything else differently, or fail)."""
    vectors = [mean, denom] + [np.asarray(v) for v in (scale, bias) if v is not None]
    return x.dtype == np.float32 and x.size > 0 and all(
        v.dtype == np.float32 and v.ndim == 1 and v.shape[0] == mean.shape[0] for v in vectors)


def _channel_affine(x, axis, mean, denom, scale, bias):
    """(x - mean) / denom * scale + bias along `axis`, numpy's float32 results bit for bit
    (kernels/float_ops.pyx channel_affine_f32: the same four roundings in the same order)."""
    channels = x.shape[axis]
    outer = math.prod(x.shape[:axis])
    x3 = np.ascontiguousarray(x).reshape(outer, channels, -1)
    out = np.empty(x.shape, np.float32)
    flat = lambda v: None if v is None else np.ascontiguousarray(v, np.float32)
    _float_ops.channel_affine_f32(x3, out.reshape(x3.shape), flat(mean), flat(denom), flat(scale), flat(bias),
                                  split_count(x3.shape[0] * channels, min_rows=max(1, (1 << 16) // max(1, x3.shape[2]))))
    return out


def _into(ufunc, y, v):
    """ufunc(y, v), written over y (an intermediate of the caller) when that keeps y's shape and
    dtype: the same values as the new array numpy would return, without a pass over fresh memory."""
    if np.result_type(y, v) == y.dtype and np.broadcast_shapes(y.shape, np.shape(v)) == y.shape:
        return ufunc(y, v, out=y)
    return ufunc(y, v)


@register("nn.mean_variance_norm")
def mean_variance_norm(ins, at):
    x = np.asarray(ins[0])
    bias = ins[1] if len(ins) > 1 else None
    scale = ins[2] if len(ins) > 2 else None
    axes = at.get("axes")
    axes = tuple(range(2, x.ndim)) if axes is None else norm_axes(axes, x.ndim, "nn.mean_variance_norm")
    mean = x.mean(axis=axes, keepdims=True, dtype=x.dtype)
    var = np.square(x - mean).mean(axis=axes, keepdims=True, dtype=x.dtype)
    y = (x - mean) / np.sqrt(var + _t(x, at.get("epsilon", 1e-5)))
    if scale is not None:
        y = y * _along(scale, 1, x.ndim)
    if bias is not None:
        y = y + _along(bias, 1, x.ndim)
    return [y]


@register("nn.local_response_norm")
def local_response_norm(ins, at):
    x = np.asarray(ins[0])
    axes = norm_axes(at.get("axes", [1]), x.ndim, "nn.local_response_norm")
    size = pack(at["size"], len(axes), "nn.local_response_norm", "size")
    padding = [(s - 1) // 2 for s in size] + [ceil_div(s - 1, 2) for s in size]
    mean = avg_pool_array("nn.local_response_norm", x * x,
                          {"axes": axes, "size": size, "padding": padding, "ignore_border": False})
    return [x / np.power(_t(x, at.get("bias", 1.0)) + _t(x, at.get("alpha", 1.0)) * mean,
                         _t(x, at.get("beta", 0.5)))]


def _lp_norm(name, reduce):
    def impl(ins, at):
        x = np.asarray(ins[0])
        axes = norm_axes(at["axes"], x.ndim, "nn." + name)
        s = reduce(x, axes)
        if at.get("bias") is not None:
            s = s + _t(x, at["bias"])
        if at.get("epsilon") is not None:
            s = np.maximum(s, _t(x, at["epsilon"]))
        return [x / s]
    return impl


register("nn.l1_norm")(_lp_norm("l1_norm", lambda x, a: np.abs(x).sum(axis=a, keepdims=True, dtype=x.dtype)))
register("nn.l2_norm")(_lp_norm("l2_norm", lambda x, a: np.sqrt((x * x).sum(axis=a, keepdims=True, dtype=x.dtype))))


@register("nn.softmax")
def softmax(ins, at):
    x = np.asarray(ins[0])
    axes = norm_axes(at.get("axes", [1]), x.ndim, "nn.softmax")
    e = np.exp(x - x.max(axis=axes, keepdims=True))
    return [e / e.sum(axis=axes, keepdims=True, dtype=x.dtype)]


# ---- 4.4.5 recurrent ------------------------------------------------------------------------

def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def lstm_step_arrays(h0, c0, x, W, R, B):
    s = x @ W.T + B + h0 @ R.T
    i, f, g, o = np.split(s, 4, axis=1)
    c1 = _sigmoid(f) * c0 + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c1), c1


@register("nn.lstm_step")
def lstm_step(ins, at):
    return list(lstm_step_arrays(*ins[:6]))


def _run_lstm(X, W, R, B, h, c, steps):
    ys = []
    for t in range(steps):
        h, c = lstm_step_arrays(h, c, X[t], W, R, B)
        ys.append(h)
    Y = np.stack(ys) if ys else np.zeros((0,) + h.shape, h.dtype)
    return Y, h, c


@register("nn.lstm_loop")
def lstm_loop(ins, at):
    X, W, R, B, h0, c0 = ins[:6]
    steps = ins[6] if len(ins) > 6 else None
    n = X.shape[0] if steps is None else int(np.asarray(steps).reshape(()))
    if not 0 <= n <= X.shape[0]:
        fail("nn.lstm_loop", f"'steps'={n} must be between 0 and the sequence length {X.shape[0]}")
    return list(_run_lstm(X, W, R, B, h0, c0, n))


@register("nn.lstm")
def lstm(ins, at):
    X, W, R, B = ins[:4]
    nh = R.shape[1]
    h0 = ins[4] if len(ins) > 4 and ins[4] is not None else np.zeros((X.shape[1], nh), X.dtype)
    c0 = ins[5] if len(ins) > 5 and ins[5] is not None else np.zeros((X.shape[1], nh), X.dtype)
    steps = ins[6] if len(ins) > 6 else None
    if steps is None:
        return list(_run_lstm(X, W, R, B, np.broadcast_to(h0, (X.shape[1], nh)),
                              np.broadcast_to(c0, (X.shape[1], nh)), X.shape[0]))
    # jagged: each batch item runs its own count; Y rows past an item's count stay 0 and
    # Y has max(steps) rows (the dynamic extent ~|s)
    steps = np.asarray(steps).reshape(-1)
    T = int(steps.max(initial=0))
    Y = np.zeros((T, X.shape[1], nh), X.dtype)
    hN = np.zeros((X.shape[1], nh), X.dtype)
    cN = np.zeros_like(hN)
    for bi in range(X.shape[1]):
        y, h, c = _run_lstm(X[:, bi:bi + 1], W, R, B, np.broadcast_to(h0, hN.shape)[bi:bi + 1],
                            np.broadcast_to(c0, hN.shape)[bi:bi + 1], int(steps[bi]))
        Y[:len(y), bi] = y[:, 0]
        hN[bi], cN[bi] = h[0], c[0]
    return [Y, hN, cN]


@register("nn._jagged_lstm_loops")
def jagged_lstm_loops(ins, at):
    if len(ins) < 7 or ins[6] is None:
        fail("nn._jagged_lstm_loops", "input 'steps' is required")
    return lstm(ins, at)
