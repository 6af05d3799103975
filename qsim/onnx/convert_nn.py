"""ONNX → NNEF 2.0, part two: convolution, pooling, normalization, matrix products, softmax and
reductions. Conventions: NCHW stays NCHW (nn.conv data_format/filter_format 'NCX'); padding
is explicit [before..., after...] for the window axes (auto_pad and ceil_mode are resolved
here, so the 2.0 operator never applies its own automatic rule)."""
from __future__ import annotations

import numpy as np

from .. import numerics
from ..limits import check_tensor_size
from .builder import F32, NodeContext, Value
from .convert_base import binary, broadcast_shape, converter, folder, unary


# ---------------------------------------------------------------------- window geometry

def _window_lists(ctx: NodeContext, spatial: int, kernel: list[int]):
    def ints(name: str, default: int, count: int) -> list[int]:
        value = ctx.attr(name)
        if value is None:
            return [default] * count
        if len(value) != count or any(v <= 0 for v in value):
            ctx.fail(f"'{name}' {value} must hold {count} positive values")
        return list(value)
    if len(kernel) != spatial or any(k <= 0 for k in kernel):
        ctx.fail(f"kernel shape {kernel} must hold {spatial} positive values")
    return ints("strides", 1, spatial), ints("dilations", 1, spatial)


