"""Calibration's channel means (qsim.quant.calibration.calibrate.channel_mean): numpy's float64 means, bit
for bit, without the float64 copy of each activation."""
import numpy as np
from hypothesis import given, settings, strategies as st

from qsim.quant.calibration.calibrate import channel_mean


@settings(derandomize=True, deadline=None, max_examples=60)
@given(st.lists(st.integers(0, 300), min_size=0, max_size=3), st.integers(1, 9),
       st.floats(1e-3, 1e3), st.integers(0, 2 ** 31))
def test_channel_mean_has_numpys_bits(rest, channels, scale, seed):
    """A float32 sample (compiled pairwise sums: sequential below 8 values, 8 partial sums up
    to 128, halves above) and a batch of two (numpy itself) give numpy's float64 mean over
    every axis but 1, bit for bit."""
    shape = (1, channels, *rest)
    x = (np.random.default_rng(seed).standard_normal(shape) * scale + 0.3).astype(np.float32)
    axes = tuple(a for a in range(x.ndim) if a != 1)
    if x.size == 0:
        return
    assert channel_mean(x).tobytes() == x.astype(np.float64).mean(axis=axes).tobytes()
    batch = np.concatenate([x, -x])
    assert channel_mean(batch).tobytes() == batch.astype(np.float64).mean(axis=axes).tobytes()


def test_channel_mean_of_a_strided_view_and_of_float64():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 50, 60)).astype(np.float32)
    view = x[:, :, ::2, 1:]
    assert not view.flags.c_contiguous
    want = view.astype(np.float64).mean(axis=(0, 2, 3))
    assert channel_mean(view).tobytes() == want.tobytes()
    d = x.astype(np.float64)
    assert channel_mean(d).tobytes() == d.mean(axis=(0, 2, 3)).tobytes()
    assert channel_mean(x).tobytes() != channel_mean(x[:, :, :, :59]).tobytes()


def test_channel_sums_have_numpys_bits_on_every_isa_path():
    """The pairwise sums (kernels/scan_stats.h: the eight partial sums as one vector) on every
    ISA path this CPU has, at the lengths where numpy's algorithm changes form (below 8, at
    and around 128, split halves) and at EfficientNet's plane sizes."""
    from qsim.kernels.cpu_features import supported_isas
    from qsim.quant.calibration.calibrate import _quant_ops
    rng = np.random.default_rng(7)
    for r in (1, 7, 8, 9, 15, 16, 127, 128, 129, 136, 255, 256, 257, 1000, 1031, 3136, 12544):
        x = (rng.standard_normal((1, 3, r)) * 10.0 ** rng.uniform(-3, 3, (1, 3, 1)) + 0.25).astype(np.float32)
        want = x.astype(np.float64).sum(axis=(0, 2))
        for isa in supported_isas():
            got = np.empty(3)
            _quant_ops.channel_sums_f32(x, got, isa.code)
            assert got.tobytes() == want.tobytes(), (r, isa)


def test_channel_sums_every_length_and_special_values_on_every_isa_path():
    """Every length up to 300 (each leaf form: below 8, the 8-wide chunks with each tail of 0-7
    values, one split and two) and a few past the deeper splits, on every ISA path; values of
    every sign and magnitude with exact zeros of both signs, and channels holding an inf, a NaN
    or both inf signs (numpy's result: inf, NaN, NaN). kernels/scan_stats.h's AVX-512 leaf
    (qsim_pairwise_leaf_avx512) against numpy's pairwise sum, bit for bit where finite."""
    from qsim.kernels.cpu_features import supported_isas
    from qsim.quant.calibration.calibrate import _quant_ops
    rng = np.random.default_rng(11)
    for r in list(range(0, 301)) + [1023, 1024, 1025, 4097, 16384, 16392, 40000]:
        x = (rng.standard_normal((1, 6, r)) * 10.0 ** rng.uniform(-30, 30, (1, 6, r))).astype(np.float32)
        x[x < -1e25] = 0.0
        x[x > 1e25] = -0.0
        if r:
            x[0, 3, rng.integers(r)] = np.inf
            x[0, 4, rng.integers(r)] = np.nan
            x[0, 5, rng.integers(r)] = np.inf
            x[0, 5, rng.integers(r)] = -np.inf
        with np.errstate(invalid="ignore"):
            want = x.astype(np.float64).sum(axis=(0, 2))
        for isa in supported_isas():
            got = np.empty(6)
            _quant_ops.channel_sums_f32(x, got, isa.code)
            finite = np.isfinite(want)
            assert got[finite].tobytes() == want[finite].tobytes(), (r, isa)
            assert np.array_equal(got[~finite], want[~finite], equal_nan=True), (r, isa)
