"""`nn` module operators (NNEF 2.0 4.4.1) as numpy: linear and convolutions by strided window
views and batched matmul (BLAS), and the window arithmetic pooling shares (nn_pool.py);
activations, normalizations and LSTM are in nn_norm.py."""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import numpy as np

from ...limits import max_tensor_bytes
from ...numerics import ceil_div
from .base import check_alloc, fail, pack, register
from ...kernels import float_conv
from ...kernels.extensions import extension
from ...kernels.cache import PerAttrs   # an op's attrs mapping is never changed in place
from ...threads import apply_blas_threads, thread_count, use_one_blas_thread
from .bounds import BOUND_ONLY, THEN_BOUND, bounded
from .conv_gemm import PackedFor, conv_gemm, conv_im2col_gemm, gemm_layer
from .fma import fma_f32

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
    order), then + bias; in float32 each step is one fused multiply-add rounded once (the
    compiled loops' and the conv GEMM's definition: acc = fma(w0, x0, +0.0), acc = fma(wk, xk, acc)). A batched GEMM would be g products of 1 x K by K x X, far from BLAS speed.
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
        fused = dtype == np.float32       # float32: the compiled loops' fma chain (fma.py), same bits
        for k, win in enumerate(padded_windows(x, range(2, x.ndim), fx, stride, dilation, before, ox, 0)):
            wtap = wk[None, :, :, k].reshape((1, ic, m) + spatial)
            if fused:
                out = fma_f32(wtap, win[:, :, None], out)
                continue
            np.multiply(wtap, win[:, :, None], out=term)
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
