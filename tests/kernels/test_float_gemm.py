"""The float convolution's compiled GEMM (kernels/float_gemm.h, qsim/runtime/float_ops/conv_gemm.py).

Oracles: the convolution summed in float64 here, with the float32 rounding bound of a sequential
sum (|error| <= terms * eps32 * sum |w x|, bias included); numpy's own add and maximum/minimum
for the epilogue (bit for bit); and the same product on every ISA path, thread count, blocking
and batch (bit for bit: each output is one fma chain in k order, which none of them changes)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim.kernels.cpu_features import forced_isa, supported_isas
from qsim.kernels.extensions import extension
from qsim.runtime.float_ops import conv_gemm as cg
from qsim.runtime.float_ops.bounds import bounded

EPS32 = float(np.finfo(np.float32).eps)
_float_ops = extension("_float_ops")


def float64_conv(x, w, bias, stride, dilation, before, out_size):
    """out[b, n, oy, ox] = sum_{c, ky, kx} w[n, c, ky, kx] * x[b, c, oy*sy + ky*dy - pt, ox*sx + kx*dx - pl]
    (+ bias), zero outside x, in float64; and the same sum of |w x| (+ |bias|)."""
    B, C, H, W = x.shape
    N, fc, KH, KW = w.shape
    g = C // fc
    m = N // g
    (sy, sx), (dy, dx), (pt, pl), (OH, OW) = stride, dilation, before, out_size
    pad = 2 + max(abs(pt), abs(pl)) + max(sy * OH + dy * KH, sx * OW + dx * KW)
    xp = np.zeros((B, C, H + 2 * pad, W + 2 * pad))
    xp[:, :, pad:pad + H, pad:pad + W] = x
    exact = np.zeros((B, N, OH, OW))
    mag = np.zeros((B, N, OH, OW))
    for ky in range(KH):
        for kx in range(KW):
            ys, xs = pad - pt + ky * dy, pad - pl + kx * dx
            win = xp[:, :, ys:ys + sy * (OH - 1) + 1:sy, xs:xs + sx * (OW - 1) + 1:sx]
            for gi in range(g):         # group gi: outputs [gi*m, (gi+1)*m) read channels [gi*fc, (gi+1)*fc)
                wg = w[gi * m:(gi + 1) * m, :, ky, kx].astype(np.float64)
                xg = win[:, gi * fc:(gi + 1) * fc]
                exact[:, gi * m:(gi + 1) * m] += np.einsum("bchw,nc->bnhw", xg, wg)
                mag[:, gi * m:(gi + 1) * m] += np.einsum("bchw,nc->bnhw", np.abs(xg), np.abs(wg))
    if bias is not None:
        exact += bias.reshape(1, N, 1, 1)
        mag += np.abs(bias).reshape(1, N, 1, 1)
    return exact, mag


def run(x, w, bias, stride=(1, 1), dilation=(1, 1), before=(0, 0), out_size=None, bound=None, only=False):
    B, C, H, W = x.shape
    N, fc, KH, KW = w.shape
    g = C // fc
    if out_size is None:
        out_size = ((H + 2 * before[0] - dilation[0] * (KH - 1) - 1) // stride[0] + 1,
                    (W + 2 * before[1] - dilation[1] * (KW - 1) - 1) // stride[1] + 1)
    out, y = cg.conv_im2col_gemm(np.ascontiguousarray(x), w.reshape(g, N // g, fc * KH * KW), (KH, KW), stride,
                                 dilation, before, out_size, bias, bound, only)
    shape = (B, N) + tuple(out_size)
    return (None if out is None else out.reshape(shape)), (None if y is None else y.reshape(shape)), out_size


def check_bound(x, w, bias, stride, dilation, before, got, out_size):
    exact, mag = float64_conv(x, w, bias, stride, dilation, before, out_size)
    terms = w.shape[1] * w.shape[2] * w.shape[3] + (bias is not None)
    assert got.dtype == np.float32 and got.shape == exact.shape
    assert np.all(np.abs(got - exact) <= terms * EPS32 * mag)


@st.composite
def conv_cases(draw):
    B = draw(st.integers(1, 2))
    fc = draw(st.integers(1, 9))
    g = draw(st.sampled_from([1, 1, 2]))
    m = draw(st.integers(1, 21))
    KH, KW = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sy, sx = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dy, dx = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    H, W = draw(st.integers(1, 13)), draw(st.integers(1, 70))
    pt, pl = draw(st.integers(-1, 3)), draw(st.integers(-1, 3))
    OH = draw(st.integers(1, 12))
    OW = draw(st.integers(1, 60))
    seed = draw(st.integers(0, 2 ** 31))
    return B, fc, g, m, (KH, KW), (sy, sx), (dy, dx), (H, W), (pt, pl), (OH, OW), seed


@settings(max_examples=60, deadline=None)
@given(conv_cases())
def test_conv_is_within_float32_rounding_of_the_float64_sum(case):
    """odd sizes: any M, N, K (K = 1 too), padding, negative padding (crops), outputs that read
    past the input, strides and dilations"""
    B, fc, g, m, k, stride, dilation, (H, W), before, out_size, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, g * fc, H, W)).astype(np.float32)
    w = rng.standard_normal((g * m, fc) + k).astype(np.float32)
    bias = rng.standard_normal(g * m).astype(np.float32) if seed % 3 else None
    out, _, _ = run(x, w, bias, stride, dilation, before, out_size)
    check_bound(x, w, bias, stride, dilation, before, out, out_size)


@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (8, 1, 48), (9, 3, 49), (64, 576, 3136), (512, 4608, 49),
                                   (7, 300, 17), (24, 257, 95), (130, 513, 200)])
def test_gemm_sizes_past_the_blocks(rng, M, K, N):
    """M, N, K around the 8-row panel, the 48-pixel panel, the 16-lane vector and the 256 k block"""
    w = rng.standard_normal((1, M, K)).astype(np.float32)
    cols = rng.standard_normal((1, 1, K, N)).astype(np.float32)
    bias = rng.standard_normal(M).astype(np.float32)
    out, _ = cg.conv_gemm(w, cols, bias, np.float32)
    exact = w[0].astype(np.float64) @ cols[0, 0].astype(np.float64) + bias[:, None]
    mag = np.abs(w[0]).astype(np.float64) @ np.abs(cols[0, 0]).astype(np.float64) + np.abs(bias)[:, None]
    assert np.all(np.abs(out[0] - exact) <= (K + 1) * EPS32 * mag)


CASES = [((2, 8, 40, 40), 40, 3, 1, 1), ((1, 5, 9, 9), 300, 1, 1, 0), ((3, 6, 38, 36), 150, 3, 2, 1),
         ((2, 3, 7, 7), 5, 3, 1, 1), ((1, 64, 7, 7), 24, 3, 1, 1), ((1, 16, 14, 14), 19, 3, 1, 1),
         ((2, 3, 23, 29), 13, 7, 2, 3)]


@pytest.mark.parametrize("shape,n,k,s,p", CASES)
def test_the_same_bits_on_every_path_thread_count_and_blocking(rng, monkeypatch, shape, n, k, s, p):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((n, shape[1], k, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    results = []
    for isa in supported_isas():
        for threads in ("1", "2", "3"):
            monkeypatch.setenv("QSIM_THREADS", threads)
            with forced_isa(isa):
                results.append(run(x, w, bias, (s, s), (1, 1), (p, p))[0])
    check_bound(x, w, bias, (s, s), (1, 1), (p, p), results[0], results[0].shape[2:])
    for r in results[1:]:
        np.testing.assert_array_equal(r.view(np.uint32), results[0].view(np.uint32))
    # any task cut: blocks of pixel panels, row splits, task ranges run in pieces
    B, C, H, W = shape
    OH, OW = results[0].shape[2:]
    N = OH * OW
    packed = cg.pack_weights(w.reshape(1, n, -1))
    for nblk_min, msplit in [(1, 1), (2, 2), (5, 3)]:
        ppb = max(1, -(-(-(-N // cg.GEMM_COLS)) // nblk_min))
        nblk = -(-(-(-N // cg.GEMM_COLS)) // ppb)
        msplit = min(msplit, -(-n // cg.GEMM_ROWS))
        tasks = B * nblk * msplit
        slot_floats = _float_ops.scratch_per_thread(_float_ops.gemm_scratch_floats(shape[1] * k * k, ppb))
        # two calls on one thread each, then one call on 3 threads of the pool
        for ranges, threads in [([(0, tasks // 2), (tasks // 2, tasks)], 1), ([(0, tasks)], 3)]:
            out = np.full((B, n, N), np.nan, dtype=np.float32)
            for t0, t1 in ranges:
                _float_ops.conv_gemm_f32(supported_isas()[-1].code, x, 1, n, k, k, s, s, 1, 1, p, p, packed, bias,
                                         out, None, OW, 0, None, None, nblk, ppb, msplit, t0, t1,
                                         np.empty(threads * slot_floats, np.float32), threads=threads)
            np.testing.assert_array_equal(out.reshape(results[0].shape).view(np.uint32), results[0].view(np.uint32))


@pytest.mark.parametrize("shape,n,k,s,p", CASES[:4])
def test_a_sample_in_a_batch_gives_the_bits_it_gives_alone(rng, monkeypatch, shape, n, k, s, p):
    monkeypatch.setenv("QSIM_THREADS", "2")
    x = rng.standard_normal((4,) + shape[1:]).astype(np.float32)
    w = rng.standard_normal((n, shape[1], k, k)).astype(np.float32)
    batch = run(x, w, None, (s, s), (1, 1), (p, p))[0]
    for i in range(4):
        alone = run(x[i:i + 1], w, None, (s, s), (1, 1), (p, p))[0]
        np.testing.assert_array_equal(batch[i:i + 1].view(np.uint32), alone.view(np.uint32))


SPECIALS = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, 3.0, 7.0, -1.0, 6.0, 1e-45, 5.999999], np.float32)


@pytest.mark.parametrize("lo,hi", [(0.0, None), (0.0, 6.0), (-0.0, 0.0), (-1.0, 1.0)])
@pytest.mark.parametrize("n,hw", [(16, 7), (8, 8), (13, 5)])     # whole tiles, tail columns, partial rows
def test_epilogue_is_numpys_add_and_bound(rng, n, hw, lo, hi):
    """+ bias is numpy's float32 add on the unbiased product, the relu/clamp numpy's maximum and
    minimum of that (NaN kept, equal zeros giving the bound), into y or in place (bound only)"""
    x = rng.standard_normal((1, 6, hw, hw)).astype(np.float32)
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, 0.0]
    w = rng.standard_normal((n, 6, 1, 1)).astype(np.float32)
    w[:, 1] = 0.0
    bias = rng.choice(SPECIALS, n).astype(np.float32)
    bare, _, _ = run(x, w, None)
    with np.errstate(invalid="ignore"):
        want = bare + bias.reshape(1, n, 1, 1)
    out, y, _ = run(x, w, bias, bound=(lo, hi))
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(y.view(np.uint32), bounded(want, np.float32(lo), hi).view(np.uint32))
    none, only, _ = run(x, w, bias, bound=(lo, hi), only=True)
    assert none is None
    np.testing.assert_array_equal(only.view(np.uint32), y.view(np.uint32))


def test_packed_weights_are_reused_and_repacked_when_rewritten(rng):
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    w = rng.standard_normal((9, 4, 3, 3)).astype(np.float32)
    first, _, _ = run(x, w, None, before=(1, 1))
    w3 = w.reshape(1, 9, -1)
    assert cg.packed_weights(w3) is cg.packed_weights(w.reshape(1, 9, -1))      # one pack per array
    w *= 2.0                                                                    # rewritten in place
    again, _, _ = run(x, w, None, before=(1, 1))
    np.testing.assert_array_equal(again, first * 2.0)
    owner = id(w)
    del w, w3
    assert all(key[0] != owner for key in cg._packed)                          # dropped with its array


def test_packed_weights_keep_at_most_the_cache_size(rng, monkeypatch):
    monkeypatch.setattr(cg, "PACKED_CACHE_BYTES", 3 * 8 * 100 * 4)
    arrays = [rng.standard_normal((1, 8, 100)).astype(np.float32) for _ in range(5)]
    for a in arrays:
        cg.packed_weights(a)
    assert cg._packed_bytes <= cg.PACKED_CACHE_BYTES
    kept = {key[0] for key in cg._packed}
    assert id(arrays[-1]) in kept and id(arrays[0]) not in kept              # the oldest went first
    np.testing.assert_array_equal(cg.packed_weights(arrays[0]), cg.pack_weights(arrays[0]))


def test_non_finite_inputs_propagate(rng):
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    out, _, _ = run(x, w, None, before=(1, 1))
    assert np.isnan(out[0, :, 1:4, 2:5]).all() and np.isfinite(out[0, :, 5, :]).all()


@pytest.mark.parametrize("shape,n,k,dilation,before,out_size", [
    ((2, 5, 20, 24), 13, (3, 3), (1, 1), (1, 1), (20, 24)),
    ((1, 4, 30, 40), 9, (3, 5), (2, 1), (2, 0), (28, 36)),        # dilation, padding on one axis only
    ((2, 6, 17, 40), 11, (1, 1), (1, 1), (0, 0), (17, 40)),       # pointwise: x itself
    ((1, 3, 24, 24), 10, (3, 3), (1, 1), (-1, 2), (20, 26)),      # a crop and a wide right padding
])
def test_stride_one_reads_the_columns_in_place_with_the_packed_bits(rng, monkeypatch, shape, n, k, dilation,
                                                                    before, out_size):
    """direct_columns (no packing: a padded copy whose rows are as wide as the pixel grid, its
    extra columns dropped) gives the packed path's bits, on every ISA path"""
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((n, shape[1]) + k).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    assert cg.direct_columns(x, shape[1], k, (1, 1), dilation, before, out_size) is not None
    for isa in supported_isas():
        with forced_isa(isa):
            direct, ydirect, _ = run(x, w, bias, (1, 1), dilation, before, out_size, bound=(0.0, 1.0))
            with monkeypatch.context() as patch:
                patch.setattr(cg, "direct_columns", lambda *args: None)
                packed, ypacked, _ = run(x, w, bias, (1, 1), dilation, before, out_size, bound=(0.0, 1.0))
        np.testing.assert_array_equal(direct.view(np.uint32), packed.view(np.uint32))
        np.testing.assert_array_equal(ydirect.view(np.uint32), ypacked.view(np.uint32))
    check_bound(x, w, bias, (1, 1), dilation, before, direct, out_size)


