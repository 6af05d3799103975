"""Transform operators (cvm-formalization, "Transform Operator"): they move or select
values, so every output keeps the precision of its data input (concatenate: the
largest of its inputs).

Decisions where the text is ambiguous or damaged (docs/cvm.md):
- flatten produces a 1-D tensor (the formula's single flatten_index), unlike NNVM.
- tile: SX/SR are defined for p in [K-N, K) (the text's [K-N, K-1) drops the last axis).
- expand_dims: a negative axis maps to axis + N + 1 (the text's axis + N would turn the
  allowed axis = -N-1 into -1); num_newaxis defaults to 1.
- reshape's attribute is `shape` (the test parameters' name; the prose says target_shape).
- squeeze of every axis gives shape (1,): CVM tensors keep rank >= 1.
- strided_slice clips begin/end to [b_range, e_range] (the text's e_range - 1 would
  drop the last element of every full slice); slice and strided_slice are one operator.
- take with an axis has rank M + N - 1 (the text's index ranges are off by one).
"""
from __future__ import annotations

import numpy as np

from .opdef import MAX_ATTR, MIN_ATTR, REQUIRED, OpDef, define, same_precision

POS_RANGE = f"the formalization's [1, max_attr) = [1, {MAX_ATTR})"


# ---- repeat ---------------------------------------------------------------------------------
def _repeat_infer(chk, shapes, attrs):
    (s,) = shapes
    axis = chk.int_attr(attrs, "axis")
    chk.require(0 <= axis < len(s), f"attribute 'axis' = {axis} is outside [0, {len(s)}) for the "
                f"rank-{len(s)} {chk.tensor('X')}", hint=f"use an axis in [0, {len(s)})")
    r = chk.int_attr(attrs, "repeats", 1, bound_doc="repeats is in [1, +inf)")
    return [s[:axis] + (s[axis] * r,) + s[axis + 1:]]


define(OpDef("repeat", ("X",), ("Y",), {"repeats": REQUIRED, "axis": REQUIRED}, _repeat_infer,
             same_precision, lambda inputs, a: [np.repeat(inputs[0], a["repeats"], axis=a["axis"])],
             doc="Y[.., d, ..] = X[.., floor(d / repeats), ..]"))


# ---- tile -------------------------------------------------------------------------------------
def _tile_infer(chk, shapes, attrs):
    (s,) = shapes
    reps = chk.ints_attr(attrs, "reps", lo=1, hi=MAX_ATTR, bound_doc=POS_RANGE)
    chk.require(len(reps) > 0, "attribute 'reps' is empty; it needs at least one repetition count")
    k = max(len(s), len(reps))
    sx = (1,) * (k - len(s)) + tuple(s)
    sr = (1,) * (k - len(reps)) + tuple(reps)
    return [tuple(a * b for a, b in zip(sx, sr))]


define(OpDef("tile", ("X",), ("Y",), {"reps": REQUIRED}, _tile_infer, same_precision,
             lambda inputs, a: [np.tile(inputs[0], a["reps"])], doc="Y[k] = X[k mod n] (aligned right)"))


# ---- flatten -------------------------------------------------------------------------------------
define(OpDef("flatten", ("X",), ("Y",), {},
             lambda chk, shapes, attrs: [(int(np.prod(shapes[0], dtype=np.int64)),)],
             same_precision, lambda inputs, a: [inputs[0].reshape(-1)], doc="1-D, row-major order"))


# ---- concatenate ----------------------------------------------------------------------------------
def _concat_infer(chk, shapes, attrs):
    chk.require(len(shapes) >= 1, "needs at least one input")
    first = shapes[0]
    n = len(first)
    axis = chk.int_attr(attrs, "axis")
    chk.require(0 <= axis < n, f"attribute 'axis' = {axis} is outside [0, {n}) for rank-{n} inputs",
                hint=f"use an axis in [0, {n})")
    for i, s in enumerate(shapes[1:], 1):
        chk.require(len(s) == n and all(a == b for j, (a, b) in enumerate(zip(s, first)) if j != axis),
                    f"input {i} has shape {list(s)} but input 0 has shape {list(first)}; all extents "
                    f"except axis {axis} must agree")
    total = sum(s[axis] for s in shapes)
    return [first[:axis] + (total,) + first[axis + 1:]]


