"""TFLite → NNEF 2.0 standard operators, part four: operators that select or rearrange
elements by position (STRIDED_SLICE, SPLIT, GATHER, SPACE_TO_DEPTH, DEPTH_TO_SPACE), computed
in TFLite's element order (a 4-D operand held NCHW is read back as NHWC, context.py)."""
from __future__ import annotations

import numpy as np

from .. import ir
from .. import numerics
from .context import OpContext, converter
from .flatbuf import INT32 as I32_OPT


def _reshape(ctx: OpContext, src: str, rank: int, shape, hint: str, quant) -> str:
    return ctx.intermediate("layout.reshape", [src], {"axis": 0, "rank": rank, "shape": tuple(shape)},
                            tuple(shape), hint, quant)


@converter("STRIDED_SLICE")
def _strided_slice(ctx: OpContext) -> None:
    x = ctx.input(0, "input")
    begin, end, strides = ctx.ints(1, "begin"), ctx.ints(2, "end"), ctx.ints(3, "strides")
    begin_mask, end_mask = ctx.option(0, I32_OPT, 0), ctx.option(1, I32_OPT, 0)
    if ctx.option(2, I32_OPT, 0) or ctx.option(3, I32_OPT, 0):
        ctx.fail("ellipsis_mask / new_axis_mask", unsupported=True, hint="qsim slices with begin/end/shrink masks")
    shrink = ctx.option(4, I32_OPT, 0)
    if not len(begin) == len(end) == len(strides) <= x.rank:
        ctx.fail(f"begin {begin}, end {end} and strides {strides} must have one entry per sliced axis")
    axes, starts, stops, steps, shape = [], [], [], [], list(x.shape)
    for a, (b, e, s) in enumerate(zip(begin, end, strides)):
        dim = x.shape[a]
        if s == 0:
            ctx.fail(f"stride 0 on axis {a}")
        if shrink >> a & 1:
            b = b + dim if b < 0 else b
            if not 0 <= b < dim:
                ctx.fail(f"shrinks axis {a} at {begin[a]}, outside its extent {dim}")
            e, s = b + 1, 1
        else:
            lo, hi = (0, dim) if s > 0 else (-1, dim - 1)
            b = (lo if s > 0 else hi) if begin_mask >> a & 1 else min(max(b + dim if b < 0 else b, lo), hi)
            e = (hi if s > 0 else lo) if end_mask >> a & 1 else min(max(e + dim if e < 0 else e, lo), hi)
        extent = max(0, numerics.ceil_div(e - b, s))
        if extent == 0:
            ctx.fail(f"the slice of axis {a} is empty", unsupported=True, hint="qsim graphs have no empty tensors")
        if (b, e, s) != (0, dim, 1):
            axes.append(a)
            starts.append(b)
            stops.append(e)
            steps.append(s)
        shape[a] = extent
    src = ctx.nhwc(x)
    out = ctx.out_def()
    # unit steps: one layout.slice; other steps (TOSA SLICE has none): a layout.gather of the
    # picked positions on each such axis, an exact selection
    unit = [k for k, st in enumerate(steps) if st == 1]
    current = list(x.shape)
    if unit:
        for k in unit:
            current[axes[k]] = stops[k] - starts[k]
        attrs = {"axes": tuple(axes[k] for k in unit), "begin": tuple(starts[k] for k in unit),
                 "end": tuple(stops[k] for k in unit), "stride": (1,) * len(unit)}
        src = ctx.intermediate("layout.slice", [src], attrs, tuple(current), f"{out.name}.slice", x.quant)
    for k, st in enumerate(steps):
        if st != 1:
            picked = np.arange(starts[k], stops[k], st, dtype=np.int64)
            current[axes[k]] = picked.size
            b = ctx.builder
            index = b.add(b.fresh(f"{out.name}.picked{axes[k]}"), picked.shape, None, picked, dtype=ir.DType.I64)
            src = ctx.intermediate("layout.gather", [src, index], {"axis": axes[k]}, tuple(current),
                                   f"{out.name}.strided{axes[k]}", x.quant)
    if int(np.prod(current)) != int(np.prod(out.shape)):
        ctx.fail(f"output shape {list(out.shape)} differs from the slice's {shape}")
    ctx.result("layout.reshape", [src], {"axis": 0, "rank": len(current), "shape": tuple(out.shape)}, nchw=False)


