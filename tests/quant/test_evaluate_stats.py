"""The evaluation's one-pass error statistics (kernels/quant_ops.pyx add_error_stats, called by
qsim/quant/evaluation/evaluate.py _IntegerView.add): the histogram counts are numpy's formulation
exactly, whichever path (multiply or division) an element takes, and the sums are the fixed
blocked order's bits."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim.kernels.cpu_features import current_isa, supported_isas
from qsim.quant.evaluation.evaluate import ERROR_EDGES_LSB, _quant_ops, _three_axes

BLOCK = 1024


def numpy_counts(err: np.ndarray, lsb: float, edges=ERROR_EDGES_LSB) -> list[int]:
    """The definition: np.histogram of (e / lsb) clipped to the edges' range (NaN nowhere)."""
    v = err / lsb
    v = v[~np.isnan(v)]
    return np.histogram(np.clip(v, edges[0], edges[-1]), bins=len(edges) - 1,
                        range=(edges[0], edges[-1]))[0].tolist()


def blocked_sums(f: np.ndarray, err: np.ndarray, sample: int | None = None,
                 start: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float]:
    """sum f^2 and sum e^2 in the kernel's documented order, one Python float at a time: per
    sample of `sample` elements (None: all one sample), blocks of 1024 from its first element,
    element i into partial sum i % 4, (s0 + s1) + (s2 + s3), block after block from 0, and the
    sample's total added to the running totals `start`."""
    signal, noise = start
    x, e = f.astype(np.float64).tolist(), err.tolist()
    sample = sample or len(x)
    for first in range(0, len(x), sample):
        sample_signal = sample_noise = 0.0
        for block in range(first, first + sample, BLOCK):
            s, t = [0.0] * 4, [0.0] * 4
            for i in range(block, min(block + BLOCK, first + sample)):
                s[(i - block) % 4] += x[i] * x[i]
                t[(i - block) % 4] += e[i] * e[i]
            sample_signal = sample_signal + ((s[0] + s[1]) + (s[2] + s[3]))
            sample_noise = sample_noise + ((t[0] + t[1]) + (t[2] + t[3]))
        signal = signal + sample_signal
        noise = noise + sample_noise
    return signal, noise


def run_stats(q: np.ndarray, f: np.ndarray, scale, zp, inner: int, lsb: float, edges=ERROR_EDGES_LSB,
              sample: int | None = None, start: tuple[float, float] = (0.0, 0.0)):
    """(counts, signal, noise) of one call, the same on every ISA path this CPU has (asserted:
    the vector copies of kernels/eval_stats.h must give the portable path's bits)."""
    results = []
    for isa in supported_isas():
        counts = np.zeros(len(edges) - 1, np.int64)
        signal, noise = _quant_ops.add_error_stats(isa.code, _three_axes(q), f.reshape(-1), np.asarray(scale, np.float64),
                                                   np.asarray(zp, np.int64), inner, lsb, edges, counts,
                                                   sample or max(1, f.size), *start)
        results.append((counts.tolist(), signal, noise))
    same = [r[0] == results[0][0] and np.array_equal(r[1:], results[0][1:], equal_nan=True) for r in results]
    assert all(same), [isa.value for isa in supported_isas()]
    return results[0]


def dequantized(q, scale, zp, shape):
    return (q.astype(np.int64) - np.asarray(zp).reshape(shape)).astype(np.float64) * np.asarray(scale).reshape(shape)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
