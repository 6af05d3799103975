"""Spec 2.13 type conversion: CAST (2.13.1) and RESCALE (2.13.2)."""
from __future__ import annotations

import numpy as np

from ..arith import apply_clip, apply_scale_16, apply_scale_32
from ..signature import (BOOL, F32, I8, I16, I32, I48, U8, U16, Arg, Attr, AttrKind, Call, OperatorDef,
                        define, modes, spec_type_name)

# ---------------------------------------------------------------- CAST


def _cast(inputs, attrs):
    x, out_t = inputs[0], attrs["out_t"]
    if out_t == "bool":
        return [x != 0]                                     # out = (in != 0) ? true : false
    out = np.dtype(out_t)
    if x.dtype == np.bool_:
        return [x.astype(out)]                              # out = (in) ? 1 : 0
    if out.kind == "f":
        return [x.astype(out)]                              # round_to_nearest_float
    if x.dtype.kind == "f":
        # round_to_nearest_int: ties to even (spec leaves ties open; docs/tosa.md); NaN -> 0
        info = np.iinfo(out)
        r = np.nan_to_num(np.rint(x.astype(np.float64)), nan=0.0)
        return [apply_clip(r, float(info.min), float(info.max)).astype(out)]
    return [x.astype(out)]      # sign_extend when widening; truncate (low bits) when narrowing


CAST = define(OperatorDef(
    "CAST", "2.13.1",
    inputs=(Arg("input", "in_t"),), attrs=(), outputs=(Arg("output", "out_t"),),
    modes=modes(("bool to signed 8", BOOL, I8), ("bool to signed 16", BOOL, I16),
                ("bool to signed 32", BOOL, I32), ("signed 8 to bool", I8, BOOL),
                ("signed 8 to signed 16", I8, I16), ("signed 8 to signed 32", I8, I32),
                ("signed 8 to fp32", I8, F32), ("signed 16 to bool", I16, BOOL),
                ("signed 16 to signed 8", I16, I8), ("signed 16 to signed 32", I16, I32),
                ("signed 16 to fp32", I16, F32), ("signed 32 to bool", I32, BOOL),
                ("signed 32 to signed 8", I32, I8), ("signed 32 to signed 16", I32, I16),
                ("signed 32 to fp32", I32, F32), ("fp32 to signed 8", F32, I8),
                ("fp32 to signed 16", F32, I16), ("fp32 to signed 32", F32, I32),
                names=("in_t", "out_t")),
    check=lambda call: [call.shapes[0]], ref=_cast))


# ---------------------------------------------------------------- RESCALE

def _check_rescale(call: Call):
    a = call.attrs
    in_t, out_t = call.type("in_t"), call.type("out_t")
    shape = call.shapes[0]
    zp_types = (I8, U8, U16)
    call.error_if(in_t not in zp_types and a["input_zp"] != 0,
                  "in_t != int8_t && in_t != uint8_t && in_t != uint16_t && input_zp != 0",
                  f"input_zp={a['input_zp']} with in_t={spec_type_name(in_t)}")
    call.error_if(out_t not in zp_types and a["output_zp"] != 0,
                  "out_t != int8_t && out_t != uint8_t && out_t != uint16_t && output_zp != 0",
                  f"output_zp={a['output_zp']} with out_t={spec_type_name(out_t)}")
    # The spec writes (input_zp != 0 || input_zp != 32768), which always holds; the comment
    # above it says "uint16 values can have zero_point 0 or 32768", so && is meant (docs/tosa.md).
    call.error_if(in_t is U16 and a["input_zp"] not in (0, 32768),
                  "in_t == uint16_t && (input_zp != 0 && input_zp != 32768)", f"input_zp={a['input_zp']}")
    call.error_if(out_t is U16 and a["output_zp"] not in (0, 32768),
                  "out_t == uint16_t && (output_zp != 0 && output_zp != 32768)", f"output_zp={a['output_zp']}")
    call.error_if(a["scale32"] and in_t is I48, "scale32 && in_t == int48_t", "scale32=true")
    call.error_if(not a["scale32"] and a["double_round"], "!scale32 && double_round",
                  "scale32=false, double_round=true")
    nc = shape[-1] if a["per_channel"] else 1
    for name in ("multiplier", "shift"):
        arr = a[name]
        call.error_if(tuple(arr.shape) != (nc,), f"{name} shape != [NC] (NC = per_channel ? shape[dims-1] : 1)",
                      f"{name} of shape {list(arr.shape)}, NC={nc}")
    return [shape]


def _rescale(inputs, attrs):
    x = inputs[0]
    value = x.astype(np.int64) - attrs["input_zp"]                  # int48_t value
    multiplier = attrs["multiplier"].astype(np.int64)               # [NC]: broadcasts on the last axis
    shift = attrs["shift"].astype(np.int64)
    if not attrs["per_channel"]:
        multiplier, shift = multiplier[0], shift[0]
    if attrs["scale32"]:
        result = apply_scale_32(value, multiplier, shift, attrs["double_round"], context="apply_scale_32")
    else:
        result = apply_scale_16(value, multiplier, shift, context="apply_scale_16")
    out = np.dtype(attrs["out_t"])
    info = np.iinfo(out)
    return [apply_clip(result.astype(np.int64) + attrs["output_zp"], int(info.min), int(info.max)).astype(out)]


RESCALE = define(OperatorDef(
    "RESCALE", "2.13.2",
    inputs=(Arg("input", "in_t", (1, 2, 3, 4)),),
    attrs=(Attr("input_zp", AttrKind.SCALAR, "in_t"), Attr("output_zp", AttrKind.SCALAR, "out_t"),
           Attr("multiplier", AttrKind.ARRAY, "mul_t"), Attr("shift", AttrKind.ARRAY, "uint6_t"),
           Attr("scale32", AttrKind.BOOL), Attr("double_round", AttrKind.BOOL),
           Attr("per_channel", AttrKind.BOOL)),
    outputs=(Arg("output", "out_t"),),
    modes=modes(("signed 8 to signed 8", I8, I8), ("signed 8 to signed 16", I8, I16),
                ("signed 8 to signed 32", I8, I32), ("signed 8 to unsigned 8", I8, U8),
                ("signed 16 to signed 8", I16, I8), ("signed 16 to signed 16", I16, I16),
                ("signed 16 to signed 32", I16, I32), ("signed 16 to unsigned 8", I16, U8),
                ("signed 16 to unsigned 16", I16, U16), ("signed 32 to signed 8", I32, I8),
                ("signed 32 to signed 16", I32, I16), ("signed 32 to signed 32", I32, I32),
                ("signed 48 to signed 8", I48, I8), ("signed 48 to signed 16", I48, I16),
                ("signed 48 to signed 32", I48, I32), ("unsigned 8 to signed 8", U8, I8),
                ("unsigned 8 to signed 16", U8, I16), ("unsigned 16 to signed 16", U16, I16),
                names=("in_t", "out_t")),
    check=_check_rescale, ref=_rescale))
