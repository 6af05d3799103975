"""Integer kernels split over qsim's threads (RESCALE and CLAMP by element rows, DEPTHWISE_CONV2D
by image or by output row): at 1, 2 and 3 threads every ISA path gives the TOSA reference's
bits, on tensors large enough to be split (the parts' boundaries fall inside them), with
rails, extreme zero points, rounding ties and strides/dilations that make the output rows read
overlapping input rows."""
import numpy as np
import pytest

from kernel_harness import check_all_paths, ints
from qsim.kernels.unary_ops import MIN_PART_ELEMENTS

THREADS = ["1", "2", "3"]


@pytest.fixture(params=THREADS)
def threads(request, monkeypatch):
    monkeypatch.setenv("QSIM_THREADS", request.param)
    return int(request.param)


def test_parts_are_large_enough_to_split():
    # the shapes below hold at least 3 parts' worth of elements
    assert 3 * MIN_PART_ELEMENTS <= 2 * 40 * 40 * 64


@pytest.mark.parametrize("per_channel", [False, True])
def test_rescale_split_gives_the_reference(rng, threads, per_channel):
    x = ints(rng, (2, 40, 40, 64), np.int32, -(1 << 24), 1 << 24)
    x.flat[:4] = (-(1 << 24), (1 << 24), 0, -1)
    c = 64 if per_channel else 1
    mult = rng.integers(1 << 30, 1 << 31, c).astype(np.int32)
    shift = rng.integers(33, 40, c).astype(np.int32)
    mult[0], shift[0] = 1 << 30, 33            # exact halves: x * 2^30 / 2^33 = x / 8, ties at x = 4 (mod 8)
    x.flat[c:c + 4] = (4, -4, 12, -12) if per_channel else (4, -4, 12, -12)
    attrs = dict(input_zp=0, output_zp=int(rng.choice([-128, 127])), multiplier=mult, shift=shift,
                 scale32=True, double_round=True, per_channel=per_channel, out_t="int8")
    out = check_all_paths("RESCALE", [x], attrs)[0]
    assert out.min() == -128 and out.max() == 127      # both rails reached


def test_clamp_split_gives_the_reference(rng, threads):
    x = ints(rng, (2, 40, 40, 64), np.int8)
    x.flat[:2] = (-128, 127)
    check_all_paths("CLAMP", [x], dict(min_val=-128, max_val=6))
    x16 = ints(rng, (3, 33, 35, 31), np.int16)
    check_all_paths("CLAMP", [x16], dict(min_val=-300, max_val=32767))


@pytest.mark.parametrize("n,stride,dilation,pad", [(1, (1, 1), (1, 1), (1, 1, 1, 1)),
                                                   (1, (2, 2), (1, 1), (0, 1, 0, 1)),
                                                   (1, (1, 1), (2, 2), (2, 2, 2, 2)),
                                                   (3, (2, 1), (1, 2), (1, 0, 2, 2))])
def test_depthwise_split_gives_the_reference(rng, threads, n, stride, dilation, pad):
    h = w = 70 if stride == (2, 2) else 36
    c = 128
    x = ints(rng, (n, h, w, c), np.int8)
    x[0, 0, 0, :] = -128
    x[0, -1, -1, :] = 127
    wt = ints(rng, (3, 3, c, 1), np.int8)
    wt[0, 0, :4, 0] = (-128, 127, -128, 127)
    attrs = dict(weight=wt, bias=ints(rng, (c,), np.int32, -999, 999), pad=pad, stride=stride,
                 dilation=dilation, input_zp=-128, weight_zp=127)
    out = check_all_paths("DEPTHWISE_CONV2D", [x], attrs)[0]
    assert out.size >= 2 * MIN_PART_ELEMENTS     # large enough to be split at 2 and 3 threads
