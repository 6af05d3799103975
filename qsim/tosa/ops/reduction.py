"""Spec 2.9 reduction operators along one axis; the output keeps the axis with extent 1."""
from __future__ import annotations

import numpy as np

from ..arith import INT32_MAX, INT32_MIN, require_running_sums
from ..signature import BOOL, F32, I8, I16, I32, Arg, Attr, AttrKind, Call, OperatorDef, define, modes


def _check_reduce(call: Call):
    shape = call.shapes[0]
    axis = call.attrs["axis"]
    call.error_if(axis < 0 or axis >= len(shape), "axis < 0 || axis >= rank(shape1)",
                  f"axis={axis}, input of shape {list(shape)}")
    return [tuple(1 if i == axis else d for i, d in enumerate(shape))]


def _reduce(name, section, modes_, ref):
    return define(OperatorDef(
        name, section, inputs=(Arg("input", "in_out_t", (1, 2, 3, 4)),),
        attrs=(Attr("axis", AttrKind.INT),), outputs=(Arg("output", "in_out_t"),), modes=modes_,
        check=_check_reduce, ref=ref))


def _reduce_sum(inputs, attrs):
    x, axis = inputs[0], attrs["axis"]
    if x.dtype.kind == "f":
        return [np.sum(x, axis=axis, keepdims=True, dtype=np.float32)]
    # state = apply_add<int32_t>(state, value) over the axis in index order, from 0
    total = require_running_sums(x, INT32_MIN, INT32_MAX, "REDUCE_SUM", axis=axis)
    return [np.expand_dims(total, axis).astype(np.int32)]


INTS = modes(("signed 8", I8), ("signed 16", I16), ("signed 32", I32), ("fp32", F32), names=("in_out_t",))

REDUCE_ALL = _reduce("REDUCE_ALL", "2.9.1", modes(("Boolean", BOOL), names=("in_out_t",)),
                     lambda i, a: [np.all(i[0], axis=a["axis"], keepdims=True)])
REDUCE_ANY = _reduce("REDUCE_ANY", "2.9.2", modes(("Boolean", BOOL), names=("in_out_t",)),
                     lambda i, a: [np.any(i[0], axis=a["axis"], keepdims=True)])
REDUCE_MAX = _reduce("REDUCE_MAX", "2.9.3", INTS,
                     lambda i, a: [np.max(i[0], axis=a["axis"], keepdims=True)])
REDUCE_MIN = _reduce("REDUCE_MIN", "2.9.4", INTS,
                     lambda i, a: [np.min(i[0], axis=a["axis"], keepdims=True)])
REDUCE_PRODUCT = _reduce("REDUCE_PRODUCT", "2.9.5", modes(("fp32", F32), names=("in_out_t",)),
                         lambda i, a: [np.prod(i[0], axis=a["axis"], keepdims=True, dtype=np.float32)])
REDUCE_SUM = _reduce("REDUCE_SUM", "2.9.6", modes(("signed 32", I32), ("fp32", F32), names=("in_out_t",)),
                     _reduce_sum)
