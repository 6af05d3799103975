"""Broadcast operators (cvm-formalization, "Broadcast Operator").

Shapes are aligned on the right by prefixing 1s; each aligned pair must be equal or
contain a 1; the output takes the larger extent, and an input of extent 1 is read at
index min(d, 0) = 0.

broadcast_div: the formalization says only "divide". qsim follows the CVM runtime:
integer division truncating toward zero (C semantics), and 0 where the divisor is 0
(docs/cvm.md). Output precision rules (upper bounds on |result|):
add, sub: max(pa, pb) + 1; mul: pa + pb; div: pa (|trunc(a/b)| <= |a|); max: max(pa, pb).
"""
from __future__ import annotations

import numpy as np

from ..numerics import trunc_div
from .opdef import OpDef, define


def broadcast_shape(chk, a: tuple, b: tuple) -> tuple:
    k = max(len(a), len(b))
    sa = (1,) * (k - len(a)) + tuple(a)
    sb = (1,) * (k - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(sa, sb)):
        if x != y and x != 1 and y != 1:
            chk.fail(f"{chk.tensor('A')} of shape {list(a)} and {chk.tensor('B')} of shape {list(b)} "
                     f"do not broadcast: aligned dimension {i} is {x} vs {y}",
                     hint="aligned extents must be equal or one of them 1")
        out.append(max(x, y))
    return tuple(out)


def _infer(chk, shapes, attrs):
    return [broadcast_shape(chk, shapes[0], shapes[1])]


def div_or_zero(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b rounded toward zero; 0 where b == 0 (CVM runtime semantics)."""
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, trunc_div(a, safe))


_OPS = {
    "broadcast_add": (np.add, lambda pa, pb: max(pa, pb) + 1),
    "broadcast_sub": (np.subtract, lambda pa, pb: max(pa, pb) + 1),
    "broadcast_mul": (np.multiply, lambda pa, pb: pa + pb),
    "broadcast_div": (div_or_zero, lambda pa, pb: pa),
    "broadcast_max": (np.maximum, lambda pa, pb: max(pa, pb)),
}


def _make(name, fn, rule):
    def reference(inputs, attrs):
        a, b = inputs
        return [np.asarray(fn(a, b), dtype=np.int64)]

    def precision(chk, precs, shapes, attrs):
        return [rule(precs[0], precs[1])]

    define(OpDef(name, ("A", "B"), ("Y",), {}, _infer, precision, reference,
                 doc=f"Y = {name[10:]}(A, B) with broadcasting"))


for _name, (_fn, _rule) in _OPS.items():
    _make(_name, _fn, _rule)
