"""Independent oracles for the TOSA tests: scalar loops over Python ints, written from the
spec's pseudocode one element at a time (no numpy arithmetic, no qsim code), so they share
nothing with the vectorized reference but the spec text.

Each returns (result as nested Python ints in a numpy int64 array, overflow flag), where the
flag says whether any partial sum left the accumulator range (the spec's REQUIRE)."""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

INT32 = (-(1 << 31), (1 << 31) - 1)
INT48 = (-(1 << 47), (1 << 47) - 1)


class Acc:
    """acc = apply_add(acc, x) with overflow tracking."""

    def __init__(self, lo, hi, start=0):
        self.lo, self.hi, self.value, self.overflow = lo, hi, start, False

    def add(self, x):
        self.value += x
        if not self.lo <= self.value <= self.hi:
            self.overflow = True


def conv_nd(x, w, bias, pad, stride, dilation, input_zp, weight_zp, bounds):
    """CONV2D / CONV3D (spec 2.3.3/2.3.4): x [N,*S,IC], w [OC,*K,IC], pad (before, after) per axis."""
    x, w = x.tolist(), w.tolist()
    nsp = len(stride)
    n_ = len(x)
    sizes = _dims(x)[1:1 + nsp]
    ic_ = _dims(x)[-1]
    oc_ = len(w)
    ks = _dims(w)[1:1 + nsp]
    outs = [(sizes[i] - 1 + pad[2 * i] + pad[2 * i + 1] - (ks[i] - 1) * dilation[i]) // stride[i] + 1
            for i in range(nsp)]
    out = np.zeros([n_] + outs + [oc_], dtype=np.int64)
    overflow = False
    for n in range(n_):
        for o in itertools.product(*(range(v) for v in outs)):
            for oc in range(oc_):
                acc = Acc(*bounds)
                for k in itertools.product(*(range(v) for v in ks)):
                    pos = [o[i] * stride[i] - pad[2 * i] + k[i] * dilation[i] for i in range(nsp)]
                    if all(0 <= pos[i] < sizes[i] for i in range(nsp)):
                        for ic in range(ic_):
                            value = _get(x[n], pos)[ic] - input_zp
                            weight = _get(w[oc], list(k))[ic] - weight_zp
                            acc.add(value * weight)
                acc.add(int(bias[oc]))
                overflow |= acc.overflow
                out[(n,) + o + (oc,)] = acc.value
    return out, overflow


def depthwise(x, w, bias, pad, stride, dilation, input_zp, weight_zp, bounds):
    n_, ih, iw, c_ = x.shape
    kh, kw, _, m_ = w.shape
    oh = (ih - 1 + pad[0] + pad[1] - (kh - 1) * dilation[0]) // stride[0] + 1
    ow = (iw - 1 + pad[2] + pad[3] - (kw - 1) * dilation[1]) // stride[1] + 1
    xl, wl = x.tolist(), w.tolist()
    out = np.zeros((n_, oh, ow, c_ * m_), dtype=np.int64)
    overflow = False
    for n, oy, ox, c, m in itertools.product(range(n_), range(oh), range(ow), range(c_), range(m_)):
        acc = Acc(*bounds)
        for ky, kx in itertools.product(range(kh), range(kw)):
            y = oy * stride[0] - pad[0] + ky * dilation[0]
            xx = ox * stride[1] - pad[2] + kx * dilation[1]
            if 0 <= y < ih and 0 <= xx < iw:
                acc.add((xl[n][y][xx][c] - input_zp) * (wl[ky][kx][c][m] - weight_zp))
        acc.add(int(bias[c * m_ + m]))
        overflow |= acc.overflow
        out[n, oy, ox, c * m_ + m] = acc.value
    return out, overflow


def transpose_conv2d(x, w, bias, out_pad, stride, out_shape, input_zp, weight_zp, bounds):
    n_, ih, iw, ic_ = x.shape
    oc_, kh, kw, _ = w.shape
    _, oh, ow, _ = out_shape
    xl, wl = x.tolist(), w.tolist()
    accs = {}
    for n, oy, ox, oc in itertools.product(range(n_), range(oh), range(ow), range(oc_)):
        accs[n, oy, ox, oc] = Acc(*bounds, start=int(bias[oc]))
    for n, iy, ix, oc, ic, ky, kx in itertools.product(range(n_), range(ih), range(iw), range(oc_),
                                                        range(ic_), range(kh), range(kw)):
        oy = iy * stride[0] - out_pad[0] + ky
        ox = ix * stride[1] - out_pad[2] + kx
        if 0 <= oy < oh and 0 <= ox < ow:
            accs[n, oy, ox, oc].add((xl[n][iy][ix][ic] - input_zp) * (wl[oc][ky][kx][ic] - weight_zp))
    out = np.zeros(tuple(out_shape), dtype=np.int64)
    for idx, acc in accs.items():
        out[idx] = acc.value
    return out, any(a.overflow for a in accs.values())