@converter("SPLIT")
def _split(ctx: OpContext) -> None:
    axis_data = ctx.ints(0, "axis")
    x = ctx.input(1, "input")
    count = len(ctx.op.outputs)
    if len(axis_data) != 1:
        ctx.fail("axis must hold one value")
    axis = axis_data[0] + x.rank if axis_data[0] < 0 else axis_data[0]
    if not 0 <= axis < x.rank or count <= 0 or x.shape[axis] % count:
        ctx.fail(f"cannot split axis {axis_data[0]} of {list(x.shape)} into {count} equal parts")
    size = x.shape[axis] // count
    src = ctx.nhwc(x)
    for k in range(count):
        attrs = {"axes": (axis,), "begin": (k * size,), "end": ((k + 1) * size,), "stride": (1,)}
        ctx.result("layout.slice", [src], attrs, k=k, nchw=False)


@converter("GATHER")
def _gather(ctx: OpContext) -> None:
    x = ctx.input(0, "params")
    indices = ctx.input(1, "indices")
    axis = int(ctx.option(0, I32_OPT, 0))
    axis = axis + x.rank if axis < 0 else axis
    if ctx.option(1, I32_OPT, 0):
        ctx.fail("batch_dims", unsupported=True)
    if not 0 <= axis < x.rank:
        ctx.fail(f"axis {axis} outside rank {x.rank}")
    if indices.data is None:
        ctx.fail("indices computed at run time", unsupported=True, hint="qsim gathers with constant indices")
    idx = indices.data.astype(np.int64)
    if np.any((idx < -x.shape[axis]) | (idx >= x.shape[axis])):
        ctx.fail(f"indices outside [0, {x.shape[axis]})")
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    b = ctx.builder
    name = b.add(b.fresh(f"{indices.name}.indices"), idx.shape, None, idx, dtype=ir.DType.I64)
    ctx.result("layout.gather", [ctx.nhwc(x), name], {"axis": axis}, nchw=False)


def _blocks(ctx: OpContext) -> int:
    block = int(ctx.option(0, I32_OPT, 0))
    if block <= 0:
        ctx.fail(f"block_size {block} is not positive")
    return block


@converter("SPACE_TO_DEPTH")
def _space_to_depth(ctx: OpContext) -> None:
    """[N, H, W, C] -> [N, H/b, b, W/b, b, C] -> (0, 1, 3, 2, 4, 5) -> [N, H/b, W/b, b*b*C]."""
    x = ctx.input(0, "input")
    b = _blocks(ctx)
    n, h, w, c = x.shape
    if h % b or w % b:
        ctx.fail(f"extents {h}x{w} are not multiples of block_size {b}")
    split = _reshape(ctx, ctx.nhwc(x), 4, (n, h // b, b, w // b, b, c), f"{x.name}.blocks", x.quant)
    moved = ctx.intermediate("layout.transpose", [split], {"axis": 0, "perm": (0, 1, 3, 2, 4, 5)},
                             (n, h // b, w // b, b, b, c), f"{x.name}.moved", x.quant)
    ctx.result("layout.reshape", [moved], {"axis": 0, "rank": 6, "shape": (n, h // b, w // b, b * b * c)},
               nchw=False)


@converter("DEPTH_TO_SPACE")
def _depth_to_space(ctx: OpContext) -> None:
    """[N, H, W, b*b*C] -> [N, H, W, b, b, C] -> (0, 1, 3, 2, 4, 5) -> [N, H*b, W*b, C] (DCR)."""
    x = ctx.input(0, "input")
    b = _blocks(ctx)
    n, h, w, c = x.shape
    if c % (b * b):
        ctx.fail(f"{c} channels are not a multiple of block_size^2 = {b * b}")
    cc = c // (b * b)
    split = _reshape(ctx, ctx.nhwc(x), 4, (n, h, w, b, b, cc), f"{x.name}.blocks", x.quant)
    moved = ctx.intermediate("layout.transpose", [split], {"axis": 0, "perm": (0, 1, 3, 2, 4, 5)},
                             (n, h, b, w, b, cc), f"{x.name}.moved", x.quant)
    ctx.result("layout.reshape", [moved], {"axis": 0, "rank": 6, "shape": (n, h * b, w * b, cc)}, nchw=False)
