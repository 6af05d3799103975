"""ONNX → NNEF 2.0, part three: shapes and layout (Reshape, Transpose, Squeeze, Concat, Slice,
Gather, Pad, Resize, ...).

The inputs that say how to reshape or slice (shape, axes, starts, pads, sizes, ...) must be
constants after folding: qsim graphs have static shapes.
"""
from __future__ import annotations

import math

import numpy as np

from .. import ir, numerics
from ..limits import check_tensor_size
from .builder import F32, I64, NodeContext, Value, constant_value
from .convert_base import broadcast_shape, converter, folder


def _check_size(ctx: NodeContext, shape, itemsize: int) -> None:
    check_tensor_size([int(d) for d in shape], itemsize, f"result of {ctx.where}", ctx.builder.location)


def reshape_to(ctx: NodeContext, x: Value, shape: tuple, final: bool = True) -> Value:
    return ctx.emit1("layout.reshape", [x], {"axis": 0, "rank": x.rank, "shape": tuple(shape)}, x.dtype,
                     shape, final)


# ---------------------------------------------------------------------- Reshape, Flatten

def _reshape_target(ctx: NodeContext, in_shape: tuple) -> tuple:
    shape = ctx.ints(1, "shape")
    allow_zero = ctx.since >= 14 and bool(ctx.attr("allowzero", 0))
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        ctx.fail(f"shape {shape} may hold at most one -1 and no other negative value")
    if allow_zero and 0 in shape and -1 in shape:
        ctx.fail(f"shape {shape} holds both 0 (allowzero) and -1")
    resolved = []
    for i, s in enumerate(shape):
        if s == 0 and not allow_zero:
            if i >= len(in_shape):
                ctx.fail(f"shape {shape} copies dimension {i} (0), which input {list(in_shape)} lacks")
            s = in_shape[i]
        resolved.append(s)
    volume = math.prod(in_shape)
    if -1 in resolved:
        known = math.prod(s for s in resolved if s != -1)
        if known == 0 or volume % known:
            ctx.fail(f"shape {shape} cannot hold the {volume} elements of input {list(in_shape)}")
        resolved[resolved.index(-1)] = volume // known
    if math.prod(resolved) != volume:
        ctx.fail(f"shape {shape} (= {resolved}) does not have the {volume} elements of input {list(in_shape)}")
    return tuple(resolved)


@converter("Reshape")
def _reshape(ctx: NodeContext) -> list:
    x = ctx.input(0, "data")
    return [reshape_to(ctx, x, _reshape_target(ctx, x.shape))]


@folder("Reshape")
def _fold_reshape(ctx: NodeContext, arrays: list) -> list:
    return [arrays[0].reshape(_reshape_target(ctx, arrays[0].shape))]


def _flatten_shape(ctx: NodeContext, shape: tuple) -> tuple:
    rank = len(shape)
    axis = int(ctx.attr("axis", 1))
    if not -rank <= axis <= rank:
        ctx.fail(f"axis {axis} is outside [-{rank}, {rank}]")
    axis = axis + rank if axis < 0 else axis
    return (math.prod(shape[:axis]), math.prod(shape[axis:]))


@converter("Flatten")
def _flatten(ctx: NodeContext) -> list:
    x = ctx.input(0, "input")
    return [reshape_to(ctx, x, _flatten_shape(ctx, x.shape))]


@folder("Flatten")
def _fold_flatten(ctx: NodeContext, arrays: list) -> list:
    return [arrays[0].reshape(_flatten_shape(ctx, arrays[0].shape))]


# ---------------------------------------------------------------------- Transpose

def _perm(ctx: NodeContext, rank: int) -> tuple:
    perm = ctx.attr("perm")
    if perm is None:
        return tuple(range(rank - 1, -1, -1))
    if sorted(perm) != list(range(rank)):
        ctx.fail(f"perm {perm} is not a permutation of 0..{rank - 1}")
    return tuple(perm)


@converter("Transpose")
def _transpose(ctx: NodeContext) -> list:
    x = ctx.input(0, "data")
    perm = _perm(ctx, x.rank)
    shape = tuple(x.shape[p] for p in perm)
    return [ctx.emit1("layout.transpose", [x], {"axis": 0, "perm": perm}, x.dtype, shape, final=True)]


