"""NNEF 1.0 operations → NNEF 2.0 standard operators (the ir op kinds of the SkriptND stdlib).

One function per 1.0 operation, registered in CONVERSIONS. Each receives the bound, type-checked
arguments (3.3.2) and emits 2.0 operators with the 2.0 attribute names, every attribute present
(optional ones as None), and static output shapes computed by the 1.0 rules of chapter 4.
COMPOUND_KEPT lists the 1.0 compound fragments converted whole (instead of expanded from their
bodies) because 2.0 has a matching operator. docs/nnef1.md holds the full mapping table.

Conventions that differ between the versions:
- Broadcasting: 1.0 aligns ranks on the left (a [1,C] bias against [N,C,H,W]); 2.0 aligns on
  the right unless `lhs_align`/`rhs_align` say otherwise, so the shorter operand gets align 0.
- Padding: 1.0 gives [(before, after), ...] per dimension, [] for automatic (4.3); 2.0 gives
  [before..., after...] for the window axes. Automatic padding is resolved here, so the 2.0
  operator always gets explicit padding (its own automatic rule differs for stride > 1).
- Border: 'constant' is the operator's zero padding, 'ignore' is `ignore_border` for averages
  and the natural -inf padding of max pooling; 'replicate', 'reflect', 'reflect-even' become an
  explicit layout.pad (REPLICATE, REFLECT, SYMMETRIC) in front of an unpadded operator.
- Window sizes: 1.0 pooling windows cover every dimension; 2.0 names the window `axes`. When
  batch and channel windows are trivial, axes = [2, ..]; otherwise every axis.
- [1,C] parameters (bias, batch-norm statistics) become [C] vectors: constants are reshaped at
  load time (a sibling constant named `<name>.vector`), activations through layout.reshape.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .builder import TensorValue
from .compose import ConvertContext

Conversion = Callable[[ConvertContext, dict], list]
CONVERSIONS: dict[str, Conversion] = {}
COMPOUND_KEPT: set[str] = set()


def conversion(*names: str, compound: bool = False):
    def wrap(fn: Conversion) -> Conversion:
        for name in names:
            CONVERSIONS[name] = fn
            if compound:
                COMPOUND_KEPT.add(name)
        return fn
    return wrap


# ---------------------------------------------------------------------- tensor introducing (4.1)

@conversion("external")
def _external(ctx: ConvertContext, a: dict) -> list:
    shape = _positive_shape(ctx, a["shape"])
    name = ctx.builder.fresh(ctx.hint + ".external")
    return [ctx.builder.add_tensor(name, ctx.generic, shape)]


@conversion("constant")
def _constant(ctx: ConvertContext, a: dict) -> list:
    shape = _positive_shape(ctx, a["shape"])
    values = a["value"]
    volume = int(np.prod(shape, dtype=np.int64))
    if len(values) not in (1, volume):
        ctx.fail(f"'value' has {len(values)} items, expected 1 or {volume} (the volume of shape {shape})")
    dtype = {"scalar": np.float32, "integer": np.int64, "logical": np.bool_}[ctx.generic]
    data = np.asarray(values, dtype=dtype)
    data = np.full(shape, data[0], dtype=dtype) if len(values) == 1 else data.reshape(shape)
    return [ctx.builder.constant(ctx.hint + ".constant", ctx.generic, data)]


@conversion("variable")
def _variable(ctx: ConvertContext, a: dict) -> list:
    shape = _positive_shape(ctx, a["shape"])
    label = a["label"]
    if not label or not all(c.isalnum() or c in "_-./\\" for c in label):
        ctx.fail(f"label {label!r} is empty or has characters outside [a-zA-Z0-9_-./\\]")
    composer = ctx.composer
    shared = composer.labels.get(label.lower())
    if shared is not None:  # same label (case-insensitive) = shared data (4.1.3)
        if list(shared.shape) != list(shape):
            ctx.fail(f"variable '{label}' is declared with shape {shape} and {list(shared.shape)}",
                     hint="variables sharing a label must have the same shape (4.1.3)")
        return [shared]
    data, quant = composer.load_variable(label, tuple(shape), ctx.generic, ctx.loc)
    name = ctx.builder.fresh(ctx.hint + ".variable")
    if data is None:
        data = np.zeros(shape, dtype={"scalar": np.float32, "integer": np.int64, "logical": np.bool_}[ctx.generic])
    value = ctx.builder.add_tensor(name, ctx.generic, shape, data=data, quant=quant)
    composer.labels[label.lower()] = value
    return [value]


def _positive_shape(ctx: ConvertContext, shape: list) -> list:
    if any(d <= 0 for d in shape):
        ctx.fail(f"shape {shape} has items that are not positive")
    return list(shape)


# ---------------------------------------------------------------------- element-wise (4.2)

_UNARY = {"copy": "math.iden", "neg": "math.neg", "rcp": "math.rcp", "exp": "math.exp",
          "log": "math.log", "abs": "math.abs", "sign": "math.sign", "not": "math.not",
          "floor": "math.floor", "ceil": "math.ceil", "round": "math.round", "sin": "math.sin",
          "cos": "math.cos"}
_UNARY_COMPOUND = {"sqr": "math.sqr", "sqrt": "math.sqrt", "rsqr": "math.rsqr", "rsqrt": "math.rsqrt",
                   "log2": "math.log2", "tanh": "math.tanh", "sigmoid": "nn.sigmoid",
                   "softplus": "nn.softplus", "gelu": "nn.gelu", "silu": "nn.silu"}


def _unary(ctx: ConvertContext, a: dict) -> list:
    x = next(iter(a.values()))
    kind = _UNARY.get(ctx.op) or _UNARY_COMPOUND[ctx.op]
    attrs = {"approximate": None} if kind == "nn.gelu" else {}
    return ctx.emit(kind, [x], attrs, [(x.item, x.shape)])


for _name in _UNARY:
    conversion(_name)(_unary)
for _name in _UNARY_COMPOUND:
    conversion(_name, compound=_name not in ("gelu", "silu"))(_unary)


@conversion("relu", compound=True)
def _relu(ctx: ConvertContext, a: dict) -> list:
    x = a["x"]
    return ctx.emit("nn.relu", [x], {"alpha": None, "max": None}, [(x.item, x.shape)])


@conversion("elu", compound=True)
def _elu(ctx: ConvertContext, a: dict) -> list:
    x = a["x"]
    return ctx.emit("nn.elu", [x], {"alpha": 1.0}, [(x.item, x.shape)])


@conversion("selu")
def _selu(ctx: ConvertContext, a: dict) -> list:
    x = a["x"]
    return ctx.emit("nn.selu", [x], {"alpha": a["alpha"], "lambda": a["lambda"]}, [(x.item, x.shape)])


def broadcast_shape(ctx: ConvertContext, *shapes: tuple) -> tuple:
    """1.0 broadcasting (4.2.2): ranks padded on the right with singletons, extents equal or 1."""
    rank = max(len(s) for s in shapes)
    padded = [tuple(s) + (1,) * (rank - len(s)) for s in shapes]
    out = []
    for axis in range(rank):
        extents = {p[axis] for p in padded} - {1}
        if len(extents) > 1:
            ctx.fail("argument shapes " + " and ".join(str(list(s)) for s in shapes)
                     + f" do not broadcast (dimension {axis})",
                     hint="extents must be equal or 1 in each dimension (4.2.2)")
        out.append(extents.pop() if extents else 1)
    return tuple(out)


def _align(value: TensorValue, rank: int):
    """2.0 alignment that reproduces 1.0's left alignment: 0 for a shorter non-scalar operand."""
    return 0 if 0 < value.rank < rank else None


