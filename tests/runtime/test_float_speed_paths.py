"""The float executor's fast paths (issue 15): the conv GEMM on qsim's threads, the one-pass
relu/clamp kernel, the one-pass batch normalisation, the pooling on the threads, and the
allocator setting.

Oracles: float64 sums written here (float32 rounding bounds), numpy's own maximum/minimum (bit
for bit), and the same computation on another thread count or batch (bit for bit: each conv
output is one fma chain in k order, which neither changes)."""
import numpy as np
import pytest

from qsim.runtime.float_ops import conv_gemm as conv_gemm_module
from qsim.runtime.float_ops import memory, nn, nn_pool, run_op
from qsim.runtime.float_ops.bounds import BOUND_ONLY, THEN_BOUND, bounded
from qsim.runtime.float_ops.conv_gemm import blocking

EPS32 = float(np.finfo(np.float32).eps)


def float64_conv(x, w, b, stride, pad):
    """sum over c, ky, kx of w * x (zero padded) + b, in float64, and the same sum of |w x| + |b|
    (the magnitude that float32 rounding errors scale with)."""
    B, C, H, W = x.shape
    N, _, KH, KW = w.shape
    xp = np.zeros((B, C, H + 2 * pad, W + 2 * pad))
    xp[:, :, pad:pad + H, pad:pad + W] = x
    OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    exact = np.zeros((B, N, OH, OW)) + b.reshape(1, N, 1, 1)
    mag = np.zeros((B, N, OH, OW)) + np.abs(b).reshape(1, N, 1, 1)
    for ky in range(KH):
        for kx in range(KW):
            win = xp[:, :, ky:ky + stride * (OH - 1) + 1:stride, kx:kx + stride * (OW - 1) + 1:stride]
            exact += np.einsum("bchw,nc->bnhw", win, w[:, :, ky, kx].astype(np.float64))
            mag += np.einsum("bchw,nc->bnhw", np.abs(win), np.abs(w[:, :, ky, kx]).astype(np.float64))
    return exact, mag


# (B, C, H, W), N, k, stride: many row panels, many pixel blocks, both, partial panels and tails
CASES = [((2, 8, 40, 40), 40, 3, 1), ((1, 5, 9, 9), 300, 1, 1), ((3, 6, 38, 36), 150, 3, 2),
         ((2, 3, 7, 7), 5, 3, 1), ((1, 16, 48, 48), 24, 1, 1)]