@pytest.mark.parametrize("per_channel", [False, True])
def test_error_stats_equal_the_numpy_formulation(dtype, per_channel):
    """Every integer width, per tensor and per channel (channel axis 1 of [N, C, H, W]), on
    values at and beyond the histogram's range, rails included: counts exactly numpy's, sums
    the blocked order's bits (and numpy's to float64 rounding)."""
    rng = np.random.default_rng(4)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -(1 << 20)), min(info.max, 1 << 20)
    q = rng.integers(lo, hi, size=(3, 4, 25, 17), endpoint=True).astype(dtype)
    q.flat[:2] = (info.min, info.max)
    c = 4 if per_channel else 1
    scale = rng.uniform(0.01, 0.1, c)
    zp = rng.integers(-100, 100, c)
    shape = (1, c, 1, 1)
    deq = dequantized(q, scale, zp, shape)
    f = (deq + rng.normal(0, 1, q.shape) * scale.reshape(shape) * rng.choice([0.1, 3.0, 100.0], q.shape)).astype(np.float32)
    f.flat[5] = deq.flat[5]                     # an exact element: error 0
    err = deq - f.astype(np.float64)
    lsb = float(scale[0])
    counts, signal, noise = run_stats(q, f, scale, zp, 25 * 17 if per_channel else 1, lsb)
    assert counts == numpy_counts(err, lsb)
    assert (signal, noise) == blocked_sums(f.reshape(-1), err.reshape(-1))
    f64 = f.astype(np.float64)
    assert signal == pytest.approx(float(np.sum(f64 * f64)), rel=1e-13)
    assert noise == pytest.approx(float(np.sum(err * err)), rel=1e-13)


def test_transposed_integer_view_reads_the_float_layout():
    """The integer tensor NHWC read as NCHW through its strided view (no copy) gives the
    figures of the copied NCHW tensor, per tensor and per channel."""
    rng = np.random.default_rng(5)
    q_nhwc = rng.integers(-128, 128, size=(2, 6, 7, 5), dtype=np.int8)
    view = q_nhwc.transpose(0, 3, 1, 2)
    assert _three_axes(view).shape == (2, 5, 42) and not _three_axes(view).flags.c_contiguous
    for c in (1, 5):
        scale, zp = rng.uniform(0.02, 0.05, c), rng.integers(-128, 128, c)
        deq = dequantized(np.ascontiguousarray(view), scale, zp, (1, c, 1, 1))
        f = (deq + rng.normal(0, 0.03, deq.shape)).astype(np.float32)
        err = (deq - f.astype(np.float64)).reshape(-1)
        inner = 42 if c > 1 else 1
        counts, signal, noise = run_stats(view, f, scale, zp, inner, float(scale[0]))
        assert counts == numpy_counts(err, float(scale[0]))
        assert (signal, noise) == blocked_sums(f.reshape(-1), err)
        assert run_stats(np.ascontiguousarray(view), f, scale, zp, inner, float(scale[0])) == (counts, signal, noise)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
@pytest.mark.parametrize("shape", [(2, 5, 7, 19), (1, 9, 8, 16), (3, 3, 3, 8), (1, 1, 70001, 10)])
def test_interleaved_rows_are_copied_in_tiles_with_the_same_figures(dtype, shape):
    """NHWC codes read as NCHW are gathered a tile of whole rows (channels) at a time into the
    float order (8-bit codes: 8 x 8 byte transposes, the edges one by one): channel counts and
    row lengths that are and are not multiples of 8, several samples, and rows so long that a
    tile holds only a few of them (the last shape: 10 rows of 70001, tiles of 7); the figures
    equal those of the contiguous NCHW copy and numpy's, per tensor and per channel, with
    exact zeros (errors 0: counted apart from the histogram's increments) among them."""
    rng = np.random.default_rng(sum(shape))
    info = np.iinfo(dtype)
    q_nhwc = rng.integers(max(info.min, -300), min(info.max, 300), size=shape, endpoint=True).astype(dtype)
    q_nhwc.flat[:2] = (max(info.min, -300), min(info.max, 300))
    view = q_nhwc.transpose(0, 3, 1, 2)
    channels, inner = shape[3], shape[1] * shape[2]
    for c in (1, channels):
        # scales on a 2^-10 grid: the dequantized values are float32 numbers, so f can hit them
        scale, zp = rng.integers(20, 51, c) / 1024.0, rng.integers(-128, 128, c)
        deq = dequantized(np.ascontiguousarray(view), scale, zp, (1, c, 1, 1))
        f = (deq + rng.normal(0, 0.03, deq.shape)).astype(np.float32)
        exact = rng.random(deq.shape) < 0.3
        f[exact] = deq[exact].astype(np.float32)
        err = (deq - f.astype(np.float64)).reshape(-1)
        assert np.count_nonzero(err == 0) > err.size // 5
        counts, signal, noise = run_stats(view, f, scale, zp, inner if c > 1 else 1, float(scale[0]))
        assert counts == numpy_counts(err, float(scale[0]))
        assert run_stats(np.ascontiguousarray(view), f, scale, zp, inner if c > 1 else 1, float(scale[0])) == (
            counts, signal, noise)
        if err.size <= 20000:
            assert (signal, noise) == blocked_sums(f.reshape(-1), err)


