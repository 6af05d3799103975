"""Layer normalization as the float graph spells it, found for a lowering (any target).

NNEF 2.0 has no layer-norm operator, so it reaches the quantizer composed:

    mean = mean_reduce(x, axes)            (squeeze false)
    d    = sub(x, mean)
    sq   = sqr(d) | pow(d, 2) | mul(d, d)
    var  = mean_reduce(sq, axes)
   [v    = add(var, eps) | add(eps, var)]  (eps a non-negative scalar constant)
    n    = div(d, sqrt(v)) | div(d, pow(v, 0.5)) | mul(d, rsqrt(v)) | mul(d, rcp(sqrt(v)))
         | mul(d, pow(v, -0.5))            (either operand order for mul)
   [y    = mul(n, gamma)]                   (constants broadcasting over `axes` only)
   [y    = add(y, beta)]

ONNX LayerNormalization (opset 17, composed by qsim.onnx) and its opset-16 export
(ReduceMean, Sub, Pow, Add, Sqrt, Div, Mul, Add), and nnef-tools' conversions, all take
this form. Every intermediate must be read by the pattern alone (not a graph output, not
annotated with @quantize), so the whole chain can become one integer computation.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import ir
from .float_patterns import is_annotated
from .float_side import FloatSide


@dataclass(frozen=True)
class LayerNorm:
    ops: tuple[ir.Op, ...]          # the float ops of the pattern (the rule marks them fused)
    x: str                          # the normalized tensor
    axes: tuple[int, ...]           # normalized axes of x, ascending
    epsilon: float
    gamma: np.ndarray | None        # float64, x's rank, extent 1 outside `axes`
    beta: np.ndarray | None
    output: str                     # the float tensor the pattern computes


def _private(f: FloatSide, name: str, readers: int = 1) -> list[ir.Op] | None:
    """The ops reading `name` when exactly `readers` do and nothing else needs it."""
    if name in f.graph.outputs or is_annotated(f, name):
        return None
    users = f.consumers(name)
    return users if len(users) == readers else None


def _single(f: FloatSide, name: str, kind: str | tuple[str, ...]) -> ir.Op | None:
    users = _private(f, name)
    if users is None:
        return None
    kinds = (kind,) if isinstance(kind, str) else kind
    return users[0] if users[0].kind.name in kinds else None


def _scalar(f: FloatSide, name: str) -> float | None:
    if not f.is_constant(name):
        return None
    data = f.constant(name)
    return float(data.reshape(-1)[0]) if data.size == 1 else None


def _plain(op: ir.Op) -> bool:
    """A binary op with numpy (right-aligned) broadcasting."""
    return op.attrs.get("lhs_align") is None and op.attrs.get("rhs_align") is None


def _other(op: ir.Op, name: str) -> str | None:
    """The operand of binary `op` that is not `name` (None when both are `name`)."""
    a, b = op.inputs[:2]
    if a == name and b != name:
        return b
    if b == name and a != name:
        return a
    return None


def _is_square_of(f: FloatSide, op: ir.Op, d: str) -> bool:
    kind = op.kind.name
    if kind == "math.sqr":
        return op.inputs[0] == d
    if kind == "math.mul":
        return tuple(op.inputs[:2]) == (d, d)
    if kind == "math.pow":
        return op.inputs[0] == d and _scalar(f, op.inputs[1]) == 2.0
    return False


def _power_of(f: FloatSide, op: ir.Op) -> float | None:
    """The exponent p when `op` computes v^p (sqrt 0.5, rsqrt -0.5, pow by a constant)."""
    kind = op.kind.name
    if kind == "math.sqrt":
        return 0.5
    if kind == "math.rsqrt":
        return -0.5
    if kind == "math.pow":
        return _scalar(f, op.inputs[1])
    return None


def _normalizer(f: FloatSide, v: str, d: str, d_users: list[ir.Op]):
    """The op computing d / sqrt(v) from `v`, and the ops between, or (None, [])."""
    root = _single(f, v, ("math.sqrt", "math.rsqrt", "math.pow"))
    if root is None or root.inputs[0] != v:
        return None, []
    chain = [root]
    power = _power_of(f, root)
    s = root.outputs[0]
    if power == 0.5:
        nxt = _single(f, s, ("math.div", "math.rcp"))
        if nxt is not None and nxt.kind.name == "math.rcp":
            chain.append(nxt)
            s, power = nxt.outputs[0], -0.5
            nxt = _single(f, s, "math.mul")
    elif power == -0.5:
        nxt = _single(f, s, "math.mul")
    else:
        return None, []
    if nxt is None or nxt not in d_users or not _plain(nxt):
        return None, []
    if nxt.kind.name == "math.div" and tuple(nxt.inputs[:2]) != (d, s):
        return None, []
    if nxt.kind.name == "math.mul" and _other(nxt, d) != s:
        return None, []
    return nxt, chain


def _affine(f: FloatSide, op: ir.Op, current: str, shape, axes) -> np.ndarray | None:
    """The constant operand of `op` (mul/add with `current`) broadcast to x's rank with
    extent 1 outside `axes`, or None when it does not broadcast that way."""
    if not _plain(op):
        return None
    other = _other(op, current)
    if other is None or not f.is_constant(other):
        return None
    data = f.constant(other)
    if data.ndim > len(shape):
        return None
    full = data.reshape((1,) * (len(shape) - data.ndim) + data.shape)
    for i, e in enumerate(full.shape):
        if e != 1 and (i not in axes or e != shape[i]):
            return None
    return full


def match_layer_norm(f: FloatSide, mean_op: ir.Op) -> LayerNorm | None:
    """The layer norm starting at math.mean_reduce `mean_op`, or None."""
    if mean_op.kind.name != "math.mean_reduce" or bool(mean_op.attrs.get("squeeze", False)):
        return None
    x = mean_op.inputs[0]
    shape = f.graph.tensor(x).shape
    if f.is_constant(x) or not f.graph.tensor(x).is_static:
        return None
    rank = len(shape)
    axes = tuple(sorted({int(a) % rank for a in mean_op.attrs.get("axes", range(rank))}))
    sub = _single(f, mean_op.outputs[0], "math.sub")
    if sub is None or tuple(sub.inputs[:2]) != (x, mean_op.outputs[0]) or not _plain(sub):
        return None
    d = sub.outputs[0]
    d_users = _private(f, d, readers=2)
    if d_users is None:
        return None
    squares = [op for op in d_users if _is_square_of(f, op, d)]
    if len(squares) != 1:
        return None
    var_op = _single(f, squares[0].outputs[0], "math.mean_reduce")
    if (var_op is None or bool(var_op.attrs.get("squeeze", False))
            or tuple(sorted({int(a) % rank for a in var_op.attrs.get("axes", range(rank))})) != axes):
        return None
    ops = [mean_op, sub, squares[0], var_op]
    v, eps = var_op.outputs[0], 0.0
    add = _single(f, v, "math.add")
    if add is not None:
        other = _other(add, v)
        eps_value = None if other is None else _scalar(f, other)
        if eps_value is not None and eps_value >= 0.0 and _plain(add):
            ops.append(add)
            v, eps = add.outputs[0], eps_value
    norm, chain = _normalizer(f, v, d, d_users)
    if norm is None:
        return None
    ops += chain + [norm]
    out = norm.outputs[0]
    gamma = beta = None
    nxt = _single(f, out, ("math.mul", "math.add"))
    if nxt is not None and nxt.kind.name == "math.mul":
        gamma = _affine(f, nxt, out, shape, axes)
        if gamma is not None:
            ops.append(nxt)
            out = nxt.outputs[0]
            nxt = _single(f, out, "math.add")
    if nxt is not None and nxt.kind.name == "math.add":
        beta = _affine(f, nxt, out, shape, axes)
        if beta is not None:
            ops.append(nxt)
            out = nxt.outputs[0]
    return LayerNorm(tuple(ops), x, axes, eps, gamma, beta, out)
