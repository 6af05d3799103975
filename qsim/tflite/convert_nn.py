"""TFLite → NNEF 2.0 standard operators, part one: convolutions, fully connected layers,
pooling, MEAN and SOFTMAX, with their fused activations (TFLite NHWC/OHWI → NCHW/OIHW at
import; context.py says why)."""
from __future__ import annotations

import numpy as np

from .. import numerics
from .flatbuf import BOOL as BOOL_OPT, FLOAT32 as F32_OPT, INT8 as I8_OPT, INT32 as I32_OPT
from . import schema as S
from .context import OpContext, Value, converter, flat_activation, fused_activation


def _same_padding(extent: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """TFLite Padding.SAME: output ceil(extent / stride), the smaller half of the padding first."""
    out = numerics.ceil_div(extent, stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - extent, 0)
    return total // 2, total - total // 2


def _window(ctx: OpContext, x: Value, kernel, strides, dilations, padding: int):
    """(padding flat [before.., after..], output extents) of a 2-D window over NHWC x."""
    if padding not in (S.PADDING_SAME, S.PADDING_VALID):
        ctx.fail(f"padding {padding} is neither SAME (0) nor VALID (1)")
    if any(v <= 0 for v in (*kernel, *strides, *dilations)):
        ctx.fail(f"kernel {list(kernel)}, strides {list(strides)} and dilations {list(dilations)} must be positive")
    pads, out = [], []
    for extent, k, s, d in zip(x.shape[1:3], kernel, strides, dilations):
        p = _same_padding(extent, k, s, d) if padding == S.PADDING_SAME else (0, 0)
        span = extent + p[0] + p[1] - ((k - 1) * d + 1)
        if span < 0:
            ctx.fail(f"the window {k} (dilation {d}) is larger than the padded extent {extent}")
        pads.append(p)
        out.append(span // s + 1)
    return (pads[0][0], pads[1][0], pads[0][1], pads[1][1]), out


def _check_out(ctx: OpContext, expected) -> None:
    got = tuple(ctx.out_def().shape)
    if got != tuple(expected):
        ctx.fail(f"output shape {list(got)} differs from the computed {list(expected)}")


def _bias(ctx: OpContext, k: int, channels: int) -> str | None:
    b = ctx.optional(k, "bias")
    if b is None:
        return None
    if b.data is None or b.shape != (channels,):
        ctx.fail(f"bias {list(b.shape)} must be a constant of shape [{channels}]")
    real, quant = ctx.float_constant(b)
    return ctx.add_constant(f"{b.name}.value", real, quant)


def _conv(ctx: OpContext, depthwise: bool) -> None:
    x = ctx.input(0, "input")
    w = ctx.input(1, "filter")
    if x.rank != 4 or w.rank != 4 or w.data is None:
        ctx.fail(f"input {list(x.shape)} and filter {list(w.shape)} must be 4-D, the filter constant")
    o = 4 if depthwise else 3     # Conv2DOptions / DepthwiseConv2DOptions slots after the strides
    padding = ctx.option(0, I8_OPT, 0)
    strides = (ctx.option(2, I32_OPT, 1), ctx.option(1, I32_OPT, 1))
    dilations = (ctx.option(o + 2, I32_OPT, 1), ctx.option(o + 1, I32_OPT, 1))
    channels = x.shape[3]
    if depthwise:
        # filter [1, KH, KW, C * M] -> groups = C, NCX filter [C * M, 1, KH, KW]
        outs = w.shape[3]
        if w.shape[0] != 1 or outs % channels:
            ctx.fail(f"depthwise filter {list(w.shape)} does not fit {channels} input channels")
        groups, perm = channels, (3, 0, 1, 2)
    else:
        outs = w.shape[0]
        if channels % w.shape[3]:
            ctx.fail(f"filter {list(w.shape)} does not fit {channels} input channels")
        groups, perm = channels // w.shape[3], (0, 3, 1, 2)
    kernel = w.shape[1:3]
    pads, out = _window(ctx, x, kernel, strides, dilations, padding)
    _check_out(ctx, (x.shape[0], *out, outs))
    real, quant = ctx.float_constant(w, axis_map=lambda a: perm.index(a))
    filt = ctx.add_constant(f"{w.name}.oihw", real.transpose(perm), quant)
    attrs = {"stride": strides, "dilation": dilations, "padding": pads, "padding_align": "UPPER",
             "ceil_mode": False, "groups": groups, "data_format": "NCX", "filter_format": "NCX"}
    inputs = [ctx.nchw(x), filt, _bias(ctx, 2, outs) or ""]
    fused_activation(ctx, "nn.conv", inputs, attrs, ctx.option(o, I8_OPT, 0))


@converter("CONV_2D")
def _conv_2d(ctx: OpContext) -> None:
    _conv(ctx, depthwise=False)


@converter("DEPTHWISE_CONV_2D")
def _depthwise(ctx: OpContext) -> None:
    _conv(ctx, depthwise=True)


@converter("FULLY_CONNECTED")
def _fully_connected(ctx: OpContext) -> None:
    x = ctx.input(0, "input")
    w = ctx.input(1, "weights")
    if w.rank != 2 or w.data is None:
        ctx.fail(f"weights {list(w.shape)} must be a 2-D constant [outputs, inputs]")
    if ctx.option(1, I8_OPT, 0):
        ctx.fail("shuffled weights (weights_format SHUFFLED4x16INT8)", unsupported=True)
    outs, depth = w.shape
    size = int(np.prod(x.shape))
    if size % depth:
        ctx.fail(f"input {list(x.shape)} does not hold rows of {depth} values")
    rows = size // depth
    src = ctx.nhwc(x)
    if x.shape != (rows, depth):
        src = ctx.intermediate("layout.reshape", [src], {"axis": 0, "rank": x.rank, "shape": (rows, depth)},
                               (rows, depth), f"{x.name}.rows", x.quant)
    real, quant = ctx.float_constant(w)
    filt = ctx.add_constant(f"{w.name}.value", real, quant)
    out = ctx.out_def()
    if int(np.prod(out.shape)) != rows * outs:
        ctx.fail(f"output shape {list(out.shape)} does not hold [{rows}, {outs}]")
    inputs = [src, filt, _bias(ctx, 2, outs) or ""]
    if tuple(out.shape) == (rows, outs):
        fused_activation(ctx, "nn.linear", inputs, {}, ctx.option(0, I8_OPT, 0), nchw=False)
        return
    flat = ctx.intermediate("nn.linear", inputs, {}, (rows, outs), f"{out.name}.rows", ctx.out_quant())
    act = ctx.option(0, I8_OPT, 0)
    if act:       # the activation on the rows (same grid), then the reshape back
        flat = flat_activation(ctx, flat, (rows, outs), act)
    ctx.result("layout.reshape", [flat], {"axis": 0, "rank": 2, "shape": tuple(out.shape)}, nchw=False)


@converter("MAX_POOL_2D", "AVERAGE_POOL_2D")
def _pool(ctx: OpContext) -> None:
    x = ctx.input(0, "input")
    if x.rank != 4:
        ctx.fail(f"input {list(x.shape)} must be 4-D (NHWC)")
    strides = (ctx.option(2, I32_OPT, 1), ctx.option(1, I32_OPT, 1))
    kernel = (ctx.option(4, I32_OPT, 1), ctx.option(3, I32_OPT, 1))
    pads, out = _window(ctx, x, kernel, strides, (1, 1), ctx.option(0, I8_OPT, 0))
    _check_out(ctx, (x.shape[0], *out, x.shape[3]))
    attrs = {"axes": (2, 3), "size": kernel, "stride": strides, "dilation": (1, 1), "padding": pads,
             "padding_align": "UPPER", "ceil_mode": False}
    average = ctx.op.builtin == "AVERAGE_POOL_2D"
    out_quant = ctx.out_quant()
    if x.quant is not None and out_quant is not None and \
            (x.quant.scale, x.quant.zero_point) != (out_quant.scale, out_quant.zero_point):
        ctx.fail(f"input and output are quantized differently ({x.quant.scale}, {x.quant.zero_point} and "
                 f"{out_quant.scale}, {out_quant.zero_point}); TFLite's integer pooling does not rescale",
                 hint="give the pooling output the input's scale and zero point, as TFLite's converter does")
    if average:
        attrs["ignore_border"] = True     # TFLite divides by the count of real (unpadded) elements
    kind = "nn.avg_pool" if average else "nn.max_pool"
    fused_activation(ctx, kind, [ctx.nchw(x)], attrs, ctx.option(5, I8_OPT, 0))


@converter("MEAN")
def _mean(ctx: OpContext) -> None:
    x = ctx.input(0, "input")
    axes = sorted({a + x.rank if a < 0 else a for a in ctx.ints(1, "axis")})
    if any(not 0 <= a < x.rank for a in axes):
        ctx.fail(f"axes {ctx.ints(1, 'axis')} are outside rank {x.rank}")
    keep = bool(ctx.option(0, BOOL_OPT, False))
    out = ctx.out_def()
    expect = tuple(1 if i in axes else e for i, e in enumerate(x.shape) if keep or i not in axes)
    _check_out(ctx, expect)
    kept = [i for i in range(x.rank) if i not in axes]
    if x.rank == 4 and (keep or kept in ([0, 3], [0], [3], [])):
        # NCHW reduction: the kept axes come out in TFLite's order
        nchw_axes = tuple(sorted((0, 2, 3, 1)[a] for a in axes))
        ctx.result("math.mean_reduce", [ctx.nchw(x)], {"axes": nchw_axes, "squeeze": not keep},
                   nchw=keep and out.rank == 4)
        return
    ctx.result("math.mean_reduce", [ctx.nhwc(x)], {"axes": tuple(axes), "squeeze": not keep}, nchw=False)


@converter("SOFTMAX")
def _softmax(ctx: OpContext) -> None:
    x = ctx.input(0, "input")
    beta = float(ctx.option(0, F32_OPT, 1.0))
    if beta != 1.0:
        ctx.fail(f"beta {beta}", unsupported=True, hint="qsim imports SOFTMAX with beta 1")
    axis = 1 if x.rank == 4 else x.rank - 1
    ctx.result("nn.softmax", [ctx.nchw(x)], {"axes": (axis,)})
