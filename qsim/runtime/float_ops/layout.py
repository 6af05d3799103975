"""`layout` module operators (NNEF 2.0 4.1) as numpy."""
from __future__ import annotations

import math

import numpy as np

from ...errors import DataError
from ...ir import DType
from ...numerics import ceil_div
from .base import check_alloc, fail, norm_axes, norm_axis, pack, register, seq

_SCALAR_TYPES = {"int": np.int64, "real": np.float32, "bool": np.bool_}


def numpy_type(name) -> np.dtype:
    """A SkriptND type name (or qsim DType short name) as a numpy dtype."""
    if isinstance(name, np.dtype):
        return name
    name = str(name)
    if name in _SCALAR_TYPES:
        return np.dtype(_SCALAR_TYPES[name])
    return DType.from_name(name).numpy


# ---- 4.1.1 generators -----------------------------------------------------------------------

@register("layout.tensor")
def tensor(ins, at):
    shape = tuple(int(v) for v in seq(at.get("shape", ())))
    value = np.asarray(at["value"])
    check_alloc("layout.tensor", shape, value.dtype)
    vol = math.prod(shape)
    if value.ndim == 0 or value.size == 1:
        return [np.full(shape, value.reshape(()))]
    if value.size != vol:
        fail("layout.tensor", f"'value' has {value.size} items but 'shape' {list(shape)} "
             f"has volume {vol}")
    return [value.reshape(shape)]


@register("layout.uniform")
def uniform(ins, at):
    shape = tuple(int(v) for v in seq(at["shape"]))
    check_alloc("layout.uniform", shape, np.asarray(ins[0]).dtype)
    return [np.full(shape, np.asarray(ins[0]).reshape(()))]


@register("layout.range")
def range_(ins, at):
    first, last = at["first"], at["last"]
    stride = at.get("stride", 1)
    if stride == 0:
        fail("layout.range", "'stride' must not be 0")
    if (stride > 0 and last < first) or (stride < 0 and first < last):
        fail("layout.range", f"empty direction: first={first}, last={last}, stride={stride}")
    if all(isinstance(v, (int, np.integer)) for v in (first, last, stride)):
        count = ceil_div(last - first, stride)
        return [first + np.arange(count, dtype=np.int64) * stride]
    count = int(np.ceil((last - first) / stride))
    return [(first + np.arange(count) * stride).astype(np.float32)]


@register("layout.shape")
def shape(ins, at):
    return [np.asarray(np.shape(ins[0]), dtype=np.int64)]


# ---- 4.1.2 data view -----------------------------------------------------------------------

@register("layout.cast")
def cast(ins, at):
    target = at.get("R", at.get("dtype"))
    x = np.asarray(ins[0])
    return [x.copy() if target is None else x.astype(numpy_type(target))]


def _axis_rank(op, x, at, default_rank_all=True):
    axis = int(at.get("axis", 0))
    if not -x.ndim <= axis < max(x.ndim, 1):
        fail(op, f"'axis' must be between -input.rank and input.rank; got {axis} for rank {x.ndim}")
    axis = axis + x.ndim if axis < 0 else axis
    rank = at.get("rank")
    rank = x.ndim - axis if rank is None else int(rank)
    if not 0 <= rank <= x.ndim - axis:
        fail(op, f"'rank' must be between 0 and input.rank - axis = {x.ndim - axis}; got {rank}")
    return axis, rank