_BINARY = {"add": "math.add", "sub": "math.sub", "mul": "math.mul", "div": "math.div",
           "pow": "math.pow", "lt": "math.lt", "gt": "math.gt", "le": "math.le", "ge": "math.ge",
           "eq": "math.eq", "ne": "math.ne", "and": "math.and", "or": "math.or"}


@conversion(*_BINARY)
@conversion("min", "max", compound=True)
def _binary(ctx: ConvertContext, a: dict) -> list:
    x, y = a["x"], a["y"]
    shape = broadcast_shape(ctx, x.shape, y.shape)
    item = "logical" if ctx.op in ("lt", "gt", "le", "ge", "eq", "ne", "and", "or") else x.item
    kind = _BINARY.get(ctx.op) or f"math.{ctx.op}"
    attrs = {"lhs_align": _align(x, len(shape)), "rhs_align": _align(y, len(shape))}
    return ctx.emit(kind, [x, y], attrs, [(item, shape)])


@conversion("select")
def _select(ctx: ConvertContext, a: dict) -> list:
    c, x, y = a["condition"], a["true_value"], a["false_value"]
    shape = broadcast_shape(ctx, c.shape, x.shape, y.shape)
    attrs = {"cond_align": _align(c, len(shape)), "lhs_align": _align(x, len(shape)),
             "rhs_align": _align(y, len(shape))}
    return ctx.emit("math.select", [c, x, y], attrs, [(x.item, shape)])


