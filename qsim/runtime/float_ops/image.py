"""`image` module operators (NNEF 2.0 4.5) as numpy.

Resampling is separable (each @lower weight is a product over the resampled axes), so the
operators resample one axis at a time. Intrinsic ones (cubic resampling, ROI pools) follow
the definitions recorded in docs/stdlib.md.
"""
from __future__ import annotations

import itertools

import numpy as np

from ...numerics import RESIZE_ROUNDING, nnef_round
from .base import check_alloc, fail, norm_axes, pack, register, seq
from .nn_pool import sum_pool

COORDINATE_TRANSFORMS = ("SYMMETRIC", "ASYMMETRIC", "ALIGNED")
ROUNDING_METHODS = ("FLOOR", "CEIL", "ROUND_PREFER_FLOOR", "ROUND_PREFER_CEIL")


def _axes_factor(op, x, at, key="factor"):
    axes = at.get("axes")
    axes = tuple(range(x.ndim)) if axes is None else norm_axes(axes, x.ndim, op)
    vals = pack(at[key], len(axes), op, key)
    if min(vals, default=1) <= 0:
        fail(op, f"'{key}' must be positive; got {list(vals)}")
    return axes, vals


@register("image.nearest_downsample")
def nearest_downsample(ins, at):
    x = np.asarray(ins[0])
    axes, factor = _axes_factor("image.nearest_downsample", x, at)
    index = [slice(None)] * x.ndim
    for a, f in zip(axes, factor):
        if x.shape[a] % f:
            fail("image.nearest_downsample", f"input.shape {list(x.shape)} at axis {a} must be "
                 f"divisible by 'factor' {f}")
        index[a] = slice(None, None, int(f))
    return [np.ascontiguousarray(x[tuple(index)])]


def _check_scaled(op, x, axes, factor, extra: int = 0) -> None:
    """Upsampling multiplies extents by model attributes: the result must fit the limit."""
    out = list(x.shape)
    for a, f in zip(axes, factor):
        out[a] = int(f) * (out[a] + extra)
    check_alloc(op, out, x.dtype)


@register("image.nearest_upsample")
def nearest_upsample(ins, at):
    x = np.asarray(ins[0])
    axes, factor = _axes_factor("image.nearest_upsample", x, at)
    _check_scaled("image.nearest_upsample", x, axes, factor)
    for a, f in zip(axes, factor):
        x = np.repeat(x, int(f), axis=a)
    return [x]


@register("image.area_downsample")
def area_downsample(ins, at):
    x = np.asarray(ins[0])
    axes, factor = _axes_factor("image.area_downsample", x, at)
    for a, f in zip(axes, factor):
        if x.shape[a] % f:
            fail("image.area_downsample", f"input.shape at axis {a} ({x.shape[a]}) must be "
                 f"divisible by 'factor' {f}")
    s = sum_pool([x], {"axes": axes, "size": factor, "stride": factor, "padding": [0] * (2 * len(axes))})[0]
    return [s / x.dtype.type(np.prod(factor))]


