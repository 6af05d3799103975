"""Depthwise patch moments summed straight from the input (PatchMoments.add_depthwise,
kernels/dw_moments.h): the totals of the gathered patches, for any geometry, thread count and
instruction-set path."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qsim.kernels.cpu_features import forced_isa, supported_isas
from qsim.quant.rounding.conv_geometry import ConvGeometry, conv_patch_shape, conv_patches_numpy, depthwise_direct
from qsim.quant.rounding.moments import InputMoments, PatchMoments

U = 2.0 ** -53


def _reference(x: np.ndarray, g: ConvGeometry):
    """float64 sums over the gathered patches (numpy's order) and their absolute values."""
    rows, groups, k = conv_patch_shape(x.shape, g)
    p = conv_patches_numpy(x, g, np.empty((groups, rows, k), np.float32)).astype(np.float64)
    outer = np.einsum("gpk,gpl->gkl", p, p)
    magnitude = np.einsum("gpk,gpl->gkl", np.abs(p), np.abs(p))
    return outer, p.sum(axis=1), magnitude, np.abs(p).sum(axis=1), rows


def _geometry(c, kh, kw, sy, sx, begins, ends):
    return ConvGeometry(c, (kh, kw), (sy, sx), (1, 1), begins, ends, (0, 0))


def _direct(x, g, samples=1, more=()):
    """add_depthwise of x `samples` times, then of each of `more`; the totals stored (the
    kernel's lane-interleaved running sums back into sum_outer / sum_x)."""
    m = PatchMoments(x.shape[1], g.kernel[0] * g.kernel[1])
    for _ in range(samples):
        m.add_depthwise(x, g)
    for y in more:
        m.add_depthwise(y, g)
    m._flush()
    return m


# C up to 19: channel blocks of 8 lanes, full and partial; strides up to 7: sampled lattices
# (sample_stride multiplies the stride) as well as the layers' own strides
geometries = st.tuples(
    st.integers(1, 2), st.integers(1, 19), st.integers(1, 14), st.integers(1, 14),  # N C H W
    st.integers(1, 5), st.integers(1, 5), st.integers(1, 7), st.integers(1, 7),     # KH KW sy sx
    st.integers(0, 2), st.integers(0, 2), st.integers(0, 2), st.integers(0, 2))     # pads


@settings(derandomize=True, deadline=None, max_examples=60)
@given(geometries, st.integers(0, 2 ** 31))
def test_integer_inputs_give_the_exact_sums(shape, seed):
    """Small integers: every product and sum is exact in float64, so the totals must equal
    the gathered patches' sums exactly (a wrong tap, offset or padding shows at once)."""
    n, c, h, w, kh, kw, sy, sx, pt, pl, pb, pr = shape
    g = _geometry(c, kh, kw, sy, sx, (pt, pl), (pb, pr))
    x = np.random.default_rng(seed).integers(-8, 9, size=(n, c, h, w)).astype(np.float32)
    if not depthwise_direct(x.shape, g):
        return                                   # no output position
    outer, sums, _, _, rows = _reference(x, g)
    m = _direct(x, g, samples=2)
    assert np.array_equal(m.sum_outer, 2 * outer)
    assert np.array_equal(m.sum_x, 2 * sums)
    assert m.count == 2 * rows
    assert np.array_equal(m.sum_outer, m.sum_outer.transpose(0, 2, 1))


@settings(derandomize=True, deadline=None, max_examples=40)
@given(geometries, st.integers(0, 2 ** 31))
def test_float_inputs_are_within_float64_rounding(shape, seed):
    """Real values: each total is a float64 sum of exact products of at most
    m = Hp + 2 KH + OW + 2 additions deep (rows, slides, the strided sum, the total), so it is
    within gamma_m of the reference times the sum of the magnitudes the additions touched
    (at most 3x the products' magnitudes: a slide subtracts a row and adds one)."""
    n, c, h, w, kh, kw, sy, sx, pt, pl, pb, pr = shape
    g = _geometry(c, kh, kw, sy, sx, (pt, pl), (pb, pr))
    x = np.random.default_rng(seed).normal(size=(n, c, h, w)).astype(np.float32)
    if not depthwise_direct(x.shape, g):
        return
    outer, sums, magnitude, abs_sums, _ = _reference(x, g)
    m = _direct(x, g)
    hp = h + pt + pb
    depth = hp + 2 * kh + w + pl + pr + 2
    gamma = depth * U / (1 - depth * U)
    # the slides touch rows outside the window too: bound by the whole plane's magnitude
    plane = np.abs(x.astype(np.float64)).sum(axis=(0, 2, 3))
    assert np.all(np.abs(m.sum_outer - outer) <= 3 * gamma * (magnitude + plane[:, None, None] ** 2))
    assert np.all(np.abs(m.sum_x - sums) <= 3 * gamma * (abs_sums + plane[:, None]))


def test_same_bits_for_any_thread_count_and_instruction_set(monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(1, 37, 15, 13)).astype(np.float32)
    # 37 channels: the thread splits cut through blocks of 8 lanes (a channel's bits must not
    # depend on the block or lane it lands in); a plain and a sampled (strided) lattice
    for g in (_geometry(37, 5, 5, 1, 1, (2, 2), (2, 2)), _geometry(37, 3, 3, 4, 5, (1, 1), (1, 1))):
        results = []
        for threads in ("1", "2", "3"):
            monkeypatch.setenv("QSIM_THREADS", threads)
            for isa in supported_isas():
                with forced_isa(isa):
                    m = _direct(x, g)
                results.append((m.sum_outer.tobytes(), m.sum_x.tobytes()))
        assert len(set(results)) == 1
        # each channel alone (a block of one lane) gives its bits in the full layer
        one = _direct(x[:, 5:6], _geometry(1, *g.kernel, *g.stride, g.begins, g.ends))
        assert one.sum_outer.tobytes() == m.sum_outer[5:6].tobytes()


def test_input_moments_takes_depthwise_layers_directly_and_others_by_gathering():
    """InputMoments sums a depthwise layer without dilation directly; a dilated one and a
    grouped layer with several channels per group are gathered as before. Either way the
    moments agree with the float64 reference within float32 rounding of the GEMM path."""
    rng = np.random.default_rng(4)
    direct = _geometry(6, 3, 3, 2, 2, (1, 1), (1, 1))
    dilated = ConvGeometry(6, (3, 3), (1, 1), (2, 2), (2, 2), (2, 2), (0, 0))
    grouped = ConvGeometry(3, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (0, 0))
    x = rng.normal(size=(1, 6, 10, 10)).astype(np.float32)
    assert depthwise_direct(x.shape, direct)
    assert not depthwise_direct(x.shape, dilated) and not depthwise_direct(x.shape, grouped)
    moments = InputMoments()
    for key, g in (("direct", direct), ("dilated", dilated), ("grouped", grouped)):
        moments.watch_conv(key, "x", g)
    moments.update({"x": x})
    for key, g in (("direct", direct), ("dilated", dilated), ("grouped", grouped)):
        got = moments.moments[key]
        got._flush()
        outer, sums, magnitude, _, rows = _reference(x, g)
        assert got.count == rows
        # float32 GEMM path: relative error of order rows * 2^-24 of the magnitudes
        assert np.all(np.abs(got.sum_outer - outer) <= rows * 2.0 ** -23 * magnitude)
        assert np.allclose(got.sum_x, sums, rtol=0, atol=1e-4)
    assert np.array_equal(moments.moments["direct"].sum_outer, _direct(x, direct).sum_outer)


def test_add_depthwise_refuses_a_layer_it_does_not_take():
    x = np.zeros((1, 4, 6, 6), np.float32)
    grouped = ConvGeometry(2, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (0, 0))
    with pytest.raises(ValueError, match="not a depthwise layer"):
        PatchMoments(4, 9).add_depthwise(x, grouped)
    with pytest.raises(ValueError, match="not a depthwise layer"):
        PatchMoments(3, 9).add_depthwise(x, _geometry(4, 3, 3, 1, 1, (1, 1), (1, 1)))


def test_sample_stride_reads_a_sub_lattice_of_the_output_positions():
    """Past max(ROWS_PER_WEIGHT x K, MIN_ROWS) rows over the calibration, a convolution's
    moments read every a-th row and b-th column of its output positions (a x b covers the
    excess, a and b within one of each other): the patches of the sampled geometry are
    exactly those rows of the full gather."""
    from qsim.quant.rounding import conv_geometry
    from qsim.quant.rounding.conv_geometry import conv_patches, sample_stride
    g = ConvGeometry(1, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (0, 0))
    shape = (1, 2, 40, 30)                                  # 1200 rows per sample, K = 18
    assert sample_stride(shape, g, None) is g               # unknown sample count: all rows
    assert sample_stride(shape, g, 13) is g                 # 15600 <= MIN_ROWS
    # excess = ceil(samples x 1200 / MIN_ROWS): 2, 3, 8, 74
    for samples, want in ((14, (1, 2)), (40, (1, 3)), (100, (2, 4)), (1000, (8, 10))):
        assert max(conv_geometry.ROWS_PER_WEIGHT * 18, conv_geometry.MIN_ROWS) == 16384
        assert sample_stride(shape, g, samples).stride == want
    x = np.random.default_rng(6).normal(size=shape).astype(np.float32)
    sampled = sample_stride(shape, g, 100)
    full = conv_patches(x, g).reshape(1, 40, 30, 18)
    assert np.array_equal(conv_patches(x, sampled).reshape(-1, 18),
                          full[:, ::2, ::4].reshape(-1, 18))
    # depthwise layers are sampled alike (and then gathered: the next test)
    dw = _geometry(2, 3, 3, 1, 1, (1, 1), (1, 1))
    assert sample_stride(shape, dw, 1000).stride == (8, 10)


def test_input_moments_sum_the_sampled_rows_when_told_the_sample_count():
    from qsim.quant.rounding.conv_geometry import conv_patches, sample_stride
    g = ConvGeometry(1, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (0, 0))
    rng = np.random.default_rng(7)
    xs = [rng.normal(size=(1, 2, 40, 30)).astype(np.float32) for _ in range(3)]
    moments = InputMoments()
    moments.watch_conv("y", "x", g)
    moments.expect_samples(100)
    for x in xs:
        moments.update({"x": x})
    sampled = sample_stride(xs[0].shape, g, 100)
    plain = PatchMoments(1, 18)
    for x in xs:
        plain.add(conv_patches(x, sampled))
    got = moments.moments["y"]
    assert got.count == 3 * 20 * 8 == plain.count          # 40 x 30 outputs, every 2nd row, 4th column
    assert got.second_moment(True).tobytes() == plain.second_moment(True).tobytes()


def test_a_sampled_depthwise_layer_is_summed_directly_on_its_sub_lattice():
    """Sampled or not, a depthwise layer is summed straight from its input (add_depthwise with
    the geometry sample_stride chose: the kernel's stride times the sampling step), and its
    totals are those of the sampled lattice's gathered patches: exactly on integer inputs."""
    from qsim.quant.rounding.conv_geometry import sample_stride
    dw = _geometry(19, 3, 3, 1, 1, (1, 1), (1, 1))
    rng = np.random.default_rng(8)
    xs = [rng.integers(-8, 9, size=(1, 19, 40, 30)).astype(np.float32) for _ in range(2)]
    for samples in (None, 100):
        moments = InputMoments()
        moments.watch_conv("y", "x", dw)
        moments.expect_samples(samples)
        for x in xs:
            moments.update({"x": x})
        got = moments.moments["y"]
        g = sample_stride(xs[0].shape, dw, samples)
        assert (g is dw) == (samples is None) and g.stride == ((1, 1) if samples is None else (2, 4))
        want = _direct(xs[0], g, more=xs[1:])
        outer = sum(_reference(x, g)[0] for x in xs)
        assert got.count == want.count == 2 * (1200 if samples is None else 160)
        got._flush()
        assert got.sum_outer.tobytes() == want.sum_outer.tobytes()
        assert np.array_equal(got.sum_outer, outer)


def test_reading_the_totals_between_samples_changes_no_bit():
    """add_depthwise keeps its running totals in the kernel's blocked layout until a flush
    stores them; reading the means between samples (a store, then a fresh copy into blocks)
    continues every channel's sums exactly, and the moments are those of one pass."""
    rng = np.random.default_rng(9)
    g = _geometry(11, 3, 3, 2, 1, (1, 1), (1, 1))
    xs = [rng.normal(size=(1, 11, 9, 8)).astype(np.float32) for _ in range(3)]
    read = PatchMoments(11, 9)
    for x in xs:
        read.add_depthwise(x, g)
        read.means()
    one_pass = _direct(xs[0], g, more=xs[1:])
    assert read.count == one_pass.count
    assert read.second_moment(True).tobytes() == one_pass.second_moment(True).tobytes()


def test_strided_and_reversed_views_give_their_copies_bits():
    """The window copy (dw_moments.h qsim_dwm_window: an 8-channel gather on the AVX-512 path,
    scalar loads elsewhere) reads x at any strides, a negative channel stride included: a
    view's totals are its contiguous copy's bits, on every instruction-set path, for a full
    and a partial channel block."""
    rng = np.random.default_rng(5)
    base = rng.normal(size=(1, 26, 30, 17)).astype(np.float32)
    view = base[:, ::-2, ::2, 1:]                # 13 channels (one full block, one of 5 lanes)
    assert not view.flags.c_contiguous and view.strides[1] < 0
    g = _geometry(13, 3, 3, 1, 2, (1, 1), (1, 0))
    for isa in supported_isas():
        with forced_isa(isa):
            a, b = _direct(view, g), _direct(np.ascontiguousarray(view), g)
        assert a.sum_outer.tobytes() == b.sum_outer.tobytes(), isa
        assert a.sum_x.tobytes() == b.sum_x.tobytes(), isa
