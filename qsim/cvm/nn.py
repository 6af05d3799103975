"""NN operators: conv2d, dense, max_pool2d, upsampling (cvm-formalization, "NN Operator").

Layouts are the formalization's: X is NCHW, conv weights OIHW, dense weights (N, K).
Text repairs (docs/cvm.md): the conv sums run over j in [0, C), k_i in [0, KH), k_j in
[0, KW) (the extracted text shows inclusive upper limits), and the groups=1 kernel
reads W[i, j, k_i, k_j] (the text passes the batch index n as the output channel).

Precision (CVM's rule for the int8 multiply-accumulate): X and W must have precision
<= 8; the output has precision px + pw + bit_length(K) with K = IC*KH*KW (conv) or the
reduction length (dense), and with a bias max(that, pb) + 1.
"""
from __future__ import annotations

import numpy as np

from ..numerics import ceil_div, floor_div
from .opdef import MAX_ATTR, MIN_ATTR, REQUIRED, OpDef, define, same_precision
from .precision import bit_length

ATTR_RANGE = f"the formalization's [min_attr, max_attr) = [{MIN_ATTR}, {MAX_ATTR})"
POS_RANGE = f"the formalization's [1, max_attr) = [1, {MAX_ATTR})"


def _mac_precision(chk, precs, k: int, has_bias: bool):
    for i, name in ((0, chk.input_names[0]), (1, chk.input_names[1])):
        chk.require(precs[i] <= 8,
                    f"{chk.tensor(name)} has precision {precs[i]}; {chk.op[4:]} multiplies INT8 "
                    "operands, so its data and weight precisions must be <= 8",
                    hint="requantize the operand with cvm_right_shift / cvm_clip to precision 8")
    p = precs[0] + precs[1] + bit_length(k)
    if has_bias:
        p = max(p, precs[2]) + 1
    return p


# ---- conv2d -------------------------------------------------------------------------------
def conv2d_params(chk, shapes, attrs):
    n, c, h, w = chk.rank(shapes, 0, 4, "NCHW")
    oc, ic, kh, kw = chk.rank(shapes, 1, 4, "OIHW")
    ph, pw = chk.ints_attr(attrs, "padding", length=2, lo=MIN_ATTR, hi=MAX_ATTR, expand=True,
                           bound_doc=ATTR_RANGE)
    sh, sw = chk.ints_attr(attrs, "stride", length=2, lo=1, hi=MAX_ATTR, expand=True, bound_doc=POS_RANGE)
    dh, dw = chk.ints_attr(attrs, "dilation", length=2, lo=1, hi=MAX_ATTR, expand=True, bound_doc=POS_RANGE)
    groups = chk.int_attr(attrs, "groups")
    chk.require(groups in (1, c), f"attribute 'groups' = {groups}; it must be 1 or C = {c} "
                "(the channel count of input X)", hint="only ordinary and depthwise convolution exist in CVM")
    if groups == 1:
        chk.require(ic == c, f"{chk.tensor('W')} has shape {list(shapes[1])}: IC = {ic} must equal "
                    f"C = {c} of {chk.tensor('X')} when groups = 1")
    else:
        chk.require(ic == 1 and oc == c, f"{chk.tensor('W')} has shape {list(shapes[1])}: depthwise "
                    f"convolution (groups = C = {c}) needs IC = 1 and OC = C, i.e. shape [{c}, 1, KH, KW]")
    if len(shapes) > 2 and shapes[2] is not None:
        chk.require(tuple(shapes[2]) == (oc,), f"{chk.tensor('B')} has shape {list(shapes[2])}; "
                    f"the bias must have shape [{oc}] (OC)")
    for name, size, pad, d, k in (("H", h, ph, dh, kh), ("W", w, pw, dw, kw)):
        chk.require(size + 2 * pad >= d * (k - 1) + 1,
                    f"the dilated kernel ({d} * ({k} - 1) + 1 = {d * (k - 1) + 1}) is larger than the "
                    f"padded input ({name} + 2 * padding = {size + 2 * pad})",
                    hint="increase padding or use a smaller kernel/dilation")
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return (n, oc, oh, ow)


