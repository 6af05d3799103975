"""NNEF 1.0 → 2.0 conversions, part three: the operations NNEF 2.0 has no operator for, composed
from 2.0 standard operators (docs/nnef1.md "Composed operations" gives the derivations).

- debox (4.3.2), argmax_pool, sample, desample (4.3.3): a window position is a multi-index
  j < size; its number k is j's row-major rank (4.3.3 "row-major ordering of positions within
  the window"). argmax_pool and sample stack the K window taps of the padded input
  (one strided layout.slice per tap) on a new last axis; desample and debox scatter with an
  nn.deconv over every dimension, whose filter routes tap k to window position j.
- avg_roi_pool / max_roi_pool (4.6.1) are image.avg_roi_pool / image.max_roi_pool.
- roi_resample (4.6.2) gathers each RoI's batch item and samples it with image.grid_sample
  (bilinear, REPLICATE) on a grid computed from the RoI coordinates.
- update (4.8) returns `value`; the new variable value is an extra graph output (compose.py).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..limits import check_tensor_size
from .builder import ITEM_DTYPE, TensorValue
from .convert_context import ConvertContext
from .convert_base import _BORDER_METHODS, _reshape, conversion
from .convert_nn import _pool, _window_lists, down_extent, window_padding


# ---------------------------------------------------------------------- window helpers

def _window(ctx: ConvertContext, x: TensorValue, a: dict):
    """size, stride, dilation of a window over every dimension of `x` (4.3: rank-many items)."""
    size = list(a["size"])
    if len(size) != x.rank:
        ctx.fail(f"'size' has {len(size)} items, expected {x.rank} (the input rank)")
    if any(f <= 0 for f in size):
        ctx.fail(f"'size' {size} has items that are not positive")
    stride, dilation = _window_lists(ctx, a, x.rank)
    return size, stride, dilation


# These operations are composed with one operator per window position (tap): a window of more
# positions than this is refused rather than turned into a graph of millions of operators.
MAX_WINDOW_TAPS = 1 << 16


def _taps(ctx: ConvertContext, size: list) -> list[tuple]:
    """Window positions j in row-major order: tap k is the k-th item (4.3.3)."""
    count = math.prod(size)
    if count > MAX_WINDOW_TAPS:
        ctx.fail(f"window {size} has {count} positions; qsim composes {ctx.op} from one operator per "
                 f"position and takes at most {MAX_WINDOW_TAPS}", unsupported=True)
    return list(itertools.product(*[range(f) for f in size]))


def _padded(ctx: ConvertContext, x: TensorValue, pads: list, border: str) -> TensorValue:
    """The input padded by the non-negative parts of `pads` with the border's values (4.3)."""
    grow = [(max(p, 0), max(q, 0)) for p, q in pads]
    axes = [i for i, g in enumerate(grow) if g != (0, 0)]
    if not axes:
        return x
    value, method = None, "CONSTANT"
    if border == "ignore":   # padded values never win a maximum
        value = ctx.builder.constant(ctx.hint + ".ignore", x.item, np.float32(-np.inf))
    elif border != "constant":
        method = _BORDER_METHODS[border]
        # reflection reaches extent - 1 ('reflect') or extent ('reflect-even') items deep
        limit = {"REFLECT": 1, "SYMMETRIC": 0}.get(method)
        if limit is not None and any(max(grow[i]) > x.shape[i] - limit for i in axes):
            ctx.fail(f"border {border!r} pads {grow} beyond what the input {list(x.shape)} can reflect",
                     hint="reflected padding must be smaller than the extent")
    shape = tuple(e + g[0] + g[1] for e, g in zip(x.shape, grow))
    attrs = {"axes": tuple(axes), "padding": tuple([grow[i][0] for i in axes] + [grow[i][1] for i in axes]),
             "method": method}
    return ctx.emit("layout.pad", [x, value], attrs, [(x.item, shape)])[0]