def test_three_axes_copies_only_what_cannot_be_merged():
    a = np.arange(2 * 3 * 4 * 5 * 6, dtype=np.int8).reshape(2, 3, 4, 5, 6)
    t = a.transpose(0, 2, 1, 4, 3)                # nothing to merge: 5 axes -> a copy
    assert _three_axes(t).tolist() == [[np.ascontiguousarray(t).reshape(-1).tolist()]]
    m = a.transpose(0, 4, 1, 2, 3)                # NDHWC as NCDHW: D, H, W merge
    assert _three_axes(m).shape == (2, 6, 60)
    assert _three_axes(m).reshape(-1).tolist() == np.ascontiguousarray(m).reshape(-1).tolist()
    assert _three_axes(a[:0]).size == 0


def test_errors_on_and_around_every_edge_take_the_exact_bin():
    """Errors within a few dozen ulps of every bin edge (in LSB), exact zeros of both signs,
    beyond the range, infinities and NaN, with scales that are and are not powers of two.
    Among them are errors whose multiply-path position e * (1 / lsb) lies on the other side
    of an edge than e / lsb (asserted, so the near-edge fallback is what decides them)."""
    straddling = 0
    for lsb in (0.125, 0.0371, 1.0 / 3.0, 0.1, 0.07, 3.7e-5, 2.0 ** -40, 1e10):
        near = (ERROR_EDGES_LSB * lsb)[:, None] * (1.0 + np.arange(-40, 41)[None, :] * 2.0 ** -52)
        err = np.concatenate([near.ravel(), [0.0, -0.0, 1e300, -1e300, np.inf, -np.inf, np.nan, 5e-324, -5e-324]])
        with np.errstate(over="ignore", invalid="ignore"):
            by_multiply = np.searchsorted(ERROR_EDGES_LSB, err * (1.0 / lsb), "right")
            by_division = np.searchsorted(ERROR_EDGES_LSB, err / lsb, "right")
        straddling += int(np.count_nonzero(by_multiply != by_division))
        # f carries the error: q = 0, zp = 0, so d = 0 and e = 0 - f = err exactly
        f = -err
        q = np.zeros(err.size, np.int8)
        counts, _, _ = run_stats(q.reshape(1, 1, -1), f, [lsb], [0], 1, lsb)
        with np.errstate(over="ignore"):
            assert counts == numpy_counts(0.0 - f, lsb), lsb
        assert sum(counts) == err.size - 1
    assert straddling > 20


@pytest.mark.parametrize("rows, channels", [(1, 1), (7, 1), (8, 1), (1023, 1), (1024, 1), (1025, 1),
                                           (3001, 1), (37, 5), (1500, 8), (70001, 10)])
def test_one_pass_blocks_count_like_numpy_near_every_edge(rows, channels):
    """The one-pass blocks (8-bit codes, float32 values, one scale: eval_stats.h
    qsim_stats_block_i8_f32, fused in registers on the AVX-512 path) on float32 values on
    every bin edge, a few ulps to either side of it, at zero error and at the rails, with
    lengths that cut blocks and 8-lane groups anywhere: contiguous codes (one channel) and
    NHWC codes read as NCHW through tiles (70001-element rows: a few rows a tile, so blocks
    that straddle a tile's end take the general path): numpy's counts, the blocked sums' bits
    and the contiguous copy's figures, the same on every ISA path (run_stats)."""
    rng = np.random.default_rng(rows * channels)
    scale, zp = 0.0390625, -3              # 5 / 128: the dequantized values are float32 numbers
    q_nhwc = rng.integers(-128, 128, (1, rows, 1, channels)).astype(np.int8)
    q_nhwc.flat[:2] = (-128, 127)
    q = q_nhwc.transpose(0, 3, 1, 2)       # the float layout's view [1, C, rows, 1]
    deq = (q.astype(np.int64) - zp) * scale
    on_edge = (deq - rng.integers(-40, 41, q.shape) / 8.0 * scale).astype(np.float32)
    off = np.nextafter(on_edge, np.where(rng.random(q.shape) < 0.5, -np.inf, np.inf).astype(np.float32))
    f = np.where(rng.random(q.shape) < 0.3, on_edge, off)
    zero = rng.random(q.shape) < 0.25
    f[zero] = deq[zero].astype(np.float32)
    err = (deq - f.astype(np.float64)).reshape(-1)
    assert np.count_nonzero(err == 0) >= np.count_nonzero(zero)
    counts, signal, noise = run_stats(q, f, [scale], [zp], 1, scale)
    assert counts == numpy_counts(err, scale)
    assert run_stats(np.ascontiguousarray(q), f, [scale], [zp], 1, scale) == (counts, signal, noise)
    if err.size <= 20000:
        assert (signal, noise) == blocked_sums(f.reshape(-1), err)