@conversion("clamp", compound=True)
def _clamp(ctx: ConvertContext, a: dict) -> list:
    x, lo, hi = a["x"], a["a"], a["b"]
    shape = broadcast_shape(ctx, x.shape, lo.shape, hi.shape)
    attrs = {"val_align": _align(x, len(shape)), "min_align": _align(lo, len(shape)),
             "max_align": _align(hi, len(shape))}
    return ctx.emit("math.clamp", [x, lo, hi], attrs, [(x.item, shape)])


@conversion("prelu", compound=True)
def _prelu(ctx: ConvertContext, a: dict) -> list:
    x, alpha = a["x"], a["alpha"]
    if x.rank < 2:
        return _expand(ctx, a)
    vector = channel_vector(ctx, alpha, x.shape[1], "alpha")
    return ctx.emit("nn.prelu", [x, vector], {"axis": 1}, [(x.item, x.shape)])


@conversion("leaky_relu", compound=True)
def _leaky_relu(ctx: ConvertContext, a: dict) -> list:
    x, alpha = a["x"], a["alpha"]
    if not 0.0 <= alpha <= 1.0:  # nn.relu's alpha is a slope in [0, 1]; expand otherwise
        return _expand(ctx, a)
    return ctx.emit("nn.relu", [x], {"alpha": float(alpha), "max": None}, [(x.item, x.shape)])


def _expand(ctx: ConvertContext, a: dict) -> list:
    """Falls back to the fragment's body (the case has no direct 2.0 operator)."""
    frag = ctx.composer.fragments[ctx.op]
    return [ctx.composer.expand(frag, a, ctx.generic, ctx.loc, ctx.hint)]


def channel_vector(ctx: ConvertContext, value: TensorValue | None, channels: int, what: str):
    """A per-channel parameter as a [C] vector (2.0) from a 1.0 [1,C] / [C] / singleton tensor."""
    if value is None:
        return None
    shape = value.shape
    if tuple(shape) == (channels,):
        return value
    tensor = ctx.builder.tensors[ctx.builder.origin.get(value.name, value.name)]
    singleton = all(d == 1 for d in shape)
    per_channel = len(shape) >= 2 and shape[1] == channels and all(d == 1 for i, d in enumerate(shape) if i != 1)
    if not (singleton or per_channel):
        ctx.fail(f"'{what}' has shape {list(shape)}, expected [1,{channels}] or a singleton",
                 hint=f"the channel dimension of '{what}' must match the {channels} channels")
    if tensor.data is not None:
        data = np.broadcast_to(tensor.data.reshape(-1), (channels,)).copy()
        name = ctx.builder.fresh(f"{value.name}.vector")
        return ctx.builder.add_tensor(name, value.item, (channels,), data=data)
    if singleton:
        return ctx.emit("layout.broadcast", [_reshape(ctx, value, [1])], {"axes": (0,), "shape": (channels,)},
                        [(value.item, (channels,))])[0]
    return _reshape(ctx, value, [channels])