def _stacked_taps(ctx: ConvertContext, x: TensorValue, a: dict, borders: tuple):
    """[out.., K]: tap k of each output position, input~[i*s + j*d - p] (4.3.3)."""
    size, stride, dilation = _window(ctx, x, a)
    border = a["border"]
    if border not in borders:
        ctx.fail(f"border {border!r} is not one of {', '.join(map(repr, borders))}")
    pads = window_padding(ctx, x.shape, size, stride, dilation, a["padding"])
    out = tuple(down_extent(ctx, X, f, s, d, p, q) for X, f, s, d, (p, q)
                in zip(x.shape, size, stride, dilation, pads))
    positions = _taps(ctx, size)
    check_tensor_size(out + (len(positions),), ITEM_DTYPE[x.item].numpy.itemsize, f"{ctx.op} window stack",
                      ctx.loc)
    xp = _padded(ctx, x, pads, border)
    # padded coordinate of logical position t is t - p + max(p, 0)
    shift = [max(p, 0) - p for p, _ in pads]
    taps = []
    for j in positions:
        begin = [jj * d + sh for jj, d, sh in zip(j, dilation, shift)]
        end = [b + (o - 1) * s + 1 for b, o, s in zip(begin, out, stride)]
        if tuple(begin) == (0,) * x.rank and tuple(end) == xp.shape and all(s == 1 for s in stride):
            taps.append(xp)
            continue
        attrs = {"axes": tuple(range(x.rank)), "begin": tuple(begin), "end": tuple(end), "stride": tuple(stride)}
        taps.append(ctx.emit("layout.slice", [xp], attrs, [(x.item, out)])[0])
    stacked = ctx.emit("layout.stack", taps, {"axis": x.rank, "squeeze": False}, [(x.item, out + (len(taps),))])[0]
    return stacked, out


@conversion("argmax_pool")
def _argmax_pool(ctx: ConvertContext, a: dict) -> list:
    x = a["input"]
    stacked, out = _stacked_taps(ctx, x, a, ("ignore", "constant", "replicate", "reflect", "reflect-even"))
    # math.argmax keeps the first of equal maxima, as 4.3.3 asks
    return ctx.emit("math.argmax", [stacked], {"axis": x.rank, "squeeze": True}, [("integer", out)])


@conversion("sample")
def _sample(ctx: ConvertContext, a: dict) -> list:
    x, index = a["input"], a["index"]
    # 'ignore' is not among sample's borders in 4.3.3, yet max_pool_with_index (4.9.3) passes its
    # border on: sample then reads the -inf padding of argmax_pool's 'ignore', which max_pool
    # with border 'ignore' also yields for a window of padding only
    stacked, out = _stacked_taps(ctx, x, a, ("ignore", "constant", "replicate", "reflect", "reflect-even"))
    if index.shape != out:
        ctx.fail(f"'index' has shape {list(index.shape)}, expected the output shape {list(out)}",
                 hint="the index of sample has the shape of the output (4.3.3)")
    column = ctx.emit("layout.unsqueeze", [index], {"axes": (index.rank,)}, [("integer", out + (1,))])[0]
    return ctx.emit("layout.gather_nd", [stacked, column], {"batch_dims": x.rank}, [(x.item, out)])


@conversion("max_pool_with_index", compound=True)
def _max_pool_with_index(ctx: ConvertContext, a: dict) -> list:
    """4.9.3 samples the input where argmax_pool found the maximum: that value is the window's
    maximum, so the output is nn.max_pool (same border semantics, see convert_nn._pool) and
    the quantizer sees a pooling operator."""
    output = _pool(ctx, a, "nn.max_pool")[0]
    return [output, _argmax_pool(ctx, a)[0]]


# ---------------------------------------------------------------------- scatter through deconv