def matmul(a, b, a_zp, b_zp, bounds):
    n_, h_, c_ = a.shape
    w_ = b.shape[2]
    al, bl = a.tolist(), b.tolist()
    out = np.zeros((n_, h_, w_), dtype=np.int64)
    overflow = False
    for n, h, w in itertools.product(range(n_), range(h_), range(w_)):
        acc = Acc(*bounds)
        for c in range(c_):
            acc.add((al[n][h][c] - a_zp) * (bl[n][c][w] - b_zp))
        overflow |= acc.overflow
        out[n, h, w] = acc.value
    return out, overflow


def reciprocal_scale(value):
    k = (value - 1).bit_length()          # 32 - count_leading_zeros(value - 1)
    return (((1 << 30) + 1) << k) // value, 30 + k


def rounded_scale(value, multiplier, shift, double_round=False):
    """apply_scale_32/16 in exact rationals: floor(v * m / 2^s + 1/2 (+- 2^30 / 2^s))."""
    x = Fraction(value * multiplier, 1 << shift) + Fraction(1, 2)
    if double_round and shift > 31:
        x += Fraction(1 << 30, 1 << shift) * (1 if value >= 0 else -1)
    return x.numerator // x.denominator


def avg_pool(x, kernel, stride, pad, input_zp, output_zp, lo, hi):
    n_, ih, iw, c_ = x.shape
    oh = (ih + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
    ow = (iw + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
    xl = x.tolist()
    out = np.zeros((n_, oh, ow, c_), dtype=np.int64)
    for n, oy, ox, c in itertools.product(range(n_), range(oh), range(ow), range(c_)):
        acc, count = 0, 0
        for ky, kx in itertools.product(range(kernel[0]), range(kernel[1])):
            y, xx = oy * stride[0] - pad[0] + ky, ox * stride[1] - pad[2] + kx
            if 0 <= y < ih and 0 <= xx < iw:
                count += 1
                acc += xl[n][y][xx][c] - input_zp
        m, s = reciprocal_scale(count)
        out[n, oy, ox, c] = min(max(rounded_scale(acc, m, s) + output_zp, lo), hi)
    return out


def max_pool(x, kernel, stride, pad):
    n_, ih, iw, c_ = x.shape
    oh = (ih + pad[0] + pad[1] - kernel[0]) // stride[0] + 1
    ow = (iw + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
    out = np.zeros((n_, oh, ow, c_), dtype=np.int64)
    for n, oy, ox, c in itertools.product(range(n_), range(oh), range(ow), range(c_)):
        vals = [int(x[n, y, xx, c])
                for y in range(oy * stride[0] - pad[0], oy * stride[0] - pad[0] + kernel[0])
                for xx in range(ox * stride[1] - pad[2], ox * stride[1] - pad[2] + kernel[1])
                if 0 <= y < ih and 0 <= xx < iw]
        out[n, oy, ox, c] = max(vals)
    return out


def resize(x, output_size, stride, offset, shift, mode):
    n_, ih, iw, c_ = x.shape
    oh, ow = output_size
    unit = 1 << shift
    out = np.zeros((n_, oh, ow, c_), dtype=np.int64)
    for n, oy, ox, c in itertools.product(range(n_), range(oh), range(ow), range(c_)):
        y = oy * stride[0] + offset[0]
        xx = ox * stride[1] + offset[1]
        iy, ix = y // unit, xx // unit          # floor division == arithmetic shift
        dy, dx = y - iy * unit, xx - ix * unit
        iy0, iy1 = max(iy, 0), min(iy + 1, ih - 1)
        ix0, ix1 = max(ix, 0), min(ix + 1, iw - 1)
        assert iy0 <= iy1 and ix0 <= ix1
        if mode == "BILINEAR":
            v = lambda a, b: int(x[n, a, b, c])  # noqa: E731
            out[n, oy, ox, c] = (v(iy0, ix0) * (unit - dy) * (unit - dx) + v(iy0, ix1) * (unit - dy) * dx
                                 + v(iy1, ix0) * dy * (unit - dx) + v(iy1, ix1) * dy * dx)
        else:
            out[n, oy, ox, c] = int(x[n, iy1 if 2 * dy >= unit else iy0, ix1 if 2 * dx >= unit else ix0, c])
    return out


def _dims(nested):
    dims = []
    while isinstance(nested, list):
        dims.append(len(nested))
        nested = nested[0]
    return dims


def _get(nested, idx):
    for i in idx:
        nested = nested[i]
    return nested