def _conv_infer(chk, shapes, attrs):
    return [conv2d_params(chk, shapes, attrs)]


def _conv_precision(chk, precs, shapes, attrs):
    oc, ic, kh, kw = shapes[1]
    return [_mac_precision(chk, precs, ic * kh * kw, len(shapes) > 2 and shapes[2] is not None)]


def conv2d_reference(inputs, attrs):
    x, w, b = inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None
    n, c, h, wd = x.shape
    oc, ic, kh, kw = w.shape
    ph, pw = attrs["padding"]
    sh, sw = attrs["stride"]
    dh, dw = attrs["dilation"]
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw), dtype=np.int64)   # pad(): 0 outside [0,H)x[0,W)
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    y = np.zeros((n, oc, oh, ow), dtype=np.int64)
    depthwise = attrs["groups"] != 1   # groups == C > 1; for C == 1 both cases coincide
    for i in range(kh):
        for j in range(kw):
            # rows p*SH - PH + i*DH in original coordinates = p*SH + i*DH in padded ones
            patch = xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
            if depthwise:
                y += patch * w[:, 0, i, j][None, :, None, None]
            else:
                y += np.tensordot(patch, w[:, :, i, j], axes=([1], [1])).transpose(0, 3, 1, 2)
    if b is not None:
        y += b[None, :, None, None]
    return [y]


# ---- dense --------------------------------------------------------------------------------
def _dense_infer(chk, shapes, attrs):
    m, k = chk.rank(shapes, 0, 2, "(M, K)")
    n, k2 = chk.rank(shapes, 1, 2, "(N, K)")
    chk.require(k == k2, f"{chk.tensor('X')} has shape {list(shapes[0])} and {chk.tensor('W')} has shape "
                f"{list(shapes[1])}: their K extents ({k} vs {k2}) must agree (Y = X W^T)")
    has_bias = len(shapes) > 2 and shapes[2] is not None
    if has_bias:
        chk.require(tuple(shapes[2]) == (n,), f"{chk.tensor('B')} has shape {list(shapes[2])}; "
                    f"the bias must have shape [{n}] (N)")
    if attrs["units"] is not None:
        units = chk.int_attr(attrs, "units", 1)
        chk.require(units == n, f"attribute 'units' = {units} but {chk.tensor('W')} has N = {n} rows",
                    hint="units must equal W's first extent")
    if attrs["use_bias"] is not None:
        use_bias = chk.bool_attr(attrs, "use_bias")
        chk.require(use_bias == has_bias, f"attribute 'use_bias' = {use_bias} but the bias input B is "
                    + ("given" if has_bias else "absent"), hint="pass B exactly when use_bias is true")
    return [(m, n)]


def _dense_precision(chk, precs, shapes, attrs):
    return [_mac_precision(chk, precs, shapes[0][1], len(shapes) > 2 and shapes[2] is not None)]


def dense_reference(inputs, attrs):
    x, w, b = inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None
    y = x @ w.T
    if b is not None:
        y = y + b[None, :]
    return [y]


# ---- max_pool2d ------------------------------------------------------------------------
def pool_geometry(chk, shapes, attrs):
    n, c, h, w = chk.rank(shapes, 0, 4, "NCHW")
    psh, psw = chk.ints_attr(attrs, "pool_size", length=2, lo=1, hi=MAX_ATTR, expand=True,
                             bound_doc=POS_RANGE)
    ph, pw = chk.ints_attr(attrs, "padding", length=2, lo=MIN_ATTR, hi=MAX_ATTR, expand=True,
                           bound_doc=ATTR_RANGE)
    sh, sw = chk.ints_attr(attrs, "strides", length=2, lo=1, hi=MAX_ATTR, expand=True, bound_doc=POS_RANGE)
    ceil_mode = chk.bool_attr(attrs, "ceil_mode")
    for axis, ps, size, pad in (("H", psh, h, ph), ("W", psw, w, pw)):
        chk.require(ps <= size + 2 * pad, f"attribute 'pool_size' = {[psh, psw]}: the {axis} window {ps} "
                    f"is larger than {axis} + 2 * padding = {size + 2 * pad} (pool_size must be in "
                    f"[0, {axis} + 2*PAD + 1))")
        chk.require(ps > pad, f"attribute 'pool_size' = {[psh, psw]} and 'padding' = {[ph, pw]}: the {axis} "
                    f"window {ps} must be larger than its padding {pad}",
                    hint="a window inside the padding alone would see only padded zeros")
    div = ceil_div if ceil_mode else floor_div
    oh = div(h + 2 * ph - psh, sh) + 1
    ow = div(w + 2 * pw - psw, sw) + 1
    return (n, c, oh, ow), (psh, psw), (ph, pw), (sh, sw)


