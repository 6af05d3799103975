"""Spec 2.12 image operators: RESIZE (2.12.1), integer modes (resize_t = int16_t).

Decision (docs/tosa.md): the output_size attribute must equal the [OH, OW] the spec derives
from the input size, stride, offset, border and shift; a mismatch is an invalid graph.
"""
from __future__ import annotations

import numpy as np

from ...errors import InvalidGraphError, UnpredictableError
from ...numerics import trunc_div   # spec 3.3.2 idiv
from ..signature import I8, I16, I32, I48, Arg, Attr, AttrKind, Call, OperatorDef, define, modes


def _check_resize(call: Call):
    n, ih, iw, c = call.shapes[0]
    a = call.attrs
    (sy, sx), (oy_, ox_), (by, bx), shift = a["stride"], a["offset"], a["border"], a["shift"]
    for name, vals in (("stride", (sy, sx)), ("offset", (oy_, ox_))):
        call.error_if(any(not -32768 <= v <= 32767 for v in vals), f"{name} outside resize_t = int16_t",
                      f"{name}={list(vals)}")
    call.error_if(sx <= 0 or sy <= 0, "stride_x <= 0 || stride_y <= 0", f"stride={[sy, sx]}")
    call.error_if(shift < 1 or shift > 11, "shift < 1 || shift > 11", f"shift={shift}")
    call.error_if(sx >= (16 << shift), "stride_x >= (16 << shift)", f"stride_x={sx}, shift={shift}")
    call.error_if(sy >= (16 << shift), "stride_y >= (16 << shift)", f"stride_y={sy}, shift={shift}")
    call.error_if(ox_ <= (-16 << shift) or ox_ >= (16 << shift),
                  "offset_x <= (-16 << shift) || offset_x >= (16 << shift)", f"offset_x={ox_}, shift={shift}")
    call.error_if(oy_ <= (-16 << shift) or oy_ >= (16 << shift),
                  "offset_y <= (-16 << shift) || offset_y >= (16 << shift)", f"offset_y={oy_}, shift={shift}")
    oh = trunc_div((ih - 1) * (1 << shift) - oy_, sy) + 1 + by
    ow = trunc_div((iw - 1) * (1 << shift) - ox_, sx) + 1 + bx
    call.error_if(max(oh, ow, ih, iw) >= 16384, "max(OH,OW,IH,IW) >= 16384",
                  f"OH={oh}, OW={ow}, IH={ih}, IW={iw}")
    call.error_if(oh < 1 or ow < 1, "OH < 1 || OW < 1 (tensor dimensions are >= 1, spec 1.8.1)",
                  f"OH={oh}, OW={ow}")
    call.error_if(tuple(a["output_size"]) != (oh, ow), "output_size != [OH, OW] derived by the spec",
                  f"output_size={list(a['output_size'])}, derived [{oh}, {ow}]")
    return [(n, oh, ow, c)]


def _axis_positions(out_size, stride, offset, shift, in_size, axis):
    pos = np.arange(out_size, dtype=np.int64) * stride + offset
    i = pos >> shift                   # arithmetic shift: floor for negative positions
    d = pos - (i << shift)
    i0 = np.maximum(i, 0)
    i1 = np.minimum(i + 1, in_size - 1)
    bad = i0 > i1
    if bad.any():
        o = int(np.argmax(bad))
        raise UnpredictableError(f"REQUIRE(i{axis}0 <= i{axis}1) fails at output {axis}={o}: sample position "
                                 f"{int(pos[o])}/2^{shift} lies outside the input (size {in_size})")
    return i0, i1, d


def _resize(inputs, attrs):
    x = inputs[0]
    n, ih, iw, c = x.shape
    oh, ow = attrs["output_size"]
    shift = attrs["shift"]
    unit = 1 << shift
    iy0, iy1, dy = _axis_positions(oh, attrs["stride"][0], attrs["offset"][0], shift, ih, "y")
    ix0, ix1, dx = _axis_positions(ow, attrs["stride"][1], attrs["offset"][1], shift, iw, "x")
    if attrs["mode"] == "NEAREST":
        iy = np.where(dy >= unit // 2, iy1, iy0)
        ix = np.where(dx >= unit // 2, ix1, ix0)
        return [x[:, iy][:, :, ix].astype(x.dtype)]
    v = x.astype(np.int64)
    dy_, dx_ = dy[None, :, None, None], dx[None, None, :, None]
    acc = (v[:, iy0][:, :, ix0] * (unit - dy_) * (unit - dx_) + v[:, iy0][:, :, ix1] * (unit - dy_) * dx_)
    acc = acc + v[:, iy1][:, :, ix0] * dy_ * (unit - dx_) + v[:, iy1][:, :, ix1] * dy_ * dx_
    # |acc| <= 2^15 * 2^22 fits int48_t; for int8 input 2^7 * 2^22 fits int32_t
    return [acc.astype(np.int32 if x.dtype == np.int8 else np.int64)]


def _mode_filter(attrs, mode) -> bool:
    """The resize mode attribute picks the table row (bilinear rows output wider types)."""
    value = str(attrs.get("mode", "")).upper()
    if value not in ("BILINEAR", "NEAREST"):
        raise InvalidGraphError(f"RESIZE: attribute mode={attrs.get('mode')!r} is not BILINEAR or NEAREST")
    return value.lower() in mode.name


RESIZE = define(OperatorDef(
    "RESIZE", "2.12.1",
    inputs=(Arg("input", "in_t", (4,)),),
    attrs=(Attr("output_size", AttrKind.INTS, length=2), Attr("stride", AttrKind.INTS, length=2),
           Attr("offset", AttrKind.INTS, length=2), Attr("border", AttrKind.INTS, length=2),
           Attr("shift", AttrKind.INT), Attr("mode", AttrKind.ENUM, choices=("BILINEAR", "NEAREST"))),
    outputs=(Arg("output", "out_t"),),
    modes=modes(("signed 8, bilinear", I16, I8, I32), ("signed 8, nearest", I16, I8, I8),
                ("signed 16, bilinear", I16, I16, I48), ("signed 16, nearest", I16, I16, I16),
                names=("resize_t", "in_t", "out_t")),
    mode_filter=lambda attrs, mode: _mode_filter(attrs, mode),
    check=_check_resize, ref=_resize))
