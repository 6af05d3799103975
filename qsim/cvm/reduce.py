"""Reduce operators sum and max (cvm-formalization, "Reduce Operator", all four cases).

Decisions (docs/cvm.md): the attribute is named `axis` (the test parameters' and the
CVM runtime's name; the prose says `axes`); when every axis is reduced and keepdims
is false the output has shape (1,) (case 2's K = 1), also for exclude=true with no axes.
"""
from __future__ import annotations

import numpy as np

from .opdef import OpDef, define
from .precision import bit_length


def reduced_axes(chk, shape, attrs) -> tuple[int, ...]:
    """R, the real axes reduced, from axis/exclude (validated: in [-N, N), distinct)."""
    n = len(shape)
    axis = chk.ints_attr(attrs, "axis")
    exclude = chk.bool_attr(attrs, "exclude")
    chk.bool_attr(attrs, "keepdims")
    t = [chk.axis(a, n, f"attribute 'axis' = {list(axis)}: axis") for a in axis]
    if len(set(t)) != len(t):
        chk.fail(f"attribute 'axis' = {list(axis)} names an axis twice (after adding {n} to negative "
                 "axes); the elements of axis must be different", hint="list each axis once")
    if not t:
        # case 2 (exclude=false, M=0): all axes; exclude=true with M=0 also leaves R = U
        return tuple(range(n))
    if exclude:
        return tuple(i for i in range(n) if i not in t)    # case 1 when this is empty
    return tuple(sorted(t))


def _infer(chk, shapes, attrs):
    (shape,) = shapes
    r = reduced_axes(chk, shape, attrs)
    if not r:
        return [shape]
    if attrs["keepdims"]:
        return [tuple(1 if i in r else d for i, d in enumerate(shape))]
    kept = tuple(d for i, d in enumerate(shape) if i not in r)
    return [kept or (1,)]


def _reduce(fn, inputs, attrs, chk_free_axes):
    (x,) = inputs
    r = chk_free_axes(x.shape, attrs)
    if not r:
        return [x.copy()]
    y = fn(x, axis=r, keepdims=True)
    return [y.reshape(_out_shape(x.shape, r, attrs["keepdims"]))]


def _out_shape(shape, r, keepdims):
    if keepdims:
        return tuple(1 if i in r else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in r) or (1,)


def _axes_unchecked(shape, attrs):
    """R for validated attrs (the reference runs after infer)."""
    n = len(shape)
    t = [a + n if a < 0 else a for a in attrs["axis"]]
    if not t:
        return tuple(range(n))
    if attrs["exclude"]:
        return tuple(i for i in range(n) if i not in t)
    return tuple(sorted(t))


def _sum_precision(chk, precs, shapes, attrs):
    """p + bit_length(K), K = number of elements summed into one output (CVM's rule).

    Bound: |sum| <= K * (2^(p-1) - 1) < 2^(p-1+bit_length(K)).
    """
    (shape,) = shapes
    r = _axes_unchecked(shape, attrs)
    if not r:
        return [precs[0]]
    k = int(np.prod([shape[i] for i in r], dtype=np.int64))
    return [precs[0] + bit_length(k)]


ATTRS = {"axis": (), "keepdims": False, "exclude": False}

define(OpDef("sum", ("X",), ("Y",), ATTRS, _infer, _sum_precision,
             lambda inputs, attrs: _reduce(np.sum, inputs, attrs, _axes_unchecked),
             doc="sum over the axes R"))
define(OpDef("max", ("X",), ("Y",), ATTRS, _infer,
             lambda chk, precs, shapes, attrs: [precs[0]],
             lambda inputs, attrs: _reduce(np.max, inputs, attrs, _axes_unchecked),
             doc="max over the axes R"))
