"""Spec 2.3 tensor operators that multiply-accumulate: CONV2D, CONV3D, DEPTHWISE_CONV2D,
TRANSPOSE_CONV2D, FULLY_CONNECTED, MATMUL.

References: the spec loops over (kd,) ky, kx, ic per output element; here the input
window is gathered once per kernel offset (im2col with the flattened index in the
spec's loop order, padding positions contributing 0 because the spec skips them),
then `checked_dot` multiplies and requires every partial sum to fit out_t.
Inputs have their zero point subtracted first: value - input_zp (int64, |.| <= 2^16).
"""
from __future__ import annotations

import itertools

import numpy as np

from ...errors import UnpredictableError
from ..accumulate import acc_bounds, add_bias, checked_dot, store
from ..signature import (I4, I8, I16, I32, I48, Arg, Attr, AttrKind, Call, OperatorDef, define,
                        modes)

CONV_MODES = modes(("signed 8x8", I8, I8, I32), ("signed 8x4", I8, I4, I32),
                   ("signed 16x8", I16, I8, I48), names=("in_t", "weight_t", "out_t"))

ZP_ATTRS = (Attr("input_zp", AttrKind.SCALAR, "in_t"), Attr("weight_zp", AttrKind.SCALAR, "weight_t"))


def _check_zero_points(call: Call) -> None:
    a = call.attrs
    call.error_if(call.type("in_t") is not I8 and a["input_zp"] != 0,
                  "in_t != int8_t && input_zp != 0", f"input_zp={a['input_zp']}")
    call.error_if(call.type("weight_t") is not I8 and a["weight_zp"] != 0,
                  "weight_t != int8_t && weight_zp != 0", f"weight_zp={a['weight_zp']}")


def _check_weight_bias(call: Call, weight_shape: tuple, bias_len: int, layout: str) -> None:
    w, b = call.attrs["weight"], call.attrs["bias"]
    call.error_if(tuple(w.shape) != tuple(weight_shape), f"weight shape != {layout}",
                  f"weight of shape {list(w.shape)}, expected {list(weight_shape)}")
    call.error_if(tuple(b.shape) != (bias_len,), "bias shape != [OC]",
                  f"bias of shape {list(b.shape)}, expected [{bias_len}]")


def conv_out_size(call: Call, size: int, pad_a: int, pad_b: int, kernel: int, dilation: int,
                  stride: int, names: tuple[str, ...]) -> int:
    """O = idiv_check(I - 1 + pad_a + pad_b - (K - 1) * dilation, stride) + 1 (spec 2.3.3)."""
    o, i, pa, pb, k, d, s = names
    num = size - 1 + pad_a + pad_b - (kernel - 1) * dilation
    call.error_if(num % stride != 0,
                  f"{o} != idiv_check({i} - 1 + {pa} + {pb} - ({k} - 1) * {d}, {s}) + 1: "
                  f"{num} is not a multiple of {s}={stride}", f"{i}={size}, {pa}={pad_a}, {pb}={pad_b}, "
                  f"{k}={kernel}, {d}={dilation}, {s}={stride}")
    out = num // stride + 1
    call.error_if(out < 1, f"{o} < 1 (tensor dimensions are >= 1, spec 1.8.1)", f"{o}={out}")
    return out


def _check_positive(call: Call, values, names: str, op: str, bound: int) -> None:
    cond = " || ".join(f"{n} {op} {bound}" for n in names.split(","))
    bad = any((v < bound) if op == "<" else (v <= bound) for v in values)
    call.error_if(bad, cond, ", ".join(f"{n}={v}" for n, v in zip(names.split(","), values)))


def gather_windows(x: np.ndarray, kernel, stride, dilation, pad_before, out_sizes) -> np.ndarray:
    """[N, *S, C] -> [N, *O, prod(K), C]: the input value at each kernel offset (spec loop
    order: first kernel axis slowest). Positions in the padding read `x`'s padded value 0."""
    nsp = len(kernel)
    widths = [(0, 0)] + [(p, max(0, (o - 1) * s + (k - 1) * d + 1 - p - n))
                         for p, o, s, k, d, n in zip(pad_before, out_sizes, stride, kernel, dilation,
                                                     x.shape[1:1 + nsp])] + [(0, 0)]
    xp = np.pad(x, widths)
    cols = []
    for offs in itertools.product(*(range(k) for k in kernel)):
        sl = tuple(slice(kk * d, kk * d + (o - 1) * s + 1, s)
                   for kk, d, o, s in zip(offs, dilation, out_sizes, stride))
        cols.append(xp[(slice(None),) + sl + (slice(None),)])
    return np.stack(cols, axis=-2)