@pytest.mark.parametrize("W,before", [(100, (1, 1)), (224, (0, 0)), (67, (0, 2)), (41, (-1, -1))])
def test_stride_two_is_stride_one_sampled_bit_for_bit(rng, W, before):
    """Stride 2 packs its columns 16 at a time from two vectors of the input row (float_gemm.h):
    every output is the same fma chain over the same taps as the stride-1 output at twice its
    coordinates, so the two agree bit for bit, on every ISA path (rows wide enough for the
    vectors, padding on the left, the right or neither, and a crop)"""
    H = 9
    x = rng.standard_normal((1, 3, H, W)).astype(np.float32)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)
    one = (H + 2 * before[0] - 2, W + 2 * before[1] - 2)          # stride 1 with the padding on both sides
    two = ((one[0] + 1) // 2, (one[1] + 1) // 2)
    for isa in supported_isas():
        with forced_isa(isa):
            full = run(x, w, bias, (1, 1), (1, 1), before, one, bound=(0.0, 6.0))
            half = run(x, w, bias, (2, 2), (1, 1), before, two, bound=(0.0, 6.0))
        for f, h in zip(full[:2], half[:2]):
            np.testing.assert_array_equal(h.view(np.uint32), f[:, :, ::2, ::2].view(np.uint32))


@pytest.mark.parametrize("shape,n,g,k,stride,dilation,before,out_size", [
    ((3, 16, 28, 28), 32, 1, (3, 3), (2, 2), (1, 1), (1, 1), (14, 14)),     # the embedded model's stride 2
    ((2, 64, 7, 7), 64, 1, (3, 3), (2, 2), (1, 1), (1, 1), (4, 4)),
    ((2, 8, 7, 7), 24, 1, (3, 3), (1, 1), (1, 1), (1, 1), (7, 7)),          # 3x3 on 7x7: no direct grid
    ((2, 5, 9, 11), 9, 1, (3, 3), (3, 3), (1, 1), (0, 2), (3, 4)),          # stride 3, padding on one side
    ((1, 4, 13, 10), 8, 2, (5, 5), (2, 2), (2, 2), (2, 2), (5, 3)),         # dilation, groups
    ((2, 4, 4, 9), 5, 1, (2, 2), (2, 2), (1, 1), (-1, 0), (1, 5)),          # a crop, a padding past the right
    ((1, 8, 20, 20), 16, 1, (1, 1), (2, 2), (1, 1), (0, 0), (10, 10)),      # a strided pointwise conv
    ((1, 3, 40, 31), 17, 1, (3, 3), (2, 2), (1, 1), (1, 1), (20, 16)),      # 320 pixels: many panels, a tail
])
def test_short_rows_pack_by_the_gather_table_with_the_runs_bits(rng, monkeypatch, shape, n, g, k, stride, dilation,
                                                               before, out_size):
    """Output rows of at most GATHER_MAX_WIDTH pixels pack their columns from the layer's gather
    table (float_gemm.h qsim_gemm_pack_b_gather): the same columns as the pixel runs, so the same
    bits, on every ISA path and thread count, with and without the shared prepacked columns
    (one sample: the threads split the rows), the bound in place or beside."""
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 0, 0, :2] = [np.inf, np.nan]
    w = rng.standard_normal((n, shape[1] // g) + k).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    layer = cg.gemm_layer(shape, (g, n // g, shape[1] // g * k[0] * k[1]), k, stride, dilation, before, out_size,
                          None, False, 1)
    assert layer.gather is not None
    results = []
    for isa in supported_isas():
        for threads in ("1", "2"):
            monkeypatch.setenv("QSIM_THREADS", threads)
            for width in (cg.GATHER_MAX_WIDTH, 0):            # 0: every layer packs by its runs
                monkeypatch.setattr(cg, "GATHER_MAX_WIDTH", width)
                cg.gemm_layer.cache_clear()
                with forced_isa(isa):
                    for only in (False, True):
                        results.append(run(x, w, bias, stride, dilation, before, out_size, (0.0, 6.0), only))
            monkeypatch.undo()
    cg.gemm_layer.cache_clear()
    want = results[0]
    for got in results:
        for a, b in zip(got[:2], want[:2]):
            if a is not None and b is not None:
                np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    x[0, 0, 0, :2] = 0.0
    check_bound(x, w, bias, stride, dilation, before, run(x, w, bias, stride, dilation, before, out_size)[0],
                out_size)


def test_the_gather_table_names_the_element_each_tap_reads():
    """Row ky*KW + kx, column oy*OW + ox: iy*W + ix with iy = oy*sy + ky*dy - pt (ix likewise), -1
    outside the plane; rows padded with -1 to a multiple of 16; read-only."""
    H, W, (KH, KW), (sy, sx), (dy, dx), (pt, pl), (OH, OW) = 6, 5, (3, 2), (2, 3), (1, 2), (1, -1), (3, 2)
    table = cg.gather_table((H, W), (KH, KW), (sy, sx), (dy, dx), (pt, pl), (OH, OW)).reshape(KH * KW, -1)
    assert table.shape == (KH * KW, 16) and not table.flags.writeable
    for ky in range(KH):
        for kx in range(KW):
            for oy in range(OH):
                for ox in range(OW):
                    iy, ix = oy * sy + ky * dy - pt, ox * sx + kx * dx - pl
                    want = iy * W + ix if 0 <= iy < H and 0 <= ix < W else -1
                    assert table[ky * KW + kx, oy * OW + ox] == want
    assert (table[:, OH * OW:] == -1).all()


@pytest.mark.parametrize("entry", [-2, 6 * 6])
def test_a_gather_table_that_reads_outside_the_plane_is_refused(rng, entry):
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    layer = cg.GemmLayer(x.shape, (1, 4, 18), (3, 3), (2, 2), (1, 1), (1, 1), (3, 3), None, False, 1)
    bad = layer.gather.copy()
    bad[5] = entry
    layer.gather = bad
    with pytest.raises(ValueError, match="gather table entry"):
        layer.run(x, w.reshape(1, 4, 18), None)
