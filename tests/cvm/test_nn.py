"""conv2d, dense, max_pool2d, upsampling: literal-loop oracles, kernels vs reference, sweeps."""
import itertools

import numpy as np
import pytest

from qsim.cvm import run, run_with_precision
from qsim.kernels.extensions import extension
from qsim.errors import InvalidGraphError

from .sweep import SHAPES, data


def test_kernels_are_built():
    # raises KernelsUnavailableError when python setup.py build_ext --inplace has not built it
    assert hasattr(extension("_cvm_conv"), "conv2d")


def conv_loops(x, w, b, pad, stride, dil, groups):
    """The formalization's conv2d, element by element in Python ints."""
    n_, c_, h_, w_ = x.shape
    oc, ic, kh, kw = w.shape
    (ph, pw), (sh, sw), (dh, dw) = pad, stride, dil
    oh = (h_ + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w_ + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n_, oc, oh, ow), dtype=np.int64)
    for n, i, p, q in itertools.product(range(n_), range(oc), range(oh), range(ow)):
        chans = [(j, j) for j in range(c_)] if groups == 1 else [(i, 0)]
        acc = 0
        for xc, wc in chans:
            for ki in range(kh):
                for kj in range(kw):
                    r, s = p * sh - ph + ki * dh, q * sw - pw + kj * dw
                    if 0 <= r < h_ and 0 <= s < w_:
                        acc += int(x[n, xc, r, s]) * int(w[i, wc, ki, kj])
        y[n, i, p, q] = acc + (0 if b is None else int(b[i]))
    return y