def _up_geometry(ctx: ConvertContext, x: TensorValue, size, stride, dilation, a: dict):
    """(up-space shape, padding) for debox/desample, as deconv computes them (4.3)."""
    output_shape = list(a["output_shape"])
    if output_shape and len(output_shape) != x.rank:
        ctx.fail(f"'output_shape' has {len(output_shape)} items, expected {x.rank} or 0")
    up = output_shape or [e * s for e, s in zip(x.shape, stride)]
    pads = window_padding(ctx, up, size, stride, dilation, a["padding"])
    if not output_shape:
        up = [(e - 1) * s + (f - 1) * d + 1 - (p + q) for e, s, f, d, (p, q)
              in zip(x.shape, stride, size, dilation, pads)]
    for X, e, f, s, d, (p, q) in zip(up, x.shape, size, stride, dilation, pads):
        if X <= 0 or down_extent(ctx, X, f, s, d, p, q) != e:
            ctx.fail(f"output extent {X} does not down-scale to the input extent {e}",
                     hint="output_shape must satisfy x = (p + X + q - (f - 1) * d - 1) / s + 1 (4.3)")
    return up, pads


def _scatter(ctx: ConvertContext, channels: TensorValue, filt: np.ndarray, stride, dilation, pads, up):
    """nn.deconv over every dimension: `channels` is [K, x..], filter [K, 1, size..]; result up."""
    x = _reshape(ctx, channels, [1, *channels.shape])
    w = ctx.builder.constant(ctx.hint + ".taps", "scalar", filt.astype(np.float32))
    attrs = {"stride": tuple(stride), "dilation": tuple(dilation),
             "padding": tuple([p for p, _ in pads] + [q for _, q in pads]), "padding_align": "UPPER",
             "output_size": tuple(up), "groups": 1, "data_format": "NCX", "filter_format": "NCX"}
    y = ctx.emit("nn.deconv", [x, w, None], attrs, [("scalar", (1, 1, *up))])[0]
    return _reshape(ctx, y, list(up))


@conversion("desample")
def _desample(ctx: ConvertContext, a: dict) -> list:
    x, index = a["input"], a["index"]
    size, stride, dilation = _window(ctx, x, a)
    if a["border"] != "constant":
        ctx.fail(f"border {a['border']!r}: desample needs border 'constant'",
                 hint="4.3.3: other borders lose their meaning, index never points outside the input")
    if index.shape != x.shape:
        ctx.fail(f"'index' has shape {list(index.shape)}, expected the input shape {list(x.shape)}",
                 hint="the index of desample has the shape of its input (4.3.3)")
    up, pads = _up_geometry(ctx, x, size, stride, dilation, a)
    taps = _taps(ctx, size)
    check_tensor_size((len(taps), 1, *size), 8, "desample routing filter", ctx.loc)
    zero = ctx.builder.constant(ctx.hint + ".zero", "scalar", np.float32(0.0))
    masked = []
    for k in range(len(taps)):   # input values whose index names tap k
        kk = ctx.builder.constant(ctx.hint + ".tap", "integer", np.int64(k))
        hit = ctx.emit("math.eq", [index, kk], {"lhs_align": None, "rhs_align": None}, [("logical", x.shape)])[0]
        masked.append(ctx.emit("math.select", [hit, x, zero], {"cond_align": None, "lhs_align": None,
                                                                "rhs_align": None}, [(x.item, x.shape)])[0])
    stacked = ctx.emit("layout.stack", masked, {"axis": 0, "squeeze": False},
                       [(x.item, (len(taps), *x.shape))])[0]
    filt = np.zeros((len(taps), 1, *size))
    for k, j in enumerate(taps):
        filt[(k, 0) + j] = 1.0
    return [_scatter(ctx, stacked, filt, stride, dilation, pads, up)]