@register("layout.reshape")
def reshape(ins, at):
    x = np.asarray(ins[0])
    axis, rank = _axis_rank("layout.reshape", x, at)
    new = [int(v) for v in seq(at["shape"])]
    if sum(v == -1 for v in new) > 1:
        fail("layout.reshape", "at most 1 item of 'shape' can be -1", hint=f"shape={new}")
    vol = math.prod(x.shape[axis:axis + rank])
    known = math.prod([v for v in new if v != -1])
    if -1 in new:
        if known == 0 or vol % known:
            fail("layout.reshape", f"volume {vol} of input dims {list(x.shape[axis:axis + rank])} "
                 f"is not divisible by the product of 'shape' {new}")
        new = [vol // known if v == -1 else v for v in new]
    if math.prod(new) != vol:
        fail("layout.reshape", f"the volume of 'shape' {new} must equal that of input dims "
             f"{list(x.shape[axis:axis + rank])} (axis={axis}, rank={rank})")
    return [x.reshape(x.shape[:axis] + tuple(new) + x.shape[axis + rank:])]


@register("layout.flatten")
def flatten(ins, at):
    x = np.asarray(ins[0])
    axis, rank = _axis_rank("layout.flatten", x, at)
    vol = math.prod(x.shape[axis:axis + rank])
    return [x.reshape(x.shape[:axis] + (vol,) + x.shape[axis + rank:])]


@register("layout.unflatten")
def unflatten(ins, at):
    x = np.asarray(ins[0])
    axis = norm_axis(at["axis"], x.ndim, "layout.unflatten")
    new = tuple(int(v) for v in seq(at["shape"]))
    if math.prod(new) != x.shape[axis] or min(new, default=1) <= 0:
        fail("layout.unflatten", f"the volume of 'shape' {list(new)} must equal the input "
             f"extent {x.shape[axis]} at dimension 'axis'={axis}")
    return [x.reshape(x.shape[:axis] + new + x.shape[axis + 1:])]


@register("layout.squeeze")
def squeeze(ins, at):
    x = np.asarray(ins[0])
    axes = norm_axes(at["axes"], x.ndim, "layout.squeeze")
    bad = [a for a in axes if x.shape[a] != 1]
    if bad:
        fail("layout.squeeze", f"input.shape at 'axes' must be 1; shape {list(x.shape)}, axes {bad}")
    return [x.reshape([e for d, e in enumerate(x.shape) if d not in axes])]


@register("layout.unsqueeze")
def unsqueeze(ins, at):
    x = np.asarray(ins[0])
    k = len(seq(at["axes"]))
    axes = norm_axes(at["axes"], x.ndim + k, "layout.unsqueeze")
    it = iter(x.shape)
    return [x.reshape([1 if d in axes else next(it) for d in range(x.ndim + k)])]


# ---- 4.1.3 joining and splitting ------------------------------------------------------------

@register("layout.concat")
def concat(ins, at):
    xs = list(ins[0])
    axis = norm_axis(at["axis"], xs[0].ndim, "layout.concat")
    try:
        return [np.concatenate(xs, axis=axis)]
    except ValueError:
        fail("layout.concat", "input shapes differ outside 'axis': "
             + ", ".join(str(list(x.shape)) for x in xs))


@register("layout.split")
def split(ins, at):
    x = np.asarray(ins[0])
    axis = norm_axis(at["axis"], x.ndim, "layout.split")
    z = x.shape[axis]
    sizes, count = at.get("sizes"), at.get("count")
    if sizes is None:
        if count is None or count <= 0 or z % count:
            fail("layout.split", f"'count'={count} must be positive and divide the extent {z}",
                 hint="or give 'sizes'")
        sizes = (z // count,) * count
    sizes = [int(v) for v in seq(sizes)]
    if count is not None and len(sizes) != count:
        fail("layout.split", f"length of 'sizes' {sizes} must equal 'count'={count}")
    if any(v < 0 for v in sizes) or sum(sizes) != z:
        fail("layout.split", f"'sizes' {sizes} must be non-negative and sum to the extent {z} "
             f"at dimension 'axis'={axis}")
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


@register("layout.stack")
def stack(ins, at):
    xs = list(ins[0])
    rank = xs[0].ndim
    sq = bool(at.get("squeeze", False))
    axis = int(at["axis"])
    if sq:  # inputs carry a singleton at 'axis' that is replaced by the pack dimension
        axis = norm_axis(axis, rank, "layout.stack")
        return [np.concatenate(xs, axis=axis)]
    if not -rank - 1 <= axis <= rank:
        fail("layout.stack", f"'axis' must be between -input-rank and input-rank; got {axis}")
    return [np.stack(xs, axis=axis if axis >= 0 else axis + rank + 1)]


@register("layout.unstack")
def unstack(ins, at):
    x = np.asarray(ins[0])
    axis = norm_axis(at["axis"], x.ndim, "layout.unstack")
    sq = bool(at.get("squeeze", True))
    parts = np.split(x, x.shape[axis], axis=axis)
    return [p.squeeze(axis) if sq else p for p in parts]


# ---- 4.1.4 expanding and shrinking ----------------------------------------------------------

def _axes_default(op, x, at):
    axes = at.get("axes")
    return tuple(range(x.ndim)) if axes is None else norm_axes(axes, x.ndim, op)


@register("layout.tile")
def tile(ins, at):
    x = np.asarray(ins[0])
    axes = _axes_default("layout.tile", x, at)
    reps = pack(at["repeats"], len(axes), "layout.tile", "repeats")
    full = [1] * x.ndim
    for a, r in zip(axes, reps):
        if r <= 0:
            fail("layout.tile", f"'repeats' must be positive; got {list(reps)}")
        full[a] = int(r)
    check_alloc("layout.tile", [n * r for n, r in zip(x.shape, full)], x.dtype)
    return [np.tile(x, full)]


@register("layout.broadcast")
def broadcast(ins, at):
    x = np.asarray(ins[0])
    axes = _axes_default("layout.broadcast", x, at)
    shape = pack(at["shape"], len(axes), "layout.broadcast", "shape")
    out = list(x.shape)
    for a, e in zip(axes, shape):
        if not (x.shape[a] == 1 or e == 1 or x.shape[a] == e):
            fail("layout.broadcast", f"input.shape or 'shape' must be 1 or equal at axis {a}: "
                 f"{x.shape[a]} vs {e}")
        out[a] = x.shape[a] if e == 1 else int(e)
    check_alloc("layout.broadcast", out, x.dtype)
    return [np.broadcast_to(x, out).copy()]


@register("layout.slice")
def slice_(ins, at):
    x = np.asarray(ins[0])
    axes = _axes_default("layout.slice", x, at)
    k = len(axes)
    begin = pack(at["begin"], k, "layout.slice", "begin")
    end = pack(at["end"], k, "layout.slice", "end")
    stride = pack(at.get("stride", 1), k, "layout.slice", "stride")
    index = [slice(None)] * x.ndim
    for a, b, e, st in zip(axes, begin, end, stride):
        s = x.shape[a]
        if st == 0:
            fail("layout.slice", "'stride' must be non-zero")
        if not 0 <= b < s:
            fail("layout.slice", f"'begin' {b} must be in [0, {s}) at axis {a}")
        e_ = min(max(e, -1), s)   # _end = end >? -1 <? s[axes]
        if (st > 0 and e_ < b) or (st < 0 and e_ > b):
            fail("layout.slice", f"'end' {e} is on the wrong side of 'begin' {b} for stride {st}")
        count = max(ceil_div(e_ - b, st), 0)
        index[a] = b + st * np.arange(count)
    out = x
    for a in range(x.ndim):  # one axis at a time keeps numpy from pairing fancy indices
        if not isinstance(index[a], slice):
            out = np.take(out, index[a], axis=a)
    return [np.ascontiguousarray(out)]


_PAD_MODES = {"CONSTANT": "constant", "REFLECT": "reflect", "REPLICATE": "edge",
              "SYMMETRIC": "symmetric"}


@register("layout.pad")
def pad(ins, at):
    x = np.asarray(ins[0])
    value = ins[1] if len(ins) > 1 else None
    axes = _axes_default("layout.pad", x, at)
    k = len(axes)
    padding = pack(at["padding"], 2 * k, "layout.pad", "padding")
    method = at.get("method", "CONSTANT")
    if method not in _PAD_MODES:
        fail("layout.pad", f"'method' must be one of {list(_PAD_MODES)}; got {method!r}")
    if any(p < 0 for p in padding):
        fail("layout.pad", f"'padding' must be non-negative; got {list(padding)}")
    widths = [(0, 0)] * x.ndim
    for i, a in enumerate(axes):
        widths[a] = (int(padding[i]), int(padding[k + i]))
    check_alloc("layout.pad", [n + lo + hi for n, (lo, hi) in zip(x.shape, widths)], x.dtype)
    if method == "CONSTANT":
        cval = 0 if value is None else np.asarray(value).reshape(())
        return [np.pad(x, widths, mode="constant", constant_values=cval)]
    return [np.pad(x, widths, mode=_PAD_MODES[method])]


# ---- 4.1.5 reordering -----------------------------------------------------------------------

@register("layout.transpose")
def transpose(ins, at):
    x = np.asarray(ins[0])
    axis = norm_axis(at.get("axis", 0), x.ndim, "layout.transpose") if x.ndim else 0
    perm = at.get("perm")
    # default [d-1:-1:-1]: reverses the dimensions from 'axis' on
    perm = list(range(x.ndim - 1, axis - 1, -1)) if perm is None else \
        [p + x.ndim if p < 0 else p for p in seq(perm)]
    if sorted(perm) != list(range(axis, x.ndim)):
        fail("layout.transpose", f"'perm' {list(seq(at.get('perm')))} must be a permutation of "
             f"the dimensions {axis}..{x.ndim - 1}")
    return [np.transpose(x, list(range(axis)) + perm)]


def _block_layout(op, x, at):
    bs = [int(v) for v in seq(at["block_size"])]
    d = len(bs)
    fmt = at.get("data_format", "NCX")
    if fmt not in ("NCX", "NXC"):
        fail(op, f"'data_format' must be one of ['NCX', 'NXC']; got {fmt!r}")
    if x.ndim != d + 2:
        fail(op, f"input rank {x.ndim} does not match {d} block sizes + 2")
    if min(bs) <= 0:
        fail(op, f"'block_size' must be positive; got {bs}")
    return bs, d, fmt == "NCX", bool(at.get("blocks_first", True))


def _split_spatial(op, x, bs, d, ncx):
    sa = 2 if ncx else 1
    s = x.shape[sa:sa + d]
    if any(e % b for e, b in zip(s, bs)):
        fail(op, f"spatial size {list(s)} must be divisible by 'block_size' {bs}")
    inner = [v for e, b in zip(s, bs) for v in (e // b, b)]
    return x.reshape(x.shape[:sa] + tuple(inner) + x.shape[sa + d:]), sa


@register("layout.space_to_batch")
def space_to_batch(ins, at):
    x = np.asarray(ins[0])
    bs, d, ncx, bf = _block_layout("layout.space_to_batch", x, at)
    r, sa = _split_spatial("layout.space_to_batch", x, bs, d, ncx)
    sdims = list(range(sa, sa + 2 * d, 2))
    perm = [0] * (not bf) + [s + 1 for s in sdims] + [0] * bf + [1] * ncx + sdims + [2 * d + 1] * (not ncx)
    t = np.transpose(r, perm)
    return [t.reshape((-1,) + t.shape[d + 1:])]


@register("layout.space_to_depth")
def space_to_depth(ins, at):
    x = np.asarray(ins[0])
    bs, d, ncx, bf = _block_layout("layout.space_to_depth", x, at)
    r, sa = _split_spatial("layout.space_to_depth", x, bs, d, ncx)
    sdims = list(range(sa, sa + 2 * d, 2))
    cdim = 1 if ncx else 2 * d + 1
    cdims = [s + 1 for s in sdims] + [cdim] if bf else [cdim] + [s + 1 for s in sdims]
    perm = [0] + cdims + sdims if ncx else [0] + sdims + cdims
    t = np.transpose(r, perm)
    ca = 1 if ncx else d + 1
    return [t.reshape(t.shape[:ca] + (-1,) + t.shape[ca + d + 1:])]


@register("layout.batch_to_space")
def batch_to_space(ins, at):
    x = np.asarray(ins[0])
    bs, d, ncx, bf = _block_layout("layout.batch_to_space", x, at)
    vol = math.prod(bs)
    if x.shape[0] % vol:
        fail("layout.batch_to_space", f"batch size {x.shape[0]} must be divisible by the "
             f"product of 'block_size' {bs}")
    split_shape = bs + [x.shape[0] // vol] if bf else [x.shape[0] // vol] + bs
    r = x.reshape(tuple(split_shape) + x.shape[1:])
    batch_dim = d if bf else 0
    bdims = list(range(0, d)) if bf else list(range(1, d + 1))
    sdims = list(range(d + 2, 2 * d + 2)) if ncx else list(range(d + 1, 2 * d + 1))
    perm = [batch_dim] + [d + 1] * ncx + [v for p in zip(sdims, bdims) for v in p] + [2 * d + 1] * (not ncx)
    t = np.transpose(r, perm)
    sa = 2 if ncx else 1
    s = [t.shape[sa + 2 * i] * t.shape[sa + 2 * i + 1] for i in range(d)]
    return [t.reshape(t.shape[:sa] + tuple(s) + t.shape[sa + 2 * d:])]


@register("layout.depth_to_space")
def depth_to_space(ins, at):
    x = np.asarray(ins[0])
    bs, d, ncx, bf = _block_layout("layout.depth_to_space", x, at)
    vol = math.prod(bs)
    ca = 1 if ncx else d + 1
    c = x.shape[ca]
    if c % vol:
        fail("layout.depth_to_space", f"depth {c} must be divisible by the product of 'block_size' {bs}")
    split_shape = bs + [c // vol] if bf else [c // vol] + bs
    r = x.reshape(x.shape[:ca] + tuple(split_shape) + x.shape[ca + 1:])
    cdim = ca + (d if bf else 0)
    bdims = [ca + v for v in (range(0, d) if bf else range(1, d + 1))]
    sdims = list(range(d + 2, 2 * d + 2)) if ncx else list(range(1, d + 1))
    perm = [0] + [cdim] * ncx + [v for p in zip(sdims, bdims) for v in p] + [cdim] * (not ncx)
    t = np.transpose(r, perm)
    sa = 2 if ncx else 1
    s = [t.shape[sa + 2 * i] * t.shape[sa + 2 * i + 1] for i in range(d)]
    return [t.reshape(t.shape[:sa] + tuple(s) + t.shape[sa + 2 * d:])]


@register("layout.shuffle")
def shuffle(ins, at):
    x = np.asarray(ins[0])
    axis = norm_axis(at["axis"], x.ndim, "layout.shuffle")
    g = int(at["groups"])
    c = x.shape[axis]
    if g <= 0 or c % g:
        fail("layout.shuffle", f"'groups'={g} must be positive and divide the extent {c} at 'axis'")
    r = x.reshape(x.shape[:axis] + (g, c // g) + x.shape[axis + 1:])
    return [np.swapaxes(r, axis, axis + 1).reshape(x.shape)]


# ---- 4.1.6 indexing -------------------------------------------------------------------------

@register("layout.nonzero")
def nonzero(ins, at):
    x = np.asarray(ins[0])
    return [np.stack(np.nonzero(x)).astype(np.int64).reshape(x.ndim, -1)]


def _check_index(op, index, extent, what):
    index = np.asarray(index)
    if index.size and (index.min() < 0 or index.max() >= extent):
        raise DataError(f"{op}: {what} has values outside [0, {extent}) "
                        f"(min {index.min()}, max {index.max()})",
                        hint="indices address the data tensor and must be in range")


@register("layout.gather")
def gather(ins, at):
    data, index = np.asarray(ins[0]), np.asarray(ins[1])
    axis = norm_axis(at["axis"], data.ndim, "layout.gather")
    _check_index("layout.gather", index, data.shape[axis], "'index'")
    return [np.take(data, index, axis=axis)]


def _nd_index(op, data, indices, bd):
    d = indices.shape[-1]
    for j in range(d):
        _check_index(op, indices[..., j], data.shape[bd + j], f"'indices'[..., {j}]")
    b = data.shape[:bd]
    z = indices.shape[bd:-1]
    grids = np.meshgrid(*[np.arange(e) for e in b], indexing="ij") if bd else []
    bix = tuple(g.reshape(b + (1,) * len(z)) for g in grids)
    return bix + tuple(indices[..., j] for j in range(d))


@register("layout.gather_nd")
def gather_nd(ins, at):
    data, indices = np.asarray(ins[0]), np.asarray(ins[1])
    bd = int(at.get("batch_dims", 0))
    return [data[_nd_index("layout.gather_nd", data, indices, bd)]]


@register("layout.scatter")
def scatter(ins, at):
    data, indices, updates = (np.asarray(v) for v in ins)
    axis = norm_axis(at["axis"], data.ndim, "layout.scatter")
    _check_index("layout.scatter", indices, data.shape[axis], "'indices'")
    out = data.copy()
    np.put_along_axis(out, indices, updates, axis=axis)   # later items win, as the loop order
    return [out]


@register("layout.scatter_nd")
def scatter_nd(ins, at):
    data, indices, updates = (np.asarray(v) for v in ins)
    bd = int(at.get("batch_dims", 0))
    out = data.copy()
    out[_nd_index("layout.scatter_nd", data, indices, bd)] = updates
    return [out]