CONV_CASES = [
    # (x shape, w shape, padding, stride, dilation, groups, bias)
    ((1, 3, 6, 5), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1, True),
    ((2, 2, 7, 8), (3, 2, 2, 3), (0, 2), (2, 3), (2, 1), 1, False),
    ((1, 4, 5, 5), (4, 1, 3, 3), (1, 1), (1, 1), (1, 1), 4, True),     # depthwise
    ((2, 3, 9, 6), (3, 1, 2, 2), (2, 0), (3, 1), (1, 3), 3, False),    # depthwise, strided, dilated
    ((1, 1, 4, 4), (2, 1, 4, 4), (0, 0), (1, 1), (1, 1), 1, True),     # kernel = input
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_matches_literal_loops_on_both_backends(case, rng):
    xs, ws, pad, stride, dil, groups, has_bias = case
    x = rng.integers(-127, 128, xs).astype(np.int8)
    w = rng.integers(-127, 128, ws).astype(np.int8)
    b = rng.integers(-5000, 5000, ws[0]).astype(np.int32) if has_bias else None
    attrs = {"padding": pad, "stride": stride, "dilation": dil, "groups": groups}
    expect = conv_loops(x, w, b, pad, stride, dil, groups)
    for backend in ("reference", "kernels"):
        res = run_with_precision("conv2d", [x, w] + ([b] if has_bias else []), attrs, backend=backend)
        np.testing.assert_array_equal(res.outputs[0], expect, err_msg=backend)
    k = ws[1] * ws[2] * ws[3]
    p = 16 + k.bit_length()
    assert res.precisions == [max(p, 14) + 1 if has_bias else p]


def test_conv2d_extremes_kernels_equal_reference(rng):
    # all +-127: the largest partial sums precision allows
    x = np.full((1, 16, 9, 9), 127, np.int8)
    x[0, ::2] = -127
    w = np.full((8, 16, 3, 3), -127, np.int8)
    attrs = {"padding": 1}
    a = run("conv2d", [x, w], attrs, backend="kernels")[0]
    r = run("conv2d", [x, w], attrs, backend="reference")[0]
    np.testing.assert_array_equal(a, r)
    assert int(a[0, 0, 4, 4]) == 0      # 8 channels of +127 and 8 of -127 cancel
    # random larger layers
    for xs, ws, attrs in [((2, 8, 17, 15), (16, 8, 3, 3), {"padding": 1, "stride": 2}),
                          ((1, 32, 12, 12), (32, 1, 3, 3), {"padding": 1, "groups": 32}),
                          ((1, 5, 10, 11), (7, 5, 1, 1), {})]:
        x = rng.integers(-127, 128, xs).astype(np.int8)
        w = rng.integers(-127, 128, ws).astype(np.int8)
        b = rng.integers(-2**20, 2**20, ws[0]).astype(np.int32)
        np.testing.assert_array_equal(run("conv2d", [x, w, b], attrs, backend="kernels")[0],
                                      run("conv2d", [x, w, b], attrs, backend="reference")[0])


@pytest.mark.parametrize("xs, ws, attrs, text", [
    ((1, 3, 5, 5), (2, 3, 3, 3), {"padding": (4096, 0)}, r"padding\[0\] = 4096 is outside \[0, 4096\)"),
    ((1, 3, 5, 5), (2, 3, 3, 3), {"padding": (-1, 0)}, r"padding\[0\] = -1 is outside \[0, 4096\)"),
    ((1, 3, 5, 5), (2, 3, 3, 3), {"stride": (1, 0)}, r"stride\[1\] = 0 is outside \[1, 4096\)"),
    ((1, 3, 5, 5), (2, 3, 3, 3), {"dilation": (0, 1)}, r"dilation\[0\] = 0 is outside \[1, 4096\)"),
    ((1, 3, 5, 5), (2, 3, 3, 3), {"stride": (1, 2, 3)}, "has 3 values; it takes 2"),
    ((1, 4, 5, 5), (4, 2, 3, 3), {"groups": 2}, "'groups' = 2; it must be 1 or C = 4"),
    ((1, 4, 5, 5), (4, 2, 3, 3), {"groups": 4}, "needs IC = 1 and OC = C"),
    ((1, 3, 5, 5), (2, 4, 3, 3), {}, "IC = 4 must equal C = 3"),
    ((1, 3, 2, 5), (2, 3, 3, 3), {}, "dilated kernel"),
    ((3, 5, 5), (2, 3, 3, 3), {}, r"\(rank 3\); it must have rank 4"),
])
def test_conv2d_attribute_and_shape_errors(xs, ws, attrs, text):
    with pytest.raises(InvalidGraphError, match=text) as e:
        run("conv2d", [np.zeros(xs, np.int8), np.zeros(ws, np.int8)], attrs)
    assert "cvm.conv2d" in str(e.value)


def test_conv2d_bias_and_precision_errors():
    x, w = np.zeros((1, 3, 5, 5), np.int8), np.zeros((2, 3, 3, 3), np.int8)
    with pytest.raises(InvalidGraphError, match=r"bias must have shape \[2\]"):
        run("conv2d", [x, w, np.zeros(3, np.int32)])
    with pytest.raises(InvalidGraphError, match="input X has precision 9"):
        run("conv2d", [x.astype(np.int32), w], precisions=[9, 8])
    with pytest.raises(InvalidGraphError, match="input W has precision 12"):
        run("conv2d", [x, w], precisions=[8, 12])


def test_dense_hand_example_and_errors():
    x = np.array([[1, 2, 3], [-1, 0, 4]], np.int32)
    w = np.array([[1, 0, -1], [2, 2, 2]], np.int32)
    b = np.array([10, -10], np.int32)
    for backend in ("reference", "kernels"):
        res = run_with_precision("dense", [x, w, b], {"units": 2, "use_bias": True}, backend=backend)
        assert res.outputs[0].tolist() == [[8, 2], [5, -4]]
    assert res.precisions == [max(4 + 3 + 2, 5) + 1]
    with pytest.raises(InvalidGraphError, match="K extents"):
        run("dense", [x, w[:, :2]])
    with pytest.raises(InvalidGraphError, match="'units' = 3"):
        run("dense", [x, w], {"units": 3})
    with pytest.raises(InvalidGraphError, match="'use_bias' = True but the bias input B is absent"):
        run("dense", [x, w], {"use_bias": True})


def test_sweep_dense():
    """X (i, j), i in {1, 14, 27}, j in {1, 12, 23}; W (k, j), k in {1, 18}; units k; no bias."""
    for i, j, k in itertools.product((1, 14, 27), (1, 12, 23), (1, 18)):
        x, w = data((i, j), i + j), data((k, j), k)
        expect = [[sum(int(a) * int(c) for a, c in zip(row, wr)) for wr in w] for row in x]
        for backend in ("reference", "kernels"):
            res = run_with_precision("dense", [x, w], {"units": k, "use_bias": False}, backend=backend)
            assert res.outputs[0].tolist() == expect
        px, pw = (int(np.abs(x).max()).bit_length() + 1, int(np.abs(w).max()).bit_length() + 1)
        assert res.precisions == [px + pw + j.bit_length()]


# ---- max_pool2d -------------------------------------------------------------------------
def pool_loops(x, ps, pad, st, ceil_mode):
    n_, c_, h_, w_ = x.shape
    div = (lambda a, b: -(-a // b)) if ceil_mode else (lambda a, b: a // b)
    oh = div(h_ + 2 * pad[0] - ps[0], st[0]) + 1
    ow = div(w_ + 2 * pad[1] - ps[1], st[1]) + 1
    y = np.zeros((n_, c_, oh, ow), np.int64)
    for n, c, p, q in itertools.product(range(n_), range(c_), range(oh), range(ow)):
        vals = []
        for r in range(p * st[0] - pad[0], p * st[0] - pad[0] + ps[0]):
            for s in range(q * st[1] - pad[1], q * st[1] - pad[1] + ps[1]):
                vals.append(int(x[n, c, r, s]) if 0 <= r < h_ and 0 <= s < w_ else 0)
        y[n, c, p, q] = max(vals)
    return y


def test_max_pool2d_pads_with_zero_and_ceil_mode():
    x = -np.arange(1, 10, dtype=np.int32).reshape(1, 1, 3, 3)     # all negative
    y = run("max_pool2d", [x], {"pool_size": 2, "padding": 1, "strides": 2})[0]
    # windows start at -1 and 1: three of the four touch the zero padding, the last is
    # rows/cols [1, 3) inside X: max(-5, -6, -8, -9)
    assert y.tolist() == [[[[0, 0], [0, -5]]]]
    y = run("max_pool2d", [x], {"pool_size": (2, 2), "strides": (2, 2)})[0]
    assert y.tolist() == [[[[-1]]]]                  # floor((3 - 2) / 2) + 1 = 1
    y = run("max_pool2d", [x], {"pool_size": (2, 2), "strides": (2, 2), "ceil_mode": True})[0]
    assert y.tolist() == [[[[-1, 0], [0, 0]]]]       # ceil: 2 windows; the overhang reads 0


@pytest.mark.parametrize("shape, attrs", [
    ((1, 2, 7, 6), {"pool_size": (3, 2), "padding": (1, 1), "strides": (2, 3), "ceil_mode": True}),
    ((2, 3, 5, 9), {"pool_size": (2, 4), "padding": (1, 3), "strides": (1, 2), "ceil_mode": False}),
    ((1, 1, 4, 4), {"pool_size": (4, 4), "padding": (0, 0), "strides": (3, 3), "ceil_mode": True}),
])
def test_max_pool2d_matches_literal_loops(shape, attrs, rng):
    x = rng.integers(-127, 128, shape).astype(np.int32)
    y = run("max_pool2d", [x], attrs)[0]
    np.testing.assert_array_equal(y, pool_loops(x, attrs["pool_size"], attrs["padding"], attrs["strides"],
                                                attrs["ceil_mode"]))


@pytest.mark.parametrize("attrs, text", [
    ({"pool_size": (2, 2), "padding": (2, 0)}, "must be larger than its padding 2"),
    ({"pool_size": (6, 2)}, "window 6 is larger than H"),
    ({"pool_size": (0, 2)}, r"pool_size\[0\] = 0 is outside \[1, 4096\)"),
    ({"pool_size": (2, 2), "padding": (4096, 1)}, r"padding\[0\] = 4096 is outside \[0, 4096\)"),
    ({"pool_size": (2, 2), "strides": (0, 1)}, r"strides\[0\] = 0 is outside \[1, 4096\)"),
    ({"pool_size": (2, 2), "ceil_mode": "yes"}, "not a boolean"),
])
def test_max_pool2d_errors(attrs, text):
    with pytest.raises(InvalidGraphError, match=text):
        run("max_pool2d", [np.zeros((1, 1, 4, 4), np.int32)], attrs)


def test_sweep_max_pool2d():
    """pool_size (1, 2), default strides (1, 1) and padding 0: Y = max of horizontal pairs."""
    for k, shape in enumerate(SHAPES):
        x = data(shape, k)
        if shape[3] < 2:
            with pytest.raises(InvalidGraphError, match="window 2 is larger than W"):
                run("max_pool2d", [x], {"pool_size": (1, 2)})
            continue
        res = run_with_precision("max_pool2d", [x], {"pool_size": (1, 2)})
        np.testing.assert_array_equal(res.outputs[0], np.where(x[..., :-1] > x[..., 1:], x[..., :-1], x[..., 1:]))
        assert res.precisions == [8]


def test_sweep_upsampling():
    for k, shape in enumerate(SHAPES):
        x = data(shape, k)
        y = run("upsampling", [x], {"scale": 2})[0]
        h = np.arange(shape[2] * 2) // 2
        w = np.arange(shape[3] * 2) // 2
        np.testing.assert_array_equal(y, x[:, :, h[:, None], w[None, :]])


def test_upsampling_errors():
    x = np.zeros((1, 1, 2, 2), np.int32)
    with pytest.raises(InvalidGraphError, match=r"'scale' = 0 is outside \[1, 4096\)"):
        run("upsampling", [x], {"scale": 0})
    with pytest.raises(InvalidGraphError, match="nearest-neighbour only"):
        run("upsampling", [x], {"scale": 2, "method": "bilinear"})
    with pytest.raises(InvalidGraphError, match="rank 4"):
        run("upsampling", [np.zeros((2, 2), np.int32)], {"scale": 2})
