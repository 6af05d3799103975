"""Spec 2.4 activation functions: CLAMP (2.4.1). SIGMOID and TANH have only floating-point
modes (2.4.2, 2.4.3); integer graphs use TABLE with `sigmoid_table()`/`tanh_table()`."""
from __future__ import annotations

import math

import numpy as np

from ..arith import apply_clip, generate_lookup_table
from ..signature import F32, I8, I16, Arg, Attr, AttrKind, Call, OperatorDef, define, modes


def _check_clamp(call: Call):
    a = call.attrs
    call.error_if(a["max_val"] < a["min_val"], "max_val < min_val",
                  f"min_val={a['min_val']}, max_val={a['max_val']}")
    return [call.shapes[0]]


def _clamp_ref(inputs, attrs):
    x = inputs[0]
    return [apply_clip(x, attrs["min_val"], attrs["max_val"]).astype(x.dtype)]


CLAMP = define(OperatorDef(
    "CLAMP", "2.4.1",
    inputs=(Arg("Input", "in_out_t"),),
    attrs=(Attr("min_val", AttrKind.SCALAR, "in_out_t"), Attr("max_val", AttrKind.SCALAR, "in_out_t")),
    outputs=(Arg("Output", "in_out_t"),),
    modes=modes(("signed 8", I8), ("signed 16", I16), ("fp32", F32), names=("in_out_t",)),
    check=_check_clamp, ref=_clamp_ref))


def _float_unary(fn):
    return lambda inputs, attrs: [fn(inputs[0].astype(np.float32)).astype(np.float32)]


SIGMOID = define(OperatorDef(
    "SIGMOID", "2.4.2", inputs=(Arg("Input", "in_out_t"),), attrs=(),
    outputs=(Arg("Output", "in_out_t"),), modes=modes(("fp32", F32), names=("in_out_t",)),
    check=lambda call: [call.shapes[0]], ref=_float_unary(lambda x: 1.0 / (1.0 + np.exp(-x)))))

TANH = define(OperatorDef(
    "TANH", "2.4.3", inputs=(Arg("Input", "in_out_t"),), attrs=(),
    outputs=(Arg("Output", "in_out_t"),), modes=modes(("fp32", F32), names=("in_out_t",)),
    check=lambda call: [call.shapes[0]], ref=_float_unary(np.tanh)))


def _round_to_nearest_int(v: float) -> int:
    # round half away from zero; ties cannot occur for these tables except at 0.5 steps
    return int(math.floor(v + 0.5)) if v >= 0 else -int(math.floor(-v + 0.5))


def sigmoid_table() -> np.ndarray:
    """The 513-entry int16 sigmoid table of spec 2.4.2 (inputs -16.0..16.0 in steps of 1/16)."""
    return generate_lookup_table(lambda x: _round_to_nearest_int(32768.0 / (1.0 + math.exp(-x / 16.0))))


def tanh_table() -> np.ndarray:
    """The 513-entry int16 tanh table of spec 2.4.3 (inputs -8.0..8.0 in steps of 1/32)."""
    def ref(x):
        v = math.exp(-2.0 * (x / 32.0))
        return _round_to_nearest_int(32768.0 * (1.0 - v) / (1.0 + v))
    return generate_lookup_table(ref)