def _index_namer(prefix_shape):
    def where(row, col):
        return str(list(np.unravel_index(row, prefix_shape)) + [col]) if prefix_shape else f"[{row}, {col}]"
    return where


# ---------------------------------------------------------------- CONV2D / CONV3D

def _check_conv(call: Call, nsp: int) -> list[tuple[int, ...]]:
    shape = call.shapes[0]
    n, spatial, ic = shape[0], shape[1:1 + nsp], shape[-1]
    w = call.attrs["weight"]
    call.error_if(w.ndim != nsp + 2, f"rank(weight) != {nsp + 2}", f"weight of shape {list(w.shape)}")
    oc, ks = w.shape[0], tuple(w.shape[1:1 + nsp])
    layout = "[OC,KH,KW,IC]" if nsp == 2 else "[OC,KD,KH,KW,IC]"
    _check_weight_bias(call, (oc,) + ks + (ic,), oc, layout)
    _check_zero_points(call)
    a = call.attrs
    pad, stride, dil = a["pad"], a["stride"], a["dilation"]
    if nsp == 2:
        pnames, snames, dnames = ("pad_top,pad_bottom,pad_left,pad_right", "stride_y,stride_x",
                                  "dilation_y,dilation_x")
        axes = (("OH", "IH", "pad_top", "pad_bottom", "KH", "dilation_y", "stride_y"),
                ("OW", "IW", "pad_left", "pad_right", "KW", "dilation_x", "stride_x"))
    else:
        pnames = "pad_d0,pad_d1,pad_top,pad_bottom,pad_left,pad_right"
        snames, dnames = "stride_d,stride_y,stride_x", "dilation_d,dilation_y,dilation_x"
        axes = (("OD", "ID", "pad_d0", "pad_d1", "KD", "dilation_d", "stride_d"),
                ("OH", "IH", "pad_top", "pad_bottom", "KH", "dilation_y", "stride_y"),
                ("OW", "IW", "pad_left", "pad_right", "KW", "dilation_x", "stride_x"))
    _check_positive(call, pad, pnames, "<", 0)
    _check_positive(call, stride, snames, "<", 1)
    _check_positive(call, dil, dnames, "<", 1)
    outs = tuple(conv_out_size(call, spatial[i], pad[2 * i], pad[2 * i + 1], ks[i], dil[i], stride[i],
                               axes[i]) for i in range(nsp))
    return [(n,) + outs + (oc,)]


def _conv_ref(inputs, attrs, nsp):
    x = inputs[0].astype(np.int64) - attrs["input_zp"]
    w = attrs["weight"].astype(np.int64) - attrs["weight_zp"]
    oc, ks = w.shape[0], w.shape[1:1 + nsp]
    pad, stride, dil = attrs["pad"], attrs["stride"], attrs["dilation"]
    spatial = x.shape[1:1 + nsp]
    outs = tuple((spatial[i] - 1 + pad[2 * i] + pad[2 * i + 1] - (ks[i] - 1) * dil[i]) // stride[i] + 1
                 for i in range(nsp))
    windows = gather_windows(x, ks, stride, dil, pad[0::2], outs)       # [N, *O, K, IC]
    prefix = windows.shape[:1 + nsp]
    lo, hi = acc_bounds(attrs["out_t"])
    where = _index_namer(prefix)
    acc = checked_dot(windows.reshape(int(np.prod(prefix)), -1), w.reshape(oc, -1).T, lo, hi, where)
    acc = add_bias(acc, attrs["bias"], lo, hi, lambda idx: where(idx[0], idx[1]))
    return [store(acc.reshape(prefix + (oc,)), attrs["out_t"])]


def _weight_bias_attrs(weight_tv="weight_t"):
    return (Attr("weight", AttrKind.ARRAY, weight_tv, binds_type=True),
            Attr("bias", AttrKind.ARRAY, "out_t"))


CONV2D = define(OperatorDef(
    "CONV2D", "2.3.3",
    inputs=(Arg("input", "in_t", (4,)),),
    attrs=_weight_bias_attrs() + (Attr("pad", AttrKind.INTS, length=4),
                                  Attr("stride", AttrKind.INTS, length=2),
                                  Attr("dilation", AttrKind.INTS, length=2)) + ZP_ATTRS,
    outputs=(Arg("output", "out_t"),), modes=CONV_MODES,
    check=lambda call: _check_conv(call, 2), ref=lambda i, a: _conv_ref(i, a, 2)))

