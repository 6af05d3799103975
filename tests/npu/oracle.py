"""Independent oracles for the NPU tests: TOSA 0.30 pseudocode as plain loops (2.3 CONV2D,
2.3 DEPTHWISE_CONV2D, FULLY_CONNECTED, MATMUL, 2.13 RESCALE), sharing nothing with
qsim.npu but qsim.tosa.arith.apply_scale_32 (the one definition of the scaling)."""
import numpy as np

from qsim.tosa.arith import apply_scale_32


def conv2d(x, w, bias, pad, stride, dilation, in_zp, w_zp):
    n, h, wd, ic = x.shape
    oc, kh, kw, _ = w.shape
    top, bottom, left, right = pad
    oh = (h - 1 + top + bottom - (kh - 1) * dilation[0]) // stride[0] + 1
    ow = (wd - 1 + left + right - (kw - 1) * dilation[1]) // stride[1] + 1
    out = np.zeros((n, oh, ow, oc), np.int64)
    for b in range(n):
        for y in range(oh):
            for xx in range(ow):
                acc = np.zeros(oc, np.int64)
                for ky in range(kh):
                    for kx in range(kw):
                        iy = y * stride[0] - top + ky * dilation[0]
                        ix = xx * stride[1] - left + kx * dilation[1]
                        if 0 <= iy < h and 0 <= ix < wd:
                            v = x[b, iy, ix].astype(np.int64) - in_zp
                            acc += (w[:, ky, kx, :].astype(np.int64) - w_zp) @ v
                out[b, y, xx] = acc + (0 if bias is None else np.asarray(bias, np.int64))
    return out


def depthwise(x, w, bias, pad, stride, dilation, in_zp, w_zp):
    kh, kw, c, m = w.shape
    # channel c*M+m of the output is an ordinary conv of input channel c with w[:, :, c, m]
    outs = []
    for ch in range(c):
        wc = np.transpose(w[:, :, ch, :], (2, 0, 1))[..., None]          # [M, KH, KW, 1]
        outs.append(conv2d(x[..., ch:ch + 1], wc, None, pad, stride, dilation, in_zp, w_zp))
    out = np.concatenate(outs, axis=-1)
    return out + (0 if bias is None else np.asarray(bias, np.int64))


def rescale_clamp(acc, multiplier, shift, out_zp, double_round, lo=-128, hi=127):
    scaled = apply_scale_32(acc.astype(np.int32), multiplier, shift, double_round).astype(np.int64)
    return np.clip(np.clip(scaled + out_zp, -128, 127), lo, hi).astype(np.int8)