@folder("Transpose")
def _fold_transpose(ctx: NodeContext, arrays: list) -> list:
    return [np.ascontiguousarray(np.transpose(arrays[0], _perm(ctx, arrays[0].ndim)))]


# ---------------------------------------------------------------------- Squeeze, Unsqueeze

def _axes_operand(ctx: NodeContext) -> list[int] | None:
    """Squeeze/Unsqueeze axes: an attribute before opset 13, the second input since."""
    if ctx.since >= 13:
        return ctx.ints(1, "axes", required=ctx.op_type == "Unsqueeze")
    return ctx.attr("axes")


def _squeeze_axes(ctx: NodeContext, shape: tuple) -> tuple:
    axes = _axes_operand(ctx)
    if axes is None:
        return tuple(i for i, e in enumerate(shape) if e == 1)
    axes = ctx.axes(axes, len(shape))
    if any(shape[a] != 1 for a in axes):
        ctx.fail(f"cannot squeeze axes {list(axes)} of shape {list(shape)}: their extents must be 1")
    return axes


def _unsqueeze_axes(ctx: NodeContext, rank: int) -> tuple:
    axes = _axes_operand(ctx)
    if axes is None:
        ctx.fail("'axes' is missing")
    return tuple(sorted(ctx.axes(axes, rank + len(axes))))


def _unsqueezed(shape: tuple, axes: tuple) -> tuple:
    it = iter(shape)
    return tuple(1 if d in axes else next(it) for d in range(len(shape) + len(axes)))


@converter("Squeeze")
def _squeeze(ctx: NodeContext) -> list:
    x = ctx.input(0, "data")
    axes = _squeeze_axes(ctx, x.shape)
    if not axes:
        return [x]
    shape = tuple(e for i, e in enumerate(x.shape) if i not in axes)
    return [ctx.emit1("layout.squeeze", [x], {"axes": axes}, x.dtype, shape, final=True)]


@folder("Squeeze")
def _fold_squeeze(ctx: NodeContext, arrays: list) -> list:
    x = arrays[0]
    axes = _squeeze_axes(ctx, x.shape)
    return [x.reshape([e for i, e in enumerate(x.shape) if i not in axes])]


@converter("Unsqueeze")
def _unsqueeze(ctx: NodeContext) -> list:
    x = ctx.input(0, "data")
    axes = _unsqueeze_axes(ctx, x.rank)
    return [ctx.emit1("layout.unsqueeze", [x], {"axes": axes}, x.dtype, _unsqueezed(x.shape, axes), final=True)]


@folder("Unsqueeze")
def _fold_unsqueeze(ctx: NodeContext, arrays: list) -> list:
    x = arrays[0]
    return [x.reshape(_unsqueezed(x.shape, _unsqueeze_axes(ctx, x.ndim)))]


# ---------------------------------------------------------------------- Concat, Split

def _concat_shape(ctx: NodeContext, shapes: list, dtypes: list) -> tuple[int, tuple]:
    if not shapes:
        ctx.fail("has no inputs")
    first = shapes[0]
    if len(set(dtypes)) > 1:
        ctx.fail(f"inputs have different element types {sorted(set(str(d) for d in dtypes))}")
    axis = ctx.axis(int(ctx.attr("axis", 0)), len(first))
    for s in shapes[1:]:
        if len(s) != len(first) or any(e != f for i, (e, f) in enumerate(zip(s, first)) if i != axis):
            ctx.fail(f"input shapes {list(first)} and {list(s)} differ outside axis {axis}")
    return axis, first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:]


@converter("Concat")
def _concat(ctx: NodeContext) -> list:
    values = [v for v in ctx.inputs if v is not None]
    axis, shape = _concat_shape(ctx, [v.shape for v in values], [v.dtype for v in values])
    values = [v for v in values if v.shape[axis] > 0] or values[:1]   # empty pieces add nothing
    if len(values) == 1:
        return [values[0]]
    return [ctx.emit1("layout.concat", values, {"axis": axis}, values[0].dtype, shape, final=True)]