@pytest.mark.parametrize("rows", [5, 8, 1024, 1029, 2050])
def test_one_pass_blocks_count_zeros_apart_from_nan_and_infinities(rows):
    """The AVX-512 one-pass block counts no zero lane by lane: every element is kept, near an
    edge, an exact zero or NaN, so its zeros are what the others leave, less the NaN, which it
    counts from e in a block whose sum of e^2 turned NaN. Float32 values with exact zeros of
    both signs, NaN (in full 8-lane groups, in a block's last partial group, in one block and
    not the next) and infinities: numpy's counts (NaN nowhere, infinities at the rails) on every
    ISA path, contiguous and tiled."""
    rng = np.random.default_rng(rows)
    scale, zp = 0.0390625, 5
    q_nhwc = rng.integers(-128, 128, (1, rows, 1, 2)).astype(np.int8)
    q = q_nhwc.transpose(0, 3, 1, 2)
    deq = (q.astype(np.int64) - zp) * scale
    f = (deq + rng.normal(0, scale, q.shape)).astype(np.float32)
    zero = rng.random(q.shape) < 0.3
    f[zero] = deq[zero].astype(np.float32)
    flat = f.reshape(-1)
    flat[rng.random(flat.size) < 0.02] = -0.0
    flat[rng.integers(0, flat.size, 3)] = np.inf
    flat[rng.integers(0, flat.size, 3)] = -np.inf
    for k in (1, rows - 1, rows + 3):          # a group's lane, the last partial group, channel 2
        flat[min(k, flat.size - 1)] = np.nan
    err = (deq - f.astype(np.float64)).reshape(-1)
    with np.errstate(invalid="ignore"):
        want = numpy_counts(err, scale)
    assert sum(want) == flat.size - int(np.count_nonzero(np.isnan(err)))
    counts, signal, noise = run_stats(q, f, [scale], [zp], 1, scale)
    assert counts == want
    assert np.isnan(noise)
    counts_c, _, _ = run_stats(np.ascontiguousarray(q), f, [scale], [zp], 1, scale)
    assert counts_c == want


def test_one_pass_blocks_take_the_exact_bin_where_the_multiply_straddles_an_edge():
    """Float32 zeros (a ReLU's) against codes q - zp = -4..4: e = n * scale lies on or within
    an ulp of the edge n, and for scales that are not powers of two e * (1 / lsb) and e / lsb
    fall on different sides of it for some (asserted): the one-pass blocks, contiguous and
    tiled, must list them near the edge and divide, giving numpy's counts."""
    straddling = 0
    rng = np.random.default_rng(9)
    for scale in (0.1, 1.0 / 3.0, 0.0371, 0.07, 0.3, 1.7e-3, 0.9):
        zp = int(rng.integers(-60, 60))
        q_nhwc = (zp + rng.integers(-4, 5, (1, 700, 1, 6))).astype(np.int8)
        q = q_nhwc.transpose(0, 3, 1, 2)
        f = np.zeros(q.shape, np.float32)
        err = ((q.astype(np.int64) - zp) * scale - 0.0).reshape(-1)
        straddling += int(np.count_nonzero(np.searchsorted(ERROR_EDGES_LSB, err * (1.0 / scale), "right")
                                           != np.searchsorted(ERROR_EDGES_LSB, err / scale, "right")))
        counts, signal, noise = run_stats(q, f, [scale], [zp], 1, scale)
        assert counts == numpy_counts(err, scale), scale
        assert run_stats(np.ascontiguousarray(q), f, [scale], [zp], 1, scale) == (counts, signal, noise)
    assert straddling > 100


