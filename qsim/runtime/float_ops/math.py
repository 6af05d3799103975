"""`math` module operators (NNEF 2.0 4.2) and `linalg` (4.3) as numpy."""
from __future__ import annotations

import numpy as np

from ... import numerics
from .base import fail, norm_axes, norm_axis, real_dtype, register
from .bounds import bounded

# ---- 4.2.1 unary ---------------------------------------------------------------------------

def erf(x: np.ndarray) -> np.ndarray:
    # an op's rank-0 intermediate (x / c of a 0-d array) is a numpy scalar, not an ndarray
    x = np.asarray(x)
    return numerics.erf(x).astype(x.dtype if x.dtype.kind == "f" else np.float64)


_UNARY = {
    "iden": lambda x: x.copy(), "neg": np.negative, "rcp": lambda x: 1.0 / x,
    "sqr": lambda x: x * x, "sqrt": np.sqrt, "rsqr": lambda x: 1.0 / (x * x),
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "exp": np.exp, "log": np.log,
    "log2": lambda x: np.log(x) / np.log(x.dtype.type(2.0)),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "abs": np.abs,
    "sign": np.sign, "not": np.logical_not, "floor": np.floor, "ceil": np.ceil,
    "round": numerics.nnef_round,
}


def _unary(fn):
    return lambda ins, at: [np.asarray(fn(ins[0]))]


for _name, _fn in _UNARY.items():
    register("math." + _name)(_unary(_fn))


# ---- 4.2.2 binary with alignment -----------------------------------------------------------

def aligned(arrays: list[np.ndarray], aligns: list) -> list[np.ndarray]:
    """Pads each argument with singleton dims as the @using blocks of 4.2.2 prescribe.

    q = rank + |align ?? 0|; r = max q; p = (align < 0 ? r - q : align) ?? r - rank;
    the argument becomes [1 ..(p), shape.., 1 ..(r - rank - p)].
    """
    ranks = [a.ndim for a in arrays]
    qs = [r + abs(al or 0) for r, al in zip(ranks, aligns)]
    rz = max(qs)
    out = []
    for a, r, q, al in zip(arrays, ranks, qs, aligns):
        p = rz - r if al is None else (rz - q if al < 0 else al)
        out.append(a.reshape((1,) * p + a.shape + (1,) * (rz - r - p)))
    return out


def broadcast_check(op: str, arrays: list[np.ndarray]) -> None:
    try:
        np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        fail(op, "incompatible argument shapes for broadcasting ("
             + " vs ".join(str(list(a.shape)) for a in arrays) + " after alignment)",
             hint="extents must match or be 1; use lhs_align/rhs_align to align ranks")


_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "mod": numerics.floor_mod, "pow": np.power,
    "min": np.minimum, "max": np.maximum, "lt": np.less, "gt": np.greater,
    "le": np.less_equal, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
    "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
}


def _div(x, y):
    # int / int rounds downwards in SkriptND (2.4); real division otherwise.
    if x.dtype.kind in "iu" and y.dtype.kind in "iu":
        return numerics.floor_div(x, y)
    return np.divide(x, y)


_BINARY["div"] = _div


def _binary(name, fn):
    def impl(ins, at):
        x, y = ins[0], ins[1]
        if type(x) is np.ndarray and type(y) is np.ndarray and x.shape == y.shape and \
                at.get("lhs_align") is None and at.get("rhs_align") is None:
            return [np.asarray(fn(x, y))]      # equal shapes: nothing to align or broadcast
        x, y = aligned([np.asarray(ins[0]), np.asarray(ins[1])],
                       [at.get("lhs_align"), at.get("rhs_align")])
        broadcast_check("math." + name, [x, y])
        return [np.asarray(fn(x, y))]
    return impl


for _name, _fn in _BINARY.items():
    register("math." + _name)(_binary(_name, _fn))


@register("math.select")
def select(ins, at):
    c, x, y = aligned([np.asarray(a) for a in ins],
                      [at.get("cond_align"), at.get("lhs_align"), at.get("rhs_align")])
    broadcast_check("math.select", [c, x, y])
    return [np.where(c, x, y)]


# ---- 4.2.4 n-ary ----------------------------------------------------------------------------

def _nary(name, fn):
    def impl(ins, at):
        xs = ins[0]
        if not xs:
            fail("math." + name, "needs at least one input tensor")
        return [fn(np.stack(xs))]
    return impl