def _padding(ctx: NodeContext, extents, kernel, strides, dilations) -> list[tuple[int, int]]:
    """(before, after) per spatial axis from pads / auto_pad (ONNX Conv and pooling)."""
    auto = ctx.attr("auto_pad", "NOTSET")
    n = len(extents)
    if auto in ("NOTSET", ""):
        pads = ctx.attr("pads") or [0] * (2 * n)
        if len(pads) != 2 * n or any(p < 0 for p in pads):
            ctx.fail(f"'pads' {pads} must hold {2 * n} non-negative values",
                     hint="negative padding (cropping) is not supported")
        return [(pads[i], pads[n + i]) for i in range(n)]
    if auto == "VALID":
        return [(0, 0)] * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        ctx.fail(f"auto_pad {auto!r} is not NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    out = []
    for X, k, s, d in zip(extents, kernel, strides, dilations):
        total = max((numerics.ceil_div(X, s) - 1) * s + (k - 1) * d + 1 - X, 0)
        small, large = total // 2, total - total // 2
        out.append((small, large) if auto == "SAME_UPPER" else (large, small))
    return out


def _down_extent(ctx: NodeContext, X, k, s, d, p, q, ceil_mode=False) -> int:
    fd = (k - 1) * d + 1
    if X + p + q < fd:
        ctx.fail(f"padded extent {p}+{X}+{q} is smaller than the dilated kernel {fd}")
    span = X + p + q - fd
    out = (numerics.ceil_div(span, s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= X + p:   # the last window must start inside input or left padding
        out -= 1
    return out


def _flat_pads(pads) -> tuple:
    return tuple([p for p, _ in pads] + [q for _, q in pads])


# ---------------------------------------------------------------------- convolution

def _conv_operands(ctx: NodeContext):
    """Conv/ConvTranspose operands X, W, B (optional), the spatial rank and the kernel shape
    (kernel_shape, or the weights' spatial extents)."""
    x = ctx.float_input(ctx.input(0, "X"), "X")
    w = ctx.float_input(ctx.input(1, "W"), "W")
    bias = ctx.optional(2)
    if x.rank < 3 or w.rank != x.rank:
        ctx.fail(f"input {list(x.shape)} and weights {list(w.shape)} must have equal rank of at least 3")
    return x, w, bias, x.rank - 2, list(ctx.attr("kernel_shape") or w.shape[2:])


@converter("Conv")
def _conv(ctx: NodeContext) -> list:
    x, w, bias, spatial, kernel = _conv_operands(ctx)
    if tuple(kernel) != tuple(w.shape[2:]):
        ctx.fail(f"kernel_shape {kernel} differs from the weights' spatial shape {list(w.shape[2:])}")
    groups = int(ctx.attr("group", 1))
    if groups <= 0 or w.shape[0] % groups or w.shape[1] * groups != x.shape[1]:
        ctx.fail(f"weights {list(w.shape)} with group={groups} do not fit {x.shape[1]} input channels",
                 hint="weight channels × group must equal the input channels; group must divide M")
    if bias is not None and bias.shape != (w.shape[0],):
        ctx.fail(f"bias has shape {list(bias.shape)}, expected [{w.shape[0]}]")
    strides, dilations = _window_lists(ctx, spatial, kernel)
    pads = _padding(ctx, x.shape[2:], kernel, strides, dilations)
    out = [_down_extent(ctx, X, k, s, d, p, q) for X, k, s, d, (p, q)
           in zip(x.shape[2:], kernel, strides, dilations, pads)]
    attrs = {"stride": tuple(strides), "dilation": tuple(dilations), "padding": _flat_pads(pads),
             "padding_align": "UPPER", "ceil_mode": False, "groups": groups, "data_format": "NCX",
             "filter_format": "NCX"}
    return [ctx.emit1("nn.conv", [x, w, bias], attrs, F32, (x.shape[0], w.shape[0], *out), final=True)]


@converter("ConvTranspose")
def _conv_transpose(ctx: NodeContext) -> list:
    x, w, bias, spatial, kernel = _conv_operands(ctx)
    groups = int(ctx.attr("group", 1))
    if tuple(kernel) != tuple(w.shape[2:]) or groups <= 0 or w.shape[0] != x.shape[1] or x.shape[1] % groups:
        ctx.fail(f"weights {list(w.shape)} with group={groups} do not fit input {list(x.shape)}",
                 hint="ConvTranspose weights are [C, M/group, k...] with C the input channels")
    channels = w.shape[1] * groups
    if bias is not None and bias.shape != (channels,):
        ctx.fail(f"bias has shape {list(bias.shape)}, expected [{channels}]")
    strides, dilations = _window_lists(ctx, spatial, kernel)
    extra = ctx.attr("output_padding") or [0] * spatial
    if len(extra) != spatial or any(not 0 <= e < max(s, d) for e, s, d in zip(extra, strides, dilations)):
        ctx.fail(f"output_padding {extra} must hold {spatial} values below the strides or dilations")
    full = [(X - 1) * s + (k - 1) * d + 1 for X, s, k, d in zip(x.shape[2:], strides, kernel, dilations)]
    auto = ctx.attr("auto_pad", "NOTSET")
    output_shape = ctx.attr("output_shape")
    if output_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        if output_shape is not None:
            target = list(output_shape)[-spatial:]
        else:
            target = [X * s for X, s in zip(x.shape[2:], strides)]
        pads = []
        for f, e, t in zip(full, extra, target):
            total = f + e - t
            if total < 0:
                ctx.fail(f"output_shape {target} is larger than the full result {full}", unsupported=True)
            # ONNX ConvTranspose: SAME_UPPER puts the larger half at the beginning
            pads.append((total - total // 2, total // 2) if auto != "SAME_LOWER" else (total // 2, total - total // 2))
    elif auto == "VALID":
        pads = [(0, 0)] * spatial
    else:
        pads = _padding(ctx, x.shape[2:], kernel, strides, dilations)
    out = [f + e - p - q for f, e, (p, q) in zip(full, extra, pads)]
    if any(o <= 0 for o in out):
        ctx.fail(f"output extents {out} are not positive")
    attrs = {"stride": tuple(strides), "dilation": tuple(dilations), "padding": _flat_pads(pads),
             "padding_align": "UPPER", "output_size": tuple(out), "groups": groups, "data_format": "NCX",
             "filter_format": "NCX"}
    return [ctx.emit1("nn.deconv", [x, w, bias], attrs, F32, (x.shape[0], channels, *out), final=True)]


# ---------------------------------------------------------------------- pooling

@converter("MaxPool", "AveragePool")
def _pool(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "X"), "X")
    if len(ctx.output_names) > 1 and ctx.output_names[1]:
        ctx.fail("the Indices output of MaxPool is used", unsupported=True,
                 hint="qsim computes the pooled values only")
    if x.rank < 3:
        ctx.fail(f"input {list(x.shape)} needs batch, channel and spatial dimensions")
    spatial = x.rank - 2
    kernel = list(ctx.attr("kernel_shape") or [])
    strides, dilations = _window_lists(ctx, spatial, kernel)
    pads = _padding(ctx, x.shape[2:], kernel, strides, dilations)
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    out = [_down_extent(ctx, X, k, s, d, p, q, ceil_mode) for X, k, s, d, (p, q)
           in zip(x.shape[2:], kernel, strides, dilations, pads)]
    # ceil_mode becomes explicit padding at the end: the windows ceil mode adds read padding
    # that max pooling and averaging without padding ignore (ONNX/onnxruntime semantics)
    grown = [(p, max(q, (o - 1) * s + (k - 1) * d + 1 - X - p))
             for (p, q), o, s, k, d, X in zip(pads, out, strides, kernel, dilations, x.shape[2:])]
    average = ctx.op_type == "AveragePool"
    include_pad = bool(ctx.attr("count_include_pad", 0)) if average else False
    if include_pad and grown != pads:
        ctx.fail("ceil_mode=1 with count_include_pad=1 where ceil mode adds windows", unsupported=True,
                 hint="onnxruntime divides those windows by a partial size; use count_include_pad=0")
    attrs = {"axes": tuple(range(2, x.rank)), "size": tuple(kernel), "stride": tuple(strides),
             "dilation": tuple(dilations), "padding": _flat_pads(grown), "padding_align": "UPPER"}
    if average:
        attrs["ignore_border"] = not include_pad
    attrs["ceil_mode"] = False
    kind = "nn.avg_pool" if average else "nn.max_pool"
    return [ctx.emit1(kind, [x], attrs, F32, (*x.shape[:2], *out), final=True)]


@converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "X"), "X")
    if x.rank < 3:
        ctx.fail(f"input {list(x.shape)} needs batch, channel and spatial dimensions")
    kind = "math.mean_reduce" if ctx.op_type == "GlobalAveragePool" else "math.max_reduce"
    shape = (*x.shape[:2], *[1] * (x.rank - 2))
    return [ctx.emit1(kind, [x], {"axes": tuple(range(2, x.rank)), "squeeze": False}, F32, shape, final=True)]


# ---------------------------------------------------------------------- normalization

def _vector(ctx: NodeContext, value: Value, channels: int, what: str) -> Value:
    if value.shape != (channels,):
        ctx.fail(f"'{what}' has shape {list(value.shape)}, expected [{channels}]")
    return ctx.float_input(value, what)


@converter("BatchNormalization")
def _batch_norm(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "X"), "X")
    if ctx.attr("training_mode", 0) or any(ctx.output_names[1:]):
        ctx.fail("training mode (running statistics outputs)", unsupported=True,
                 hint="export the model in inference mode (model.eval())")
    if x.rank < 2:
        ctx.fail(f"input {list(x.shape)} has no channel dimension")
    c = x.shape[1]
    scale, bias, mean, var = (_vector(ctx, ctx.input(i, n), c, n)
                              for i, n in ((1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var")))
    attrs = {"epsilon": float(ctx.attr("epsilon", 1e-5)), "channel_axis": 1}
    return [ctx.emit1("nn.batch_norm", [x, mean, var, bias, scale], attrs, F32, x.shape, final=True)]


@converter("LayerNormalization")
def _layer_norm(ctx: NodeContext) -> list:
    """(x - mean) / sqrt(var + epsilon) * scale + bias over the axes from 'axis' on. The standard
    library has no layer norm (nn.mean_variance_norm scales per channel), so it is composed:
    mean_reduce, sub, sqr, mean_reduce, add, sqrt, div, mul, add (the ONNX function body)."""
    x = ctx.float_input(ctx.input(0, "X"), "X")
    scale = ctx.float_input(ctx.input(1, "Scale"), "Scale")
    bias = ctx.optional(2)
    if any(ctx.output_names[1:]):
        ctx.fail("the Mean / InvStdDev outputs are used", unsupported=True,
                 hint="qsim computes the normalized output only")
    axis = ctx.axis(int(ctx.attr("axis", -1)), x.rank)
    axes = tuple(range(axis, x.rank))
    reduced = tuple(1 if i in axes else e for i, e in enumerate(x.shape))
    keep = {"axes": axes, "squeeze": False}
    mean = ctx.emit1("math.mean_reduce", [x], keep, F32, reduced)
    centered = binary(ctx, "math.sub", x, mean)
    square = unary(ctx, "math.sqr", centered)
    var = ctx.emit1("math.mean_reduce", [square], keep, F32, reduced)
    stabilized = binary(ctx, "math.add", var, ctx.scalar(float(ctx.attr("epsilon", 1e-5))))
    sigma = unary(ctx, "math.sqrt", stabilized)
    normalized = binary(ctx, "math.div", centered, sigma)
    if bias is None:
        return [binary(ctx, "math.mul", normalized, scale, final=True)]
    scaled = binary(ctx, "math.mul", normalized, scale)
    return [binary(ctx, "math.add", scaled, ctx.float_input(bias, "B"), final=True)]


# ---------------------------------------------------------------------- matrix products

def matmul_shape(ctx: NodeContext, a: tuple, b: tuple) -> tuple:
    """numpy.matmul shapes (ONNX MatMul): 1-D operands get a unit axis that is dropped again."""
    if not a or not b:
        ctx.fail("MatMul operands must have rank 1 or more")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        ctx.fail(f"inner extents differ: A {list(a)} and B {list(b)}")
    batch = broadcast_shape(ctx, a2[:-2], b2[:-2]) if len(a2) > 2 or len(b2) > 2 else ()
    out = tuple(batch) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


@converter("MatMul")
def _matmul(ctx: NodeContext) -> list:
    """linalg.matmul multiplies matrices (rank 2 or more), so a 1-D operand goes in as numpy
    does it: A [K] as [1, K], B [K] as [K, 1], and the unit axis is reshaped away after."""
    a = ctx.float_input(ctx.input(0, "A"), "A")
    b = ctx.float_input(ctx.input(1, "B"), "B")
    shape = matmul_shape(ctx, a.shape, b.shape)
    if a.rank >= 2 and b.rank >= 2:
        return [ctx.emit1("linalg.matmul", [a, b, None], {"transA": False, "transB": False}, F32, shape,
                          final=True)]
    a2 = _with_unit_axis(ctx, a, (1,) + a.shape) if a.rank == 1 else a
    b2 = _with_unit_axis(ctx, b, b.shape + (1,)) if b.rank == 1 else b
    product = ctx.emit1("linalg.matmul", [a2, b2, None], {"transA": False, "transB": False}, F32,
                        matmul_shape(ctx, a2.shape, b2.shape))
    return [ctx.emit1("layout.reshape", [product], {"axis": 0, "rank": product.rank, "shape": shape}, F32, shape,
                      final=True)]


def _with_unit_axis(ctx: NodeContext, x: Value, shape: tuple) -> Value:
    """A 1-D operand as a matrix of `shape`: a constant is reshaped at import, a tensor by an op."""
    if x.is_constant:
        name = ctx.builder.fresh(f"{x.name}.matrix")
        ctx.builder.reserved.add(name)
        return Value(name, x.dtype, shape, x.data.reshape(shape))
    return ctx.emit1("layout.reshape", [x], {"axis": 0, "rank": x.rank, "shape": shape}, x.dtype, shape)


@folder("MatMul")
def _fold_matmul(ctx: NodeContext, arrays: list) -> list:
    shape = matmul_shape(ctx, arrays[0].shape, arrays[1].shape)
    check_tensor_size(shape, arrays[0].dtype.itemsize, f"result of {ctx.where}", ctx.builder.location)
    return [np.matmul(arrays[0], arrays[1])]


@converter("Gemm")
def _gemm(ctx: NodeContext) -> list:
    """alpha * A' B' + beta * C. With a constant B, alpha = 1, no transA and a per-column C,
    nn.linear (filter [N, K] = B'^T folded at import); otherwise linalg.matmul, mul, add."""
    a = ctx.float_input(ctx.input(0, "A"), "A")
    b = ctx.float_input(ctx.input(1, "B"), "B")
    c = ctx.optional(2)
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    ta, tb = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    if a.rank != 2 or b.rank != 2:
        ctx.fail(f"A {list(a.shape)} and B {list(b.shape)} must be matrices")
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    k2, n = (b.shape[1], b.shape[0]) if tb else b.shape
    if k != k2:
        ctx.fail(f"inner extents differ: A {list(a.shape)} (transA={int(ta)}), B {list(b.shape)} (transB={int(tb)})")
    if c is not None:
        if broadcast_shape(ctx, (m, n), c.shape) != (m, n):
            ctx.fail(f"C {list(c.shape)} does not broadcast to [{m}, {n}]")
    per_column = c is None or (c.is_constant and c.data.size == n and c.shape in ((n,), (1, n)))
    if b.is_constant and alpha == 1.0 and not ta and per_column:
        filt_value = b
        if not tb:
            name = ctx.builder.fresh(f"{b.name}.filter")
            ctx.builder.reserved.add(name)
            filt_value = Value(name, F32, (n, k), np.ascontiguousarray(b.data.T, dtype=np.float32))
        bias = None
        if c is not None and beta != 0.0:
            bname = ctx.builder.fresh(f"{c.name}.vector")
            ctx.builder.reserved.add(bname)
            bias = Value(bname, F32, (n,), (np.float32(beta) * c.data.reshape(n)).astype(np.float32))
        return [ctx.emit1("nn.linear", [a, filt_value, bias], {}, F32, (m, n), final=True)]
    last = c is None or beta == 0.0
    y = ctx.emit1("linalg.matmul", [a, b, None], {"transA": ta, "transB": tb}, F32, (m, n),
                  final=last and alpha == 1.0)
    if alpha != 1.0:
        y = binary(ctx, "math.mul", y, ctx.scalar(alpha), final=last)
    if last:
        return [y]
    if beta != 1.0:
        c = binary(ctx, "math.mul", ctx.float_input(c, "C"), ctx.scalar(beta))
    return [binary(ctx, "math.add", y, c, final=True)]


# ---------------------------------------------------------------------- softmax, reductions

@converter("Softmax")
def _softmax(ctx: NodeContext) -> list:
    x = ctx.float_input(ctx.input(0, "input"), "input")
    return [ctx.emit1("nn.softmax", [x], {"axes": _softmax_axes(ctx, x.rank)}, F32, x.shape, final=True)]


def _softmax_axes(ctx: NodeContext, rank: int) -> tuple[int, ...]:
    """Softmax/LogSoftmax axes: before opset 13 the input is coerced to 2-D at 'axis' (default
    1), so the axes axis..rank; since, the one 'axis' (default -1)."""
    if ctx.since < 13:
        axis = ctx.axis(int(ctx.attr("axis", 1)), rank)
        return tuple(range(axis, rank))
    return (ctx.axis(int(ctx.attr("axis", -1)), rank),)


@converter("LogSoftmax")
def _log_softmax(ctx: NodeContext) -> list:
    """x - max - log(sum(exp(x - max))) over the axes Softmax would take (onnxruntime's order of
    operations: the shift by the maximum keeps exp in range and the log exact where a
    probability underflows, which log(softmax(x)) would turn into -inf)."""
    x = ctx.float_input(ctx.input(0, "input"), "input")
    axes = _softmax_axes(ctx, x.rank)
    reduced = tuple(1 if i in axes else e for i, e in enumerate(x.shape))
    top = ctx.emit1("math.max_reduce", [x], {"axes": axes, "squeeze": False}, F32, reduced)
    shifted = binary(ctx, "math.sub", x, top)
    total = ctx.emit1("math.sum_reduce", [unary(ctx, "math.exp", shifted)], {"axes": axes, "squeeze": False},
                      F32, reduced)
    return [binary(ctx, "math.sub", shifted, unary(ctx, "math.log", total), final=True)]


_REDUCE = {"ReduceMean": "math.mean_reduce", "ReduceSum": "math.sum_reduce", "ReduceMax": "math.max_reduce",
           "ReduceMin": "math.min_reduce", "ReduceProd": "math.prod_reduce"}
# the opset from which each reduction takes its axes as an input instead of an attribute
_AXES_INPUT_SINCE = {"ReduceSum": 13}


def _reduce_axes(ctx: NodeContext, rank: int):
    """The reduced axes, or None for the identity (noop_with_empty_axes with no axes)."""
    if ctx.since >= _AXES_INPUT_SINCE.get(ctx.op_type, 18):
        axes = ctx.ints(1, "axes", required=False)
        if not axes:
            if ctx.attr("noop_with_empty_axes", 0):
                return None
            axes = list(range(rank))
    else:
        axes = ctx.attr("axes")
        axes = list(range(rank)) if axes is None else axes
    # an axis named twice is reduced once (onnxruntime reads the list as a set)
    return tuple(sorted(set(ctx.axis(int(a), rank, "axes") for a in axes)))


@converter(*_REDUCE)
def _reduce(ctx: NodeContext) -> list:
    x = ctx.input(0, "data")
    axes = _reduce_axes(ctx, x.rank)
    if axes is None:
        return [x]
    keep = bool(ctx.attr("keepdims", 1))
    shape = tuple(1 if i in axes else e for i, e in enumerate(x.shape) if keep or i not in axes)
    if x.dtype is not F32 and ctx.op_type in ("ReduceMean",):
        ctx.float_input(x, "data")
    return [ctx.emit1(_REDUCE[ctx.op_type], [x], {"axes": axes, "squeeze": not keep}, x.dtype, shape,
                      final=True)]


_REDUCE_NUMPY = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min,
                 "ReduceProd": np.prod}


@folder(*_REDUCE)
def _fold_reduce(ctx: NodeContext, arrays: list) -> list:
    x = arrays[0]
    axes = _reduce_axes(ctx, x.ndim)
    if axes is None:
        return [x]
    if x.size == 0 and ctx.op_type in ("ReduceMax", "ReduceMin"):
        ctx.fail("reduces an empty constant")
    keep = bool(ctx.attr("keepdims", 1))
    return [np.asarray(_REDUCE_NUMPY[ctx.op_type](x, axis=axes, keepdims=keep)).astype(x.dtype)]
