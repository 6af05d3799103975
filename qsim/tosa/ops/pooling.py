"""Spec 2.3 tensor operators without weights: ARGMAX (2.3.1), AVG_POOL2D (2.3.2),
MAX_POOL2D (2.3.9)."""
from __future__ import annotations

import numpy as np

from ...errors import UnpredictableError
from ..arith import INT32_MAX, INT32_MIN, apply_clip, apply_scale_32, reciprocal_scale
from .convolution import _check_positive, gather_windows
from ..signature import F32, I8, I16, I32, Arg, Attr, AttrKind, Call, OperatorDef, define, modes


# ---------------------------------------------------------------- ARGMAX

def _check_argmax(call: Call):
    shape = call.shapes[0]
    axis = call.attrs["axis"]
    call.error_if(axis < 0 or axis >= len(shape) or len(shape) > 4,
                  "axis < 0 || axis >= rank(shape1) || rank(shape1) > 4",
                  f"axis={axis}, input of shape {list(shape)}")
    return [tuple(d for i, d in enumerate(shape) if i != axis)]


def _argmax_ref(inputs, attrs):
    # First index of the maximum: the spec keeps the first i with value > max_value,
    # starting from minimum_value, so an all-minimum slice gives 0 as np.argmax does.
    x = inputs[0]
    if x.dtype.kind == "f":
        x = np.where(np.isnan(x), -np.inf, x)     # NaN > max_value is false: NaN never wins
    return [np.argmax(x, axis=attrs["axis"]).astype(np.int32)]


ARGMAX = define(OperatorDef(
    "ARGMAX", "2.3.1",
    inputs=(Arg("input", "in_t", (1, 2, 3, 4)),),
    attrs=(Attr("axis", AttrKind.INT),),
    outputs=(Arg("output", "out_t"),),
    modes=modes(("signed 8", I8, I32), ("signed 16", I16, I32), ("fp32", F32, I32),
                names=("in_t", "out_t")),
    check=_check_argmax, ref=_argmax_ref))


# ---------------------------------------------------------------- pools

def _check_pool(call: Call, avg: bool):
    n, ih, iw, c = call.shapes[0]
    a = call.attrs
    if avg:
        int8 = call.type("in_out_t") is I8
        call.error_if(not int8 and a["input_zp"] != 0, "in_out_t != int8_t && input_zp != 0",
                      f"input_zp={a['input_zp']}")
        call.error_if(not int8 and a["output_zp"] != 0, "in_out_t != int8_t && output_zp != 0",
                      f"output_zp={a['output_zp']}")
    (ky, kx), (sy, sx), pad = a["kernel"], a["stride"], a["pad"]
    _check_positive(call, (ky, kx), "kernel_y,kernel_x", "<", 1)
    _check_positive(call, (sy, sx), "stride_y,stride_x", "<", 1)
    _check_positive(call, pad, "pad_top,pad_bottom,pad_left,pad_right", "<", 0)
    pt, pb, pl, pr = pad
    call.error_if(pr >= kx or pl >= kx, "pad_right >= kernel_x || pad_left >= kernel_x",
                  f"pad_left={pl}, pad_right={pr}, kernel_x={kx}")
    call.error_if(pt >= ky or pb >= ky, "pad_top >= kernel_y || pad_bottom >= kernel_y",
                  f"pad_top={pt}, pad_bottom={pb}, kernel_y={ky}")
    outs = []
    for o, i, size, p0, p1, k, s in (("OH", "IH", ih, "pad_top", "pad_bottom", ky, sy),
                                     ("OW", "IW", iw, "pad_left", "pad_right", kx, sx)):
        num = size + (pt + pb if o == "OH" else pl + pr) - k
        call.error_if(num % s != 0, f"{o} != idiv_check({i} + {p0} + {p1} - kernel_{'y' if o == 'OH' else 'x'}, "
                                    f"stride_{'y' if o == 'OH' else 'x'}) + 1: {num} is not a multiple of {s}",
                      f"{i}={size}, kernel={k}, stride={s}")
        call.error_if(num < 0, f"{o} < 1 (tensor dimensions are >= 1, spec 1.8.1)",
                      f"{i}={size}, kernel={k}")
        outs.append(num // s + 1)
    return [(n, outs[0], outs[1], c)]


def _pool_windows(x, attrs, pad_value):
    ky, kx = attrs["kernel"]
    pt, pb, pl, pr = attrs["pad"]
    sy, sx = attrs["stride"]
    oh = (x.shape[1] + pt + pb - ky) // sy + 1
    ow = (x.shape[2] + pl + pr - kx) // sx + 1
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=pad_value)
    return gather_windows(xp, (ky, kx), (sy, sx), (1, 1), (0, 0), (oh, ow))   # [N,OH,OW,K,C]


