"""The two compiled depthwise loops (kernels/float_conv.h): plane by plane, and 16 channels side
by side for narrow images (multiplier 1). Each element is the same sequence of float32
operations in both, so they must agree bit for bit whatever the geometry (channel counts that
are no multiple of 16, images whose pixel count is none, padding, cropping, stride, dilation,
tails of the 8-pixel blocks); the plane loop itself is tested against the numpy reference."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qsim.kernels.cpu_features import current_isa
from qsim.kernels.extensions import extension

from test_float_speed_paths import EPS32, float64_conv   # tests/runtime is on sys.path

_float_ops = extension("_float_ops")


def _run(x, w, b, stride, dilation, before, out_size, blocks, bound, bound_only, units_of):
    B, C = x.shape[:2]
    out = np.full((B, C) + out_size, np.nan, np.float32)      # every element must be written
    y = None if bound is None or bound_only else np.full_like(out, np.nan)
    lo, hi = (0.0, None) if bound is None else bound
    units = B * -(-C // 16) if blocks else B * C
    for p0, p1 in units_of(units):
        _float_ops.depthwise_nchw_f32(current_isa().code, x, w, b, out, 1, stride[0], stride[1], dilation[0],
                                      dilation[1], before[0], before[1], p0, p1, y, lo, hi, bound_only, blocks)
    return out, y


@settings(derandomize=True, deadline=None, max_examples=60)
@given(B=st.integers(1, 2), C=st.integers(1, 40), H=st.integers(1, 20), W=st.integers(1, 20),
       k=st.sampled_from([(1, 1), (3, 3), (5, 5), (3, 5), (1, 3)]), s=st.integers(1, 3), d=st.integers(1, 2),
       pad=st.integers(-1, 3), bias=st.booleans(), bound=st.sampled_from([None, (0.0, 6.0), (0.0, None)]),
       bound_only=st.booleans(), split=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_channel_blocks_give_the_bits_of_the_plane_loop(B, C, H, W, k, s, d, pad, bias, bound, bound_only, split,
                                                        seed):
    rng = np.random.default_rng(seed)
    KH, KW = k
    OH, OW = (H + 2 * pad - d * (KH - 1) - 1) // s + 1, (W + 2 * pad - d * (KW - 1) - 1) // s + 1
    if OH < 1 or OW < 1:
        return
    x = (rng.standard_normal((B, C, H, W)) * 3).astype(np.float32)
    x.reshape(-1)[rng.integers(0, x.size, 2)] = [np.nan, -0.0]
    w = rng.standard_normal((C, KH, KW)).astype(np.float32)
    b = rng.standard_normal(C).astype(np.float32) if bias else None
    bound_only = bound_only and bound is not None
    units_of = (lambda n: [(0, n // 2), (n // 2, n)]) if split else (lambda n: [(0, n)])
    args = (x, w, b, (s, s), (d, d), (pad, pad), (OH, OW))
    plane = _run(*args, False, bound, bound_only, units_of)
    blocks = _run(*args, True, bound, bound_only, units_of)
    for got, want in zip(blocks, plane):
        if want is None:
            assert got is None
        else:
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("C,H,K,s", [(40, 14, 5, 1), (33, 7, 3, 1), (20, 28, 3, 2), (16, 9, 5, 2)])
def test_channel_blocks_within_float32_rounding(rng, C, H, K, s):
    x = rng.standard_normal((2, C, H, H)).astype(np.float32)
    w = rng.standard_normal((C, K, K)).astype(np.float32)
    b = rng.standard_normal(C).astype(np.float32)
    p = K // 2
    O = (H + 2 * p - K) // s + 1
    out, _ = _run(x, w, b, (s, s), (1, 1), (p, p), (O, O), True, None, False, lambda n: [(0, n)])
    exact, mag = np.zeros(out.shape), np.zeros(out.shape)
    for c in range(C):
        e, m = float64_conv(x[:, c:c + 1], w[c:c + 1, None], b[c:c + 1], s, p)
        exact[:, c:c + 1], mag[:, c:c + 1] = e, m
    assert np.all(np.abs(out - exact) <= (K * K + 1) * EPS32 * mag)


def test_channel_blocks_refuse_a_multiplier_and_a_bad_range():
    x = np.zeros((1, 4, 5, 5), np.float32)
    out = np.zeros((1, 8, 5, 5), np.float32)
    with pytest.raises(ValueError, match="shapes or plane range do not agree"):
        _float_ops.depthwise_nchw_f32(current_isa().code, x, np.zeros((8, 3, 3), np.float32), None, out, 2,
                                      1, 1, 1, 1, 1, 1, 0, 1, None, 0.0, None, False, True)
    out = np.zeros((1, 4, 5, 5), np.float32)
    with pytest.raises(ValueError, match="shapes or plane range do not agree"):
        _float_ops.depthwise_nchw_f32(current_isa().code, x, np.zeros((4, 3, 3), np.float32), None, out, 1,
                                      1, 1, 1, 1, 1, 1, 0, 2, None, 0.0, None, False, True)   # 1 block only


@pytest.mark.parametrize("blocks", [False, True])
@pytest.mark.parametrize("C,H,K,s,pad", [(20, 9, 3, 1, 1), (37, 7, 5, 2, 2), (18, 12, 3, 2, -1), (3, 14, 5, 1, 3)])
def test_one_call_over_many_units_gives_the_bits_of_one_call_per_unit(blocks, C, H, K, s, pad):
    # the loops zero their padded scratch once per call (each unit's copy writes the same
    # positions; a short channel block zeroes again): a call over every plane or channel
    # block, samples with a short last block included, must match fresh calls unit by unit
    rng = np.random.default_rng(C * 100 + H)
    x = (rng.standard_normal((2, C, H, H)) * 3).astype(np.float32)
    w = rng.standard_normal((C, K, K)).astype(np.float32)
    b = rng.standard_normal(C).astype(np.float32)
    O = (H + 2 * pad - K) // s + 1
    args = (x, w, b, (s, s), (1, 1), (pad, pad), (O, O), blocks)
    for bound, only in ((None, False), ((0.0, 6.0), False), ((0.0, 6.0), True)):
        whole = _run(*args, bound, only, lambda n: [(0, n)])
        each = _run(*args, bound, only, lambda n: [(p, p + 1) for p in range(n)])
        for got, want in zip(whole, each):
            if want is None:
                assert got is None
            else:
                np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
