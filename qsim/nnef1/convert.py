"""NNEF 1.0 operations → NNEF 2.0 standard operators (the ir op kinds of the SkriptND stdlib).

One function per 1.0 operation, registered in CONVERSIONS (convert_base.py, with the helpers
the families share). Each receives the bound, type-checked arguments (3.3.2) and emits 2.0
operators with the 2.0 attribute names, every attribute present
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

import math

import numpy as np

from ..limits import check_tensor_size
from .builder import ITEM_DTYPE, TensorValue
from .convert_base import _BORDER_METHODS, _axes, _expand, _reshape, broadcast_shape, channel_vector, conversion
from .convert_context import ConvertContext

# ---------------------------------------------------------------------- tensor introducing (4.1)

@conversion("external")
def _external(ctx: ConvertContext, a: dict) -> list:
    shape = _positive_shape(ctx, a["shape"])
    batch = ctx.composer.external_batch
    if batch is not None and shape and shape[0] == 1:
        shape[0] = batch
    name = ctx.builder.fresh(ctx.hint + ".external")
    return [ctx.builder.add_tensor(name, ctx.generic, shape)]


@conversion("constant")
def _constant(ctx: ConvertContext, a: dict) -> list:
    shape = _positive_shape(ctx, a["shape"])
    values = a["value"]
    volume = math.prod(shape)
    if len(values) not in (1, volume):
        ctx.fail(f"'value' has {len(values)} items, expected 1 or {volume} (the volume of shape {shape})")
    dtype = ITEM_DTYPE[ctx.generic].numpy
    check_tensor_size(shape, dtype.itemsize, f"constant '{ctx.hint}'", ctx.loc)
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
        # the first declaration may have been renamed to its identifier since
        return [TensorValue(ctx.builder.resolve(shared.name), shared.item, shared.shape)]
    # before its data are read or made: a variable is materialised at load time
    check_tensor_size(shape, ITEM_DTYPE[ctx.generic].numpy.itemsize, f"variable '{label}'", ctx.loc)
    data, quant = composer.load_variable(label, tuple(shape), ctx.generic, ctx.loc)
    name = ctx.builder.fresh(ctx.hint + ".variable")
    if data is None:
        data = np.zeros(shape, dtype=ITEM_DTYPE[ctx.generic].numpy)
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


# ---------------------------------------------------------------------- reductions (4.4)

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
    volume = math.prod(x.shape)
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        ctx.fail(f"'shape' {shape} may hold non-negative items and at most one -1")
    resolved = [x.shape[i] if s == 0 and i < x.rank else s for i, s in enumerate(shape)]
    if -1 in resolved:
        known = math.prod(s for s in resolved if s != -1)
        if known == 0 or volume % known:
            ctx.fail(f"'shape' {shape} cannot hold the {volume} items of input {list(x.shape)}")
        resolved[resolved.index(-1)] = volume // known
    if math.prod(resolved) != volume:
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

