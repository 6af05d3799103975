"""NNEF 1.0 → 2.0 conversions, part two: sliding windows (4.3), matrices and the neural-network
compounds (4.7, 4.9). The conventions (padding, border, window axes, [1,C] parameters) are
described in convert.py."""
from __future__ import annotations

from .builder import TensorValue
from .convert_context import ConvertContext
from .convert_base import (_BORDER_METHODS, _axes, _expand, _is_zero_literal, broadcast_shape, channel_vector,
                      conversion)

# ---------------------------------------------------------------------- sliding windows (4.3)



def window_padding(ctx: ConvertContext, extents, sizes, strides, dilations, padding) -> list:
    """Explicit (before, after) per dimension; [] means automatic (4.3 Automatic Padding)."""
    if padding:
        if len(padding) != len(extents):
            ctx.fail(f"'padding' has {len(padding)} items, expected {len(extents)} or 0")
        return [tuple(p) for p in padding]
    out = []
    for X, f, s, d in zip(extents, sizes, strides, dilations):
        fd = (f - 1) * d + 1
        x = -(-X // s)
        t = max((x - 1) * s + fd - X, 0)
        out.append((t // 2, t - t // 2))
    return out


def _window_lists(ctx: ConvertContext, a: dict, count: int):
    def fill(name):
        value = a.get(name) or []
        if value and len(value) != count:
            ctx.fail(f"'{name}' has {len(value)} items, expected {count} or 0")
        if any(v <= 0 for v in value):
            ctx.fail(f"'{name}' {value} has items that are not positive")
        return list(value) or [1] * count
    return fill("stride"), fill("dilation")


def down_extent(ctx: ConvertContext, X: int, f: int, s: int, d: int, p: int, q: int) -> int:
    fd = (f - 1) * d + 1
    if p + X + q < fd:
        ctx.fail(f"padded extent {p}+{X}+{q} is smaller than the dilated window {fd}",
                 hint="p + X + q must be at least (f - 1) * d + 1 (4.3)")
    return (p + X + q - fd) // s + 1


def _border_pad(ctx: ConvertContext, x: TensorValue, border: str, pads: list, allowed: tuple) -> tuple:
    """Applies a non-zero border as an explicit layout.pad; returns (input, remaining padding)."""
    if border not in allowed:
        ctx.fail(f"border {border!r} is not one of {', '.join(repr(b) for b in allowed)}")
    if border in ("constant", "ignore") or all(p == (0, 0) for p in pads):
        return x, pads
    if any(p < 0 or q < 0 for p, q in pads):
        ctx.fail(f"negative padding with border {border!r}", unsupported=True)
    axes = [i for i, p in enumerate(pads) if p != (0, 0)]
    shape = tuple(e + pads[i][0] + pads[i][1] for i, e in enumerate(x.shape))
    attrs = {"axes": tuple(axes), "padding": tuple([pads[i][0] for i in axes] + [pads[i][1] for i in axes]),
             "method": _BORDER_METHODS[border]}
    padded = ctx.emit("layout.pad", [x, None], attrs, [(x.item, shape)])[0]
    return padded, [(0, 0)] * len(pads)


@conversion("conv")
def _conv(ctx: ConvertContext, a: dict) -> list:
    x, w = a["input"], a["filter"]
    if w.rank != x.rank or x.rank < 3:
        ctx.fail(f"filter rank {w.rank} must equal input rank {x.rank} (at least 3)")
    d = x.rank - 2
    groups = a["groups"] if a["groups"] != 0 else x.shape[1]
    if groups < 0 or w.shape[0] % groups or w.shape[1] * groups != x.shape[1]:
        ctx.fail(f"filter {list(w.shape)} with groups={a['groups']} does not fit input channels {x.shape[1]}",
                 hint="filter channels × groups must equal input channels; groups must divide filter batch")
    stride, dilation = _window_lists(ctx, a, d)
    pads = window_padding(ctx, x.shape[2:], w.shape[2:], stride, dilation, a["padding"])
    x, full = _border_pad(ctx, x, a["border"], [(0, 0), (0, 0)] + pads,
                          ("constant", "replicate", "reflect", "reflect-even"))
    pads = full[2:]
    spatial = [down_extent(ctx, X, f, s, dl, p, q) for X, f, s, dl, (p, q)
               in zip(x.shape[2:], w.shape[2:], stride, dilation, pads)]
    bias = None if _is_zero_literal(ctx, a["bias"]) else channel_vector(ctx, a["bias"], w.shape[0], "bias")
    attrs = {"stride": tuple(stride), "dilation": tuple(dilation),
             "padding": tuple([p for p, _ in pads] + [q for _, q in pads]), "padding_align": "UPPER",
             "ceil_mode": False, "groups": groups, "data_format": "NCX", "filter_format": "NCX"}
    return ctx.emit("nn.conv", [x, w, bias], attrs, [("scalar", (x.shape[0], w.shape[0], *spatial))])


@conversion("deconv")
def _deconv(ctx: ConvertContext, a: dict) -> list:
    x, w = a["input"], a["filter"]
    if w.rank != x.rank or x.rank < 3:
        ctx.fail(f"filter rank {w.rank} must equal input rank {x.rank} (at least 3)")
    if a["border"] != "constant":
        ctx.fail(f"border {a['border']!r} on deconv", unsupported=True)
    d = x.rank - 2
    groups = a["groups"] if a["groups"] != 0 else x.shape[1]
    if groups <= 0 or w.shape[0] != x.shape[1] or x.shape[1] % groups:
        ctx.fail(f"filter {list(w.shape)} with groups={a['groups']} does not fit input channels {x.shape[1]}")
    stride, dilation = _window_lists(ctx, a, d)
    output_shape = a["output_shape"]
    if output_shape and len(output_shape) != x.rank:
        ctx.fail(f"'output_shape' has {len(output_shape)} items, expected {x.rank} or 0")
    up = list(output_shape[2:]) if output_shape else [e * s for e, s in zip(x.shape[2:], stride)]
    pads = window_padding(ctx, up, w.shape[2:], stride, dilation, a["padding"])
    if not output_shape:
        up = [(e - 1) * s + (f - 1) * dl + 1 - (p + q) for e, s, f, dl, (p, q)
              in zip(x.shape[2:], stride, w.shape[2:], dilation, pads)]
    for X, e, f, s, dl, (p, q) in zip(up, x.shape[2:], w.shape[2:], stride, dilation, pads):
        if down_extent(ctx, X, f, s, dl, p, q) != e:
            ctx.fail(f"output extent {X} does not down-scale to the input extent {e}")
    out_channels = w.shape[1] * groups
    bias = None if _is_zero_literal(ctx, a["bias"]) else channel_vector(ctx, a["bias"], out_channels, "bias")
    attrs = {"stride": tuple(stride), "dilation": tuple(dilation),
             "padding": tuple([p for p, _ in pads] + [q for _, q in pads]), "padding_align": "UPPER",
             "output_size": tuple(up), "groups": groups, "data_format": "NCX", "filter_format": "NCX"}
    return ctx.emit("nn.deconv", [x, w, bias], attrs, [("scalar", (x.shape[0], out_channels, *up))])


def _pool(ctx: ConvertContext, a: dict, kind: str) -> list:
    """box / avg_pool / max_pool / rms_pool: windows over every dimension → 2.0 pooling axes."""
    x, size = a["input"], list(a["size"])
    n = x.rank
    if len(size) != n:
        ctx.fail(f"'size' has {len(size)} items, expected {n} (the input rank)")
    if any(f <= 0 for f in size):
        ctx.fail(f"'size' {size} has items that are not positive")
    stride, dilation = _window_lists(ctx, a, n)
    pads = window_padding(ctx, x.shape, size, stride, dilation, a["padding"])
    border = a["border"]
    borders = ("ignore", "constant", "replicate", "reflect", "reflect-even")
    if kind == "nn.max_pool" and border == "constant" and any(p != (0, 0) for p in pads):
        # zeros take part in the maximum: pad explicitly with 0, then pool unpadded
        axes = [i for i, p in enumerate(pads) if p != (0, 0)]
        shape = tuple(e + pads[i][0] + pads[i][1] for i, e in enumerate(x.shape))
        x = ctx.emit("layout.pad", [x, None], {"axes": tuple(axes), "padding": tuple(
            [pads[i][0] for i in axes] + [pads[i][1] for i in axes]), "method": "CONSTANT"},
            [(x.item, shape)])[0]
        pads = [(0, 0)] * n
    else:
        x, pads = _border_pad(ctx, x, border, pads, borders)
    out_shape = tuple(down_extent(ctx, X, f, s, dl, p, q) for X, f, s, dl, (p, q)
                      in zip(x.shape, size, stride, dilation, pads))
    trivial = [size[i] == 1 and stride[i] == 1 and dilation[i] == 1 and pads[i] == (0, 0) for i in range(n)]
    axes = list(range(2, n)) if n >= 2 and trivial[0] and trivial[1] else list(range(n))
    attrs = {"axes": tuple(axes), "size": tuple(size[i] for i in axes), "stride": tuple(stride[i] for i in axes),
             "dilation": tuple(dilation[i] for i in axes),
             "padding": tuple([pads[i][0] for i in axes] + [pads[i][1] for i in axes]),
             "padding_align": "UPPER"}
    if kind in ("nn.avg_pool", "nn.rms_pool"):
        attrs["ignore_border"] = border == "ignore"
    attrs["ceil_mode"] = False
    return ctx.emit(kind, [x], attrs, [(x.item, out_shape)])


@conversion("box")
def _box(ctx: ConvertContext, a: dict) -> list:
    return _pool(ctx, a, "nn.avg_pool" if a["normalize"] else "nn.sum_pool")


@conversion("avg_pool", compound=True)
def _avg_pool(ctx: ConvertContext, a: dict) -> list:
    return _pool(ctx, a, "nn.avg_pool")


@conversion("max_pool", compound=True)
def _max_pool(ctx: ConvertContext, a: dict) -> list:
    return _pool(ctx, a, "nn.max_pool")


@conversion("rms_pool", compound=True)
def _rms_pool(ctx: ConvertContext, a: dict) -> list:
    return _pool(ctx, a, "nn.rms_pool")


def _sample_factor(ctx: ConvertContext, x: TensorValue, factor: list) -> list:
    if len(factor) != x.rank - 2 or any(f <= 0 for f in factor):
        ctx.fail(f"'factor' {factor} must have {x.rank - 2} positive items (one per spatial dimension)")
    return list(factor)


@conversion("nearest_downsample", "area_downsample", compound=True)
def _downsample(ctx: ConvertContext, a: dict) -> list:
    x = a["input"]
    factor = _sample_factor(ctx, x, a["factor"])
    for e, f in zip(x.shape[2:], factor):
        if e % f:
            ctx.fail(f"extent {e} is not divisible by the factor {f}")
    shape = x.shape[:2] + tuple(e // f for e, f in zip(x.shape[2:], factor))
    kind = "image." + ctx.op
    return ctx.emit(kind, [x], {"axes": tuple(range(2, x.rank)), "factor": tuple(factor)}, [(x.item, shape)])


@conversion("nearest_upsample", compound=True)
def _nearest_upsample(ctx: ConvertContext, a: dict) -> list:
    x = a["input"]
    factor = _sample_factor(ctx, x, a["factor"])
    shape = x.shape[:2] + tuple(e * f for e, f in zip(x.shape[2:], factor))
    return ctx.emit("image.nearest_upsample", [x], {"axes": tuple(range(2, x.rank)), "factor": tuple(factor)},
                    [(x.item, shape)])


@conversion("multilinear_upsample")
def _multilinear_upsample(ctx: ConvertContext, a: dict) -> list:
    x = a["input"]
    factor = _sample_factor(ctx, x, a["factor"])
    if a["method"] not in ("symmetric", "asymmetric", "aligned"):
        ctx.fail(f"method {a['method']!r} is not 'symmetric', 'asymmetric' or 'aligned'")
    if a["method"] == "aligned" or a["border"] not in ("constant", "replicate"):
        ctx.fail(f"method {a['method']!r} with border {a['border']!r}", unsupported=True,
                 hint="image.linear_upsample covers methods symmetric/asymmetric, borders constant/replicate")
    shape = x.shape[:2] + tuple(e * f for e, f in zip(x.shape[2:], factor))
    attrs = {"axes": tuple(range(2, x.rank)), "factor": tuple(factor), "symmetric": a["method"] == "symmetric",
             "replicate_border": a["border"] == "replicate"}
    return ctx.emit("image.linear_upsample", [x], attrs, [(x.item, shape)])


# ---------------------------------------------------------------------- matrices, nn (4.7, 4.9)

def matmul_shape(ctx: ConvertContext, A: TensorValue, B: TensorValue, ta: bool, tb: bool) -> tuple:
    if A.rank < 2 or A.rank != B.rank:
        ctx.fail(f"A {list(A.shape)} and B {list(B.shape)} must have equal rank of at least 2")
    m, k = (A.shape[-1], A.shape[-2]) if ta else (A.shape[-2], A.shape[-1])
    k2, n = (B.shape[-1], B.shape[-2]) if tb else (B.shape[-2], B.shape[-1])
    if k != k2:
        ctx.fail(f"inner extents differ: A {list(A.shape)} (transposeA={ta}) and B {list(B.shape)} "
                 f"(transposeB={tb})")
    batch = broadcast_shape(ctx, A.shape[:-2], B.shape[:-2])
    return tuple(batch) + (m, n)


@conversion("matmul")
def _matmul(ctx: ConvertContext, a: dict) -> list:
    A, B, ta, tb = a["A"], a["B"], a["transposeA"], a["transposeB"]
    shape = matmul_shape(ctx, A, B, ta, tb)
    return ctx.emit("linalg.matmul", [A, B, None], {"transA": ta, "transB": tb}, [("scalar", shape)])


@conversion("linear", compound=True)
def _linear(ctx: ConvertContext, a: dict) -> list:
    x, w, bias = a["input"], a["filter"], a["bias"]
    if x.rank != 2 or w.rank != 2:
        return _expand(ctx, a)
    if x.shape[1] != w.shape[1]:
        ctx.fail(f"input {list(x.shape)} and filter {list(w.shape)} disagree on the inner extent")
    vector = None if _is_zero_literal(ctx, bias) else channel_vector(ctx, bias, w.shape[0], "bias")
    return ctx.emit("nn.linear", [x, w, vector], {}, [("scalar", (x.shape[0], w.shape[0]))])


@conversion("softmax", compound=True)
def _softmax(ctx: ConvertContext, a: dict) -> list:
    x = a["x"]
    axes = _axes(ctx, x, a["axes"])
    return ctx.emit("nn.softmax", [x], {"axes": tuple(axes)}, [(x.item, x.shape)])


@conversion("batch_normalization", compound=True)
def _batch_norm(ctx: ConvertContext, a: dict) -> list:
    x = a["input"]
    if x.rank < 2:
        return _expand(ctx, a)
    c = x.shape[1]
    ins = [x] + [channel_vector(ctx, a[k], c, k) for k in ("mean", "variance", "offset", "scale")]
    return ctx.emit("nn.batch_norm", ins, {"epsilon": float(a["epsilon"]), "channel_axis": 1}, [(x.item, x.shape)])


@conversion("l1_normalization", "l2_normalization", compound=True)
def _lp_norm(ctx: ConvertContext, a: dict) -> list:
    x = a["input"]
    axes = _axes(ctx, x, a["axes"])
    kind = "nn.l1_norm" if ctx.op == "l1_normalization" else "nn.l2_norm"
    return ctx.emit(kind, [x], {"axes": tuple(axes), "bias": float(a["bias"]), "epsilon": float(a["epsilon"])},
                    [(x.item, x.shape)])


@conversion("local_response_normalization", compound=True)
def _lrn(ctx: ConvertContext, a: dict) -> list:
    x, size = a["input"], list(a["size"])
    if x.rank == 0:
        ctx.fail("'input' has rank 0; the normalization window needs at least one dimension")
    if len(size) != x.rank or any(s <= 0 for s in size):
        ctx.fail(f"'size' {size} must have {x.rank} positive items")
    # a window of ones everywhere normalizes each item by itself: any axis will do (channels)
    axes = [i for i, s in enumerate(size) if s != 1] or [min(1, x.rank - 1)]
    attrs = {"axes": tuple(axes), "size": tuple(size[i] for i in axes), "alpha": float(a["alpha"]),
             "beta": float(a["beta"]), "bias": float(a["bias"])}
    return ctx.emit("nn.local_response_norm", [x], attrs, [(x.item, x.shape)])


@conversion("linear_quantize", compound=True)
def _linear_quantize(ctx: ConvertContext, a: dict) -> list:
    x = a["x"]
    lo, hi = (_compile_time_scalar(ctx, a[k]) for k in ("min", "max"))
    if lo is None or hi is None:  # dynamic range (7.2): expand into primitives
        return _expand(ctx, a)
    attrs = {"min": (lo,), "max": (hi,), "bits": a["bits"], "signed": False, "symmetric": False,
             "channel_axis": 1}
    return ctx.emit("quant.min_max_linear_quantize", [x], attrs, [(x.item, x.shape)])


def _compile_time_scalar(ctx: ConvertContext, value: TensorValue) -> float | None:
    tensor = ctx.builder.tensors.get(ctx.builder.origin.get(value.name, value.name))
    if tensor is None or tensor.data is None or tensor.data.size != 1:
        return None
    return float(tensor.data.reshape(-1)[0])