def test_edges_off_the_power_of_two_grid_count_like_numpy():
    """Edges that are not first + k * w with w a power of two (0.1-wide bins) take the exact
    division path for every element: still numpy's counts."""
    rng = np.random.default_rng(6)
    edges = np.linspace(-3.0, 3.0, 61)
    q = rng.integers(-128, 128, 4000).astype(np.int8)
    deq = q.astype(np.float64) * 0.05
    f = (deq + rng.normal(0, 0.06, q.size)).astype(np.float32)
    counts, _, _ = run_stats(q.reshape(1, 1, -1), f, [0.05], [0], 1, 0.05, edges)
    assert counts == numpy_counts(deq - f.astype(np.float64), 0.05, edges)


@settings(derandomize=True, deadline=None, max_examples=60)
@given(st.integers(1, 3000), st.floats(1e-6, 1e3), st.integers(-128, 127), st.sampled_from([0.01, 0.3, 2.0, 40.0]),
       st.booleans(), st.integers(0, 2 ** 32 - 1))
def test_random_tensors_count_like_numpy(n, scale, zp, noise_lsb, float64_values, seed):
    """Seeded random tensors of any length (blocks cut anywhere), scale, zero point and error
    spread, float32 and float64 values: counts exactly numpy's, sums the blocked order's."""
    rng = np.random.default_rng(seed)
    q = rng.integers(-128, 128, n).astype(np.int8)
    deq = (q.astype(np.int64) - zp).astype(np.float64) * scale
    f = deq + rng.normal(0, noise_lsb * scale, n)
    f = f if float64_values else f.astype(np.float32)
    err = deq - f.astype(np.float64)
    counts, signal, noise = run_stats(q.reshape(1, 1, -1), f, [scale], [zp], 1, scale)
    assert counts == numpy_counts(err, scale)
    assert (signal, noise) == blocked_sums(np.asarray(f).reshape(-1), err)


def test_error_stats_refuse_mismatched_arrays():
    counts = np.zeros(64, np.int64)
    q = np.zeros((1, 1, 4), np.int8)
    with pytest.raises(ValueError, match="do not fit"):
        _quant_ops.add_error_stats(current_isa().code, q, np.zeros(3, np.float32), np.ones(1), np.zeros(1, np.int64), 1, 1.0,
                                   ERROR_EDGES_LSB, counts, 3, 0.0, 0.0)
    with pytest.raises(ValueError, match="do not fit"):         # 4 elements are no whole number of 3-element samples
        _quant_ops.add_error_stats(current_isa().code, q, np.zeros(4, np.float32), np.ones(1), np.zeros(1, np.int64), 1, 1.0,
                                   ERROR_EDGES_LSB, counts, 3, 0.0, 0.0)
    with pytest.raises(ValueError, match="edges"):
        _quant_ops.add_error_stats(current_isa().code, q, np.zeros(4, np.float32), np.ones(1), np.zeros(1, np.int64), 1, 1.0,
                                   ERROR_EDGES_LSB[:10], counts, 4, 0.0, 0.0)


@pytest.mark.parametrize("sample", [1, 7, 1024, 1500, 3000])
def test_sums_go_sample_by_sample_into_the_running_totals(sample):
    """A call over several samples sums each from its own first element and adds each total to
    the running totals in order: the bits of one call per sample, so an evaluation gives the
    same SQNR for any batch size; the counts add up either way."""
    rng = np.random.default_rng(sample)
    n = sample * 4
    q = rng.integers(-128, 128, n).astype(np.int8)
    scale, zp = 0.043, 3
    deq = (q.astype(np.int64) - zp) * scale
    f = (deq + rng.normal(0, 0.02, n)).astype(np.float32)
    start = (12.5, 0.375)
    counts, signal, noise = run_stats(q.reshape(1, 1, -1), f, [scale], [zp], 1, scale, sample=sample, start=start)
    assert (signal, noise) == blocked_sums(f, deq - f.astype(np.float64), sample, start)
    running, total = start, np.zeros(64, np.int64)
    for k in range(4):
        part = slice(k * sample, (k + 1) * sample)
        c, *running = run_stats(q[part].reshape(1, 1, -1), f[part], [scale], [zp], 1, scale, start=tuple(running))
        total += c
    assert (signal, noise) == tuple(running) and counts == total.tolist()


