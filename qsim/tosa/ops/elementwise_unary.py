"""Spec 2.6 elementwise unary operators. Integer modes: ABS, BITWISE_NOT, CLZ, LOGICAL_NOT,
NEGATE; CEIL, EXP, FLOOR, LOG, RECIPROCAL, RSQRT are floating-point only (fp32 here)."""
from __future__ import annotations

import numpy as np

from ...errors import UnpredictableError
from ..arith import INT32_MAX, INT32_MIN, apply_clip, apply_sub, count_leading_zeros
from ..signature import BOOL, F32, I8, I16, I32, Arg, Attr, AttrKind, Call, OperatorDef, define, modes


def _unary(name, section, modes_, ref, attrs=(), check=None):
    return define(OperatorDef(
        name, section, inputs=(Arg("input1", "in_out_t"),), attrs=attrs,
        outputs=(Arg("output", "in_out_t"),), modes=modes_,
        check=check or (lambda call: [call.shapes[0]]), ref=ref))


def _abs(inputs, attrs):
    x = inputs[0]
    if x.dtype.kind == "f":
        return [np.abs(x)]          # -0.0 -> +0.0 as the spec's first step
    v = x.astype(np.int64)
    # value1 < 0: apply_sub<int32_t>(0, value1), which REQUIREs -minimum<int32_t> to fit
    out = np.where(v < 0, apply_sub(0, np.where(v < 0, v, 0), INT32_MIN, INT32_MAX, "ABS"), v)
    return [out.astype(np.int32)]


FP32 = modes(("fp32", F32), names=("in_out_t",))

ABS = _unary("ABS", "2.6.1", modes(("signed 32", I32), ("fp32", F32), names=("in_out_t",)), _abs)
BITWISE_NOT = _unary("BITWISE_NOT", "2.6.2",
                     modes(("signed 8", I8), ("signed 16", I16), ("signed 32", I32), names=("in_out_t",)),
                     lambda i, a: [np.invert(i[0])])
CLZ = _unary("CLZ", "2.6.4", modes(("signed 32", I32), names=("in_out_t",)),
             lambda i, a: [count_leading_zeros(i[0], 32).astype(np.int32)])
LOGICAL_NOT = _unary("LOGICAL_NOT", "2.6.8", modes(("bool", BOOL), names=("in_out_t",)),
                     lambda i, a: [np.logical_not(i[0])])


def _float(fn):
    def ref(inputs, attrs):
        with np.errstate(divide="ignore", invalid="ignore"):
            return [fn(inputs[0]).astype(np.float32)]
    return ref


CEIL = _unary("CEIL", "2.6.3", FP32, _float(np.ceil))
EXP = _unary("EXP", "2.6.5", FP32, _float(np.exp))
FLOOR = _unary("FLOOR", "2.6.6", FP32, _float(np.floor))
LOG = _unary("LOG", "2.6.7", FP32, _float(np.log))
RECIPROCAL = _unary("RECIPROCAL", "2.6.10", FP32, _float(lambda x: np.float32(1.0) / x))
RSQRT = _unary("RSQRT", "2.6.11", FP32, _float(lambda x: np.float32(1.0) / np.sqrt(x)))


def _check_negate(call: Call):
    a = call.attrs
    int8 = call.type("in_out_t") is I8
    call.error_if(not int8 and a["input1_zp"] != 0, "in_out_t != int8_t && input1_zp != 0",
                  f"input1_zp={a['input1_zp']}")
    call.error_if(not int8 and a["output_zp"] != 0, "in_out_t != int8_t && output_zp != 0",
                  f"output_zp={a['output_zp']}")
    return [call.shapes[0]]


def _negate(inputs, attrs):
    x = inputs[0]
    if x.dtype.kind == "f":
        return [np.negative(x)]
    value = x.astype(np.int64) - attrs["input1_zp"]                # acc_t = int32_t
    value = apply_sub(0, value, INT32_MIN, INT32_MAX, "NEGATE apply_sub<acc_t>(0, value)")
    info = np.iinfo(x.dtype)
    return [apply_clip(value + attrs["output_zp"], int(info.min), int(info.max)).astype(x.dtype)]


NEGATE = _unary("NEGATE", "2.6.9",
                modes(("signed 8", I8, I32), ("signed 16", I16, I32), ("signed 32", I32, I32),
                      ("fp32", F32, F32), names=("in_out_t", "acc_t")),
                _negate, attrs=(Attr("input1_zp", AttrKind.SCALAR, "in_out_t"),
                                Attr("output_zp", AttrKind.SCALAR, "in_out_t")),
                check=_check_negate)