define(OpDef("concatenate", ("X",), ("Y",), {"axis": 0}, _concat_infer,
             lambda chk, precs, shapes, attrs: [max(precs)],
             lambda inputs, a: [np.concatenate(inputs, axis=a["axis"])], variadic=True,
             doc="join along axis"))


# ---- expand_dims ---------------------------------------------------------------------------------
def _expand_axis(chk, s, attrs):
    n = len(s)
    axis = chk.int_attr(attrs, "axis", -n - 1, n + 1, bound_doc="[-N-1, N+1)")
    chk.int_attr(attrs, "num_newaxis", MIN_ATTR, MAX_ATTR,
                 bound_doc=f"the formalization's [min_attr, max_attr) = [{MIN_ATTR}, {MAX_ATTR})")
    return axis + n + 1 if axis < 0 else axis


def _expand_infer(chk, shapes, attrs):
    (s,) = shapes
    ra = _expand_axis(chk, s, attrs)
    return [s[:ra] + (1,) * attrs["num_newaxis"] + s[ra:]]


def _expand_ref(inputs, attrs):
    (x,) = inputs
    n = x.ndim
    ra = attrs["axis"] + n + 1 if attrs["axis"] < 0 else attrs["axis"]
    return [x.reshape(x.shape[:ra] + (1,) * attrs["num_newaxis"] + x.shape[ra:])]


define(OpDef("expand_dims", ("X",), ("Y",), {"axis": REQUIRED, "num_newaxis": 1}, _expand_infer,
             same_precision, _expand_ref, doc="insert num_newaxis unit axes before real_axis"))


# ---- reshape -----------------------------------------------------------------------------------------
def _reshape_infer(chk, shapes, attrs):
    (s,) = shapes
    target = chk.ints_attr(attrs, "shape", lo=1, bound_doc="extents are positive")
    chk.require(len(target) > 0, "attribute 'shape' is empty")
    a = int(np.prod(s, dtype=np.int64))
    b = int(np.prod(target, dtype=np.int64))
    chk.require(a == b, f"attribute 'shape' = {list(target)} has {b} elements but {chk.tensor('X')} of "
                f"shape {list(s)} has {a}", hint="the products of the two shapes must be equal")
    return [target]


define(OpDef("reshape", ("X",), ("Y",), {"shape": REQUIRED}, _reshape_infer, same_precision,
             lambda inputs, a: [inputs[0].reshape(a["shape"])], doc="row-major reshape"))


# ---- squeeze -----------------------------------------------------------------------------------------
def squeeze_axes(chk, s, attrs) -> set[int]:
    n = len(s)
    axes = chk.ints_attr(attrs, "axes")
    if not axes:
        return {i for i in range(n) if s[i] == 1}
    real = {chk.axis(a, n, f"attribute 'axes' = {list(axes)}: axis") for a in axes}
    for i in sorted(real):
        chk.require(s[i] == 1, f"attribute 'axes' = {list(axes)} squeezes axis {i}, but {chk.tensor('X')} "
                    f"of shape {list(s)} has extent {s[i]} there; only extent-1 axes can be squeezed")
    return real


def _squeeze_infer(chk, shapes, attrs):
    (s,) = shapes
    real = squeeze_axes(chk, s, attrs)
    return [tuple(d for i, d in enumerate(s) if i not in real) or (1,)]