@folder("Concat")
def _fold_concat(ctx: NodeContext, arrays: list) -> list:
    arrays = [a for a in arrays if a is not None]
    axis, shape = _concat_shape(ctx, [a.shape for a in arrays], [a.dtype for a in arrays])
    _check_size(ctx, shape, arrays[0].dtype.itemsize)
    return [np.concatenate(arrays, axis=axis)]


def _split_sizes(ctx: NodeContext, shape: tuple) -> tuple[int, list[int]]:
    axis = ctx.axis(int(ctx.attr("axis", 0)), len(shape))
    extent = shape[axis]
    sizes = ctx.ints(1, "split", required=False) if ctx.since >= 13 else ctx.attr("split")
    outputs = len(ctx.output_names)
    if sizes is None:
        count = int(ctx.attr("num_outputs", outputs))
        if count <= 0:
            ctx.fail(f"num_outputs {count} is not positive")
        chunk = numerics.ceil_div(extent, count)
        if ctx.attr("num_outputs") is None and extent % count:
            ctx.fail(f"extent {extent} does not split evenly into {count} outputs")
        sizes = [min(chunk, extent - i * chunk) for i in range(count)]
    if len(sizes) != outputs or any(s < 0 for s in sizes) or sum(sizes) != extent:
        ctx.fail(f"split sizes {sizes} must be {outputs} non-negative values that add up to {extent}")
    return axis, list(sizes)


@converter("Split")
def _split(ctx: NodeContext) -> list:
    x = ctx.input(0, "input")
    axis, sizes = _split_sizes(ctx, x.shape)
    if any(s == 0 for s in sizes):
        ctx.fail(f"split sizes {sizes} make an empty output", unsupported=True)
    outs = [(x.dtype, x.shape[:axis] + (s,) + x.shape[axis + 1:]) for s in sizes]
    names = [n or ctx.builder.fresh(f"{ctx.label}.unused") for n in ctx.output_names]
    return ctx.emit("layout.split", [x], {"axis": axis, "count": None, "sizes": tuple(sizes)}, outs, names)


@folder("Split")
def _fold_split(ctx: NodeContext, arrays: list) -> list:
    x = arrays[0]
    axis, sizes = _split_sizes(ctx, x.shape)
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


# ---------------------------------------------------------------------- Slice, Gather

def _slice_params(ctx: NodeContext, shape: tuple):
    """(axes, begin, end, step, out_shape) with ONNX's clamping of starts and ends."""
    starts, ends = ctx.ints(1, "starts"), ctx.ints(2, "ends")
    axes = ctx.ints(3, "axes", required=False)
    steps = ctx.ints(4, "steps", required=False)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        ctx.fail(f"starts, ends, axes and steps have lengths {len(starts)}, {len(ends)}, {len(axes)}, {len(steps)}")
    axes = ctx.axes(axes, len(shape))
    out = list(shape)
    begin, end = [], []
    for ax, b, e, st in zip(axes, starts, ends, steps):
        dim = shape[ax]
        if st == 0:
            ctx.fail("a step is 0")
        b = b + dim if b < 0 else b
        e = e + dim if e < 0 else e
        if st > 0:
            b, e = min(max(b, 0), dim), min(max(e, 0), dim)
        else:
            b, e = min(max(b, 0), dim - 1), min(max(e, -1), dim - 1)
        out[ax] = max(0, numerics.ceil_div(e - b, st))
        begin.append(b)
        end.append(e)
    return axes, begin, end, steps, tuple(out)


@converter("Slice")
def _slice(ctx: NodeContext) -> list:
    x = ctx.input(0, "data")
    axes, begin, end, steps, shape = _slice_params(ctx, x.shape)
    if any(e == 0 for e in shape):
        # an empty slice holds nothing to compute: it is an empty constant, which Concat drops
        # (a torch export's x[:, :0] pieces); an operator computing on it is refused (builder.emit)
        return [constant_value(ctx.output_names[0], np.zeros(shape, x.dtype.numpy))]
    if shape == x.shape and all(s == 1 for s in steps):
        return [x]
    attrs = {"axes": tuple(axes), "begin": tuple(begin), "end": tuple(end), "stride": tuple(steps)}
    return [ctx.emit1("layout.slice", [x], attrs, x.dtype, shape, final=True)]