def _reshape(ctx: ConvertContext, x: TensorValue, shape: list) -> TensorValue:
    return ctx.emit("layout.reshape", [x], {"axis": 0, "rank": x.rank, "shape": tuple(shape)},
                    [(x.item, tuple(shape))])[0]


def _is_zero_literal(ctx: ConvertContext, value: TensorValue) -> bool:
    tensor = ctx.builder.tensors.get(ctx.builder.origin.get(value.name, value.name))
    return (tensor is not None and tensor.data is not None and tensor.data.size == 1
            and value.name.endswith(".const") and float(tensor.data.reshape(-1)[0]) == 0.0)


# ---------------------------------------------------------------------- sliding windows (4.3)

_BORDER_METHODS = {"replicate": "REPLICATE", "reflect": "REFLECT", "reflect-even": "SYMMETRIC"}


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


# ---------------------------------------------------------------------- reductions (4.4)

def _axes(ctx: ConvertContext, x: TensorValue, axes: list) -> list:
    if len(set(axes)) != len(axes) or any(not 0 <= ax < x.rank for ax in axes):
        ctx.fail(f"'axes' {axes} must be unique and in [0, {x.rank})")
    return list(axes)


def _reduce(ctx: ConvertContext, a: dict, kind: str, item: str | None = None) -> list:
    x = a["input"]
    axes = _axes(ctx, x, a["axes"])
    shape = tuple(1 if i in axes else e for i, e in enumerate(x.shape))
    return ctx.emit(kind, [x], {"axes": tuple(axes), "squeeze": False}, [(item or x.item, shape)])


@conversion("sum_reduce")
def _sum_reduce(ctx: ConvertContext, a: dict) -> list:
    return _reduce(ctx, a, "math.mean_reduce" if a["normalize"] else "math.sum_reduce")


@conversion("max_reduce", "min_reduce", "any_reduce", "all_reduce")
@conversion("mean_reduce", compound=True)
def _simple_reduce(ctx: ConvertContext, a: dict) -> list:
    return _reduce(ctx, a, "math." + ctx.op)


@conversion("moments", compound=True)
def _moments(ctx: ConvertContext, a: dict) -> list:
    x = a["input"]
    axes = _axes(ctx, x, a["axes"])
    shape = tuple(1 if i in axes else e for i, e in enumerate(x.shape))
    return ctx.emit("math.moments", [x], {"axes": tuple(axes), "squeeze": False},
                    [(x.item, shape), (x.item, shape)])


@conversion("argmax_reduce", "argmin_reduce")
def _arg_reduce(ctx: ConvertContext, a: dict) -> list:
    x = a["input"]
    axes = _axes(ctx, x, a["axes"])
    if len(axes) != 1:
        ctx.fail(f"arg-reduction over {len(axes)} axes", unsupported=True,
                 hint="qsim maps argmax_reduce/argmin_reduce over one axis to math.argmax/argmin")
    shape = tuple(1 if i in axes else e for i, e in enumerate(x.shape))
    kind = "math.argmax" if ctx.op == "argmax_reduce" else "math.argmin"
    return ctx.emit(kind, [x], {"axis": axes[0], "squeeze": False}, [("integer", shape)])


# ---------------------------------------------------------------------- shape operations (4.5)