@register("image.linear_upsample")
def linear_upsample(ins, at):
    """Transposed convolution with a triangle filter along each axis (the @lower of 4.5.1):
    output[f*i + j - padding] += e[i] * filter[j], e the input, edge-extended by c = int(symmetric)
    before and 1 after when replicate_border; out-of-range outputs are skipped."""
    x = np.asarray(ins[0])
    axes, factor = _axes_factor("image.linear_upsample", x, at)
    # the widest intermediate is the edge-extended, fully upsampled input (factor * (L + 1) + 1)
    _check_scaled("image.linear_upsample", x, axes, factor, extra=2)
    sym = bool(at.get("symmetric", True))
    rep = bool(at.get("replicate_border", True))
    for a, f in zip(axes, factor):
        f = int(f)
        fs = 2 * f - f % 2 if sym else 2 * f - 1
        padding = (f + f // 2 if rep else f // 2) if sym else f - 1
        offset = 0.5 if sym and f % 2 == 0 else 1.0
        w = (1.0 - np.abs(np.arange(fs) - f + offset) / f).astype(x.dtype)
        e = x
        if rep:
            widths = [(0, 0)] * x.ndim
            widths[a] = (int(sym), 1)
            e = np.pad(x, widths, mode="edge")
        L = e.shape[a]
        full_shape = list(e.shape)
        full_shape[a] = f * (L - 1) + fs
        full = np.zeros(full_shape, dtype=x.dtype)
        for j in range(fs):
            index = [slice(None)] * x.ndim
            index[a] = slice(j, j + f * (L - 1) + 1, f)
            full[tuple(index)] += e * w[j]
        n = f * x.shape[a]
        out_shape = list(x.shape)
        out_shape[a] = n
        out = np.zeros(out_shape, dtype=x.dtype)
        avail = max(min(n, full.shape[a] - padding), 0)
        src = [slice(None)] * x.ndim
        dst = [slice(None)] * x.ndim
        src[a] = slice(padding, padding + avail)
        dst[a] = slice(0, avail)
        out[tuple(dst)] = full[tuple(src)]
        x = out
    return [x]


def _source_coords(op, extent, size, transform):
    """x = i * scale + offset, the @using of nearest/linear_resize."""
    if transform not in COORDINATE_TRANSFORMS:
        fail(op, f"'coordinate_transform' must be one of {list(COORDINATE_TRANSFORMS)}; got {transform!r}")
    if transform != "ALIGNED":
        scale = extent / size
    else:
        scale = 0.0 if size <= 1 else (extent - 1) / (size - 1)
    offset = 0.5 * scale - 0.5 if transform == "SYMMETRIC" else 0.0
    return np.arange(size) * scale + offset


def _resize_args(op, x, at):
    axes = at.get("axes")
    axes = tuple(range(x.ndim)) if axes is None else norm_axes(axes, x.ndim, op)
    size = pack(at["size"], len(axes), op, "size")
    if min(size, default=1) <= 0:
        fail(op, f"'size' must be positive; got {list(size)}")
    out = list(x.shape)
    for a, n in zip(axes, size):
        out[a] = max(out[a], int(n))            # every intermediate is at most this large
    check_alloc(op, out, x.dtype)
    return axes, [int(v) for v in size], at.get("coordinate_transform", "SYMMETRIC")


@register("image.nearest_resize")
def nearest_resize(ins, at):
    x = np.asarray(ins[0])
    op = "image.nearest_resize"
    axes, size, transform = _resize_args(op, x, at)
    method = at.get("rounding_method", "ROUND_PREFER_FLOOR")
    if method not in ROUNDING_METHODS:
        fail(op, f"'rounding_method' must be one of {list(ROUNDING_METHODS)}; got {method!r}")
    rnd = RESIZE_ROUNDING[method]
    for a, n in zip(axes, size):
        src = rnd(_source_coords(op, x.shape[a], n, transform)).astype(np.int64)
        # the @lower clamps only above (int(r) <? s - 1); FLOOR of a negative SYMMETRIC
        # coordinate would read index -1, so qsim clamps below at 0 as well
        x = np.take(x, np.clip(src, 0, x.shape[a] - 1), axis=a)
    return [x]


def _weighted_taps(x, a, index_lists, weights):
    """sum_t weights[t][i] * x[index_lists[t][i]] along axis a."""
    shape = [1] * x.ndim
    shape[a] = -1
    out = None
    for idx, w in zip(index_lists, weights):
        term = np.take(x, idx, axis=a) * w.astype(x.dtype).reshape(shape)
        out = term if out is None else out + term
    return out


@register("image.linear_resize")
def linear_resize(ins, at):
    x = np.asarray(ins[0])
    axes, size, transform = _resize_args("image.linear_resize", x, at)
    for a, n in zip(axes, size):
        r = _source_coords("image.linear_resize", x.shape[a], n, transform)
        lo = np.floor(r)
        frac = r - lo
        s = x.shape[a]
        i0 = np.clip(lo.astype(np.int64), 0, s - 1)
        i1 = np.clip(lo.astype(np.int64) + 1, 0, s - 1)
        x = _weighted_taps(x, a, [i0, i1], [1.0 - frac, frac])
    return [x]


def cubic_weights(t: np.ndarray, a: float) -> list[np.ndarray]:
    """Keys cubic convolution weights of the 4 taps at offsets -1, 0, 1, 2 from floor(r)."""
    def k(d):
        d = np.abs(d)
        return np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                        np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0))
    return [k(t + 1), k(t), k(1 - t), k(2 - t)]