register("math.sum_n")(_nary("sum_n", lambda s: s.sum(axis=0, dtype=s.dtype)))
register("math.prod_n")(_nary("prod_n", lambda s: s.prod(axis=0, dtype=s.dtype)))
register("math.min_n")(_nary("min_n", lambda s: s.min(axis=0)))
register("math.max_n")(_nary("max_n", lambda s: s.max(axis=0)))
register("math.argmin_n")(_nary("argmin_n", lambda s: s.argmin(axis=0).astype(np.int64)))
register("math.argmax_n")(_nary("argmax_n", lambda s: s.argmax(axis=0).astype(np.int64)))
register("math.any_n")(_nary("any_n", lambda s: s.any(axis=0)))
register("math.all_n")(_nary("all_n", lambda s: s.all(axis=0)))


# ---- 4.2.5 misc element-wise ----------------------------------------------------------------

@register("math.axpb")
def axpb(ins, at):
    a, x, b = aligned([np.asarray(v) for v in ins],
                      [at.get("a_align"), at.get("x_align"), at.get("b_align")])
    broadcast_check("math.axpb", [a, x, b])
    return [a * x + b]


@register("math.axpy")
def axpy(ins, at):
    a, x, b, y = aligned([np.asarray(v) for v in ins],
                         [at.get("a_align"), at.get("x_align"), at.get("b_align"), at.get("y_align")])
    broadcast_check("math.axpy", [a, x, b, y])
    return [a * x + b * y]


@register("math.clamp")
def clamp(ins, at):
    x, a, b = aligned([np.asarray(v) for v in ins],
                      [at.get("val_align"), at.get("min_align"), at.get("max_align")])
    broadcast_check("math.clamp", [x, a, b])
    # y = x < a ? a : x > b ? b : x  (a wins over b when a > b, as the formula says)
    if a.size == 1 and b.size == 1 and a.dtype == b.dtype == x.dtype and a.ravel()[0] <= b.ravel()[0]:
        # constant bounds in order (relu6): the same values, without np.where's two temporaries
        # (NaN stays NaN both ways)
        y = bounded(x, a.reshape(()), b.reshape(()))           # numpy's values, one pass
        return [y.reshape(np.broadcast_shapes(x.shape, a.shape, b.shape))]
    return [np.where(x < a, a, np.where(x > b, b, x))]


# ---- 4.2.6 reductions -----------------------------------------------------------------------

def reduce_axes(op: str, x: np.ndarray, at) -> tuple[tuple[int, ...], bool]:
    axes = at.get("axes")
    axes = tuple(range(x.ndim)) if axes is None else norm_axes(axes, x.ndim, op)
    return axes, bool(at.get("squeeze", False))


def _reduce(name, fn, needs_elements: bool = False):
    """`needs_elements`: a reduction without an identity (min, max): the spec's @lower assigns
    its output only from input elements, so an output element over an empty range has no value
    (an empty output is fine)."""
    def impl(ins, at):
        x = np.asarray(ins[0])
        axes, squeeze = reduce_axes("math." + name, x, at)
        if needs_elements and any(x.shape[d] == 0 for d in axes):
            kept = [x.shape[d] for d in range(x.ndim) if d not in axes]
            if not all(kept):       # no output element either: numpy would still refuse
                shape = kept if squeeze else [1 if d in axes else x.shape[d] for d in range(x.ndim)]
                return [np.empty(shape, x.dtype)]
            fail("math." + name, f"the input shape {list(x.shape)} has extent 0 along a reduced axis "
                 f"(axes {list(axes)}): the {name.split('_')[0]}imum of no elements has no value",
                 hint="reduce over axes of positive extent, or guard the reduction for empty inputs")
        return [np.asarray(fn(x, axes, not squeeze))]
    return impl


register("math.min_reduce")(_reduce("min_reduce", lambda x, a, k: x.min(axis=a, keepdims=k), True))
register("math.max_reduce")(_reduce("max_reduce", lambda x, a, k: x.max(axis=a, keepdims=k), True))
register("math.sum_reduce")(_reduce("sum_reduce", lambda x, a, k: x.sum(axis=a, keepdims=k, dtype=x.dtype)))
register("math.prod_reduce")(_reduce("prod_reduce", lambda x, a, k: x.prod(axis=a, keepdims=k, dtype=x.dtype)))
register("math.mean_reduce")(_reduce("mean_reduce", lambda x, a, k: x.mean(axis=a, keepdims=k, dtype=x.dtype)))
register("math.any_reduce")(_reduce("any_reduce", lambda x, a, k: x.any(axis=a, keepdims=k)))
register("math.all_reduce")(_reduce("all_reduce", lambda x, a, k: x.all(axis=a, keepdims=k)))