@folder("Slice")
def _fold_slice(ctx: NodeContext, arrays: list) -> list:
    x = arrays[0]
    axes, begin, end, steps, _ = _slice_params(ctx, x.shape)
    index = [slice(None)] * x.ndim
    for ax, b, e, st in zip(axes, begin, end, steps):
        index[ax] = slice(b, None if e < 0 else e, st)
    return [np.ascontiguousarray(x[tuple(index)])]


def _gather_indices(ctx: NodeContext, indices: np.ndarray, extent: int) -> np.ndarray:
    if indices.dtype.kind not in "iu":
        ctx.fail(f"indices are {indices.dtype}, expected integers")
    if indices.size and (indices.min() < -extent or indices.max() >= extent):
        ctx.fail(f"indices {indices.reshape(-1)[:8].tolist()} are outside [-{extent}, {extent})")
    return np.where(indices < 0, indices + extent, indices).astype(np.int64)


def _as_slice(ctx: NodeContext, x: Value, axis: int, indices: np.ndarray) -> Value | None:
    """Constant indices that step evenly (a scalar, or a 1-D arithmetic progression) select a
    strided slice: layout.slice (+ layout.squeeze for a scalar), standard operators the
    quantizer moves without arithmetic (multi-head attention's q, k, v = proj[0], proj[1],
    proj[2] exports as Gather). Other indices stay a layout.gather."""
    flat = indices.reshape(-1)
    if indices.ndim > 1 or flat.size == 0:
        return None
    steps = np.diff(flat)
    step = int(steps[0]) if steps.size else 1
    if step == 0 or np.any(steps != step):
        return None
    begin, last = int(flat[0]), int(flat[-1])
    shape = x.shape[:axis] + (flat.size,) + x.shape[axis + 1:]
    attrs = {"axes": (axis,), "begin": (begin,), "end": (last + step,), "stride": (step,)}
    if indices.ndim == 1:
        return ctx.emit1("layout.slice", [x], attrs, x.dtype, shape, final=True)
    sliced = ctx.emit1("layout.slice", [x], attrs, x.dtype, shape)
    return ctx.emit1("layout.squeeze", [sliced], {"axes": (axis,)}, x.dtype, x.shape[:axis] + x.shape[axis + 1:],
                     final=True)


@converter("Gather")
def _gather(ctx: NodeContext) -> list:
    x, idx = ctx.input(0, "data"), ctx.input(1, "indices")
    axis = ctx.axis(int(ctx.attr("axis", 0)), x.rank)
    if idx.is_constant:
        indices = _gather_indices(ctx, idx.data, x.shape[axis])
        strided = _as_slice(ctx, x, axis, indices)
        if strided is not None:
            return [strided]
        idx = constant_value(ctx.builder.fresh(f"{idx.name}.index"), indices)
        ctx.builder.reserved.add(idx.name)
    elif idx.dtype not in (I64, ir.DType.I32):
        ctx.fail(f"indices are {idx.dtype}, expected int64 or int32")
    shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
    return [ctx.emit1("layout.gather", [x, idx], {"axis": axis}, x.dtype, shape, final=True)]


@folder("Gather")
def _fold_gather(ctx: NodeContext, arrays: list) -> list:
    x, idx = arrays
    axis = ctx.axis(int(ctx.attr("axis", 0)), x.ndim)
    _check_size(ctx, x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype.itemsize)
    return [np.take(x, _gather_indices(ctx, idx, x.shape[axis]), axis=axis)]


# ---------------------------------------------------------------------- Pad, Tile, Expand

_PAD_MODES = {"constant": "CONSTANT", "reflect": "REFLECT", "edge": "REPLICATE"}


def _pad_params(ctx: NodeContext, shape: tuple):
    mode = ctx.attr("mode", "constant")
    if mode not in _PAD_MODES:
        ctx.fail(f"mode {mode!r}", unsupported=True, hint="qsim pads with modes constant, reflect and edge")
    pads = ctx.ints(1, "pads")
    axes = ctx.ints(3, "axes", required=False) if ctx.since >= 18 else None
    axes = list(range(len(shape))) if axes is None else list(ctx.axes(axes, len(shape)))
    if len(pads) != 2 * len(axes):
        ctx.fail(f"pads {pads} must hold {2 * len(axes)} values (before and after per axis)")
    if any(p < 0 for p in pads):
        ctx.fail(f"pads {pads} are negative (cropping)", unsupported=True, hint="crop with Slice instead")
    k = len(axes)
    out = list(shape)
    for i, a in enumerate(axes):
        out[a] += pads[i] + pads[k + i]
        if mode == "reflect" and (pads[i] >= shape[a] or pads[k + i] >= shape[a]):
            ctx.fail(f"reflect padding {pads[i]}/{pads[k + i]} is not smaller than extent {shape[a]}")
        if mode == "edge" and shape[a] == 0 and pads[i] + pads[k + i]:
            ctx.fail("edge padding of an empty axis")
    return mode, axes, pads, tuple(out)