@register("image.cubic_resize")
def cubic_resize(ins, at):
    """Intrinsic: cubic convolution (Keys, coefficient coeff_a) on the linear_resize coordinates,
    edge-replicated taps; no antialiasing filter."""
    x = np.asarray(ins[0])
    axes, size, transform = _resize_args("image.cubic_resize", x, at)
    coeff = float(at.get("coeff_a", -0.75))
    for a, n in zip(axes, size):
        r = _source_coords("image.cubic_resize", x.shape[a], n, transform)
        lo = np.floor(r)
        taps = [np.clip(lo.astype(np.int64) + o, 0, x.shape[a] - 1) for o in (-1, 0, 1, 2)]
        x = _weighted_taps(x, a, taps, cubic_weights(r - lo, coeff))
    return [x]


@register("image.resize")
def resize(ins, at):
    mode = at.get("mode", "NEAREST")
    common = {k: at[k] for k in ("axes", "size", "coordinate_transform") if k in at}
    if mode == "NEAREST":
        if "rounding_method" in at:
            common["rounding_method"] = at["rounding_method"]
        return nearest_resize(ins, common)
    if mode == "LINEAR":
        return linear_resize(ins, common)
    if mode == "CUBIC":
        common["coeff_a"] = at.get("cubic_coeff_a", -0.75)
        return cubic_resize(ins, common)
    fail("image.resize", f"'mode' must be one of ['NEAREST', 'LINEAR', 'CUBIC']; got {mode!r}")


@register("image.rescale")
def rescale(ins, at):
    x = np.asarray(ins[0])
    axes = at.get("axes")
    axes = tuple(range(x.ndim)) if axes is None else norm_axes(axes, x.ndim, "image.rescale")
    factor = pack(at["factor"], len(axes), "image.rescale", "factor")
    with np.errstate(over="ignore", invalid="ignore"):      # checked just below
        scaled = [nnef_round(np.float64(x.shape[a]) * f) for a, f in zip(axes, factor)]
    if not all(np.isfinite(scaled)):
        fail("image.rescale", f"'factor' {list(factor)} gives no finite size for input shape "
             f"{list(x.shape)}")
    size = [int(v) for v in scaled]
    sub = {k: v for k, v in at.items() if k != "factor"}
    sub.update(axes=axes, size=size)
    return resize(ins, sub)


# ---- 4.5.3 ROI pooling (intrinsic; NNEF 1.0 4.6.1 semantics) -----------------------------------

