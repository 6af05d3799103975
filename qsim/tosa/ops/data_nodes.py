"""Spec 2.14 data nodes: CONST (2.14.1) and IDENTITY (2.14.2)."""
from __future__ import annotations

from ..signature import BOOL, F32, I8, I16, I32, Arg, Attr, AttrKind, OperatorDef, define, modes

DATA_MODES = modes(("Boolean", BOOL), ("signed 8", I8), ("signed 16", I16), ("signed 32", I32),
                   ("fp32", F32), names=("out_t",))

CONST = define(OperatorDef(
    "CONST", "2.14.1", inputs=(), attrs=(Attr("values", AttrKind.ARRAY, "out_t", binds_type=True),),
    outputs=(Arg("output", "out_t"),), modes=DATA_MODES,
    check=lambda call: [tuple(call.attrs["values"].shape)],
    ref=lambda inputs, attrs: [attrs["values"].copy()]))

IDENTITY = define(OperatorDef(
    "IDENTITY", "2.14.2", inputs=(Arg("input1", "in_out_t"),), attrs=(),
    outputs=(Arg("output", "in_out_t"),),
    modes=modes(("Boolean", BOOL), ("signed 8", I8), ("signed 16", I16), ("signed 32", I32),
                ("fp32", F32), names=("in_out_t",)),
    check=lambda call: [call.shapes[0]], ref=lambda inputs, attrs: [inputs[0].copy()]))
