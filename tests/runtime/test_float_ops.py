"""Fast numpy operator paths against independent oracles: literal loop transcriptions of the
spec's @lower formulas written here, and hand-worked examples."""
import itertools

import numpy as np
import pytest

from qsim.errors import DataError, QsimError
from qsim.runtime.float_ops import OPS, run_op

from float_reference import naive_conv, naive_deconv, naive_pool


CONV_CASES = [
    # shape x, shape w, attrs
    ((2, 4, 7, 6), (6, 2, 3, 2), dict(groups=2, stride=[2, 1], dilation=[1, 2])),
    ((1, 3, 5, 5), (4, 3, 3, 3), dict(padding=[0, 1, 2, 1], ceil_mode=True, stride=2)),
    ((1, 3, 6, 5), (3, 1, 3, 3), dict(groups=0, padding_align="LOWER", stride=2)),   # depthwise
    ((2, 3, 6, 5), (6, 1, 3, 3), dict(groups=3, padding=[1, 1, 0, 2], dilation=[1, 2])),  # x2 multiplier
    ((2, 4, 7), (4, 1, 3), dict(groups=0, stride=2)),                                  # 1-D depthwise
    ((2, 2, 9), (3, 2, 4), dict(stride=3, dilation=2)),                              # 1-D
    ((1, 2, 4, 4, 3), (2, 2, 2, 2, 2), dict(padding=[1, 0, 0, 0, 1, 1])),            # 3-D
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
def test_conv_matches_lower_loops(rng, xs, ws, attrs):
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)
    b = rng.standard_normal(ws[0])
    d = len(xs) - 2
    got = run_op("nn.conv", [x, w, b], attrs)[0]
    stride = attrs.get("stride", 1)
    stride = [stride] * d if np.isscalar(stride) else stride
    dil = attrs.get("dilation", 1)
    dil = [dil] * d if np.isscalar(dil) else dil
    want = naive_conv(x, w, b, stride, dil, attrs.get("padding"), attrs.get("groups", 1),
                      attrs.get("padding_align", "UPPER"), attrs.get("ceil_mode", False))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 8, 10, 10), (16, 8, 3, 3), dict(padding=[1, 1, 1, 1])),            # im2col + GEMM
    ((2, 12, 11, 11), (12, 1, 5, 5), dict(groups=0, stride=2)),            # depthwise loop
])
def test_float32_conv_is_within_float32_rounding(rng, xs, ws, attrs):
    """float32 in, float32 out (no float64 detour), within n * eps32 * sum|products| of the
    exact result, n the products per output (any summation order satisfies this)."""
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    got = run_op("nn.conv", [x, w, b], attrs)[0]
    assert got.dtype == np.float32
    st = attrs.get("stride", 1)
    exact = naive_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), [st] * 2, [1, 1],
                       attrs.get("padding"), attrs.get("groups", 1))
    mags = naive_conv(np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)), np.abs(b.astype(np.float64)),
                      [st] * 2, [1, 1], attrs.get("padding"), attrs.get("groups", 1))
    n = ws[1] * ws[2] * ws[3] + 1
    eps32 = float(np.finfo(np.float32).eps)
    assert np.all(np.abs(got - exact) <= n * eps32 * mags)


def test_conv_data_and_filter_formats(rng):
    x = rng.standard_normal((2, 3, 5, 4))
    w = rng.standard_normal((4, 3, 3, 2))
    ref = run_op("nn.conv", [x, w, None], {"stride": 1})[0]
    nxc = run_op("nn.conv", [np.moveaxis(x, 1, -1), np.transpose(w, (2, 3, 1, 0)), None],
                 {"data_format": "NXC", "filter_format": "XCN"})[0]
    np.testing.assert_allclose(np.moveaxis(nxc, -1, 1), ref, rtol=1e-12)
    cxb = run_op("nn.conv", [x, np.transpose(w, (1, 2, 3, 0)), None], {"filter_format": "CXB"})[0]
    np.testing.assert_allclose(cxb, ref, rtol=1e-12)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 2, 3, 4), (2, 3, 3, 3), dict(stride=2)),
    ((2, 4, 3, 3), (4, 1, 2, 3), dict(groups=2, stride=[1, 2], dilation=[2, 1], padding=[1, 0, 2, 1])),
    ((1, 2, 5), (2, 2, 3), dict(stride=2, padding=[1, 1], output_size=[10])),
])
def test_deconv_matches_lower_loops(rng, xs, ws, attrs):
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    d = len(xs) - 2
    st = attrs.get("stride", 1)
    st = [st] * d if np.isscalar(st) else st
    dl = attrs.get("dilation", 1)
    dl = [dl] * d if np.isscalar(dl) else dl
    got = run_op("nn.deconv", [x, w, None], attrs)[0]
    want = naive_deconv(x, w, st, dl, attrs.get("padding"), attrs.get("groups", 1), attrs.get("output_size"))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["max", "sum", "avg"])
