"""TFLite → NNEF 2.0 standard operators, part three: operators that move values (RESHAPE,
SQUEEZE, CONCATENATION, PAD/PADV2, TRANSPOSE). They read the element order, so a 4-D operand
held NCHW is read in TFLite's order unless the operator maps its axes (context.py)."""
from __future__ import annotations

import numpy as np

from .context import NHWC_TO_NCHW, OpContext, converter
from .flatbuf import INT32 as I32_OPT

_NCHW_AXIS = (0, 2, 3, 1)     # NHWC axis -> its position in NCHW


@converter("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def _reshape(ctx: OpContext) -> None:
    x = ctx.input(0, "input")
    out = ctx.out_def()
    if int(np.prod(out.shape)) != int(np.prod(x.shape)):
        ctx.fail(f"output shape {list(out.shape)} does not hold the {int(np.prod(x.shape))} input elements")
    if tuple(out.shape) == tuple(x.shape):
        ctx.alias(0, x)
        return
    ctx.result("layout.reshape", [ctx.nhwc(x)], {"axis": 0, "rank": x.rank, "shape": tuple(out.shape)},
               nchw=False)


@converter("CONCATENATION")
def _concat(ctx: OpContext) -> None:
    values = [ctx.input(k, f"input {k}") for k in range(ctx.input_count())]
    out = ctx.out_def()
    axis = int(ctx.option(0, I32_OPT, 0))
    axis = axis + out.rank if axis < 0 else axis
    if not 0 <= axis < out.rank or any(v.rank != out.rank for v in values):
        ctx.fail(f"axis {axis} or an input rank does not fit the output {list(out.shape)}")
    ctx.fail_if_activation(ctx.option(1, I32_OPT, 0) & 0xFF, "CONCATENATION")
    if out.rank == 4:
        ctx.result("layout.concat", [ctx.nchw(v) for v in values], {"axis": _NCHW_AXIS[axis]})
    else:
        ctx.result("layout.concat", [ctx.nhwc(v) for v in values], {"axis": axis})


@converter("PAD", "PADV2")
def _pad(ctx: OpContext) -> None:
    x = ctx.input(0, "input")
    pads = ctx.ints(1, "paddings")
    if len(pads) != 2 * x.rank or any(p < 0 for p in pads):
        ctx.fail(f"paddings {pads} must hold {x.rank} non-negative (before, after) pairs")
    before, after = pads[0::2], pads[1::2]
    value = ""
    if ctx.op.builtin == "PADV2" and ctx.optional(2, "constant_values") is not None:
        real, _ = ctx.float_constant(ctx.input(2, "constant_values"))
        if real.size != 1:
            ctx.fail("constant_values must hold one value")
        if float(real.reshape(-1)[0]) != 0.0:
            value = ctx.scalar(float(real.reshape(-1)[0]))
    if x.rank == 4:
        perm = NHWC_TO_NCHW
        before, after = [before[p] for p in perm], [after[p] for p in perm]
        src, nchw = ctx.nchw(x), True
    else:
        src, nchw = ctx.nhwc(x), False
    axes = tuple(range(x.rank))
    attrs = {"axes": axes, "padding": tuple(before) + tuple(after), "method": "CONSTANT"}
    ctx.result("layout.pad", [src, value], attrs, nchw=nchw)


@converter("TRANSPOSE")
def _transpose(ctx: OpContext) -> None:
    x = ctx.input(0, "input")
    perm = ctx.ints(1, "perm")
    if sorted(perm) != list(range(x.rank)):
        ctx.fail(f"perm {perm} is not a permutation of {x.rank} axes")
    ctx.result("layout.transpose", [ctx.nhwc(x)], {"axis": 0, "perm": tuple(perm)}, nchw=False)