def test_evaluation_report_is_the_same_for_any_thread_count(rng, monkeypatch):
    """With more than one thread the tensors' statistics run on a worker beside the float
    execution: the report, every SQNR bit and histogram count included, is the one-thread
    report."""
    from qsim.quant.calibration.calibrate import calibrate
    from qsim.quant.evaluation.evaluate import evaluate
    from qsim.quant.tosa.target import lower_graph

    from .lowering_models import small_cnn
    graph = small_cnn(rng)
    xs = [rng.normal(0, 1, (1, 3, 12, 12)).astype(np.float32) for _ in range(6)]
    model = lower_graph(graph, calibrate(graph, [{"x": x} for x in xs[:3]], show_progress=False))
    reports = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("QSIM_THREADS", threads)
        reports.append(evaluate(graph, model, [({"x": x}, None) for x in xs], show_progress=False))
    assert len(reports[0].tensors) >= 5
    assert reports[1] == reports[0] and reports[2] == reports[0]


@pytest.mark.parametrize("dtype, bits, symmetric", [(np.int8, 8, False), (np.int8, 8, True), (np.int16, 16, True),
                                                    (np.int32, 32, True)])
@pytest.mark.parametrize("real", [np.float32, np.float64])
def test_per_tensor_input_quantization_is_params_quantize(dtype, bits, symmetric, real):
    """evaluate.quantized (the compiled per-tensor pass, quant_ops.quantize_per_tensor) gives
    params.quantize's integers: ties at every half step of both signs (+-0.5, +-1.5, ...), one ulp
    either side of them, both rails and far beyond them, zeros of both signs, scales that are and
    are not powers of two and zero points at the ends of the range; a value numpy's cast decides
    (inf, NaN, beyond 2^62 steps) sends the whole tensor down params.quantize's path."""
    from qsim import ir
    from qsim.quant.evaluation.evaluate import quantized
    from qsim.quant.params import quantize
    rng = np.random.default_rng(bits)
    qmax = (1 << (bits - 1)) - 1

    def quant_min(bits, symmetric):
        return -qmax if symmetric else -qmax - 1
    for scale in (0.0375, 0.25, 1.0 / 3.0, 1e-3):
        for zp in ((0,) if symmetric else (-128, -1, 0, 5, 127)):
            quant = ir.QuantInfo(scale=scale, zero_point=zp, bits=bits, signed=True, symmetric=symmetric)
            halves = (np.arange(-300, 301) + 0.5) * scale
            x = np.concatenate([halves, np.nextafter(halves, np.inf), np.nextafter(halves, -np.inf),
                                [0.0, -0.0, qmax * scale, -(qmax + 1) * scale, 1e6 * scale * qmax, -1e15 * scale],
                                rng.normal(0, 100 * scale, 2000)]).astype(real)
            got = quantized(x.reshape(1, -1), quant, dtype)
            for isa in supported_isas():        # the compiled pass takes every one of them
                out = np.empty(x.size, dtype)
                assert _quant_ops.quantize_per_tensor(isa.code, x, scale, zp, quant_min(bits, symmetric), qmax, out)
                assert np.array_equal(got.reshape(-1), out), isa
            assert got.dtype == dtype and got.shape == (1, x.size)
            assert np.array_equal(got, quantize(x.reshape(1, -1), quant).astype(dtype)), (scale, zp)
    quant = ir.QuantInfo(scale=0.05, zero_point=3, bits=bits, signed=True, symmetric=symmetric)
    with np.errstate(invalid="ignore", over="ignore"):        # 1e300 is inf as float32
        for odd in (np.inf, -np.inf, np.nan, 1e300):
            x = np.array([0.3, odd, -0.7], dtype=real)
            assert np.array_equal(quantized(x, quant, dtype), quantize(x, quant).astype(dtype))