def test_pools_match_lower_loops(rng, kind):
    x = rng.standard_normal((2, 3, 6, 5))
    attrs = {"size": [3, 2], "stride": [2, 2], "padding": [1, 0, 1, 1]}
    got = run_op(f"nn.{kind}_pool", [x], attrs)[0]
    want = naive_pool(x, [2, 3], [3, 2], [2, 2], [1, 0, 1, 1], kind)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_avg_pool_counts_border_when_not_ignored():
    x = np.ones((1, 1, 2, 2))
    got = run_op("nn.avg_pool", [x], {"size": [3, 3], "padding": [1, 1, 1, 1], "ignore_border": False})[0]
    np.testing.assert_allclose(got, np.full((1, 1, 2, 2), 4 / 9))


def test_binary_alignment_rules():
    x = np.arange(6.0).reshape(2, 3)
    # default: right-aligned, [3] broadcasts along rows
    np.testing.assert_array_equal(run_op("math.add", [x, np.array([10.0, 20, 30])], {})[0],
                                  [[10, 21, 32], [13, 24, 35]])
    # rhs_align=0: [2] aligned from the left, i.e. per row
    np.testing.assert_array_equal(run_op("math.mul", [x, np.array([1.0, -1])], {"rhs_align": 0})[0],
                                  [[0, 1, 2], [-3, -4, -5]])
    with pytest.raises(QsimError, match="broadcasting"):
        run_op("math.add", [x, np.ones(2)], {})


def test_integer_division_rounds_down():
    got = run_op("math.div", [np.array([7, -7]), np.array([2, 2])], {})[0]
    np.testing.assert_array_equal(got, [3, -4])


def test_argmin_first_occurrence_and_nd():
    x = np.array([[3.0, 1, 1], [0, 5, 0]])
    np.testing.assert_array_equal(run_op("math.argmin", [x], {"axis": 1})[0], [[1], [0]])
    y = np.zeros((2, 3, 4))
    y[1, 0, 2] = 9
    y[0, 2, 3] = 9
    got = run_op("math.argmax_nd", [y], {"axes": [2, 0], "squeeze": True})[0]
    # per kept index j of axis 1: (index along axis 2, index along axis 0)
    np.testing.assert_array_equal(got, [[2, 1], [0, 0], [3, 0]])


def test_moments_and_cumsum():
    x = np.array([[1.0, 2, 3, 6]])
    mean, var = run_op("math.moments", [x], {"axes": [1]})
    np.testing.assert_allclose(mean, [[3.0]])
    np.testing.assert_allclose(var, [[3.5]])
    np.testing.assert_array_equal(run_op("math.cumsum", [x], {"axis": 1, "exclusive": True, "reverse": True})[0],
                                  [[11, 9, 6, 0]])


def test_layout_hand_examples():
    x = np.arange(10)
    np.testing.assert_array_equal(run_op("layout.slice", [x], {"begin": [8], "end": [-1], "stride": [-3]})[0], [8, 5, 2])
    np.testing.assert_array_equal(run_op("layout.pad", [np.array([1, 2, 3])], {"padding": [2, 1], "method": "REFLECT"})[0],
                                  [3, 2, 1, 2, 3, 2])
    np.testing.assert_array_equal(run_op("layout.pad", [np.array([1, 2, 3])], {"padding": [2, 1], "method": "SYMMETRIC"})[0],
                                  [2, 1, 1, 2, 3, 3])
    y = np.arange(24).reshape(2, 3, 4)
    assert run_op("layout.reshape", [y], {"axis": 1, "shape": [-1]})[0].shape == (2, 12)
    assert run_op("layout.flatten", [y], {"axis": 0, "rank": 2})[0].shape == (6, 4)
    assert run_op("layout.unsqueeze", [y], {"axes": [0, -1]})[0].shape == (1, 2, 3, 4, 1)
    np.testing.assert_array_equal(run_op("layout.transpose", [y], {"axis": 1, "perm": [2, 1]})[0], y.transpose(0, 2, 1))
    parts = run_op("layout.split", [y], {"axis": 2, "sizes": [1, 3]})
    assert [p.shape for p in parts] == [(2, 3, 1), (2, 3, 3)]
    np.testing.assert_array_equal(run_op("layout.nonzero", [np.array([[0, 1], [1, 0]])], {})[0], [[0, 1], [1, 0]])
    s = run_op("layout.shuffle", [np.arange(6).reshape(1, 6)], {"axis": 1, "groups": 2})[0]
    np.testing.assert_array_equal(s, [[0, 3, 1, 4, 2, 5]])


