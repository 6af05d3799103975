"""The conv-like kernels with a fused RESCALE (+ CLAMP) (kernels/registry.py `rescaled`, the
executor's integer fusion) vs the TOSA reference run op by op: the same dtype and bits on every
ISA path, thread count and block size, or None (the caller then runs the ops apart) exactly
where the reference raises a REQUIRE failure."""
import numpy as np
import pytest

from kernel_harness import ISAS, ints, tosa_run
from qsim.errors import UnpredictableError
from qsim.kernels import gemm_ops
from qsim.kernels.cpu_features import forced_isa
from qsim.kernels.registry import RESCALING, rescaled
from qsim.runtime.int_fusion import RESCALING_OPS
from qsim.tosa.run import prepare

from test_gemm_ops import conv_attrs, fc_attrs, random_conv2d_case

_tosa_ops = gemm_ops._tosa_ops


def _apart(op, inputs, attrs, rq, clamp):
    """The reference, op by op: (int32 accumulators, final output or None where a REQUIRE fails)."""
    acc, = tosa_run(op, inputs, attrs, backend="reference")
    try:
        y, = tosa_run("RESCALE", [acc], rq, backend="reference")
        if clamp is not None:
            y, = tosa_run("CLAMP", [y], dict(min_val=clamp[0], max_val=clamp[1]), backend="reference")
    except UnpredictableError:
        y = None
    return acc, y


def check_fused(op, inputs, attrs, rq, clamp=None, fused=True):
    """rescaled() on every ISA path against the reference; `fused`: the kernels must compute the
    case (not hand it back) wherever the reference succeeds. Returns the reference output."""
    acc, want = _apart(op, inputs, attrs, rq, clamp)
    call, arrays = prepare(op, inputs, attrs)
    rcall, _ = prepare("RESCALE", [acc], rq)
    for isa in ISAS:
        with forced_isa(isa):
            got = rescaled(op, arrays, call.attrs, rcall.attrs, clamp)
        if want is None or got is None:
            assert got is None and (want is None or not fused), f"{op} on {isa}: fused {got is not None}"
            continue
        assert got.dtype == want.dtype and got.shape == want.shape, f"{op} on {isa}"
        if not np.array_equal(got, want):
            idx = tuple(int(i) for i in np.argwhere(got != want)[0])
            pytest.fail(f"{op} on {isa}: element {list(idx)} is {got[idx]}, reference {want[idx]} "
                        f"(accumulator {acc[idx]}; {int((got != want).sum())} of {want.size} differ)")
    return want


