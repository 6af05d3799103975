"""Observer properties: coverage, streaming invariance, outlier robustness, MSE optimality."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qsim.errors import DataError, UsageError
from qsim.quant.calibration.observers import (OBSERVER_CLASSES, AutoObserver, MinMaxObserver, MseObserver, ObserverKind, PercentileObserver,
                                  StreamingHistogram, make_observer)
from qsim.quant.params import QuantScheme, dequantize, quantize

ASYM = QuantScheme(bits=8, signed=True, symmetric=False)
SYM = QuantScheme(bits=8, signed=True, symmetric=True)
KINDS = list(ObserverKind)


def observe(kind, data, batches=1, axis=None, **kw):
    obs = make_observer(kind, axis, name="t", **kw)
    for part in np.array_split(data, batches, axis=0):
        obs.update(part)
    return obs


def mse_of(params, x):
    return float(np.mean((dequantize(quantize(x, params), params) - x) ** 2))


def test_kinds_by_name():
    assert ObserverKind.from_name("MSE") is ObserverKind.MSE
    assert isinstance(make_observer("percentile"), PercentileObserver)
    with pytest.raises(UsageError, match="minmax, percentile, mse"):
        ObserverKind.from_name("kl")


def test_unknown_observer_kind_is_an_error_not_mse():
    # an unknown kind used to fall back to the MSE observer silently
    for bad in ("kl", "", None, 3):
        with pytest.raises(UsageError, match=f"unknown observer {bad!r}") as err:
            make_observer(bad)
        assert err.value.hint == "choose one of auto, minmax, percentile, mse"


def test_every_observer_kind_makes_its_own_observer():
    made = {kind: type(make_observer(kind)) for kind in ObserverKind}
    assert made == {ObserverKind.AUTO: AutoObserver, ObserverKind.MINMAX: MinMaxObserver, ObserverKind.PERCENTILE: PercentileObserver,
                    ObserverKind.MSE: MseObserver}
    assert set(OBSERVER_CLASSES) == set(ObserverKind)


@pytest.mark.parametrize("scheme", [ASYM, SYM])
def test_minmax_covers_the_data(rng, scheme):
    x = rng.normal(size=(8, 100)) * 3 + 1
    q = observe(ObserverKind.MINMAX, x, batches=4).params(scheme)
    raw = np.asarray(q.zero_point) + np.floor(x / q.scale + 0.5)
    assert raw.min() >= scheme.qmin and raw.max() <= scheme.qmax   # nothing clipped
    assert np.max(np.abs(dequantize(quantize(x, q), q) - x)) <= q.scale / 2 * (1 + 1e-9)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scheme", [ASYM, SYM])
def test_streaming_equals_one_batch(rng, kind, scheme):
    # batch sizes grow the range in steps, forcing histogram merges
    x = np.concatenate([rng.normal(size=50) * 0.01, rng.normal(size=500),
                        rng.standard_t(2, size=2000) * 5, np.zeros(100)])
    whole = observe(kind, x).params(scheme)
    split = observe(kind, x, batches=7).params(scheme)
    assert whole.scale == split.scale and whole.zero_point == split.zero_point


def test_histogram_counts_are_exact(rng):
    x = rng.normal(size=5000) * 10
    h = StreamingHistogram()
    for part in np.array_split(x, 5):
        h.add(part)
    left, right, counts = h.bins()
    assert counts.sum() == x.size
    assert h.counts.size <= 2048
    # every value lies in its bin
    j = np.floor(x / h.width).astype(np.int64) - h.first
    assert np.array_equal(np.bincount(j, minlength=h.counts.size), h.counts)
    assert (h.lo, h.hi) == (x.min(), x.max())


def test_histogram_of_zeros_then_data():
    h = StreamingHistogram()
    h.add(np.zeros(10))
    h.add(np.array([1e6, -3.0]))
    left, right, counts = h.bins()
    assert counts.sum() == 2 and h.zeros == 10


@pytest.mark.parametrize("scheme", [ASYM, SYM])
def test_full_percentile_equals_minmax(rng, scheme):
    x = rng.normal(size=3000)
    a = observe(ObserverKind.PERCENTILE, x, percentile=100.0).params(scheme)
    b = observe(ObserverKind.MINMAX, x).params(scheme)
    assert a.scale == pytest.approx(b.scale, rel=1e-12) and a.zero_point == b.zero_point


def test_percentile_ignores_rare_outliers(rng):
    x = np.concatenate([rng.uniform(-1, 1, size=100000), [500.0, -800.0]])
    q = observe(ObserverKind.PERCENTILE, x, percentile=99.9).params(ASYM)
    assert q.scale < 2.1 / 255
    qs = observe(ObserverKind.PERCENTILE, x, percentile=99.9).params(SYM)
    assert 0.99 / 127 < qs.scale < 1.01 / 127


@pytest.mark.parametrize("df", [2, 3, 5])
@pytest.mark.parametrize("scheme", [ASYM, SYM])
def test_mse_error_at_most_minmax_on_heavy_tails(rng, scheme, df):
    x = rng.standard_t(df, size=50000)
    mse_params = observe(ObserverKind.MSE, x, batches=3).params(scheme)
    minmax_params = observe(ObserverKind.MINMAX, x).params(scheme)
    assert mse_of(mse_params, x) <= 0.96 * mse_of(minmax_params, x)


def test_mse_clips_hard_at_four_bits(rng):
    # with 15 levels, clipping the tails of Student-t(3) pays: error well under half
    x = rng.standard_t(3, size=50000)
    scheme = QuantScheme(bits=4, signed=True, symmetric=True)
    got = mse_of(observe(ObserverKind.MSE, x).params(scheme), x)
    assert got < 0.5 * mse_of(observe(ObserverKind.MINMAX, x).params(scheme), x)


def test_mse_keeps_uniform_data_nearly_unclipped(rng):
    x = rng.uniform(-2, 5, size=50000)
    got = mse_of(observe(ObserverKind.MSE, x).params(ASYM), x)
    ref = mse_of(observe(ObserverKind.MINMAX, x).params(ASYM), x)
    assert got <= 1.05 * ref


def test_mse_handles_relu_output_with_many_zeros(rng):
    x = np.maximum(rng.normal(size=40000), 0.0)
    q = observe(ObserverKind.MSE, x).params(ASYM)
    assert q.zero_point == -128
    assert mse_of(q, x) <= mse_of(observe(ObserverKind.MINMAX, x).params(ASYM), x)


@pytest.mark.parametrize("kind", KINDS)
def test_per_channel(rng, kind):
    # NCHW activations observed per channel along axis 1; channel c has range ~ (c+1)
    x = rng.uniform(-1, 1, size=(4, 3, 5, 5)) * np.array([1.0, 2.0, 3.0])[None, :, None, None]
    scheme = QuantScheme(bits=8, symmetric=True, channel_axis=1)
    q = observe(kind, x, batches=2, axis=1).params(scheme)
    assert q.axis == 1 and q.scales().shape == (3,)
    assert np.all(np.diff(q.scales()) > 0)
    if kind is ObserverKind.MINMAX:
        amax = np.abs(x).max(axis=(0, 2, 3))
        np.testing.assert_allclose(q.scales(), amax / 127, rtol=1e-15)


def test_errors_name_the_tensor(rng):
    obs = make_observer(ObserverKind.MSE, name="conv3")
    with pytest.raises(DataError, match="conv3: no calibration values"):
        obs.params(ASYM)
    with pytest.raises(DataError, match="conv3: calibration produced non-finite"):
        obs.update(np.array([1.0, np.nan]))
    per_channel = make_observer(ObserverKind.MINMAX, 1, name="relu2")
    per_channel.update(np.zeros((2, 4, 3)))
    with pytest.raises(DataError, match="relu2: a batch has 5 channels, earlier batches had 4"):
        per_channel.update(np.zeros((2, 5, 3)))
    with pytest.raises(DataError, match="channel axis 3"):
        make_observer(ObserverKind.MINMAX, 3, name="x").update(np.zeros((2, 2)))
    with pytest.raises(UsageError):
        per_channel.params(ASYM)          # per-channel observer, per-tensor scheme
    per_tensor = MseObserver(None, name="y")
    per_tensor.update(np.ones(3))
    with pytest.raises(UsageError, match="y: observer is per tensor"):
        per_tensor.params(QuantScheme(channel_axis=0))
    with pytest.raises(UsageError, match="percentile 30"):
        PercentileObserver(None, percentile=30.0)


@pytest.mark.parametrize("kind", [PercentileObserver, MseObserver])
@pytest.mark.parametrize("value", [1.0, -3.0, 1e6])
def test_a_constant_tensor_far_from_zero_folds_without_a_huge_histogram(kind, value):
    """Found by benchmarks/fuzz.py: a tensor that is one value (x / x) gets bins 2^-52 wide,
    so its folded index is ~2^40; folding must not allocate a bin per index up to that."""
    observer = kind()
    observer.update(np.full((2, 3), value, np.float32))
    lo, hi = observer.value_range(SYM)
    assert float(hi[0]) == pytest.approx(abs(value), rel=1e-6) and float(lo[0]) == -float(hi[0])


def _state(obs):
    """Everything an observer keeps, for comparing two of them exactly."""
    if hasattr(obs, "histograms"):
        return [(h.log2_width, h.first, h.counts.tolist(), h.zeros, h.lo, h.hi) for h in obs.histograms]
    return obs.lo.tolist(), obs.hi.tolist(), obs.count


@pytest.mark.parametrize("kind", KINDS)
def test_float32_batches_keep_the_statistics_of_the_float64_path(rng, kind):
    """Per-tensor observers scan float32 activations in compiled passes; the histograms,
    extremes and counts equal those of the same values given as float64 (the numpy path),
    through range growth (bin merges), exact and signed zeros, and tiny values."""
    batches = [rng.normal(size=(2, 3, 5, 5)).astype(np.float32) * 1e-3,
               np.maximum(rng.normal(size=(2, 3, 5, 5)), 0).astype(np.float32),
               np.array([-0.0, 0.0, 1e-30, -1e-30, 3e-45, -3e-45], np.float32),
               (rng.standard_t(2, size=(4, 100)) * 50).astype(np.float32)]
    fast, slow = make_observer(kind, name="t"), make_observer(kind, name="t")
    for b in batches:
        fast.update(b)
        slow.update(b.astype(np.float64))
        assert _state(fast) == _state(slow)
    assert fast.count == slow.count == sum(b.size for b in batches)
    for scheme in (ASYM, SYM):
        f, s = fast.params(scheme), slow.params(scheme)
        assert np.array_equal(f.scale, s.scale) and np.array_equal(f.zero_point, s.zero_point)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_float32_non_finite_values_are_a_data_error(bad):
    obs = make_observer(ObserverKind.PERCENTILE, name="conv7")
    with pytest.raises(DataError, match="conv7: calibration produced non-finite"):
        obs.update(np.array([[1.0, 2.0], [bad, 0.0]], np.float32))
    assert obs.count == 0


def _needed_log2_by_steps(lo, hi):
    """The histogram width rule written as the plain search: from the finest width allowed by
    the peak, one power of two at a time until the range fits MAX_BINS bins."""
    import math
    from qsim.quant.calibration.observers import MANTISSA_BITS, MAX_BINS, MIN_BIN_LOG2
    k = MIN_BIN_LOG2
    if max(abs(lo), abs(hi)) > 0:
        k = max(k, math.frexp(max(abs(lo), abs(hi)))[1] - MANTISSA_BITS)
    while math.floor(hi / 2.0 ** k) - math.floor(lo / 2.0 ** k) + 1 > MAX_BINS:
        k += 1
    return k


def test_histogram_width_jump_finds_the_smallest_width_that_fits():
    """_needed_log2 starts its search near (hi - lo) / MAX_BINS; it returns the width of the
    one-step-at-a-time search on random ranges and on spans of exactly MAX_BINS - 1..+1 bins."""
    import math
    from qsim.quant.calibration.observers import MAX_BINS
    rng = np.random.default_rng(0)
    h = StreamingHistogram()
    cases = []
    for _ in range(20000):
        a = float(rng.uniform(-1, 1) * 10.0 ** rng.uniform(-30, 30))
        b = float(a + rng.uniform(0, 1) * 10.0 ** rng.uniform(-30, 30))
        cases.append((a, b))
    for e in range(-50, 50, 7):
        for m in (MAX_BINS - 1, MAX_BINS, MAX_BINS + 1):
            for lo in (0.0, -math.ldexp(m, e), math.ldexp(1, e)):
                cases.append((lo, lo + math.ldexp(m, e)))
    cases += [(0.0, 0.0), (-1.0, -1.0), (0.0, 1.0)]
    for lo, hi in cases:
        assert h._needed_log2(lo, hi) == _needed_log2_by_steps(lo, hi), (lo, hi)


@settings(derandomize=True, deadline=None, max_examples=40)
@given(st.lists(st.tuples(st.floats(1e-3, 1e3), st.floats(-2.0, 2.0), st.integers(1, 300)),
                min_size=2, max_size=6), st.integers(0, 2 ** 31))
def test_one_pass_scan_and_count_keeps_the_two_pass_statistics(parts, seed):
    """Once a histogram has bins, a float32 batch is scanned and counted in one pass
    (scan_bins_f32) and kept when it fits the bins; otherwise the two passes run. Either way
    the histogram, extremes, zeros and count equal the float64 (numpy) path's after every
    batch (both ways are checked one by one in the next test)."""
    from qsim.quant.calibration import observers
    rng = np.random.default_rng(seed)
    taken = []
    original = observers.StreamingHistogram.scan_and_add_f32

    def spy(self, values):
        result = original(self, values)
        taken.append(result[4])
        return result

    fast, slow = make_observer("percentile", name="t"), make_observer("percentile", name="t")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(observers.StreamingHistogram, "scan_and_add_f32", spy)
        for scale, shift, n in parts:
            b = ((rng.normal(size=n) + shift) * scale).astype(np.float32)
            b[rng.random(n) < 0.2] = 0.0
            fast.update(b)
            slow.update(b.astype(np.float64))
            assert _state(fast) == _state(slow)
    assert len(taken) == len(parts) - 1


def test_the_one_pass_scan_keeps_a_batch_inside_the_bins_and_leaves_others():
    rng = np.random.default_rng(1)
    obs = make_observer("percentile", name="t")
    obs.update(rng.normal(size=1000).astype(np.float32))
    hist = obs.histograms[0]
    state = (hist.counts.copy(), hist.lo, hist.hi, hist.zeros)
    inside = rng.uniform(hist.lo, hist.hi, 500).astype(np.float32)
    assert hist.scan_and_add_f32(inside)[4] is True
    assert hist.counts.sum() == state[0].sum() + 500
    before = (hist.counts.copy(), hist.lo, hist.hi, hist.zeros)
    outside = np.array([0.5, 100.0], np.float32)
    assert hist.scan_and_add_f32(outside)[4] is False          # left untouched
    assert np.array_equal(hist.counts, before[0]) and (hist.lo, hist.hi, hist.zeros) == before[1:]
    # the batch buffer the histogram reuses held the discarded batch's partial counts: the
    # next batch that fits counts from zero (exactly its own values added)
    again = rng.uniform(hist.lo, hist.hi, 300).astype(np.float32)
    want = before[0] + np.bincount(np.floor(again.astype(np.float64) / hist.width).astype(np.int64) - hist.first,
                                   minlength=hist.counts.size)
    assert hist.scan_and_add_f32(again)[4] is True
    assert np.array_equal(hist.counts, want)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_in_a_later_batch_are_a_data_error(bad):
    """The one-pass scan (a later batch) finds a NaN or infinity as the two-pass one does,
    and the observer is left as it was."""
    obs = make_observer(ObserverKind.PERCENTILE, name="conv9")
    obs.update(np.array([1.0, -2.0, 0.5], np.float32))
    state, count = _state(obs), obs.count
    with pytest.raises(DataError, match="conv9: calibration produced non-finite"):
        obs.update(np.array([0.25, bad, 0.0], np.float32))
    assert _state(obs) == state and obs.count == count
