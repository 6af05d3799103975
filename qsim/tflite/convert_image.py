"""TFLite → NNEF 2.0 standard operators, part five: TRANSPOSE_CONV, BATCH_MATMUL,
RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR and HARD_SWISH."""
from __future__ import annotations

from . import schema as S
from .context import OpContext, converter, fused_activation
from .convert_nn import _bias, _same_padding
from .flatbuf import BOOL as BOOL_OPT, INT8 as I8_OPT, INT32 as I32_OPT


@converter("TRANSPOSE_CONV")
def _transpose_conv(ctx: OpContext) -> None:
    """Inputs: output_shape, weights [O, KH, KW, I], input, bias. TFLite places the full
    result (extent (H - 1) s + K) and keeps output_shape of it, dropping the SAME padding's
    smaller half first (padding computed as for the convolution from the output back)."""
    out_shape = ctx.ints(0, "output_shape")
    w = ctx.input(1, "weights")
    x = ctx.input(2, "input")
    if x.rank != 4 or w.rank != 4 or w.data is None or w.shape[3] != x.shape[3]:
        ctx.fail(f"input {list(x.shape)} and weights {list(w.shape)} must be NHWC and OHWI constants")
    strides = (ctx.option(2, I32_OPT, 1), ctx.option(1, I32_OPT, 1))
    padding = ctx.option(0, I8_OPT, 0)
    if tuple(out_shape) != tuple(ctx.out_def().shape):
        ctx.fail(f"output_shape {out_shape} differs from the output tensor's {list(ctx.out_def().shape)}")
    pads = []
    for extent, out, k, s in zip(x.shape[1:3], out_shape[1:3], w.shape[1:3], strides):
        full = (extent - 1) * s + k
        before = _same_padding(out, k, s, 1)[0] if padding == S.PADDING_SAME else 0
        if full - before < out:
            ctx.fail(f"output extent {out} exceeds the full result {full}")
        pads.append((before, full - out - before))
    perm = (3, 0, 1, 2)
    real, quant = ctx.float_constant(w, axis_map=lambda a: perm.index(a))
    filt = ctx.add_constant(f"{w.name}.iohw", real.transpose(perm), quant)
    attrs = {"stride": strides, "dilation": (1, 1), "padding": (pads[0][0], pads[1][0], pads[0][1], pads[1][1]),
             "padding_align": "UPPER", "output_size": tuple(out_shape[1:3]), "groups": 1,
             "data_format": "NCX", "filter_format": "NCX"}
    inputs = [ctx.nchw(x), filt, _bias(ctx, 3, w.shape[0]) or ""]
    fused_activation(ctx, "nn.deconv", inputs, attrs, ctx.option(3, I8_OPT, 0))


@converter("BATCH_MATMUL")
def _batch_matmul(ctx: OpContext) -> None:
    a, b = ctx.input(0, "x"), ctx.input(1, "y")
    attrs = {"transA": bool(ctx.option(0, BOOL_OPT, False)), "transB": bool(ctx.option(1, BOOL_OPT, False))}
    if a.rank < 2 or b.rank < 2:
        ctx.fail(f"operands {list(a.shape)} and {list(b.shape)} must have rank 2 or more")
    ctx.result("linalg.matmul", [ctx.nhwc(a), ctx.nhwc(b), ""], attrs, nchw=False)


@converter("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def _resize(ctx: OpContext) -> None:
    x = ctx.input(0, "input")
    size = ctx.ints(1, "size")
    if x.rank != 4 or len(size) != 2 or min(size) <= 0:
        ctx.fail(f"input {list(x.shape)} and size {size} must be NHWC and two positive extents")
    bilinear = ctx.op.builtin == "RESIZE_BILINEAR"
    first = 2 if bilinear else 0          # ResizeBilinearOptions: new_height, new_width (deprecated) first
    align, half = bool(ctx.option(first, BOOL_OPT, False)), bool(ctx.option(first + 1, BOOL_OPT, False))
    transform = "ALIGNED" if align else "SYMMETRIC" if half else "ASYMMETRIC"
    attrs = {"axes": (2, 3), "size": tuple(size), "coordinate_transform": transform}
    if bilinear:
        ctx.result("image.linear_resize", [ctx.nchw(x)], attrs)
        return
    # TFLite: floor(x * scale), or round (half up) with align_corners or half-pixel centres
    attrs["rounding_method"] = "ROUND_PREFER_CEIL" if align or half else "FLOOR"
    ctx.result("image.nearest_resize", [ctx.nchw(x)], attrs)


@converter("HARD_SWISH")
def _hard_swish(ctx: OpContext) -> None:
    """x * relu6(x + 3) / 6 composed (NNEF 2.0 has no hard-swish operator); the lowering takes
    the chain as one function of x (one TABLE)."""
    x = ctx.input(0, "input")
    nchw = x.rank == 4
    src = ctx.nchw(x) if nchw else ctx.nhwc(x)
    shape = ctx.held_out_shape(nchw)
    name = ctx.out_def().name
    align = {"lhs_align": None, "rhs_align": None}
    scaled = ctx.intermediate("math.mul", [src, ctx.scalar(1.0 / 6.0)], align, shape, f"{name}.scaled", None)
    shifted = ctx.intermediate("math.add", [scaled, ctx.scalar(0.5)], align, shape, f"{name}.shifted", None)
    gate = ctx.intermediate("math.clamp", [shifted, ctx.scalar(0.0), ctx.scalar(1.0)],
                            {"val_align": None, "min_align": None, "max_align": None}, shape, f"{name}.gate", None)
    ctx.result("math.mul", [src, gate], align, nchw=nchw)