CONV3D = define(OperatorDef(
    "CONV3D", "2.3.4",
    inputs=(Arg("input", "in_t", (5,)),),
    attrs=_weight_bias_attrs() + (Attr("pad", AttrKind.INTS, length=6),
                                  Attr("stride", AttrKind.INTS, length=3),
                                  Attr("dilation", AttrKind.INTS, length=3)) + ZP_ATTRS,
    outputs=(Arg("output", "out_t"),), modes=CONV_MODES,
    check=lambda call: _check_conv(call, 3), ref=lambda i, a: _conv_ref(i, a, 3)))


# ---------------------------------------------------------------- DEPTHWISE_CONV2D

def _check_depthwise(call: Call):
    n, ih, iw, c = call.shapes[0]
    w = call.attrs["weight"]
    call.error_if(w.ndim != 4, "rank(weight) != 4", f"weight of shape {list(w.shape)}")
    kh, kw, _, m = w.shape
    _check_weight_bias(call, (kh, kw, c, m), c * m, "[KH,KW,C,M]")
    _check_zero_points(call)
    pad, stride, dil = call.attrs["pad"], call.attrs["stride"], call.attrs["dilation"]
    _check_positive(call, pad, "pad_top,pad_bottom,pad_left,pad_right", "<", 0)
    _check_positive(call, stride, "stride_y,stride_x", "<", 1)
    _check_positive(call, dil, "dilation_y,dilation_x", "<", 1)
    oh = conv_out_size(call, ih, pad[0], pad[1], kh, dil[0], stride[0],
                       ("OH", "IH", "pad_top", "pad_bottom", "KH", "dilation_y", "stride_y"))
    ow = conv_out_size(call, iw, pad[2], pad[3], kw, dil[1], stride[1],
                       ("OW", "IW", "pad_left", "pad_right", "KW", "dilation_x", "stride_x"))
    return [(n, oh, ow, c * m)]


def _depthwise_ref(inputs, attrs):
    x = inputs[0].astype(np.int64) - attrs["input_zp"]
    w = attrs["weight"].astype(np.int64) - attrs["weight_zp"]
    kh, kw, c, m = w.shape
    pad, stride, dil = attrs["pad"], attrs["stride"], attrs["dilation"]
    n, ih, iw, _ = x.shape
    oh = (ih - 1 + pad[0] + pad[1] - (kh - 1) * dil[0]) // stride[0] + 1
    ow = (iw - 1 + pad[2] + pad[3] - (kw - 1) * dil[1]) // stride[1] + 1
    windows = gather_windows(x, (kh, kw), stride, dil, pad[0::2], (oh, ow))   # [N,OH,OW,KH*KW,C]
    rows = windows.reshape(n * oh * ow, kh * kw, c)
    wk = w.reshape(kh * kw, c, m)
    lo, hi = acc_bounds(attrs["out_t"])
    acc = np.empty((n * oh * ow, c, m), dtype=np.int64)
    for ch in range(c):
        def where(row, col, ch=ch):
            return str(list(np.unravel_index(row, (n, oh, ow))) + [ch * m + col])
        acc[:, ch, :] = checked_dot(rows[:, :, ch], wk[:, ch, :], lo, hi, where)
    acc = acc.reshape(n, oh, ow, c * m)
    acc = add_bias(acc, attrs["bias"], lo, hi, lambda idx: str(list(idx)))
    return [store(acc, attrs["out_t"])]


DEPTHWISE_CONV2D = define(OperatorDef(
    "DEPTHWISE_CONV2D", "2.3.5",
    inputs=(Arg("input", "in_t", (4,)),),
    attrs=_weight_bias_attrs() + (Attr("pad", AttrKind.INTS, length=4),
                                  Attr("stride", AttrKind.INTS, length=2),
                                  Attr("dilation", AttrKind.INTS, length=2)) + ZP_ATTRS,
    outputs=(Arg("output", "out_t"),), modes=CONV_MODES,
    check=_check_depthwise, ref=_depthwise_ref))


# ---------------------------------------------------------------- TRANSPOSE_CONV2D