@conversion("reshape")
def _reshape_op(ctx: ConvertContext, a: dict) -> list:
    x, shape = a["input"], list(a["shape"])
    volume = int(np.prod(x.shape, dtype=np.int64))
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        ctx.fail(f"'shape' {shape} may hold non-negative items and at most one -1")
    resolved = [x.shape[i] if s == 0 and i < x.rank else s for i, s in enumerate(shape)]
    if -1 in resolved:
        known = int(np.prod([s for s in resolved if s != -1], dtype=np.int64))
        if known == 0 or volume % known:
            ctx.fail(f"'shape' {shape} cannot hold the {volume} items of input {list(x.shape)}")
        resolved[resolved.index(-1)] = volume // known
    if int(np.prod(resolved, dtype=np.int64)) != volume:
        ctx.fail(f"'shape' {shape} (= {resolved}) has a different volume than input {list(x.shape)}")
    return [_reshape(ctx, x, resolved)]


@conversion("squeeze", compound=True)
def _squeeze(ctx: ConvertContext, a: dict) -> list:
    x = a["input"]
    axes = _axes(ctx, x, a["axes"])
    if any(x.shape[ax] != 1 for ax in axes):
        ctx.fail(f"cannot squeeze axes {axes} of shape {list(x.shape)}: extents must be 1")
    shape = tuple(e for i, e in enumerate(x.shape) if i not in axes)
    return ctx.emit("layout.squeeze", [x], {"axes": tuple(axes)}, [(x.item, shape)])


@conversion("unsqueeze", compound=True)
def _unsqueeze(ctx: ConvertContext, a: dict) -> list:
    x, axes = a["input"], list(a["axes"])
    shape = list(x.shape)
    for ax in axes:
        if not 0 <= ax <= len(shape):
            ctx.fail(f"'axes' {axes} must be in [0, output rank)")
        shape.insert(ax, 1)
    return ctx.emit("layout.unsqueeze", [x], {"axes": tuple(axes)}, [(x.item, tuple(shape))])


@conversion("transpose")
def _transpose(ctx: ConvertContext, a: dict) -> list:
    x, axes = a["input"], list(a["axes"])
    if sorted(axes) != list(range(len(axes))) or len(axes) > x.rank:
        ctx.fail(f"'axes' {axes} is not a permutation of 0..{len(axes) - 1} within rank {x.rank}")
    perm = axes + list(range(len(axes), x.rank))
    shape = tuple(x.shape[p] for p in perm)
    return ctx.emit("layout.transpose", [x], {"axis": 0, "perm": tuple(perm)}, [(x.item, shape)])


@conversion("split")
def _split(ctx: ConvertContext, a: dict) -> list:
    x, axis, ratios = a["value"], a["axis"], list(a["ratios"])
    if not 0 <= axis < x.rank:
        ctx.fail(f"'axis' {axis} is outside [0, {x.rank})")
    total = sum(ratios)
    if not ratios or any(r <= 0 for r in ratios) or x.shape[axis] % total:
        ctx.fail(f"'ratios' {ratios} must be positive and their sum must divide extent {x.shape[axis]}")
    unit = x.shape[axis] // total
    sizes = [r * unit for r in ratios]
    outs = [(x.item, x.shape[:axis] + (s,) + x.shape[axis + 1:]) for s in sizes]
    return [ctx.emit("layout.split", [x], {"axis": axis, "count": None, "sizes": tuple(sizes)}, outs)]


@conversion("concat")
def _concat(ctx: ConvertContext, a: dict) -> list:
    values, axis = a["values"], a["axis"]
    if not values:
        ctx.fail("'values' is empty")
    first = values[0]
    if not 0 <= axis < first.rank:
        ctx.fail(f"'axis' {axis} is outside [0, {first.rank})")
    for v in values[1:]:
        if v.rank != first.rank or any(e != f for i, (e, f) in enumerate(zip(v.shape, first.shape)) if i != axis):
            ctx.fail(f"shapes {list(first.shape)} and {list(v.shape)} differ outside axis {axis}")
    shape = first.shape[:axis] + (sum(v.shape[axis] for v in values),) + first.shape[axis + 1:]
    return ctx.emit("layout.concat", values, {"axis": axis}, [(first.item, shape)])


