"""Spec 2.8 comparison operators (EQUAL, GREATER, GREATER_EQUAL) and the 2.7 elementwise
ternary SELECT, which broadcasts the same way."""
from __future__ import annotations

import numpy as np

from .elementwise_binary import broadcast_shape
from ..signature import BOOL, F32, I8, I16, I32, Arg, OperatorDef, define, modes


def _compare(name, section, fn):
    # numpy comparisons with NaN are False, as the spec's isNaN branch
    return define(OperatorDef(
        name, section, inputs=(Arg("input1", "in_t"), Arg("input2", "in_t")), attrs=(),
        outputs=(Arg("output", "out_t"),),
        modes=modes(("signed 32", I32, BOOL), ("fp32", F32, BOOL), names=("in_t", "out_t")),
        check=lambda call: [broadcast_shape(call)], ref=lambda i, a: [fn(*i)]))


EQUAL = _compare("EQUAL", "2.8.1", np.equal)
GREATER = _compare("GREATER", "2.8.2", np.greater)
GREATER_EQUAL = _compare("GREATER_EQUAL", "2.8.3", np.greater_equal)

SELECT = define(OperatorDef(
    "SELECT", "2.7.1",
    inputs=(Arg("input1", "cmp_t"), Arg("input2", "in_out_t"), Arg("input3", "in_out_t")), attrs=(),
    outputs=(Arg("output", "in_out_t"),),
    modes=modes(("Boolean", BOOL, BOOL), ("signed 8", BOOL, I8), ("signed 16", BOOL, I16),
                ("signed 32", BOOL, I32), ("fp32", BOOL, F32), names=("cmp_t", "in_out_t")),
    check=lambda call: [broadcast_shape(call, ("input1", "input2", "input3"))],
    ref=lambda i, a: [np.where(i[0], i[1], i[2]).astype(i[1].dtype)]))
