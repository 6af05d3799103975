"""LOADW, im2col in hardware: the window walker's words against an independent im2col (plain
loops over TOSA's window definition), its timing by hand, and the three engines on
convolution corners (padding with zero points at both rails, stride and dilation > 1,
1x1 and 7x7 kernels, depthwise) in both dataflows: equal values, equal cycles."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim.hw.params import Dataflow, Geometry
from qsim.npu.layers import run_layer
from qsim.npu.array.window import Window, descriptor_bytes, window_timing, window_words_values

from . import oracle

WS, OS = Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY
BASE = 96          # the tensor's DRAM address in these tests


def _im2col(x, kernel, pad, stride, dilation, zp, c0, ck):
    """[N*OH*OW, KH*KW*ck] (ky, kx, c): element by element from TOSA's window definition."""
    n, h, w, _ = x.shape
    (kh, kw), (top, bottom, left, right) = kernel, pad
    oh = (h - 1 + top + bottom - (kh - 1) * dilation[0]) // stride[0] + 1
    ow = (w - 1 + left + right - (kw - 1) * dilation[1]) // stride[1] + 1
    out = np.full((n * oh * ow, kh * kw * ck), zp, np.int64)
    for b in range(n):
        for y in range(oh):
            for xx in range(ow):
                for ky in range(kh):
                    for kx in range(kw):
                        iy = y * stride[0] - top + ky * dilation[0]
                        ix = xx * stride[1] - left + kx * dilation[1]
                        if 0 <= iy < h and 0 <= ix < w:
                            col = (ky * kw + kx) * ck
                            out[(b * oh + y) * ow + xx, col:col + ck] = x[b, iy, ix, c0:c0 + ck]
    return out.astype(np.int8)


def _dram(x):
    return np.concatenate([np.full(BASE, 0xAA, np.uint8), x.view(np.uint8).ravel(), np.full(40, 0x55, np.uint8)])


@st.composite
def windows(draw):
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 7)), draw(st.integers(1, 7))
    cp = draw(st.integers(1, 24))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dil = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pad = tuple(draw(st.integers(0, 3)) for _ in range(4))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    if h - 1 + pad[0] + pad[1] < (kh - 1) * dil[0] or w - 1 + pad[2] + pad[3] < (kw - 1) * dil[1]:
        pad = (pad[0] + (kh - 1) * dil[0], pad[1], pad[2] + (kw - 1) * dil[1], pad[3])
    group = draw(st.booleans())
    c0 = draw(st.integers(0, cp - 1)) if group else 0
    ck = draw(st.integers(1, cp - c0)) if group else cp
    zp = draw(st.sampled_from([-128, 127, 0, -3]))
    return Window((n, h, w, cp), (kh, kw), pad, stride, dil, c0, ck), zp


@settings(derandomize=True, deadline=None, max_examples=120)
@given(case=windows(), lanes=st.sampled_from([1, 3, 4, 16]), seed=st.integers(0, 2**16),
       os=st.booleans(), data=st.data())