def test_space_depth_round_trip_and_formula(rng):
    x = rng.standard_normal((1, 2, 4, 6))
    y = run_op("layout.space_to_depth", [x], {"block_size": [2, 3]})[0]
    # blocks_first: output channel (bh * 3 + bw) * c + ci holds input[ci, 2h + bh, 3w + bw]
    for bh, bw, ci in itertools.product(range(2), range(3), range(2)):
        np.testing.assert_array_equal(y[0, (bh * 3 + bw) * 2 + ci], x[0, ci, bh::2, bw::3])
    back = run_op("layout.depth_to_space", [y], {"block_size": [2, 3]})[0]
    np.testing.assert_array_equal(back, x)
    z = run_op("layout.space_to_batch", [x], {"block_size": [2, 3]})[0]
    np.testing.assert_array_equal(run_op("layout.batch_to_space", [z], {"block_size": [2, 3]})[0], x)


def test_gather_scatter(rng):
    data = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(run_op("layout.gather", [data, np.array([[2, 0]])], {"axis": 0})[0],
                                  [[[8, 9, 10, 11], [0, 1, 2, 3]]])
    np.testing.assert_array_equal(run_op("layout.gather_nd", [data, np.array([[1, 2], [2, 3]])], {})[0], [6, 11])
    out = run_op("layout.scatter_nd", [data, np.array([[0, 0]]), np.array([-1])], {})[0]
    assert out[0, 0] == -1 and out.sum() == data.sum() - 1
    with pytest.raises(QsimError, match="outside"):
        run_op("layout.gather", [data, np.array([3])], {"axis": 0})


def test_linear_upsample_half_pixel_factor_two():
    x = np.array([1.0, 5.0, 9.0])
    got = run_op("image.linear_upsample", [x], {"factor": [2]})[0]
    # worked from the @lower: symmetric, replicate_border, filter [.25, .75, .75, .25]
    np.testing.assert_allclose(got, [1, 2, 4, 6, 8, 9])


def test_resizes_hand_examples():
    x = np.array([0.0, 10.0])
    np.testing.assert_allclose(run_op("image.linear_resize", [x], {"size": [4]})[0], [0, 2.5, 7.5, 10])
    np.testing.assert_allclose(run_op("image.linear_resize", [x], {"size": [3], "coordinate_transform": "ALIGNED"})[0],
                               [0, 5, 10])
    np.testing.assert_array_equal(run_op("image.nearest_resize", [np.array([1.0, 2, 3])], {"size": [6]})[0],
                                  [1, 1, 2, 2, 3, 3])
    np.testing.assert_allclose(run_op("image.cubic_resize", [np.arange(5.0)], {"size": [5]})[0], np.arange(5.0))


def test_grid_sample_identity_grid(rng):
    x = rng.standard_normal((1, 2, 3, 4))
    ys, xs = np.meshgrid(np.linspace(-1, 1, 3), np.linspace(-1, 1, 4), indexing="ij")
    grid = np.stack([xs, ys], -1)[None]
    for mode in ("NEAREST", "LINEAR", "CUBIC"):
        got = run_op("image.grid_sample", [x, grid], {"mode": mode, "aligned": True})[0]
        np.testing.assert_allclose(got, x, atol=1e-12)


def test_quantize_hand_example():
    x = np.array([[-1.0, 0.26, 10.0]]).T
    got = run_op("quant.zero_point_linear_quantize", [x],
                 {"zero_point": 0, "scale": 0.5, "bits": 4, "channel_axis": 0})[0]
    # q = clamp(round(x / 0.5), -8, 7) = [-2, 1, 7] → [-1, 0.5, 3.5]
    np.testing.assert_allclose(got.ravel(), [-1.0, 0.5, 3.5])
    mm = run_op("quant.min_max_linear_quantize", [np.array([0.0, 0.4, 2.0])],
                {"min": 0.0, "max": 1.0, "bits": 2, "signed": False, "channel_axis": 0})[0]
    np.testing.assert_allclose(mm, [0.0, 1 / 3, 1.0])