@register("math.lp_reduce")
def lp_reduce(ins, at):
    x = np.asarray(ins[0])
    axes, squeeze = reduce_axes("math.lp_reduce", x, at)
    p = at.get("p")
    if p is None or p <= 0:
        fail("math.lp_reduce", f"'p' must be positive; got {p}")
    s = np.power(np.abs(x), x.dtype.type(p)).sum(axis=axes, keepdims=not squeeze, dtype=x.dtype)
    return [np.power(s, x.dtype.type(1.0 / p))]


@register("math.moments")
def moments(ins, at):
    x = np.asarray(ins[0])
    axes, squeeze = reduce_axes("math.moments", x, at)
    mean = x.mean(axis=axes, keepdims=True, dtype=x.dtype)
    var = np.square(x - mean).mean(axis=axes, keepdims=not squeeze, dtype=x.dtype)
    return [mean.reshape(var.shape) if squeeze else mean, var]


def _arg(name, pick):
    def impl(ins, at):
        x = np.asarray(ins[0])
        if "axis" not in at:
            fail("math." + name, "attribute 'axis' is required")
        axis = norm_axis(at["axis"], x.ndim, "math." + name)
        if x.shape[axis] == 0:
            fail("math." + name, "input shape along dimension 'axis' must be positive")
        # first occurrence wins: the @lower updates only on strict improvement
        r = pick(x, axis).astype(np.int64)
        return [r if at.get("squeeze", False) else np.expand_dims(r, axis)]
    return impl


register("math.argmin")(_arg("argmin", lambda x, a: np.argmin(x, axis=a)))
register("math.argmax")(_arg("argmax", lambda x, a: np.argmax(x, axis=a)))


def _arg_nd(name, pick):
    def impl(ins, at):
        x = np.asarray(ins[0])
        axes, squeeze = reduce_axes("math." + name, x, at)
        kept = [d for d in range(x.ndim) if d not in axes]
        red = sorted(axes)
        if any(x.shape[d] == 0 for d in red):
            fail("math." + name, "input shape along 'axes' must be positive")
        # the @lower scans i < s in row-major order, so ties go to the first index in that order
        moved = np.transpose(x, kept + red).reshape([x.shape[d] for d in kept] + [-1])
        flat = pick(moved, -1)
        multi = np.unravel_index(flat, [x.shape[d] for d in red]) if red else ()
        by_dim = dict(zip(red, multi))
        out = np.stack([by_dim[a] for a in axes], axis=-1).astype(np.int64) if axes else \
            np.zeros(flat.shape + (0,), np.int64)
        if not squeeze:
            shape = [1 if d in axes else x.shape[d] for d in range(x.ndim)] + [len(axes)]
            out = out.reshape(shape)
        return [out]
    return impl


register("math.argmin_nd")(_arg_nd("argmin_nd", lambda x, a: np.argmin(x, axis=a)))
register("math.argmax_nd")(_arg_nd("argmax_nd", lambda x, a: np.argmax(x, axis=a)))


@register("math.cumsum")
def cumsum(ins, at):
    x = np.asarray(ins[0])
    axis = norm_axis(at["axis"], x.ndim, "math.cumsum")
    y = np.flip(x, axis) if at.get("reverse", False) else x
    c = np.cumsum(y, axis=axis, dtype=x.dtype)
    if at.get("exclusive", False):
        c = c - y
    return [np.flip(c, axis) if at.get("reverse", False) else c]


# ---- 4.3 linalg -----------------------------------------------------------------------------

@register("linalg.dot")
def dot(ins, at):
    x, y, b = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    z = np.asarray(np.dot(x, y), dtype=real_dtype(x, y))
    return [z + b if b is not None else z]


@register("linalg.matvec")
def matvec(ins, at):
    A, x, b = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    y = (A.T if at.get("transA", False) else A) @ x
    return [y + b if b is not None else y]


@register("linalg.matmul")
def matmul(ins, at):
    A, B, C = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    if at.get("transA", False):
        A = np.swapaxes(A, -1, -2)
    if at.get("transB", False):
        B = np.swapaxes(B, -1, -2)
    if A.shape[-1] != B.shape[-2]:
        fail("linalg.matmul", f"inner dimensions differ: A.shape={list(ins[0].shape)}, "
             f"B.shape={list(ins[1].shape)}", hint="check transA/transB")
    try:
        Z = np.matmul(A, B)
    except ValueError:
        fail("linalg.matmul", "incompatible batch dimensions of A and B "
             f"({list(ins[0].shape[:-2])} vs {list(ins[1].shape[:-2])})")
    return [Z + C if C is not None else Z]


@register("linalg.outer")
def outer(ins, at):
    x, y = ins
    return [np.multiply.outer(x, y)]