def _squeeze_ref(inputs, attrs):
    x = inputs[0]
    n = x.ndim
    real = {a + n if a < 0 else a for a in attrs["axes"]} or {i for i in range(n) if x.shape[i] == 1}
    return [x.reshape(tuple(d for i, d in enumerate(x.shape) if i not in real) or (1,))]


define(OpDef("squeeze", ("X",), ("Y",), {"axes": ()}, _squeeze_infer, same_precision, _squeeze_ref,
             doc="drop extent-1 axes"))


# ---- transpose -------------------------------------------------------------------------------------
def transpose_axes(chk, s, attrs) -> tuple[int, ...]:
    n = len(s)
    axes = chk.ints_attr(attrs, "axes")
    if not axes:
        return tuple(range(n - 1, -1, -1))
    chk.require(len(axes) == n, f"attribute 'axes' = {list(axes)} has {len(axes)} entries; it must be "
                f"empty or list all {n} axes", hint="give a permutation of the axes")
    real = tuple(chk.axis(a, n, f"attribute 'axes' = {list(axes)}: axis") for a in axes)
    chk.require(len(set(real)) == n, f"attribute 'axes' = {list(axes)} is not a permutation of the "
                f"{n} axes (after adding {n} to negative axes)")
    return real


def _transpose_infer(chk, shapes, attrs):
    (s,) = shapes
    perm = transpose_axes(chk, s, attrs)
    return [tuple(s[p] for p in perm)]


def _transpose_ref(inputs, attrs):
    x = inputs[0]
    n = x.ndim
    perm = tuple(a + n if a < 0 else a for a in attrs["axes"]) or None
    return [np.ascontiguousarray(np.transpose(x, perm))]


define(OpDef("transpose", ("X",), ("Y",), {"axes": ()}, _transpose_infer, same_precision, _transpose_ref,
             doc="Y[d_axes0, ...] = X[d_0, ...]; no axes reverses"))