def rescale_attrs(rng, oc, *, out="int8", per_channel=None, scale32=None, shifts=(33, 41)):
    """RESCALE attributes of an int32 input with `oc` channels (shift range [lo, hi))."""
    per_channel = bool(rng.integers(2)) if per_channel is None else per_channel
    scale32 = bool(rng.integers(2)) if scale32 is None else scale32
    n = oc if per_channel else 1
    top = (1 << 31) - 1 if scale32 else (1 << 15) - 1
    mult = rng.integers(top // 4, top, size=n, endpoint=True)
    shift = rng.integers(shifts[0], shifts[1], size=n) if scale32 else rng.integers(max(shifts[0] - 16, 2), shifts[1] - 16, size=n)
    ozp = int(rng.integers(-128, 128)) if out == "int8" else 0
    return dict(input_zp=0, output_zp=ozp, multiplier=mult.astype(np.int32 if scale32 else np.int16),
                shift=shift.astype(np.int8), scale32=scale32, double_round=scale32 and bool(rng.integers(2)),
                per_channel=per_channel, out_t=out)


def test_every_rescaling_kernel_is_fused_by_the_executor():
    assert set(RESCALING) == RESCALING_OPS


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("scratch", [None, 64])
def test_conv2d_random(rng, monkeypatch, threads, scratch):
    """Random geometries, zero points and RESCALE attributes (both multiplier widths, per channel
    and per tensor, with and without double_round, int8/int16/int32 outputs, CLAMP or not);
    scratch=64 bytes: a block of 6 rows, every block boundary crossed."""
    monkeypatch.setenv("QSIM_THREADS", threads)
    if scratch:
        monkeypatch.setattr(_tosa_ops, "REQUANT_SCRATCH_BYTES", scratch)
    for i in range(10):
        (kh, kw), stride, dilation, pad, (ih, iw) = random_conv2d_case(rng)
        ic, oc = int(rng.integers(1, 20)), [16, 24, 32, 5][i % 4]
        x = ints(rng, (2, ih + 8, iw + 8, ic), np.int8)
        w = ints(rng, (oc, kh, kw, ic), np.int8)
        attrs = conv_attrs(rng, w, oc, pad=pad, stride=(1, 1), dilation=dilation,
                           wzp=int(rng.integers(-128, 128)) if i % 3 == 0 else 0)
        # the output-size rule (ERROR_IF) holds for stride 1 whatever the extents
        out = ["int8", "int16", "int32"][i % 3]
        rq = rescale_attrs(rng, oc, out=out)
        clamp = (int(rng.integers(-128, 0)), int(rng.integers(0, 128))) if i % 2 and out != "int32" else None
        check_fused("CONV2D", [x], attrs, rq, clamp)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("scratch", [None, 64])
def test_depthwise_random(rng, monkeypatch, threads, scratch):
    monkeypatch.setenv("QSIM_THREADS", threads)
    if scratch:
        monkeypatch.setattr(_tosa_ops, "REQUANT_SCRATCH_BYTES", scratch)
    cases = [((9, 9), 32, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
             ((10, 10), 12, 2, (3, 3), (2, 2), (1, 1), (0, 1, 0, 1)),
             ((6, 11), 33, 1, (3, 1), (1, 3), (2, 1), (2, 2, 0, 1)),
             ((12, 12), 16, 1, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2))]
    for n in (1, 3):
        for (ih, iw), c, m, (kh, kw), (sy, sx), (dy, dx), pad in cases:
            x = ints(rng, (n, ih, iw, c), np.int8)
            w = ints(rng, (kh, kw, c, m), np.int8)
            attrs = dict(weight=w, bias=ints(rng, (c * m,), np.int32, -999, 999), pad=pad, stride=(sy, sx),
                         dilation=(dy, dx), input_zp=int(rng.integers(-128, 128)),
                         weight_zp=int(rng.integers(-128, 128)))
            if (ih - 1 + pad[0] + pad[1] - (kh - 1) * dy) % sy or (iw - 1 + pad[2] + pad[3] - (kw - 1) * dx) % sx:
                continue
            check_fused("DEPTHWISE_CONV2D", [x], attrs, rescale_attrs(rng, c * m),
                        (-100, 90) if n == 3 else None)


def test_fully_connected_matmul_transpose_conv2d(rng, monkeypatch):
    monkeypatch.setattr(_tosa_ops, "REQUANT_SCRATCH_BYTES", 64)
    for n, ic, oc in ((1, 512, 100), (3, 5, 1), (20, 67, 130)):
        x, w = ints(rng, (n, ic), np.int8), ints(rng, (oc, ic), np.int8)
        check_fused("FULLY_CONNECTED", [x], fc_attrs(rng, w, oc, wzp=int(rng.integers(-128, 128))),
                    rescale_attrs(rng, oc))
    for a_zp, b_zp in ((0, 0), (-128, 127)):
        a, b = ints(rng, (2, 13, 21), np.int8), ints(rng, (2, 21, 35), np.int8)
        check_fused("MATMUL", [a, b], dict(A_zp=a_zp, B_zp=b_zp), rescale_attrs(rng, 35), (-5, 100))
    x, w = ints(rng, (1, 4, 4, 3), np.int8), ints(rng, (18, 3, 3, 3), np.int8)
    attrs = conv_attrs(rng, w, 18, wzp=7)
    del attrs["pad"], attrs["dilation"]
    attrs.update(out_pad=(3, 2, 2, 0), stride=(2, 1), out_shape=(1, 4, 4, 18))
    check_fused("TRANSPOSE_CONV2D", [x], attrs, rescale_attrs(rng, 18))


@pytest.mark.parametrize("ozp", [-128, 127, 0])
def test_saturation_at_both_rails_and_extreme_zero_points(ozp):
    """-128 inputs and weights at the zero points' far ends give the largest accumulators of
    both signs; a multiplier near 2^31 drives the RESCALE into both rails."""
    x = np.full((1, 6, 6, 32), -128, dtype=np.int8)
    x[0, ::2, ::3] = 127
    w = np.full((32, 3, 3, 32), -128, dtype=np.int8)
    w[::2, 1] = 127
    for izp, wzp in ((127, 0), (-128, 127), (-128, -128)):
        attrs = dict(weight=w, bias=np.arange(32, dtype=np.int32) * 1000 - 16000, pad=(1, 1, 1, 1),
                     stride=(1, 1), dilation=(1, 1), input_zp=izp, weight_zp=wzp)
        for shift in (33, 40, 50):
            rq = dict(input_zp=0, output_zp=ozp, multiplier=np.array([(1 << 31) - 1], np.int32),
                      shift=np.array([shift], np.int8), scale32=True, double_round=True, per_channel=False,
                      out_t="int8")
            y = check_fused("CONV2D", [x], attrs, rq)
            if shift == 33:
                assert y.min() == -128 and y.max() == 127
            wd = np.full((3, 3, 32, 1), -128, dtype=np.int8)
            wd[1, 1, ::2] = 127
            check_fused("DEPTHWISE_CONV2D", [x], dict(attrs, weight=wd), rq, (-128, 126))


@pytest.mark.parametrize("double_round", [False, True])
@pytest.mark.parametrize("shift", [31, 33, 34, 40])
def test_rounding_ties(double_round, shift):
    """acc = x + bias covers every residue modulo 2^(shift-30): with multiplier 2^30 the exact
    quotient acc / 2^(shift-30) lands on every half (ties away from zero or up, double_round)."""
    x = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)
    w = np.ones((32, 1), dtype=np.int8)
    attrs = dict(weight=w, bias=np.arange(-16, 16, dtype=np.int32) * 37, input_zp=0, weight_zp=0)
    rq = dict(input_zp=0, output_zp=3, multiplier=np.full(32, 1 << 30, np.int32),
              shift=np.full(32, shift, np.int8), scale32=True, double_round=double_round, per_channel=True,
              out_t="int8")
    check_fused("FULLY_CONNECTED", [x], attrs, rq)