def _check_transpose(call: Call):
    n, ih, iw, ic = call.shapes[0]
    w = call.attrs["weight"]
    call.error_if(w.ndim != 4, "rank(weight) != 4", f"weight of shape {list(w.shape)}")
    oc, kh, kw, _ = w.shape
    _check_weight_bias(call, (oc, kh, kw, ic), oc, "[OC,KH,KW,IC]")
    _check_zero_points(call)
    a = call.attrs
    opad, stride, out_shape = a["out_pad"], a["stride"], a["out_shape"]
    _check_positive(call, opad[:2], "out_pad_top,out_pad_bottom", "<", 0)
    _check_positive(call, opad[2:], "out_pad_left,out_pad_right", "<", 0)
    _check_positive(call, stride, "stride_y,stride_x", "<", 1)
    on, oh, ow, occ = out_shape
    call.error_if(oh != (ih - 1) * stride[0] - opad[0] - opad[1] + kh,
                  "OH != (IH - 1) * stride_y - out_pad_top - out_pad_bottom + KH",
                  f"out_shape {list(out_shape)}: OH={oh}, IH={ih}, stride_y={stride[0]}, KH={kh}")
    call.error_if(ow != (iw - 1) * stride[1] - opad[2] - opad[3] + kw,
                  "OW != (IW - 1) * stride_x - out_pad_left - out_pad_right + KW",
                  f"out_shape {list(out_shape)}: OW={ow}, IW={iw}, stride_x={stride[1]}, KW={kw}")
    call.error_if(on != n or occ != oc, "out_shape != [N,OH,OW,OC]",
                  f"out_shape {list(out_shape)} with N={n}, OC={oc}")
    call.error_if(oh < 1 or ow < 1, "OH < 1 || OW < 1 (spec 1.8.1)", f"out_shape {list(out_shape)}")
    return [tuple(out_shape)]


def _transpose_ref(inputs, attrs):
    x = inputs[0].astype(np.int64) - attrs["input_zp"]
    w = attrs["weight"].astype(np.int64) - attrs["weight_zp"]
    bias = attrs["bias"].astype(np.int64)
    n, ih, iw, ic = x.shape
    oc, kh, kw, _ = w.shape
    _, oh, ow, _ = attrs["out_shape"]
    sy, sx = attrs["stride"]
    top, left = attrs["out_pad"][0], attrs["out_pad"][2]
    lo, hi = acc_bounds(attrs["out_t"])
    acc = np.broadcast_to(bias, (n, oh, ow, oc)).copy()
    bound = np.broadcast_to(np.abs(bias), (n, oh, ow, oc)).copy()
    for ky, kx in itertools.product(range(kh), range(kw)):
        # oy = iy * stride_y - out_pad_top + ky, for the iy that land inside [0, OH)
        iys = [iy for iy in range(ih) if 0 <= iy * sy - top + ky < oh]
        ixs = [ix for ix in range(iw) if 0 <= ix * sx - left + kx < ow]
        if not iys or not ixs:
            continue
        oys = [iy * sy - top + ky for iy in iys]
        oxs = [ix * sx - left + kx for ix in ixs]
        part = x[:, iys][:, :, ixs]                                        # [N, y, x, IC]
        acc[:, oys[0]:oys[-1] + 1:sy, oxs[0]:oxs[-1] + 1:sx] += part @ w[:, ky, kx, :].T
        bound[:, oys[0]:oys[-1] + 1:sy, oxs[0]:oxs[-1] + 1:sx] += np.abs(part) @ np.abs(w[:, ky, kx, :]).T
    if (bound > min(hi, -lo)).any():
        _transpose_literal_require(x, w, bias, attrs, lo, hi, bound > min(hi, -lo))
    return [store(acc, attrs["out_t"])]