def test_top_k_and_nms():
    v, i = run_op("algo.top_k", [np.array([1.0, 3, 3, 2])], {"k": 3})
    np.testing.assert_array_equal(v, [3, 3, 2])
    np.testing.assert_array_equal(i, [1, 2, 3])
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [2, 2, 3, 3]]], dtype=float)
    scores = np.array([[[0.9, 0.8, 0.7]]])
    got = run_op("algo.nonmax_suppress", [boxes, scores], {"iou_threshold": 0.5})[0]
    np.testing.assert_array_equal(got, [[0, 0, 0], [0, 0, 2]])


def test_every_stdlib_operator_has_a_float_path():
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / "stdlib"
    names = {f"{m}.{n}" for m in ("layout", "math", "linalg", "nn", "image", "quant", "algo")
             for n in re.findall(r"^operator (\w+)", (root / f"{m}.sknd").read_text(), re.M)}
    assert names - set(OPS) == set()


def test_unknown_operator_is_a_located_error():
    with pytest.raises(QsimError, match="no float implementation of operator 'nn.nope'"):
        run_op("nn.nope", [], {})


@pytest.mark.parametrize("lo,hi", [(0.0, 6.0), (6.0, 0.0), (-1.5, -1.5)])
def test_clamp_follows_the_formula_for_constant_bounds(lo, hi):
    """y = x < a ? a : x > b ? b : x, with a winning when a > b and NaN passing through."""
    x = np.array([[-7.0, -1.5, -0.0, 0.0, 3.0, 6.0, 9.0, np.nan]], dtype=np.float32)
    a, b = np.float32(lo), np.float32(hi)
    got = run_op("math.clamp", [x, np.array(a), np.array(b)], {})[0]
    want = np.array([[a if v < a else b if v > b else v for v in x[0]]], dtype=np.float32)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("xs,ws,attrs", [
    ((2, 6, 13, 11), (12, 1, 3, 3), dict(groups=6, stride=[2, 1], dilation=[1, 2], padding=[1, 2, 0, 3])),
    ((1, 16, 9, 9), (16, 1, 5, 5), dict(groups=0, stride=2)),
])
def test_compiled_depthwise_gives_the_numpy_loops_bits(rng, monkeypatch, threads, xs, ws, attrs):
    from qsim.runtime.float_ops import nn as float_nn
    monkeypatch.setenv("QSIM_THREADS", threads)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    assert float_nn._float_conv() is not None
    compiled = run_op("nn.conv", [x, w], attrs)[0]
    monkeypatch.setattr(float_nn, "_float_conv", lambda: None)
    loop = run_op("nn.conv", [x, w], attrs)[0]
    assert compiled.dtype == loop.dtype == np.float32
    np.testing.assert_array_equal(compiled, loop)


@pytest.mark.parametrize("padding", [(2 ** 62, 2 ** 62, 0, 0), (10 ** 12, 0, 0, 0)])
def test_extents_past_int64_are_a_size_error_not_an_overflow(padding):
    """fuzz #5: output extents from huge paddings are multiplied as Python ints and refused by
    the tensor-size limit before numpy sees them (was OverflowError in np.prod)."""
    x, w = np.zeros((1, 2, 3, 3), np.float32), np.zeros((2, 2, 1, 1), np.float32)
    with pytest.raises(DataError, match=r"nn.conv im2col buffer of shape \[1, 2, 1, \d+, \d+\] would take .* over"):
        run_op("nn.conv", [x, w, None], {"padding": padding})


def test_reshape_volume_is_exact_past_int64():
    x = np.zeros((1, 2, 4, 4), np.float32)
    # 4 * (8 + 2^62) = 32 + 2^64, which int64 arithmetic wraps to the input's volume 32
    with pytest.raises(QsimError, match=r"the volume of 'shape' \[4, 4611686018427387912\] must equal"):
        run_op("layout.reshape", [x], {"shape": [4, 8 + 2 ** 62]})


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_with_a_stride_beyond_int64_runs_on_the_numpy_windows(groups):
    # a hostile stride (2^63) cannot enter the compiled loops' int64 geometry: the numpy path
    # (Python ints) computes the single output position, which reads the padded top-left window
    x = np.arange(2 * 4 * 4, dtype=np.float32).reshape(1, 2, 4, 4)
    w = np.ones((2, 2 // groups, 3, 3), np.float32)
    y, = run_op("nn.conv", [x, w], dict(stride=[2 ** 63, 2 ** 63], padding=[1, 1, 1, 1],
                                        groups=groups))
    assert y.shape == (1, 2, 1, 1)
    window = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))[0, :, :3, :3]
    want = window.sum() if groups == 1 else window.sum(axis=(1, 2))
    np.testing.assert_array_equal(y.reshape(-1), np.broadcast_to(want, (2,)))