@converter("Pad")
def _pad(ctx: NodeContext) -> list:
    x = ctx.input(0, "data")
    mode, axes, pads, shape = _pad_params(ctx, x.shape)
    value = ctx.optional(2)
    if value is not None:
        if not value.is_constant or value.data.size != 1:
            ctx.fail("constant_value must be a scalar constant", unsupported=True)
        if float(value.data.reshape(-1)[0]) == 0.0 or mode != "constant":
            value = None
        else:
            value = ctx.scalar(float(value.data.reshape(-1)[0]), x.dtype)
    attrs = {"axes": tuple(axes), "padding": tuple(pads), "method": _PAD_MODES[mode]}
    return [ctx.emit1("layout.pad", [x, value], attrs, x.dtype, shape, final=True)]


@folder("Pad")
def _fold_pad(ctx: NodeContext, arrays: list) -> list:
    x = arrays[0]
    mode, axes, pads, shape = _pad_params(ctx, x.shape)
    _check_size(ctx, shape, x.dtype.itemsize)
    widths = [(0, 0)] * x.ndim
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[len(axes) + i])
    if mode == "constant":
        value = arrays[2] if len(arrays) > 2 and arrays[2] is not None else np.zeros((), x.dtype)
        return [np.pad(x, widths, mode="constant", constant_values=value.reshape(-1)[0] if value.size else 0)]
    return [np.pad(x, widths, mode={"reflect": "reflect", "edge": "edge"}[mode])]


@converter("Tile")
def _tile(ctx: NodeContext) -> list:
    x = ctx.input(0, "input")
    repeats = ctx.ints(1, "repeats")
    if len(repeats) != x.rank or any(r <= 0 for r in repeats):
        ctx.fail(f"repeats {repeats} must hold {x.rank} positive values")
    shape = tuple(e * r for e, r in zip(x.shape, repeats))
    attrs = {"axes": tuple(range(x.rank)), "repeats": tuple(repeats)}
    return [ctx.emit1("layout.tile", [x], attrs, x.dtype, shape, final=True)]


@folder("Tile")
def _fold_tile(ctx: NodeContext, arrays: list) -> list:
    x = arrays[0]
    repeats = ctx.ints(1, "repeats")
    if len(repeats) != x.ndim or any(r < 0 for r in repeats):
        ctx.fail(f"repeats {repeats} must hold {x.ndim} non-negative values")
    _check_size(ctx, [e * r for e, r in zip(x.shape, repeats)], x.dtype.itemsize)
    return [np.tile(x, repeats)]


def _expand_shape(ctx: NodeContext, shape: tuple) -> tuple:
    target = ctx.ints(1, "shape")
    if any(t < 0 for t in target):
        ctx.fail(f"shape {target} has negative values")
    return broadcast_shape(ctx, shape, tuple(target))


@converter("Expand")
def _expand(ctx: NodeContext) -> list:
    x = ctx.input(0, "input")
    shape = _expand_shape(ctx, x.shape)
    if shape == x.shape:
        return [x]
    lead = len(shape) - x.rank
    if lead:
        x = ctx.emit1("layout.unsqueeze", [x], {"axes": tuple(range(lead))}, x.dtype, (1,) * lead + x.shape)
    attrs = {"axes": tuple(range(len(shape))), "shape": shape}
    return [ctx.emit1("layout.broadcast", [x], attrs, x.dtype, shape, final=True)]


@folder("Expand")
def _fold_expand(ctx: NodeContext, arrays: list) -> list:
    shape = _expand_shape(ctx, arrays[0].shape)
    _check_size(ctx, shape, arrays[0].dtype.itemsize)
    return [np.broadcast_to(arrays[0], shape).copy()]


