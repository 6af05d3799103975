"""The observers' compiled pass (kernels/quant_ops.pyx scan_f32, scan_bins_f32,
add_bin_counts_f32; kernels/scan_stats.h) against its numpy formulation, on every ISA path
this CPU has: extremes (a zero extreme is the first zero, sign included), exact zeros,
finiteness, and each value's bin floor(v / 2^log2_width) - first counted while in range."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim.kernels.cpu_features import supported_isas
from qsim.quant.calibration.observers import _quant_ops


def numpy_scan(x: np.ndarray, log2_width: int, first: int, size: int):
    """The definition: (lo, hi, zeros, finite, inside, counts) with float64 bins."""
    lo, hi = float(x.min()), float(x.max())
    zero_at = np.flatnonzero(x == 0)
    if zero_at.size:                 # a zero extreme keeps the first zero's sign
        lo = float(x[zero_at[0]]) if lo == 0 else lo
        hi = float(x[zero_at[0]]) if hi == 0 else hi
    with np.errstate(over="ignore", invalid="ignore"):
        j = np.floor(x.astype(np.float64) * 2.0 ** -log2_width) - first
    inside = (j >= 0) & (j < size)
    counts = np.bincount(j[inside].astype(np.int64), minlength=size)[:size]
    return lo, hi, int(zero_at.size), bool(np.all(np.isfinite(x))), bool(inside.all()), counts.tolist()


def kernel_scan(x: np.ndarray, log2_width: int, first: int, size: int):
    """scan_bins_f32 on every path (asserted equal, zero signs included) and the result."""
    results = []
    for isa in supported_isas():
        counts = np.zeros(size, np.int64)
        lo, hi, zeros, finite, inside = _quant_ops.scan_bins_f32(isa.code, x, log2_width, first, counts)
        results.append((lo, hi, math.copysign(1, lo), math.copysign(1, hi), zeros, finite, inside, counts.tolist()))
        plain = _quant_ops.scan_f32(isa.code, x)
        assert plain == (lo, hi, zeros, finite) and [math.copysign(1, v) for v in plain[:2]] == list(results[-1][2:4])
    assert all(r == results[0] for r in results), [isa.value for isa in supported_isas()]
    lo, hi, _, _, zeros, finite, inside, counts = results[0]
    return lo, hi, zeros, finite, inside, counts


def assert_scan_is_numpy(x, log2_width, first, size):
    got, want = kernel_scan(x, log2_width, first, size), numpy_scan(x, log2_width, first, size)
    assert got == want
    assert [math.copysign(1, v) for v in got[:2]] == [math.copysign(1, v) for v in want[:2]]


@settings(derandomize=True, deadline=None, max_examples=80)
@given(st.integers(1, 200), st.integers(-8, 3), st.sampled_from([0.0, 0.3, 0.9]), st.floats(-3, 3),
       st.integers(0, 2 ** 32 - 1))
def test_random_activations_scan_like_numpy(n, log2_width, zero_share, shift, seed):
    """Any length (vector bodies and tails), widths finer and coarser than 1 (coarser: the
    portable path's float64 bins on every path), a share of exact zeros of both signs, and bins
    that cover the values, part of them, or none."""
    rng = np.random.default_rng(seed)
    x = ((rng.standard_normal(n) + shift) * 4.0).astype(np.float32)
    zeros = rng.random(n) < zero_share
    x[zeros] = np.where(rng.random(int(zeros.sum())) < 0.5, 0.0, -0.0)
    bins = np.floor(x.astype(np.float64) * 2.0 ** -log2_width)
    lo_bin, hi_bin = int(bins.min()), int(bins.max())
    for first, size in ((lo_bin, hi_bin - lo_bin + 1), (lo_bin + 1, max(1, hi_bin - lo_bin - 1)),
                        (hi_bin + 5, 10), (lo_bin - 3, hi_bin - lo_bin + 8)):
        assert_scan_is_numpy(x, log2_width, first, size)


@pytest.mark.parametrize("n", [1023, 1024, 1025, 1040, 4099, 20000])
def test_runs_of_counted_values_count_like_numpy(n):
    """The AVX-512 path packs a run of 1024 values' counted bins before adding them: lengths
    around and across runs, with ReLU6-like data (a third exact zeros, a fifth on the rail 6.0,
    one bin again and again) and values outside the bins."""
    rng = np.random.default_rng(n)
    x = np.clip(rng.standard_normal(n) * 4.0, 0.0, 6.0).astype(np.float32)
    x[rng.random(n) < 0.1] = -0.0
    x[rng.random(n) < 0.05] = -2.5
    for first, size in ((0, 193), (-40, 250), (10, 50)):
        assert_scan_is_numpy(x, -5, first, size)


def test_zero_extremes_take_the_first_zeros_sign():
    """A zero minimum or maximum is the first zero met, as a sequential scan from x[0] with
    strict comparisons leaves it; on the vector paths the zero may sit in any lane or the tail."""
    for at in (0, 5, 15, 16, 17, 40):
        for sign in (0.0, -0.0):
            x = np.full(41, 2.0, np.float32)
            x[at:] = np.where(np.arange(41 - at) % 2, -sign, sign)
            assert_scan_is_numpy(x, -4, 0, 40)
            assert_scan_is_numpy(-x, -4, -40, 41)
            assert math.copysign(1, kernel_scan(x, -4, 0, 40)[0]) == math.copysign(1, sign)


def test_corner_values_bin_like_numpy():
    """Subnormals (their bins at fine and coarse widths), the largest floats (overflowing the
    float32 scaling: out of range), values on bin edges, exact powers of two, bins far from 0
    and near the float32 path's 2^24 bound (the portable path beyond it)."""
    tiny = np.array([1e-45, -1e-45, 1e-40, -1e-40, 1.17e-38, -1.17e-38, 0.0, -0.0], np.float32)
    big = np.array([3.4e38, -3.4e38, 1e30, -1e30, 65504.0], np.float32)
    edges = np.array([k * 0.25 for k in range(-40, 41)], np.float32)
    for x in (tiny, big, edges, np.concatenate([tiny, edges, big])):
        for log2_width in (-40, -10, -2, 0, 1, 5):
            bins = np.floor(x.astype(np.float64) * 2.0 ** -log2_width)
            lo_bin = int(max(bins.min(), -(2 ** 40)))
            assert_scan_is_numpy(x, log2_width, lo_bin, 64)
            assert_scan_is_numpy(x, log2_width, -32, 64)
    far = np.array([2.0 ** 24 - 9, 2.0 ** 24 - 3.5, 2.0 ** 24, 2.0 ** 24 + 2, 2.0 ** 25 + 4], np.float32)
    for first in (2 ** 24 - 10, 2 ** 24 - 1, 2 ** 24, 2 ** 24 + 1, 2 ** 40):
        assert_scan_is_numpy(far, 0, first, 40)
        assert_scan_is_numpy(-far, 0, -first, 40)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("at", [0, 7, 16, 33])
def test_non_finite_values_are_reported_on_every_path(bad, at):
    x = np.linspace(-1, 1, 34).astype(np.float32)
    x[at] = bad
    for isa in supported_isas():
        assert _quant_ops.scan_f32(isa.code, x)[3] is False
        counts = np.zeros(16, np.int64)
        _, _, _, finite, inside = _quant_ops.scan_bins_f32(isa.code, x, -3, -8, counts)
        assert finite is False and inside is False


def test_add_bin_counts_counts_every_value_in_the_callers_bins():
    rng = np.random.default_rng(3)
    x = rng.normal(size=1001).astype(np.float32)
    x[::7] = 0.0
    j = np.floor(x.astype(np.float64) * 2.0 ** 6).astype(np.int64)
    for isa in supported_isas():
        counts = np.full(j.max() - j.min() + 1, 5, np.int64)
        _quant_ops.add_bin_counts_f32(isa.code, x, -6, int(j.min()), counts)
        assert counts.tolist() == (np.bincount(j - j.min()) + 5).tolist()


def test_empty_input_and_empty_bins():
    for isa in supported_isas():
        assert _quant_ops.scan_f32(isa.code, np.zeros(0, np.float32)) == (0.0, 0.0, 0, True)
        assert _quant_ops.scan_bins_f32(isa.code, np.zeros(0, np.float32), 0, 0, np.zeros(3, np.int64)) == (
            0.0, 0.0, 0, True, True)
        # no bins: every value is outside
        assert _quant_ops.scan_bins_f32(isa.code, np.zeros(3, np.float32), 0, 0, np.zeros(0, np.int64))[4] is False


def test_bins_beyond_the_observers_histograms_are_refused():
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="beyond"):
        _quant_ops.scan_bins_f32(supported_isas()[0].code, x, 0, 2 ** 54, np.zeros(4, np.int64))