def _transpose_literal_require(x, w, bias, attrs, lo, hi, flagged):
    """The spec's loop order for the output elements whose bound does not fit: the partial
    sums start at bias[oc] and add value * weight over (iy, ix, ic, ky, kx). For one output
    element each (iy, ix) meets at most one (ky, kx): ky = oy - iy * stride_y + out_pad_top."""
    _, ih, iw, _ = x.shape
    _, kh, kw, _ = w.shape
    sy, sx = attrs["stride"]
    top, left = attrs["out_pad"][0], attrs["out_pad"][2]
    for n, oy, ox, oc in np.argwhere(flagged):
        iys = [iy for iy in range(ih) if 0 <= oy - iy * sy + top < kh]
        ixs = [ix for ix in range(iw) if 0 <= ox - ix * sx + left < kw]
        if not iys or not ixs:
            continue
        kys = [oy - iy * sy + top for iy in iys]
        kxs = [ox - ix * sx + left for ix in ixs]
        terms = x[n][iys][:, ixs] * w[oc][kys][:, kxs]              # [iy, ix, ic] in loop order
        partial = int(bias[oc]) + np.cumsum(terms.ravel())
        if ((partial < lo) | (partial > hi)).any():
            raise UnpredictableError(
                f"accumulator overflow at output element {[int(n), int(oy), int(ox), int(oc)]}: a partial "
                f"sum leaves [{lo}, {hi}] (REQUIRE(c >= minimum<out_t> && c <= maximum<out_t>) in apply_add)")


TRANSPOSE_CONV2D = define(OperatorDef(
    "TRANSPOSE_CONV2D", "2.3.11",
    inputs=(Arg("input", "in_t", (4,)),),
    attrs=_weight_bias_attrs() + (Attr("out_pad", AttrKind.INTS, length=4),
                                  Attr("stride", AttrKind.INTS, length=2),
                                  Attr("out_shape", AttrKind.INTS, length=4)) + ZP_ATTRS,
    outputs=(Arg("output", "out_t"),), modes=CONV_MODES,
    check=_check_transpose, ref=_transpose_ref))


# ---------------------------------------------------------------- FULLY_CONNECTED / MATMUL

def _check_fc(call: Call):
    n, ic = call.shapes[0]
    w = call.attrs["weight"]
    call.error_if(w.ndim != 2, "rank(weight) != 2", f"weight of shape {list(w.shape)}")
    _check_weight_bias(call, (w.shape[0], ic), w.shape[0], "[OC,IC]")
    _check_zero_points(call)
    return [(n, w.shape[0])]


def _fc_ref(inputs, attrs):
    x = inputs[0].astype(np.int64) - attrs["input_zp"]
    w = attrs["weight"].astype(np.int64) - attrs["weight_zp"]
    lo, hi = acc_bounds(attrs["out_t"])
    acc = checked_dot(x, w.T, lo, hi, lambda r, c: f"[{r}, {c}]")
    acc = add_bias(acc, attrs["bias"], lo, hi, lambda idx: str(list(idx)))
    return [store(acc, attrs["out_t"])]


FULLY_CONNECTED = define(OperatorDef(
    "FULLY_CONNECTED", "2.3.7",
    inputs=(Arg("input", "in_t", (2,)),),
    attrs=_weight_bias_attrs() + ZP_ATTRS,
    outputs=(Arg("output", "out_t"),), modes=CONV_MODES,
    check=_check_fc, ref=_fc_ref))


def _check_matmul(call: Call):
    (n, h, c), (n2, c2, w) = call.shapes
    call.error_if(n2 != n or c2 != c, "B shape != [N,C,W]",
                  f"A of shape {[n, h, c]} and B of shape {[n2, c2, w]}")
    a = call.attrs
    call.error_if(call.type("in_t") is not I8 and (a["A_zp"] != 0 or a["B_zp"] != 0),
                  "in_t != int8_t && (A_zp != 0 || B_zp != 0)", f"A_zp={a['A_zp']}, B_zp={a['B_zp']}")
    return [(n, h, w)]


def _matmul_ref(inputs, attrs):
    a = inputs[0].astype(np.int64) - attrs["A_zp"]
    b = inputs[1].astype(np.int64) - attrs["B_zp"]
    lo, hi = acc_bounds(attrs["out_t"])
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), dtype=np.int64)
    for n in range(a.shape[0]):
        out[n] = checked_dot(a[n], b[n], lo, hi, lambda r, c, n=n: f"[{n}, {r}, {c}]")
    return [store(out, attrs["out_t"])]


MATMUL = define(OperatorDef(
    "MATMUL", "2.3.8",
    inputs=(Arg("A", "in_t", (3,)), Arg("B", "in_t", (3,))),
    attrs=(Attr("A_zp", AttrKind.SCALAR, "in_t"), Attr("B_zp", AttrKind.SCALAR, "in_t")),
    outputs=(Arg("output", "out_t"),),
    modes=modes(("signed 8x8", I8, I32), ("signed 16x16", I16, I48), names=("in_t", "out_t")),
    check=_check_matmul, ref=_matmul_ref))