# ---- slice / strided_slice ---------------------------------------------------------------------------
def slice_bounds(chk, s, attrs):
    """(b_vec, s_arr, extents) per the formalization, with the clip repair described above."""
    n = len(s)
    begin = chk.ints_attr(attrs, "begin")
    end = chk.ints_attr(attrs, "end")
    strides = chk.ints_attr(attrs, "strides")
    for name, v in (("begin", begin), ("end", end), ("strides", strides)):
        chk.require(len(v) <= n, f"attribute '{name}' = {list(v)} has more entries than the rank {n} of "
                    f"{chk.tensor('X')}")
    b_vec, s_arr, ext = [], [], []
    for i in range(n):
        st = strides[i] if i < len(strides) else 1
        chk.require(st != 0, f"attribute 'strides' = {list(strides)}: strides[{i}] is 0; strides must be "
                    "non-zero")
        b = begin[i] + s[i] if i < len(begin) and begin[i] < 0 else (begin[i] if i < len(begin) else 0)
        e = end[i] + s[i] if i < len(end) and end[i] < 0 else (end[i] if i < len(end) else s[i])
        lo, hi = (-1, s[i] - 1) if st < 0 else (0, s[i])
        b = min(max(b, lo), hi)
        e = min(max(e, lo), hi)
        ok = b < e if st > 0 else e < b
        chk.require(ok, f"axis {i}: begin {b} and end {e} (after wrapping negatives and clipping to "
                    f"[{lo}, {hi}]) select nothing with stride {st}",
                    hint="with a positive stride begin must be below end, with a negative one above it")
        b_vec.append(b)
        s_arr.append(st)
        ext.append(-((b - e) // st))   # ceil((e - b) / st) for either sign of st
    return b_vec, s_arr, ext


def _slice_infer(chk, shapes, attrs):
    return [tuple(slice_bounds(chk, shapes[0], attrs)[2])]


def _slice_ref(inputs, attrs):
    x = inputs[0]
    chk = _SliceSilent()
    b_vec, s_arr, ext = slice_bounds(chk, x.shape, attrs)
    index = tuple(np.arange(e, dtype=np.int64) * st + b for b, st, e in zip(b_vec, s_arr, ext))
    return [x[np.ix_(*index)]]


class _SliceSilent:
    def ints_attr(self, attrs, name, **kw):
        return tuple(attrs[name])

    def require(self, *a, **k):
        pass

    def tensor(self, name):
        return name


_SLICE = OpDef("strided_slice", ("X",), ("Y",), {"begin": (), "end": (), "strides": ()}, _slice_infer,
               same_precision, _slice_ref, doc="Y[d] = X[b_vec + s_arr * d]")
define(_SLICE, "slice")


# ---- take, cvm_lut -------------------------------------------------------------------------------------
def _take_infer_core(chk, xs, ids, axis):
    if axis is None:
        return tuple(ids)
    n = len(xs)
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        chk.fail(f"attribute 'axis' = {axis!r} is neither an integer nor None")
    ra = chk.axis(int(axis), n, "attribute 'axis'")
    return tuple(xs[:ra]) + tuple(ids) + tuple(xs[ra + 1:])


def take_values(x, indices, axis):
    if axis is None:
        flat = x.reshape(-1)
        return flat[np.clip(indices, 0, flat.size - 1)]
    ra = axis + x.ndim if axis < 0 else axis
    return np.take(x, np.clip(indices, 0, x.shape[ra] - 1), axis=ra)


define(OpDef("take", ("X", "indices"), ("Y",), {"axis": None},
             lambda chk, shapes, attrs: [_take_infer_core(chk, shapes[0], shapes[1], attrs["axis"])],
             same_precision, lambda inputs, a: [take_values(inputs[0], inputs[1], a["axis"])],
             doc="gather with indices clipped into range"))
define(OpDef("cvm_lut", ("indices", "X"), ("Y",), {},
             lambda chk, shapes, attrs: [tuple(shapes[0])],
             lambda chk, precs, shapes, attrs: [precs[1]],
             lambda inputs, a: [take_values(inputs[1], inputs[0], None)],
             doc="take(X, indices, axis=None): a table lookup"))


# ---- slice_like -----------------------------------------------------------------------------------------
def slice_like_axes(chk, xs, ls, attrs):
    n, m = len(xs), len(ls)
    axes = chk.ints_attr(attrs, "axes")
    if not axes:
        chk.require(m <= n, f"input shape_like has rank {m}, larger than the rank {n} of {chk.tensor('X')}")
        real = list(range(m))
    else:
        real = []
        for a in axes:
            chk.require(-n <= a < m, f"attribute 'axes' = {list(axes)}: axis {a} is outside [-{n}, {m}) "
                        f"(-N, M) for X of rank {n} and shape_like of rank {m}")
            r = a + n if a < 0 else a
            chk.require(r < m, f"attribute 'axes' = {list(axes)}: axis {a} is axis {r} of X, which "
                        f"shape_like (rank {m}) does not have")
            real.append(r)
    for j in real:
        chk.require(ls[j] <= xs[j], f"shape_like extent {ls[j]} on axis {j} exceeds {chk.tensor('X')}'s "
                    f"extent {xs[j]}; slice_like can only shrink")
    return set(real)


def _slice_like_infer(chk, shapes, attrs):
    xs, ls = shapes
    real = slice_like_axes(chk, xs, ls, attrs)
    return [tuple(ls[j] if j in real else xs[j] for j in range(len(xs)))]


def _slice_like_ref(inputs, attrs):
    x, like = inputs
    n = x.ndim
    real = {a + n if a < 0 else a for a in attrs["axes"]} or set(range(like.ndim))
    return [x[tuple(slice(0, like.shape[j]) if j in real else slice(None) for j in range(n))].copy()]


define(OpDef("slice_like", ("X", "shape_like"), ("Y",), {"axes": ()}, _slice_like_infer, same_precision,
             _slice_like_ref, doc="crop X to shape_like's extents on axes"))