@pytest.mark.parametrize("shape,n,k,stride", CASES)
def test_conv_within_float32_rounding_and_the_same_bits_on_any_thread_count(rng, monkeypatch, shape, n, k,
                                                                           stride):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((n, shape[1], k, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    attrs = dict(stride=[stride] * 2, padding=[k // 2] * 4)
    results = {}
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("QSIM_THREADS", threads)
        results[threads] = run_op("nn.conv", [x, w, b], attrs)[0]
    exact, mag = float64_conv(x, w, b, stride, k // 2)
    got = results["1"]
    assert got.dtype == np.float32 and got.shape == exact.shape and got.flags.c_contiguous
    terms = shape[1] * k * k + 1          # float32 products and sums per output, bias included
    assert np.all(np.abs(got - exact) <= terms * EPS32 * mag)
    for threads in ("2", "3"):
        np.testing.assert_array_equal(results[threads].view(np.uint32), got.view(np.uint32), err_msg=threads)


@pytest.mark.parametrize("shape,n,k,stride", CASES)
def test_a_sample_in_a_batch_gives_the_bits_it_gives_alone(rng, monkeypatch, shape, n, k, stride):
    monkeypatch.setenv("QSIM_THREADS", "2")
    x = rng.standard_normal((5,) + shape[1:]).astype(np.float32)
    w = rng.standard_normal((n, shape[1], k, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    attrs = dict(stride=[stride] * 2, padding=[k // 2] * 4)
    batch = run_op("nn.conv", [x, w, b], attrs)[0]
    for i in (0, 3, 4):
        alone = run_op("nn.conv", [x[i:i + 1], w, b], attrs)[0]
        np.testing.assert_array_equal(batch[i:i + 1].view(np.uint32), alone.view(np.uint32), err_msg=str(i))


def test_blocking_covers_the_pixels_and_shares_the_tasks_between_the_threads():
    for batch, g, m, K, N, threads in [(1, 1, 512, 4608, 49, 2), (1, 1, 64, 576, 3136, 2), (1, 1, 64, 147, 12544, 1),
                                       (16, 1, 256, 2304, 196, 2), (1, 1, 8, 1, 1, 3), (1, 3, 5, 7, 700, 3),
                                       (1, 1, 256, 2304, 196, 3), (2, 1, 16, 16, 47, 2)]:
        nblk, ppb, msplit = blocking(batch, g, m, K, N, threads)
        assert nblk * ppb * conv_gemm_module.GEMM_COLS >= N > (nblk - 1) * ppb * conv_gemm_module.GEMM_COLS or \
            nblk == 1
        assert 1 <= msplit <= -(-m // conv_gemm_module.GEMM_ROWS)
        tasks = batch * g * nblk * msplit
        if threads > 1 and msplit < -(-m // conv_gemm_module.GEMM_ROWS):
            assert tasks >= threads
    assert blocking(1, 1, 512, 4608, 49, 1) == (1, 2, 1)        # one thread: no split at all
    assert blocking(1, 1, 512, 4608, 49, 2) == (1, 2, 2)        # 7x7: the channels are split


def test_conv_keeps_a_wider_bias_dtype_and_other_dtypes(rng):
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b64 = rng.standard_normal(4)
    got = run_op("nn.conv", [x, w, b64], dict(padding=[1] * 4))[0]
    exact, mag = float64_conv(x, w, b64, 1, 1)
    assert got.dtype == np.float64 and np.all(np.abs(got - exact) <= 28 * EPS32 * mag)
    got64 = run_op("nn.conv", [x.astype(np.float64), w.astype(np.float64), b64], dict(padding=[1] * 4))[0]
    assert got64.dtype == np.float64
    np.testing.assert_allclose(got64, exact, rtol=1e-12, atol=1e-12)


SPECIALS = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, 3.0, 7.0, -1.0, 6.0, 1e-45, -1e-45, 5.999999],
                    np.float32)


@pytest.mark.parametrize("lo,hi", [(0.0, 6.0), (-0.0, 6.0), (0.0, 0.0), (-0.0, -0.0), (0.0, -0.0),
                                   (-0.0, 0.0), (-1.0, 1.0), (6.0, 6.0), (0.0, None), (-0.0, None)])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_bounded_gives_numpys_bits(rng, monkeypatch, lo, hi, threads):
    """NaN stays NaN, and where two zeros compare equal the bound is taken, as in numpy's
    maximum/minimum, for every length (vector bodies and tails) and on threads."""
    monkeypatch.setenv("QSIM_THREADS", threads)
    lo32, hi32 = np.float32(lo), None if hi is None else np.float32(hi)
    for n in (1, 5, 16, 17, 100, 4099, 300_001):
        x = rng.choice(SPECIALS, n) * rng.choice(np.float32([1, 1, 0.5]), n)
        want = np.maximum(x, lo32)
        if hi32 is not None:
            want = np.minimum(want, hi32)
        got = bounded(x, lo32, hi32)
        assert got.dtype == np.float32 and got.shape == x.shape
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"n={n}")


def _batch_norm_numpy(x, mean, var, bias, scale, axis, eps):
    """nn.batch_norm as four numpy float32 passes (subtract, divide, multiply, add)."""
    along = lambda v: v.reshape([-1 if d == axis else 1 for d in range(x.ndim)])
    y = x - along(mean)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = y / np.sqrt(along(var + np.float32(eps)))
    if scale is not None:
        y = y * along(scale)
    if bias is not None:
        y = y + along(bias)
    return y


@pytest.mark.parametrize("shape,axis", [((2, 16, 28, 28), 1), ((3, 5), 1), ((4, 7, 3), 2), ((1, 33, 7, 7), 1),
                                        ((5,), 0), ((2, 3, 1, 1), 1), ((3, 4, 5), 0)])
@pytest.mark.parametrize("scaled,biased", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_batch_norm_in_one_pass_gives_numpys_bits(rng, monkeypatch, shape, axis, scaled, biased, threads):
    """Every channel axis and plane size (vector bodies and tails), with and without scale and
    bias, with zero variance and zero epsilon (x / 0: inf and nan, as numpy), NaN, infinities,
    signed zeros and subnormals among the inputs; on 1 and 2 threads."""
    monkeypatch.setenv("QSIM_THREADS", threads)
    C = shape[axis]
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x.reshape(-1)[:6] = np.float32([np.nan, np.inf, -0.0, 0.0, 1e-45, -np.inf])[:x.size]
    mean = rng.standard_normal(C).astype(np.float32)
    var = np.abs(rng.standard_normal(C)).astype(np.float32)
    var[0] = 0.0
    scale = rng.standard_normal(C).astype(np.float32) if scaled else None
    bias = rng.standard_normal(C).astype(np.float32) if biased else None
    for eps in (1e-5, 0.0):
        ins = [x, mean, var, bias, scale] if scaled else ([x, mean, var, bias] if biased else [x, mean, var])
        got = run_op("nn.batch_norm", ins, dict(channel_axis=axis, epsilon=eps))[0]
        want = _batch_norm_numpy(x, mean, var, bias, scale, axis, eps)
        assert got.dtype == np.float32 and got.shape == x.shape
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"eps={eps}")


def test_batch_norm_of_other_dtypes_and_broadcast_vectors_keeps_numpys_results(rng):
    """What the one-pass kernel does not take (float64, a float64 mean, an empty tensor) goes
    through numpy as before: numpy's dtype promotion and values."""
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    mean, var = np.float32([0.5, -1, 2]), np.float32([1, 2, 3])
    for xs, ms in ((x.astype(np.float64), mean), (x, mean.astype(np.float64)), (x[:0], mean)):
        got = run_op("nn.batch_norm", [xs, ms, var], {})[0]
        want = _batch_norm_numpy(xs, ms, var, None, None, 1, 1e-5)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_relu_and_clamp_ops_use_it_and_keep_shapes_and_other_dtypes(rng):
    x = (rng.standard_normal((2, 3, 4, 5)) * 4).astype(np.float32)
    np.testing.assert_array_equal(run_op("nn.relu", [x], {})[0], np.maximum(x, 0))
    np.testing.assert_array_equal(run_op("nn.relu", [x], dict(max=6.0))[0], np.clip(x, 0, 6))
    lo, hi = np.zeros((1,), np.float32), np.full((1,), 6.0, np.float32)
    y = run_op("math.clamp", [x, lo, hi], {})[0]
    assert y.shape == x.shape
    np.testing.assert_array_equal(y, np.clip(x, 0, 6))
    xt = x.transpose(0, 2, 3, 1)                           # not contiguous
    np.testing.assert_array_equal(run_op("nn.relu", [xt], {})[0], np.maximum(xt, 0))
    xi = np.arange(-5, 5, dtype=np.int32)
    got = run_op("nn.relu", [xi], {})[0]
    assert got.dtype == np.int32 and got.tolist() == [0] * 5 + [0, 1, 2, 3, 4]


def test_keep_freed_memory_is_applied_once():
    assert memory.keep_freed_memory() is True    # glibc (the CI and this machine)
    assert memory.keep_freed_memory() is True


def test_conv_geometry_is_cached_per_shape_and_attributes_and_errors_are_not(rng):
    from qsim.errors import SemanticError
    from qsim.runtime.float_ops import nn
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    nn._conv_geometry.cache_clear()
    a = run_op("nn.conv", [x, w], dict(padding=[1] * 4))[0]
    b = run_op("nn.conv", [x, w], dict(padding=(1, 1, 1, 1)))[0]      # a list and a tuple: one entry
    c = run_op("nn.conv", [x, w], dict(padding=[0] * 4, stride=[2, 2]))[0]
    assert nn._conv_geometry.cache_info().hits == 1 and nn._conv_geometry.cache_info().currsize == 2
    np.testing.assert_array_equal(a, b)
    assert a.shape == (1, 8, 6, 6) and c.shape == (1, 8, 2, 2)
    for _ in range(2):                       # a failing geometry is refused on every call
        with pytest.raises(SemanticError, match=r"input-channels \(4\) must equal filter-channels \(3\)"):
            run_op("nn.conv", [x, w[:, :3]], {})


@pytest.mark.parametrize("op", ["nn.max_pool", "nn.avg_pool", "nn.sum_pool"])
def test_pools_give_the_same_bits_on_any_thread_count(rng, monkeypatch, op):
    """the threads pool disjoint channels with numpy's own loops (large inputs only): the same
    values as one thread, and max pool the plain maximum over the padded windows"""
    x = rng.standard_normal((2, 24, 57, 57)).astype(np.float32)
    x[0, 3, 4, 5] = np.nan
    attrs = dict(size=[3, 3], stride=[2, 2], padding=[1, 1, 1, 1])
    monkeypatch.setattr(nn_pool, "POOL_SPLIT_ELEMENTS", 1 << 10)
    results = {}
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("QSIM_THREADS", threads)
        results[threads] = run_op(op, [x], attrs)[0]
    for threads in ("2", "3"):
        np.testing.assert_array_equal(results[threads].view(np.uint32), results["1"].view(np.uint32))
    if op == "nn.max_pool":
        xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)], constant_values=-np.inf)
        want = np.full((2, 24, 29, 29), -np.inf, np.float32)
        for ky in range(3):
            for kx in range(3):
                want = np.maximum(want, xp[:, :, ky:ky + 57:2, kx:kx + 57:2])
        np.testing.assert_array_equal(results["1"].view(np.uint32), want.view(np.uint32))


def test_a_max_pool_window_beyond_int64_is_not_handed_to_the_compiled_loop():
    """the compiled max pool takes int64 geometry; a hostile model's dilation of 2^63 must get
    the numpy windows' ValueError (which the standard runner turns into an InvalidGraphError
    naming the op), never the OverflowError of the int64 conversion (a traceback)"""
    x = np.arange(50, dtype=np.float32).reshape(1, 2, 5, 5)
    with pytest.raises(ValueError):
        run_op("nn.max_pool", [x], dict(size=[2, 2], stride=[1, 1], dilation=[2 ** 63, 1]))
    # and a window that fits takes the compiled loop with the windows' values
    out = run_op("nn.max_pool", [x], dict(size=[2, 2], stride=[1, 1], dilation=[3, 1], padding=[0, 0, 0, 0]))[0]
    np.testing.assert_array_equal(out, np.maximum(np.maximum(x[:, :, 0:2, 0:4], x[:, :, 0:2, 1:5]),
                                                  np.maximum(x[:, :, 3:5, 0:4], x[:, :, 3:5, 1:5])))


@pytest.mark.parametrize("shape,n,k,stride,groups", [((1, 8, 12, 12), 8, 3, 1, 8), ((2, 16, 9, 9), 16, 5, 2, 16),
                                                     ((1, 6, 10, 10), 12, 1, 1, 1), ((2, 5, 11, 13), 7, 3, 2, 1)])
def test_the_planned_nchw_call_gives_the_general_paths_bits(rng, shape, n, k, stride, groups):
    """nn.conv plans a float32 NCHW call once per op and shape (nn._FastConv) and then only runs
    its kernel; an NHWC conv takes the general path, which decides everything on each call.
    Both give the same bits, with the fused relu6 beside the conv (THEN_BOUND) or in its place
    (BOUND_ONLY), and a second call of the same attribute mapping reuses the plan (an input of
    another size makes a new one)"""
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((n, shape[1] // groups, k, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    pad = [k // 2] * 4
    for extra in ({}, {THEN_BOUND: (0.0, 6.0)}, {THEN_BOUND: (0.0, 6.0), BOUND_ONLY: True}):
        at = {"stride": [stride, stride], "padding": pad, "groups": groups, **extra}
        planned = nn.conv([x, w, bias], at)
        again = nn.conv([x, w, bias], at)
        assert nn._fast_convs._entries[id(at)][2] is not None       # planned, not the general path
        general = nn.conv([np.moveaxis(x, 1, -1), w, bias], {**at, "data_format": "NXC"})
        assert len(planned) == len(general) == (1 if not extra else 2)
        for p, a, g in zip(planned, again, general):
            if p is None:
                assert a is None and g is None and BOUND_ONLY in extra
                continue
            np.testing.assert_array_equal(p.view(np.uint32), a.view(np.uint32))
            np.testing.assert_array_equal(p.view(np.uint32), np.moveaxis(g, -1, 1).view(np.uint32))
    other = nn.conv([x[:, :, :-1, :-1], w, bias], at)[-1]
    assert other.shape[2:] == nn.conv([np.moveaxis(x[:, :, :-1, :-1], 1, -1), w, bias],
                                      {**at, "data_format": "NXC"})[-1].shape[1:3]