@pytest.mark.parametrize("scale32", [True, False])
def test_shift_limits_and_long_accumulations(rng, scale32):
    """shift 2 and 62 (the spec's limits), a 4096-long accumulation near its bound; where the
    REQUIRE on the value fails (scale32, |value| >= 2^(shift-2)) the fused call hands back."""
    x = ints(rng, (7, 4096), np.int8)
    x[0] = -128
    w = ints(rng, (48, 4096), np.int8)
    w[0] = -128
    w[1] = 127
    attrs = dict(weight=w, bias=ints(rng, (48,), np.int32, -99, 99), input_zp=0, weight_zp=0)
    top = (1 << 31) - 1 if scale32 else (1 << 15) - 1
    mdt = np.int32 if scale32 else np.int16
    for shift in (2, 62):
        for mult in (1, top):
            rq = dict(input_zp=0, output_zp=0, multiplier=np.array([mult], mdt), shift=np.array([shift], np.int8),
                      scale32=scale32, double_round=False, per_channel=False, out_t="int32")
            check_fused("FULLY_CONNECTED", [x], attrs, rq)
    # shift 2 with scale32 holds only for values in [-1, 1): accumulators of 0 and -1
    zeros = np.zeros((3, 16), np.int8)
    fc = dict(weight=np.zeros((16, 16), np.int8), bias=-(np.arange(16, dtype=np.int32) % 2), input_zp=0,
              weight_zp=0)
    rq = dict(input_zp=0, output_zp=-7, multiplier=np.array([top], mdt), shift=np.array([2], np.int8),
              scale32=scale32, double_round=False, per_channel=False, out_t="int8")
    check_fused("FULLY_CONNECTED", [zeros], fc, rq)


def test_sixteen_bit_modes_hand_back(rng):
    """int16 inputs (48-bit accumulators) are not fused: None, and the caller runs the ops apart."""
    w = ints(rng, (16, 3, 3, 8), np.int8)
    for op, x, attrs in (("CONV2D", ints(rng, (1, 4, 4, 8), np.int16), conv_attrs(rng, w, 16, izp=0, out="int48")),
                         ("MATMUL", ints(rng, (1, 4, 8), np.int16), dict(A_zp=0, B_zp=0))):
        inputs = [x] if op == "CONV2D" else [x, ints(rng, (1, 8, 16), np.int16)]
        call, arrays = prepare(op, inputs, attrs)
        acc, = tosa_run(op, inputs, attrs, backend="reference")
        rcall, _ = prepare("RESCALE", [acc], rescale_attrs(rng, 16, scale32=False))
        assert rescaled(op, arrays, call.attrs, rcall.attrs, None) is None