def _avg_pool_ref(inputs, attrs):
    x = inputs[0]
    if x.dtype.kind == "f":
        w = _pool_windows(x.astype(np.float32), attrs, np.nan)
        count = (~np.isnan(w)).sum(axis=3)
        return [(np.nansum(w, axis=3) / count).astype(np.float32)]
    valid = _pool_windows(np.ones(x.shape[:3] + (1,), dtype=np.int64), attrs, 0)    # 1 inside
    values = _pool_windows(x.astype(np.int64) - attrs["input_zp"], attrs, 0)     # padding adds 0
    count = valid.sum(axis=3)                                                    # [N,OH,OW,1] >= 1
    acc = values.sum(axis=3)
    # apply_add<int32_t> on every partial sum: |partial| <= count * max|value - input_zp|
    if values.size and values.shape[3] * int(np.abs(values).max()) > INT32_MAX:
        partial = np.cumsum(values, axis=3)
        if ((partial < INT32_MIN) | (partial > INT32_MAX)).any():
            raise UnpredictableError("accumulator overflow: a partial sum of the window leaves int32_t "
                                     "(REQUIRE in apply_add)")
    multiplier, shift = reciprocal_scale(count, context="reciprocal_scale(count)")
    acc = apply_scale_32(acc, multiplier, shift, False, context="apply_scale_32(acc, 1/count)")
    info = np.iinfo(x.dtype)
    out = apply_clip(acc.astype(np.int64) + attrs["output_zp"], info.min, info.max)
    return [out.astype(x.dtype)]


def _max_pool_ref(inputs, attrs):
    x = inputs[0]
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min     # minimum_value<in_out_t>
    return [_pool_windows(x, attrs, low).max(axis=3).astype(x.dtype)]


POOL_ATTRS = (Attr("kernel", AttrKind.INTS, length=2), Attr("stride", AttrKind.INTS, length=2),
              Attr("pad", AttrKind.INTS, length=4))

AVG_POOL2D = define(OperatorDef(
    "AVG_POOL2D", "2.3.2",
    inputs=(Arg("input", "in_out_t", (4,)),),
    attrs=POOL_ATTRS + (Attr("input_zp", AttrKind.SCALAR, "in_out_t"),
                        Attr("output_zp", AttrKind.SCALAR, "in_out_t")),
    outputs=(Arg("output", "in_out_t"),),
    modes=modes(("signed 8", I8, I32), ("signed 16", I16, I32), ("fp32", F32, F32),
                names=("in_out_t", "acc_t")),
    check=lambda call: _check_pool(call, True), ref=_avg_pool_ref))

MAX_POOL2D = define(OperatorDef(
    "MAX_POOL2D", "2.3.9",
    inputs=(Arg("input", "in_out_t", (4,)),),
    attrs=POOL_ATTRS,
    outputs=(Arg("output", "in_out_t"),),
    modes=modes(("signed 8", I8), ("16-bit", I16), ("fp32", F32), names=("in_out_t",)),
    check=lambda call: _check_pool(call, False), ref=_max_pool_ref))