@conversion("stack", compound=True)
def _stack(ctx: ConvertContext, a: dict) -> list:
    values, axis = a["values"], a["axis"]
    if not values or any(v.shape != values[0].shape for v in values):
        ctx.fail("'values' must be a non-empty array of tensors of one shape")
    if not 0 <= axis <= values[0].rank:
        ctx.fail(f"'axis' {axis} is outside [0, {values[0].rank}]")
    shape = values[0].shape[:axis] + (len(values),) + values[0].shape[axis:]
    return ctx.emit("layout.stack", values, {"axis": axis, "squeeze": False}, [(values[0].item, shape)])


@conversion("unstack", compound=True)
def _unstack(ctx: ConvertContext, a: dict) -> list:
    x, axis = a["value"], a["axis"]
    if not 0 <= axis < x.rank:
        ctx.fail(f"'axis' {axis} is outside [0, {x.rank})")
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return [ctx.emit("layout.unstack", [x], {"axis": axis, "squeeze": True},
                     [(x.item, shape)] * x.shape[axis])]


@conversion("slice")
def _slice(ctx: ConvertContext, a: dict) -> list:
    x, axes, begin, end = a["input"], list(a["axes"]), list(a["begin"]), list(a["end"])
    if not len(axes) == len(begin) == len(end):
        ctx.fail(f"'axes', 'begin' and 'end' have lengths {len(axes)}, {len(begin)}, {len(end)}")
    axes = _axes(ctx, x, axes)
    shape = list(x.shape)
    b_abs, e_abs = [], []
    for ax, b, e in zip(axes, begin, end):
        extent = x.shape[ax]
        b2 = b + extent if b < 0 else b
        e2 = extent if e == 0 else (e + extent if e < 0 else e)
        if not (0 <= b2 < e2 <= extent):
            ctx.fail(f"slice [{b}:{e}] of axis {ax} (extent {extent}) is empty or out of range")
        b_abs.append(b2)
        e_abs.append(e2)
        shape[ax] = e2 - b2
    attrs = {"axes": tuple(axes), "begin": tuple(b_abs), "end": tuple(e_abs), "stride": (1,) * len(axes)}
    return ctx.emit("layout.slice", [x], attrs, [(x.item, tuple(shape))])


@conversion("tile")
def _tile(ctx: ConvertContext, a: dict) -> list:
    x, repeats = a["input"], list(a["repeats"])
    if len(repeats) != x.rank or any(r <= 0 for r in repeats):
        ctx.fail(f"'repeats' {repeats} must have {x.rank} positive items")
    shape = tuple(e * r for e, r in zip(x.shape, repeats))
    return ctx.emit("layout.tile", [x], {"axes": tuple(range(x.rank)), "repeats": tuple(repeats)},
                    [(x.item, shape)])


@conversion("pad")
def _pad(ctx: ConvertContext, a: dict) -> list:
    x, padding, border = a["input"], [tuple(p) for p in a["padding"]], a["border"]
    if len(padding) != x.rank or any(p < 0 or q < 0 for p, q in padding):
        ctx.fail(f"'padding' {padding} must have {x.rank} non-negative (before, after) pairs")
    methods = {"constant": "CONSTANT", **_BORDER_METHODS}
    if border not in methods:
        ctx.fail(f"border {border!r} is not one of {', '.join(map(repr, methods))}")
    value = None if a["value"] == 0.0 else ctx.composer.literal_tensor(a["value"], x.item, ctx.hint)
    shape = tuple(e + p + q for e, (p, q) in zip(x.shape, padding))
    attrs = {"axes": tuple(range(x.rank)), "padding": tuple([p for p, _ in padding] + [q for _, q in padding]),
             "method": methods[border]}
    return ctx.emit("layout.pad", [x, value], attrs, [(x.item, shape)])


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
    if len(size) != x.rank or any(s <= 0 for s in size):
        ctx.fail(f"'size' {size} must have {x.rank} positive items")
    axes = [i for i, s in enumerate(size) if s != 1] or [1]
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