def _roi_pool(op, ins, at, reduce):
    x, rois, index = np.asarray(ins[0]), np.asarray(ins[1]), np.asarray(ins[2]).reshape(-1)
    d = x.ndim - 2
    out_size = [int(v) for v in pack(at["output_size"], d, op, "output_size")]
    if rois.shape[-1] != 2 * d or rois.shape[0] != index.shape[0]:
        fail(op, f"'rois' must be [n, {2 * d}] and 'index' [n]; got {list(rois.shape)}, {list(index.shape)}")
    check_alloc(op, (rois.shape[0], x.shape[1]) + tuple(out_size), x.dtype)
    out = np.zeros((rois.shape[0], x.shape[1]) + tuple(out_size), dtype=x.dtype)
    for r in range(rois.shape[0]):
        bi = int(index[r])
        if not 0 <= bi < x.shape[0]:
            fail(op, f"roi {r} refers to batch item {bi} of {x.shape[0]}")
        lo = nnef_round(rois[r, :d]).astype(np.int64)
        hi = nnef_round(rois[r, d:]).astype(np.int64)
        extent = np.maximum(hi - lo, 1)
        cell = -(-extent // out_size)                 # ceil(r / p)
        step = extent // out_size                     # floor(r / p)
        for cellidx in itertools.product(*[range(p) for p in out_size]):
            start = lo + step * np.asarray(cellidx)
            window = tuple(slice(max(int(s), 0), max(min(int(s + c), e), 0))
                           for s, c, e in zip(start, cell, x.shape[2:]))
            patch = x[(bi, slice(None)) + window]
            if patch.size:
                out[(r, slice(None)) + cellidx] = reduce(patch.reshape(x.shape[1], -1), axis=1)
    return [out]


@register("image.max_roi_pool")
def max_roi_pool(ins, at):
    return _roi_pool("image.max_roi_pool", ins, at, np.max)


@register("image.avg_roi_pool")
def avg_roi_pool(ins, at):
    return _roi_pool("image.avg_roi_pool", ins, at, np.mean)


# ---- 4.5.4 grid sampling --------------------------------------------------------------------

def _grid_coords(x, grid, aligned):
    d = x.ndim - 2
    g = (grid[..., ::-1] + 1.0) * 0.5                # di = [d-1:-1:-1]: grid is x-first
    s = np.asarray(x.shape[2:], dtype=grid.dtype)
    return g * (s - 1) if aligned else g * s - 0.5, d


def _remap(i, s, padding):
    """Index remapping of the @lower: REFLECT |i <> -i : 2(s-1) - i|, REPLICATE |i <> 0 : s-1|.
    Returns (index, valid)."""
    if padding == "REFLECT":
        i = np.where(i < 0, -i, np.where(i >= s, 2 * (s - 1) - i, i))
    elif padding == "REPLICATE":
        i = np.clip(i, 0, s - 1)
    valid = (i >= 0) & (i < s)
    return np.clip(i, 0, s - 1), valid


def _gather_nc(x, idx):
    """x[n, c, idx[n, z.., 0], idx[n, z.., 1], ...] → [n, c, z..]."""
    n = x.shape[0]
    zshape = idx[0].shape[1:]
    nidx = np.arange(n).reshape((n,) + (1,) * len(zshape))
    picked = x.transpose([0] + list(range(2, x.ndim)) + [1])[(nidx,) + tuple(idx)]   # [n, z.., c]
    return np.moveaxis(picked, -1, 1)


def _grid_sample(op, ins, at, mode):
    x, grid = np.asarray(ins[0]), np.asarray(ins[1])
    padding = at.get("padding", "ZEROS")
    if padding not in ("ZEROS", "REFLECT", "REPLICATE"):
        fail(op, f"'padding' must be one of ['ZEROS', 'REFLECT', 'REPLICATE']; got {padding!r}")
    coords, d = _grid_coords(x, grid, bool(at.get("aligned", False)))
    if grid.shape[-1] != d:
        fail(op, f"grid's last extent {grid.shape[-1]} must equal the {d} spatial dims of input")
    sizes = x.shape[2:]
    if mode == "NEAREST":
        idx, valid = zip(*[_remap(nnef_round(coords[..., a]).astype(np.int64), sizes[a], padding)
                           for a in range(d)])
        mask = np.logical_and.reduce(valid)
        return [_gather_nc(x, idx) * mask[:, None].astype(x.dtype)]
    offsets = (0, 1) if mode == "LINEAR" else (-1, 0, 1, 2)
    base = np.floor(coords).astype(np.int64)
    t = coords - base
    out = np.zeros((x.shape[0], x.shape[1]) + grid.shape[1:-1], dtype=x.dtype)
    for js in itertools.product(range(len(offsets)), repeat=d):
        w = np.ones(grid.shape[:-1], dtype=np.float64)
        idx, valid = [], []
        for a, j in enumerate(js):
            i = base[..., a] + offsets[j]
            if mode == "LINEAR":
                w = w * (1.0 - np.abs(i - coords[..., a]))
            else:
                w = w * cubic_weights(t[..., a], -0.75)[j]
            ia, va = _remap(i, sizes[a], padding)
            idx.append(ia)
            valid.append(va)
        w = w * np.logical_and.reduce(valid)
        out += _gather_nc(x, idx) * w[:, None].astype(x.dtype)
    return [out]


register("image._nearest_grid_sample")(lambda ins, at: _grid_sample("image._nearest_grid_sample", ins, at, "NEAREST"))
register("image._linear_grid_sample")(lambda ins, at: _grid_sample("image._linear_grid_sample", ins, at, "LINEAR"))
register("image._cubic_grid_sample")(lambda ins, at: _grid_sample("image._cubic_grid_sample", ins, at, "CUBIC"))


@register("image.grid_sample")
def grid_sample(ins, at):
    mode = at.get("mode", "LINEAR")
    if mode not in ("NEAREST", "LINEAR", "CUBIC"):
        fail("image.grid_sample", f"'mode' must be one of ['NEAREST', 'LINEAR', 'CUBIC']; got {mode!r}")
    return _grid_sample("image.grid_sample", ins, at, mode)