def _debox_count(x_shape, up, size, stride, dilation, pads) -> np.ndarray:
    """Per up-space position, how many terms of the debox sum read a real input value (4.3.2):
    a product over the dimensions of the per-dimension counts."""
    count = np.ones((), dtype=np.float64)
    for X, e, f, s, d, (p, _) in zip(up, x_shape, size, stride, dilation, pads):
        t = np.arange(X)[:, None] + p - np.arange(f)[None, :] * d      # numerators i + p - j d
        valid = (t % s == 0) & (t // s >= 0) & (t // s < e)
        count = np.multiply.outer(count, valid.sum(axis=1))
    return count


@conversion("debox")
def _debox(ctx: ConvertContext, a: dict) -> list:
    x = a["input"]
    size, stride, dilation = _window(ctx, x, a)
    border = a["border"]
    borders = ("ignore", "constant", "replicate", "reflect", "reflect-even")
    if border not in borders:
        ctx.fail(f"border {border!r} is not one of {', '.join(map(repr, borders))}")
    up, pads = _up_geometry(ctx, x, size, stride, dilation, a)
    check_tensor_size(size, 8, "debox window", ctx.loc)
    check_tensor_size(up, 8, "debox output", ctx.loc)
    if border in _BORDER_METHODS:
        # input~ outside [0, x) is the border value: pad the input with enough of it and move the
        # up-space window by the same amount (p' = p + before * s keeps every term's index)
        grow = []
        for X, e, f, s, d, (p, q) in zip(up, x.shape, size, stride, dilation, pads):
            before = max(0, -(-((f - 1) * d - p) // s))
            after = max(0, (X - 1 + p) // s - (e - 1))
            grow.append((before, after))
        if any(g != (0, 0) for g in grow):
            xp = _padded(ctx, x, grow, border)
            pads = [(p + b * s, q + c * s) for (p, q), (b, c), s in zip(pads, grow, stride)]
            x = xp
    y = _scatter(ctx, _reshape(ctx, x, [1, *x.shape]), np.ones((1, 1, *size)), stride, dilation, pads, up)
    if not a["normalize"]:
        return [y]
    if border == "ignore":   # average over the terms that read the input, as box does
        count = np.maximum(_debox_count(x.shape, up, size, stride, dilation, pads), 1.0)
    else:
        count = np.full((), float(np.prod(size)))
    divisor = ctx.builder.constant(ctx.hint + ".volume", "scalar", count.astype(np.float32))
    return ctx.emit("math.div", [y, divisor], {"lhs_align": None, "rhs_align": None}, [("scalar", tuple(up))])


# ---------------------------------------------------------------------- RoI operations (4.6)

def _roi_args(ctx: ConvertContext, a: dict):
    x, rois, batch_index, size = a["input"], a["rois"], a["batch_index"], list(a["output_size"])
    m = x.rank - 2
    if m < 1:
        ctx.fail(f"input {list(x.shape)} needs batch, channel and at least one spatial dimension")
    if rois.rank != 2 or rois.shape[1] != 2 * m:
        ctx.fail(f"'rois' has shape {list(rois.shape)}, expected [N, {2 * m}] ({m} spatial dimensions)")
    if batch_index.shape != (rois.shape[0], 1):
        ctx.fail(f"'batch_index' has shape {list(batch_index.shape)}, expected [{rois.shape[0]}, 1]",
                 hint="one batch index per RoI, shape (N, 1) (4.6)")
    if len(size) != m or any(v <= 0 for v in size):
        ctx.fail(f"'output_size' {size} must have {m} positive items (one per spatial dimension)")
    index = _reshape(ctx, batch_index, [rois.shape[0]])
    return x, rois, index, size, (rois.shape[0], x.shape[1], *size)


@conversion("avg_roi_pool", "max_roi_pool")
def _roi_pool(ctx: ConvertContext, a: dict) -> list:
    x, rois, index, size, shape = _roi_args(ctx, a)
    return ctx.emit("image." + ctx.op, [x, rois, index], {"output_size": tuple(size)}, [(x.item, shape)])


def _resample_line(method: str, h: int, extent_s: int):
    """Coefficients (alpha, beta[h], gamma[h]) with normalized grid coordinate
    g = start * alpha + (end - start) * beta + gamma for output index i < h of one axis.

    The RoI [start, end) plays the input interval of multilinear_upsample (4.3.4) with factor
    h / r (r = end - start): source coordinate c = start + r * A[i] + B[i], where 'symmetric'
    A = (i + 1/2) / h, B = -1/2; 'asymmetric' A = i / h, B = 0; 'aligned' A = i / (h - 1),
    B = -i / (h - 1) (c = start + i (r - 1) / (h - 1)). grid_sample (aligned = false) reads
    pixel c at g = (c + 1/2) * 2 / S - 1.
    """
    i = np.arange(h, dtype=np.float64)
    if method == "symmetric":
        A, B = (i + 0.5) / h, np.full(h, -0.5)
    elif method == "asymmetric":
        A, B = i / h, np.zeros(h)
    else:
        A = i / (h - 1) if h > 1 else np.zeros(h)
        B = -A
    S = float(extent_s)
    return 2.0 / S, 2.0 * A / S, (2.0 * B + 1.0) / S - 1.0


@conversion("roi_resample")
def _roi_resample(ctx: ConvertContext, a: dict) -> list:
    x, rois, index, size, shape = _roi_args(ctx, a)
    method = a["method"]
    if method not in ("symmetric", "asymmetric", "aligned"):
        ctx.fail(f"method {method!r} is not 'symmetric', 'asymmetric' or 'aligned'")
    n, m = rois.shape[0], x.rank - 2
    crops = ctx.emit("layout.gather", [x, index], {"axis": 0}, [(x.item, (n, *x.shape[1:]))])[0]
    b = ctx.builder
    axes_coords = []
    for ax in range(m):
        def column(c):
            attrs = {"axes": (1,), "begin": (c,), "end": (c + 1,), "stride": (1,)}
            return ctx.emit("layout.slice", [rois], attrs, [("scalar", (n, 1))])[0]
        start, end = column(ax), column(m + ax)
        extent = ctx.emit("math.sub", [end, start], {"lhs_align": None, "rhs_align": None}, [("scalar", (n, 1))])[0]
        alpha, beta, gamma = _resample_line(method, size[ax], x.shape[2 + ax])
        h = size[ax]
        c_alpha = b.constant(ctx.hint + ".alpha", "scalar", np.float32(alpha))
        c_beta = b.constant(ctx.hint + ".beta", "scalar", beta.astype(np.float32))
        c_gamma = b.constant(ctx.hint + ".gamma", "scalar", gamma.astype(np.float32))
        none = {"lhs_align": None, "rhs_align": None}
        g0 = ctx.emit("math.mul", [start, c_alpha], none, [("scalar", (n, 1))])[0]
        g1 = ctx.emit("math.mul", [extent, c_beta], none, [("scalar", (n, h))])[0]
        g2 = ctx.emit("math.add", [g1, g0], none, [("scalar", (n, h))])[0]
        g3 = ctx.emit("math.add", [g2, c_gamma], none, [("scalar", (n, h))])[0]
        along = [n] + [h if k == ax else 1 for k in range(m)]
        g4 = _reshape(ctx, g3, along)
        full = (n, *size)
        g5 = ctx.emit("layout.broadcast", [g4], {"axes": tuple(range(m + 1)), "shape": full}, [("scalar", full)])[0]
        axes_coords.append(g5)
    # grid_sample's grid lists the last spatial axis first
    grid = ctx.emit("layout.stack", axes_coords[::-1], {"axis": m + 1, "squeeze": False},
                    [("scalar", (n, *size, m))])[0]
    attrs = {"mode": "LINEAR", "padding": "REPLICATE", "aligned": False}
    return ctx.emit("image.grid_sample", [crops, grid], attrs, [(x.item, shape)])


# ---------------------------------------------------------------------- variable updates (4.8)

@conversion("update")
def _update(ctx: ConvertContext, a: dict) -> list:
    variable, value = a["variable"], a["value"]
    composer = ctx.composer
    name = ctx.builder.resolve(variable.name)
    label = next((label for label, v in composer.labels.items() if ctx.builder.resolve(v.name) == name), None)
    if label is None:
        ctx.fail(f"'{variable.name}' is not a variable tensor",
                 hint="only tensors made by `variable` can be updated (4.8)")
    if value.shape != variable.shape:
        ctx.fail(f"value shape {list(value.shape)} differs from the variable's {list(variable.shape)}",
                 hint="the new value must have the variable's shape (4.8)")
    if name in composer.updates:
        ctx.fail(f"variable '{variable.name}' is updated twice",
                 hint="each variable can only be updated once in a cycle (4.8)")
    composer.updates[name] = (label, value)
    return [value]