# ---------------------------------------------------------------------- Resize

_TRANSFORMS = {"half_pixel": "SYMMETRIC", "pytorch_half_pixel": "SYMMETRIC", "asymmetric": "ASYMMETRIC",
               "align_corners": "ALIGNED"}
_ROUNDING = {"round_prefer_floor": "ROUND_PREFER_FLOOR", "round_prefer_ceil": "ROUND_PREFER_CEIL",
             "floor": "FLOOR", "ceil": "CEIL"}


@converter("Resize")
def _resize(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "X"), "X")
    mode = ctx.attr("mode", "nearest")
    transform = ctx.attr("coordinate_transformation_mode", "half_pixel")
    if mode not in ("nearest", "linear", "cubic"):
        ctx.fail(f"mode {mode!r} is not nearest, linear or cubic")
    if transform not in _TRANSFORMS:
        ctx.fail(f"coordinate_transformation_mode {transform!r}", unsupported=True,
                 hint="qsim resizes with half_pixel, pytorch_half_pixel, asymmetric and align_corners")
    if ctx.attr("antialias", 0) or ctx.attr("exclude_outside", 0):
        ctx.fail("antialias / exclude_outside", unsupported=True)
    if ctx.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        ctx.fail("keep_aspect_ratio_policy other than stretch", unsupported=True)
    axes = list(ctx.axes(ctx.attr("axes"), x.rank)) if ctx.attr("axes") is not None else list(range(x.rank))
    sizes = ctx.ints(3, "sizes", required=False)
    if sizes:
        if len(sizes) != len(axes) or any(s <= 0 for s in sizes):
            ctx.fail(f"sizes {sizes} must hold {len(axes)} positive values")
    else:
        scales = ctx.constant(2, "scales", required=False)
        if scales is None or scales.size == 0:
            ctx.fail("has neither scales nor sizes")
        scales = [float(s) for s in scales.reshape(-1)]
        if len(scales) != len(axes) or any(not s > 0 for s in scales):
            ctx.fail(f"scales {scales} must hold {len(axes)} positive values")
        sizes = []
        for a, s in zip(axes, scales):
            exact = x.shape[a] * s
            if not math.isfinite(exact) or exact != math.floor(exact):
                ctx.fail(f"scale {s} of extent {x.shape[a]} does not give a whole size", unsupported=True,
                         hint="qsim resizes to whole multiples; give 'sizes' instead of 'scales'")
            sizes.append(int(exact))
    out = list(x.shape)
    for a, n in zip(axes, sizes):
        out[a] = n
    moved = [(a, n) for a, n in zip(axes, sizes) if n != x.shape[a]]
    if transform == "pytorch_half_pixel" and any(n == 1 for _, n in moved):
        # pytorch_half_pixel maps an output extent of 1 to the source coordinate 0 (not the
        # centre), where every mode's weights select x[0] alone: the first slice of the axis
        ones = tuple(a for a, n in moved if n == 1)
        shape = tuple(1 if i in ones else e for i, e in enumerate(x.shape))
        attrs = {"axes": ones, "begin": (0,) * len(ones), "end": (1,) * len(ones), "stride": (1,) * len(ones)}
        moved = [(a, n) for a, n in moved if n != 1]
        x = ctx.emit1("layout.slice", [x], attrs, x.dtype, shape, final=not moved)
    if not moved:
        return [x]
    attrs = {"axes": tuple(a for a, _ in moved), "size": tuple(n for _, n in moved),
             "coordinate_transform": _TRANSFORMS[transform]}
    if mode == "nearest":
        rounding = ctx.attr("nearest_mode", "round_prefer_floor")
        if rounding not in _ROUNDING:
            ctx.fail(f"nearest_mode {rounding!r} is not one of {', '.join(_ROUNDING)}")
        attrs["rounding_method"] = _ROUNDING[rounding]
        kind = "image.nearest_resize"
    elif mode == "linear":
        kind = "image.linear_resize"
    else:
        attrs["coeff_a"] = float(ctx.attr("cubic_coeff_a", -0.75))
        kind = "image.cubic_resize"
    return [ctx.emit1(kind, [x], attrs, F32, tuple(out), final=True)]