def max_pool2d_reference(inputs, attrs):
    (x,) = inputs
    n, c, h, w = x.shape
    (_, _, oh, ow), (psh, psw), (ph, pw), (sh, sw) = pool_geometry(_Silent(), [x.shape], attrs)
    # padded input large enough for every window, ceil-mode overhang included; pad() is 0
    rows = max(h + 2 * ph, (oh - 1) * sh + psh)
    cols = max(w + 2 * pw, (ow - 1) * sw + psw)
    xp = np.zeros((n, c, rows, cols), dtype=np.int64)
    xp[:, :, ph:ph + h, pw:pw + w] = x
    y = None
    for i in range(psh):
        for j in range(psw):
            win = xp[:, :, i: i + sh * (oh - 1) + 1: sh, j: j + sw * (ow - 1) + 1: sw]
            y = win.copy() if y is None else np.maximum(y, win)
    return [y]


class _Silent:
    """A checker stand-in for references, which run on already validated attributes."""
    op = "cvm"
    input_names = ("X",)

    def rank(self, shapes, index, rank, layout=""):
        return shapes[index]

    def ints_attr(self, attrs, name, length=None, expand=False, **kw):
        v = attrs[name]
        v = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
        return v * length if expand and length and len(v) == 1 else v

    def bool_attr(self, attrs, name):
        return bool(attrs[name])

    def require(self, cond, *a, **k):
        pass


def _pool_precision(chk, precs, shapes, attrs):
    return [precs[0]]   # padded zeros fit every precision


# ---- upsampling ---------------------------------------------------------------------------
def _upsampling_infer(chk, shapes, attrs):
    n, c, h, w = chk.rank(shapes, 0, 4, "NCHW")
    s = chk.int_attr(attrs, "scale", 1, MAX_ATTR, bound_doc=POS_RANGE)
    chk.require(attrs["method"] == "nearest", f"attribute 'method' = {attrs['method']!r}; CVM upsampling "
                "is nearest-neighbour only", hint="use method='nearest'")
    return [(n, c, h * s, w * s)]


def upsampling_reference(inputs, attrs):
    s = attrs["scale"]
    return [inputs[0].repeat(s, axis=2).repeat(s, axis=3)]


define(OpDef("conv2d", ("X", "W", "B"), ("Y",),
             {"padding": (0, 0), "stride": (1, 1), "dilation": (1, 1), "groups": 1},
             _conv_infer, _conv_precision, conv2d_reference, optional=frozenset({"B"}),
             doc="2-D convolution, NCHW/OIHW, groups 1 or C (depthwise)"))
define(OpDef("dense", ("X", "W", "B"), ("Y",), {"units": None, "use_bias": None},
             _dense_infer, _dense_precision, dense_reference, optional=frozenset({"B"}),
             doc="Y = X W^T (+ B)"))
define(OpDef("max_pool2d", ("X",), ("Y",),
             {"pool_size": REQUIRED, "padding": (0, 0), "strides": (1, 1), "ceil_mode": False},
             lambda chk, shapes, attrs: [pool_geometry(chk, shapes, attrs)[0]],
             _pool_precision, max_pool2d_reference, doc="max pooling, padding reads 0"))
define(OpDef("upsampling", ("X",), ("Y",), {"scale": REQUIRED, "method": "nearest"},
             _upsampling_infer, same_precision, upsampling_reference, doc="nearest upsampling by scale"))
