"""The numpy fused multiply-add (qsim/runtime/float_ops/fma.py), the reference of the float
conv's definition, against the C library's fmaf (an independent single-rounding fma) bit for
bit: random bit patterns (subnormals, infinities, NaNs), cancellations, halfway cases and
signed zeros."""
import ctypes
import ctypes.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim.runtime.float_ops.fma import fma_chain_f32, fma_f32

_libm_name = ctypes.util.find_library("m")
if _libm_name is None:                                   # pragma: no cover  (every Linux/macOS has one)
    pytest.skip("no C math library to compare with", allow_module_level=True)
_libm = ctypes.CDLL(_libm_name)
_libm.fmaf.restype = ctypes.c_float
_libm.fmaf.argtypes = [ctypes.c_float] * 3


def c_fmaf(a, b, c):
    return np.array([_libm.fmaf(float(x), float(y), float(z)) for x, y, z in zip(a, b, c)], dtype=np.float32)


def assert_same_bits(got, want):
    assert got.dtype == np.float32
    both_nan = np.isnan(got) & np.isnan(want)
    np.testing.assert_array_equal(np.where(both_nan, 0, got.view(np.uint32)),
                                  np.where(both_nan, 0, want.view(np.uint32)))


def test_random_bit_patterns_and_cancellations_round_like_fmaf(rng):
    n = 20000
    a = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    b = rng.standard_normal(n).astype(np.float32) * np.float32(2.0) ** rng.integers(-100, 100, n).astype(np.float32)
    with np.errstate(all="ignore"):
        # half the addends cancel the product's leading bits (the float32 rounding of -a*b)
        c = np.where(rng.random(n) < 0.5, -(a.astype(np.float64) * b).astype(np.float32),
                     rng.standard_normal(n).astype(np.float32))
    assert_same_bits(fma_f32(a, b, c), c_fmaf(a, b, c))


def test_halfway_cases_subnormals_and_signed_zeros():
    one_ulp = np.float32(2.0 ** -23)
    a = np.array([1 + one_ulp, 1 + one_ulp, 2.0 ** -70, 1e-30, -0.0, 0.0, -1.0, np.inf, np.inf, 3.0, np.nan,
                  2.0 ** 64, 1.0 + 2 ** -12],
                 dtype=np.float32)
    b = np.array([1 - one_ulp, 1 + one_ulp, 2.0 ** -70, 1e-10, 1.0, 5.0, 0.0, 0.0, 1.0, 1.0, 1.0,
                  2.0 ** 64, 1.0 + 2 ** -12], dtype=np.float32)
    c = np.array([-1.0, 0.0, 2.0 ** -149, 0.0, 0.0, -0.0, -0.0, 1.0, -np.inf, -3.0, 0.0, 1.0, -1.0],
                 dtype=np.float32)
    got = fma_f32(a, b, c)
    assert_same_bits(got, c_fmaf(a, b, c))
    assert got[0] == np.float32(-(2.0 ** -46))             # exact where multiply-then-add gives 0
    assert not np.signbit(got[9]) and got[9] == 0             # 3 * 1 - 3: +0.0
    assert np.isnan(got[7]) and np.isnan(got[8])          # inf * 0, inf - inf


@settings(deadline=None, max_examples=200, derandomize=True)
@given(st.lists(st.tuples(st.floats(width=32), st.floats(width=32), st.floats(width=32)), min_size=1,
                max_size=20))
def test_any_float32_triples(triples):
    a, b, c = (np.array(v, dtype=np.float32) for v in zip(*triples))
    assert_same_bits(fma_f32(a, b, c), c_fmaf(a, b, c))


def test_the_chain_starts_at_plus_zero_and_runs_in_order():
    w = [np.float32(-1.0), np.float32(3.0), np.float32(1e8)]
    x = [np.float32(0.0), np.float32(0.1), np.float32(1e-8)]
    got = fma_chain_f32(w, x)
    acc = np.float32(0.0)
    for wk, xk in zip(w, x):
        acc = _libm.fmaf(float(wk), float(xk), float(acc))
        acc = np.float32(acc)
    assert got.view(np.uint32) == acc.view(np.uint32) and not np.signbit(fma_chain_f32(w[:1], x[:1]))
