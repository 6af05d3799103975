"""nn.conv with a fused relu/clamp whose conv output nobody reads (bounds.BOUND_ONLY): the GEMM
tile epilogue and the depthwise loop write only the bounded values, in the conv's own buffer.

Oracles: the unfused computation (the conv alone, then numpy's maximum/minimum: bit for bit),
a float64 sum written here (float32 rounding bounds), and the same computation on another
thread count or batch (bit for bit)."""
import numpy as np
import pytest

from qsim.runtime.float_ops import run_op
from qsim.runtime.float_ops.bounds import BOUND_ONLY, THEN_BOUND

from test_float_speed_paths import EPS32, float64_conv   # tests/runtime is on sys.path

# (B, C, H, W), N, k, stride, groups: 1x1 tiled along rows and columns, 3x3 on the tiled im2col,
# depthwise stride 1 and 2, depthwise with channel multiplier 2, a tiny plane
CASES = [((2, 16, 40, 36), 300, 1, 1, 1), ((2, 3, 19, 17), 24, 3, 2, 1), ((2, 24, 23, 21), 24, 3, 1, 24),
         ((1, 20, 14, 14), 20, 5, 2, 20), ((2, 6, 9, 11), 12, 3, 1, 6), ((3, 40, 7, 7), 40, 5, 1, 40)]
BOUNDS = [(0.0, 6.0), (0.0, None), (-1.0, 1.0)]


def _numpy_bound(v, lo, hi):
    v = np.maximum(v, np.float32(lo))
    return v if hi is None else np.minimum(v, np.float32(hi))


def _inputs(rng, shape, n, k, groups, batch=None):
    x = (rng.standard_normal(((batch or shape[0]),) + shape[1:]) * 2).astype(np.float32)
    w = rng.standard_normal((n, shape[1] // groups, k, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return x, w, b


def _attrs(k, stride, groups, bound, only=True):
    return {"stride": [stride] * 2, "padding": [k // 2] * 4, "groups": groups, THEN_BOUND: bound,
            **({BOUND_ONLY: True} if only else {})}


@pytest.mark.parametrize("bound", BOUNDS)
@pytest.mark.parametrize("shape,n,k,stride,groups", CASES)
def test_only_the_bounded_array_with_the_unfused_bits(rng, monkeypatch, shape, n, k, stride, groups, bound):
    x, w, b = _inputs(rng, shape, n, k, groups)
    x.reshape(-1)[:3] = [np.nan, -0.0, np.inf]
    results = {}
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("QSIM_THREADS", threads)
        results[threads] = run_op("nn.conv", [x, w, b], _attrs(k, stride, groups, bound))
    conv, y = results["1"]
    assert conv is None and y.dtype == np.float32 and y.flags.c_contiguous
    plain = run_op("nn.conv", [x, w, b], {"stride": [stride] * 2, "padding": [k // 2] * 4, "groups": groups})[0]
    unfused = _numpy_bound(plain, *bound)
    np.testing.assert_array_equal(y.view(np.uint32), unfused.view(np.uint32))
    both = run_op("nn.conv", [x, w, b], _attrs(k, stride, groups, bound, only=False))
    np.testing.assert_array_equal(both[1].view(np.uint32), y.view(np.uint32))
    np.testing.assert_array_equal(both[0].view(np.uint32), plain.view(np.uint32))
    for threads in ("2", "3"):
        assert results[threads][0] is None
        np.testing.assert_array_equal(results[threads][1].view(np.uint32), y.view(np.uint32), err_msg=threads)


@pytest.mark.parametrize("shape,n,k,stride,groups", CASES)
def test_within_float32_rounding_of_the_exact_clamped_sum(rng, shape, n, k, stride, groups):
    x, w, b = _inputs(rng, shape, n, k, groups)
    y = run_op("nn.conv", [x, w, b], _attrs(k, stride, groups, (0.0, 6.0)))[1]
    fc = shape[1] // groups
    exact, mag = np.zeros(y.shape), np.zeros(y.shape)
    m = n // groups
    for gi in range(groups):          # per group: the float64 conv of its channels
        e, s = float64_conv(x[:, gi * fc:(gi + 1) * fc], w[gi * m:(gi + 1) * m], b[gi * m:(gi + 1) * m],
                            stride, k // 2)
        exact[:, gi * m:(gi + 1) * m], mag[:, gi * m:(gi + 1) * m] = e, s
    terms = fc * k * k + 1
    # clamping never widens a difference: |clip(a) - clip(b)| <= |a - b|
    assert np.all(np.abs(y - np.clip(exact, 0.0, 6.0)) <= terms * EPS32 * mag)
    assert y.min() >= 0.0 and y.max() <= 6.0


@pytest.mark.parametrize("shape,n,k,stride,groups", CASES)
def test_a_sample_in_a_batch_gives_the_bits_it_gives_alone(rng, monkeypatch, shape, n, k, stride, groups):
    monkeypatch.setenv("QSIM_THREADS", "2")
    x, w, b = _inputs(rng, shape, n, k, groups, batch=4)
    attrs = _attrs(k, stride, groups, (0.0, 6.0))
    batch = run_op("nn.conv", [x, w, b], attrs)[1]
    for i in (0, 3):
        alone = run_op("nn.conv", [x[i:i + 1], w, b], attrs)[1]
        np.testing.assert_array_equal(batch[i:i + 1].view(np.uint32), alone.view(np.uint32), err_msg=str(i))


def test_other_dtypes_take_numpys_bound(rng):
    """A wider bias (float64 result) or float64 data: the bounded array is numpy's bound of the
    conv result, and the conv result is still not returned."""
    x, w, b = _inputs(rng, (2, 3, 6, 6), 4, 3, 1)
    for ins in ([x, w, b.astype(np.float64)], [x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)]):
        plain = run_op("nn.conv", ins, {"padding": [1] * 4})[0]
        conv, y = run_op("nn.conv", ins, _attrs(3, 1, 1, (0.0, 6.0)))
        assert conv is None
        np.testing.assert_array_equal(y, np.clip(plain.astype(np.float32), 0, 6))
