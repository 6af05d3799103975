"""The int8 x int4 modes (TOSA 0.30 "signed 8x4": int4 weights held in int8 arrays, marked with
weight_t="int4") of every convolution-like operator, and the operators not covered elsewhere
with zero points at both ends of int8; kernels vs reference on every ISA path."""
import numpy as np

from kernel_harness import check_all_paths, ints


def _int4(rng, shape):
    w = ints(rng, shape, np.int8, -7, 7)          # qsim.ir: int4 is [-7, 7]
    w.flat[0], w.flat[-1] = -7, 7
    return w


def test_int4_weights_every_convolution(rng):
    x4 = ints(rng, (1, 7, 6, 5), np.int8)
    x4.flat[0] = -128
    common = dict(input_zp=-128, weight_zp=0, weight_t="int4")
    conv = dict(common, pad=(2, 0, 2, 1), stride=(2, 1), dilation=(1, 2))
    check_all_paths("CONV2D", [x4], dict(conv, weight=_int4(rng, (6, 3, 2, 5)),
                                         bias=ints(rng, (6,), np.int32, -999, 999)))
    check_all_paths("DEPTHWISE_CONV2D", [x4], dict(conv, weight=_int4(rng, (3, 2, 5, 2)),
                                                   bias=ints(rng, (10,), np.int32, -999, 999)))
    x5 = ints(rng, (1, 4, 5, 4, 3), np.int8)
    check_all_paths("CONV3D", [x5], dict(common, weight=_int4(rng, (4, 2, 2, 3, 3)),
                                         bias=ints(rng, (4,), np.int32, -999, 999),
                                         pad=(1, 0, 0, 1, 1, 1), stride=(1, 2, 1), dilation=(2, 1, 1)))
    check_all_paths("FULLY_CONNECTED", [x4.reshape(7, 30)],
                    dict(common, weight=_int4(rng, (9, 30)), bias=ints(rng, (9,), np.int32, -999, 999)))
    ih, iw, kh, kw, sy, sx = 4, 3, 3, 2, 2, 3
    oh, ow = (ih - 1) * sy + kh, (iw - 1) * sx + kw
    check_all_paths("TRANSPOSE_CONV2D", [x4[:, :ih, :iw]],
                    dict(common, weight=_int4(rng, (7, kh, kw, 5)),
                         bias=ints(rng, (7,), np.int32, -999, 999), out_pad=(0, 0, 0, 0),
                         stride=(sy, sx), out_shape=(1, oh, ow, 7)))


def test_extreme_zero_points_fully_connected_and_transpose_conv2d(rng):
    # zero points at both ends of int8; TRANSPOSE_CONV2D's holes hold input_zp like padding
    x = ints(rng, (3, 4, 5, 6), np.int8)
    x.flat[0] = -128
    w = ints(rng, (13, 2, 3, 6), np.int8)
    w.flat[0] = -128
    for izp, wzp in ((-128, 127), (127, -128)):
        check_all_paths("FULLY_CONNECTED", [x.reshape(3, 120)],
                        dict(weight=ints(rng, (13, 120), np.int8), bias=ints(rng, (13,), np.int32, -99, 99),
                             input_zp=izp, weight_zp=wzp))
        check_all_paths("TRANSPOSE_CONV2D", [x],
                        dict(weight=w, bias=ints(rng, (13,), np.int32, -99, 99), out_pad=(1, 0, 0, 2),
                             stride=(2, 3), out_shape=(3, 7, 13, 13), input_zp=izp, weight_zp=wzp))