def test_loadw_words_equal_an_independent_im2col(case, lanes, seed, os, data):
    window, zp = case
    x = np.random.default_rng(seed).integers(-128, 128, window.shape).astype(np.int8)
    ref = _im2col(x, window.kernel, window.pad, window.stride, window.dilation, zp, window.c0, window.channels)
    M, K = window.gemm_shape
    assert ref.shape == (M, K)
    dram = _dram(x)
    if os:      # word = K index, lane r = pixel tile start + r (pixels past M read zp)
        m0 = data.draw(st.integers(0, (M - 1) // lanes)) * lanes
        k0 = data.draw(st.integers(0, K - 1))
        count = data.draw(st.integers(1, K - k0))
        want = np.full((lanes, count), zp, np.int8)
        rows = ref[m0:m0 + lanes, k0:k0 + count]
        want[:rows.shape[0]] = rows
        want = want.T
    else:       # word = pixel, lanes = a fold of K (lanes past K read zp)
        k0 = data.draw(st.integers(0, (K - 1) // lanes)) * lanes
        m0 = data.draw(st.integers(0, M - 1))
        count = data.draw(st.integers(1, M - m0))
        want = np.full((count, lanes), zp, np.int8)
        cols = ref[m0:m0 + count, k0:k0 + lanes]
        want[:, :cols.shape[1]] = cols
    blob = descriptor_bytes(window.descriptor(BASE, m0, k0, os, zp), 144)
    got = window_words_values(blob, count, lanes, dram).view(np.int8)
    np.testing.assert_array_equal(got, want)
    # the bytes moved are exactly the in-bounds elements the words take from the tensor
    in_bounds = _im2col(np.ones_like(x), window.kernel, window.pad, window.stride, window.dilation, 0,
                        window.c0, window.channels)
    moved = (in_bounds[m0:m0 + lanes, k0:k0 + count] if os else in_bounds[m0:m0 + count, k0:k0 + lanes]).sum()
    assert window_timing(blob, count, lanes, 8).read_bytes == moved


def test_loadw_timing_by_hand():
    """A 3x6 matrix, 4 lanes, B = 2 bytes/cycle. Fold 0: one 4-byte read per word, issued at
    s = ceil(4(j+1)/2) - 1 = 1, 3, 5: busy 5 + 2 = 7 cycles. Fold 1 (k 4, 5): 2-byte reads at
    s = 0, 1, 2: 4 cycles. A 1x1 convolution whose two padded pixels read nothing: their
    transactions still take a cycle each."""
    window = Window.matrix(3, 6)
    for k0, cycles, moved in ((0, 7, 12), (4, 4, 6)):
        t = window_timing(descriptor_bytes(window.descriptor(0, 0, k0, False, 0), 144), 3, 4, 2)
        assert (t.duration, t.read_bytes, t.transactions) == (cycles, moved, 3)
    padded = Window((1, 1, 2, 4), (1, 1), pad=(0, 0, 1, 1))      # 4 output pixels, 2 padding
    t = window_timing(descriptor_bytes(padded.descriptor(0, 0, 0, False, 5), 144), 4, 4, 4)
    # reads of 0, 4, 4, 0 bytes at s = 0, 1, 2, 3 (credit (s+1)*4 >= 4, 8)
    assert (t.duration, t.read_bytes, t.transactions) == (5, 8, 4)
    # the 7x7 / 3-channel stem: a kernel row is one 21-byte unit, so a 16-lane fold takes
    # at most two reads per output pixel
    stem = Window((1, 16, 16, 3), (7, 7), (3, 3, 3, 3), (2, 2))
    t = window_timing(descriptor_bytes(stem.descriptor(0, 0, 16, False, 0), 144), 64, 16, 16)
    assert t.transactions == 2 * 64


def _corner_layers(rng):
    """(name, op, inputs, attrs, expected int32 sums): the window corners, sums from the
    TOSA loops of tests/npu/oracle.py."""
    out = []

    def conv(name, shape, oc, kernel, pad, stride, dilation, in_zp, w_zp):
        x = rng.integers(-128, 128, shape).astype(np.int8)
        w = rng.integers(-128, 128, (oc, *kernel, shape[3])).astype(np.int8)
        attrs = dict(weight=w, bias=rng.integers(-500, 500, oc), pad=pad, stride=stride, dilation=dilation,
                     input_zp=in_zp, weight_zp=w_zp)
        want = oracle.conv2d(x, w, attrs["bias"], pad, stride, dilation, in_zp, w_zp)
        out.append((name, "CONV2D", [x], attrs, want))

    conv("7x7_stride2_pad3_zp-128", (1, 6, 5, 3), 5, (7, 7), (3, 3, 3, 3), (2, 2), (1, 1), -128, 3)
    conv("3x3_dilation2_pad2_zp127", (1, 5, 5, 5), 3, (3, 3), (2, 1, 2, 2), (1, 1), (2, 2), 127, -128)
    conv("1x1_stride2", (2, 4, 5, 20), 6, (1, 1), (0, 0, 0, 0), (2, 2), (1, 1), 7, 0)
    conv("asymmetric_pad_stride_dilation", (1, 5, 6, 4), 4, (2, 3), (0, 2, 1, 0), (1, 2), (2, 1), -128, 1)
    x = rng.integers(-128, 128, (1, 5, 5, 6)).astype(np.int8)
    wd = rng.integers(-128, 128, (3, 3, 6, 1)).astype(np.int8)
    attrs = dict(weight=wd, bias=rng.integers(-500, 500, 6), pad=(1, 1, 1, 1), stride=(2, 2),
                 dilation=(1, 1), input_zp=127, weight_zp=-2)
    out.append(("depthwise_3x3_stride2_zp127", "DEPTHWISE_CONV2D", [x], attrs,
                oracle.depthwise(x, wd, attrs["bias"], (1, 1, 1, 1), (2, 2), (1, 1), 127, -2)))
    return out


CORNERS = [c[0] for c in _corner_layers(np.random.default_rng(0))]


@pytest.mark.parametrize("dataflow", [WS, OS])
@pytest.mark.parametrize("name", CORNERS)
def test_window_corners_equal_on_model_and_amaranth(name, dataflow):
    """The Amaranth RTL (a 4x4 array with small buffers, so layers take several chunks and
    folds) and the model: equal values (= the TOSA loops) and equal cycles."""
    case = {c[0]: c for c in _corner_layers(np.random.default_rng(0))}[name]
    _, op, inputs, attrs, want = case
    geom = Geometry(4, 4, dataflow, 4 * 32, 4 * 16, 16 * 16, 8)
    model = run_layer(geom, op, inputs, attrs, engine="model")
    rtl = run_layer(geom, op, inputs, attrs, engine="amaranth")
    np.testing.assert_array_equal(model.output, want.astype(np.int32))
    np.testing.assert_array_equal(rtl.output, model.output)
    assert rtl.cycles == model.cycles


@pytest.mark.parametrize("preset", ["16x16", "8x8:os"])
def test_window_corners_equal_on_model_and_verilator(preset):
    from qsim.npu.config import load_config
    geom = load_config(preset).geometry
    for name, op, inputs, attrs, want in _corner_layers(np.random.default_rng(1)):
        model = run_layer(geom, op, inputs, attrs, engine="model")
        rtl = run_layer(geom, op, inputs, attrs, engine="verilator")
        np.testing.assert_array_equal(model.output, want.astype(np.int32), err_msg=name)
        np.testing.assert_array_equal(rtl.output, model.output, err_msg=name)
        assert rtl.cycles == model.cycles, name
