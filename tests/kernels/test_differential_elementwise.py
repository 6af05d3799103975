"""Differential tests, part 2: RESCALE, TABLE, CLAMP, ADD, SUB, MAXIMUM, MINIMUM, MUL,
REDUCE_SUM/MAX/MIN (TOSA kernels vs the reference on every ISA path) and the CVM conv2d/dense
kernels vs qsim.cvm's reference, over hypothesis-drawn shapes, modes and attributes. Every
drawn call passes the spec's ERROR_IF; REQUIRE failures must be raised by both backends."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import qsim.cvm as cvm
from diff_strategies import RANGES, STORAGE, arrays, diff_settings, fill
from kernel_harness import differential
from qsim.kernels.cpu_features import forced_isa, supported_isas

# the spec's RESCALE modes (2.13.2): (in_t, out_t)
RESCALE_MODES = (("int8", "int8"), ("int8", "int16"), ("int8", "int32"), ("int8", "uint8"),
                 ("int16", "int8"), ("int16", "int16"), ("int16", "int32"), ("int16", "uint8"),
                 ("int16", "uint16"), ("int32", "int8"), ("int32", "int16"), ("int32", "int32"),
                 ("int48", "int8"), ("int48", "int16"), ("int48", "int32"), ("uint8", "int8"),
                 ("uint8", "int16"), ("uint16", "int16"))


def rescale_zero_point(type_name):
    """ERROR_IF: int8/uint8 any value of the type, uint16 0 or 32768, every other type 0."""
    if type_name in ("int8", "uint8"):
        lo, hi = RANGES[type_name]
        return st.one_of(st.sampled_from((lo, hi, 0)), st.integers(lo, hi))
    return st.sampled_from((0, 32768)) if type_name == "uint16" else st.just(0)


@st.composite
def shapes(draw, max_rank=4, last=(1, 3, 16, 32, 33)):
    rank = draw(st.integers(1, max_rank))
    return tuple(draw(st.integers(1, 4)) for _ in range(rank - 1)) + (draw(st.sampled_from(last)),)


@st.composite
def rescale_calls(draw, in_t, out_t):
    scale32 = in_t != "int48" and draw(st.booleans())           # ERROR_IF(scale32 && in_t == int48_t)
    double_round = scale32 and draw(st.booleans())              # ERROR_IF(!scale32 && double_round)
    shape = draw(shapes())
    per_channel = draw(st.booleans())
    nc = shape[-1] if per_channel else 1
    mul_hi = (1 << 31) - 1 if scale32 else (1 << 15) - 1
    mult = draw(st.one_of(arrays((nc,), "int32", 0, mul_hi), arrays((nc,), "int32", 0, 3)))
    shift_range = draw(st.sampled_from(((2, 62), (33, 62), (2, 31), (30, 34), (60, 62), (2, 4))))
    shift = draw(arrays((nc,), "int32", *shift_range))
    if draw(st.integers(0, 20)) == 0:                             # REQUIRE violations: both raise
        if draw(st.booleans()):
            mult[0] = -1 - mult[0] % 7
        else:
            shift[0] = draw(st.sampled_from((0, 1, 63)))
    izp, ozp = draw(rescale_zero_point(in_t)), draw(rescale_zero_point(out_t))
    x = draw(arrays(shape, in_t)).astype(np.int64)
    if scale32 and draw(st.integers(0, 5)):
        # mostly inside REQUIRE(value in [-2^(shift-2), 2^(shift-2))) for value = x - input_zp
        s = np.broadcast_to(np.clip(shift, 2, 62).astype(np.int64), x.shape[:-1] + (nc,))
        bound = np.left_shift(np.int64(1), s - 2)
        lo, hi = RANGES[in_t]
        x = np.clip(x, np.maximum(lo, izp - bound), np.minimum(hi, izp + bound - 1))
    x = x.astype(STORAGE[in_t])
    attrs = dict(input_zp=izp, output_zp=ozp, multiplier=mult, shift=shift, scale32=scale32,
                 double_round=double_round, per_channel=per_channel, out_t=out_t)
    return [x], attrs


@pytest.mark.parametrize("in_t,out_t", RESCALE_MODES)
def test_rescale(in_t, out_t):
    @diff_settings(40)
    @given(rescale_calls(in_t, out_t))
    def check(call):
        differential("RESCALE", *call)
    check()


def test_rescale_double_round_hand_worked():
    # int32 -> int32, 36 channels (the 16-lane path), multiplier 2^30, shift 33, double_round:
    # round = 2^32 + 2^30 (value >= 0) or 2^32 - 2^30 (value < 0); result = (v*2^30 + round) >> 33
    #   1 -> 5*2^30 >> 33 = 0;  3 -> 8*2^30 >> 33 = 1 (single rounding: 7*2^30 -> 0)
    #  -3 -> 0;  -4 -> -1*2^30 >> 33 = -1 (single rounding: 0 -> 0)
    #  2^31-1 -> (2^31+4)*2^30 >> 33 = 2^28;  -2^31 -> (-2^31+3)*2^30 >> 33 = -2^28
    x = np.array([[1, 3, -3, -4, (1 << 31) - 1, -(1 << 31)] * 6], np.int32)
    attrs = dict(input_zp=0, output_zp=0, multiplier=np.full(36, 1 << 30, np.int32),
                 shift=np.full(36, 33, np.int32), scale32=True, double_round=True, per_channel=True,
                 out_t="int32")
    out = differential("RESCALE", [x], attrs)[0]
    assert out[0, :6].tolist() == [0, 1, 0, -1, 1 << 28, -(1 << 28)]
    single = differential("RESCALE", [x], dict(attrs, double_round=False))[0]
    assert single[0, :4].tolist() == [0, 0, 0, 0]


@st.composite
def table_calls(draw):
    if draw(st.booleans()):
        return [draw(arrays(draw(shapes()), "int8"))], dict(table=draw(arrays((256,), "int8")))
    x = draw(arrays(draw(shapes()), "int16"))
    if draw(st.integers(0, 4)):
        # neighbours differ by at most 2^15 - 1 (REQUIRE on the slope) but wander over int16
        steps = draw(arrays((512,), "int16", -32767 // 2, 32767 // 2))
        table = np.clip(np.cumsum(np.concatenate([[int(draw(st.integers(-32768, 32767)))], steps])),
                        -32768, 32767).astype(np.int16)
    else:
        table = draw(arrays((513,), "int16"))                  # any table: the slope may break
    return [x], dict(table=table)


@diff_settings(200)
@given(table_calls())
def test_table(call):
    differential("TABLE", *call)


@st.composite
def clamp_calls(draw):
    t = draw(st.sampled_from(("int8", "int16")))
    lo, hi = RANGES[t]
    a, b = draw(st.integers(lo, hi)), draw(st.integers(lo, hi))
    return [draw(arrays(draw(shapes()), t))], dict(min_val=min(a, b), max_val=max(a, b))


@diff_settings(150)
@given(clamp_calls())
def test_clamp(call):
    differential("CLAMP", *call)


@st.composite
def broadcast_pair(draw, type_name, lo=None, hi=None):
    """Two arrays of the same rank (0..4), each dimension the output's or 1 (spec 1.8.4)."""
    rank = draw(st.integers(0, 4))
    out = tuple(draw(st.sampled_from((1, 2, 3, 5, 17))) for _ in range(rank))
    a_shape = tuple(d if draw(st.booleans()) else 1 for d in out)
    b_shape = tuple(d if draw(st.booleans()) else 1 for d in out)
    return draw(arrays(a_shape, type_name, lo, hi)), draw(arrays(b_shape, type_name, lo, hi))


@diff_settings(300)
@given(st.sampled_from(("ADD", "SUB", "MAXIMUM", "MINIMUM")), st.data())
def test_add_sub_maximum_minimum(op, data):
    half = data.draw(st.booleans())          # full range: ADD/SUB overflow, a REQUIRE on both sides
    a, b = data.draw(broadcast_pair("int32", -(1 << 30) if half else None, (1 << 30) - 1 if half else None))
    differential(op, [a, b], {})


@diff_settings(300)
@given(st.sampled_from(("int8", "int16", "int32")), st.integers(0, 63), st.data())
def test_mul(in_t, shift, data):
    shift = shift if in_t == "int32" else 0          # ERROR_IF(in_t != int32_t && shift > 0)
    a, b = data.draw(broadcast_pair(in_t))
    differential("MUL", [a, b], dict(shift=shift))


@st.composite
def reduce_calls(draw):
    op = draw(st.sampled_from(("REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN")))
    t = "int32" if op == "REDUCE_SUM" else draw(st.sampled_from(("int8", "int16", "int32")))
    shape = draw(shapes(last=(1, 2, 7, 40)))
    axis = draw(st.integers(0, len(shape) - 1))
    if op == "REDUCE_SUM" and draw(st.booleans()):
        # near the int32 limit: every element about (2^31 - 1) / n, some above (REQUIRE)
        n = shape[axis]
        lo, hi = RANGES["int32"]
        bound = hi // n + draw(st.integers(-2, 2))
        x = draw(arrays(shape, "int32", -bound if draw(st.booleans()) else bound, bound))
    else:
        x = draw(arrays(shape, t))
    return op, [x], dict(axis=axis)


@diff_settings(300)
@given(reduce_calls())
def test_reductions(call):
    op, inputs, attrs = call
    differential(op, inputs, attrs)


# ---------------------------------------------------------------- CVM conv2d / dense

def cvm_same(op, inputs, attrs):
    """qsim.cvm's reference vs the kernels on every ISA path of the GEMM this CPU runs."""
    want = cvm.run(op, inputs, attrs, backend="reference")[0]
    for isa in supported_isas():
        with forced_isa(isa):
            got = cvm.run(op, inputs, attrs, backend="kernels")[0]
        assert got.dtype == want.dtype and np.array_equal(got, want), f"cvm.{op} ({isa.value}) differs"


@st.composite
def cvm_conv_calls(draw):
    n, c, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 7)), draw(st.integers(1, 7))
    depthwise = c > 1 and draw(st.booleans())
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ph, pw = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    # the dilated kernel must fit the padded input (cvm conv2d's shape rule)
    ph = max(ph, -(-(dh * (kh - 1) + 1 - h) // 2))
    pw = max(pw, -(-(dw * (kw - 1) + 1 - w) // 2))
    oc = c if depthwise else draw(st.integers(1, 9))
    x = draw(arrays((n, c, h, w), "int8", -127, 127))
    wt = draw(arrays((oc, 1 if depthwise else c, kh, kw), "int8", -127, 127))
    inputs = [x, wt]
    if draw(st.booleans()):
        inputs.append(draw(arrays((oc,), "int32", -(1 << 20), 1 << 20)))
    attrs = dict(padding=(ph, pw), stride=(draw(st.integers(1, 3)), draw(st.integers(1, 3))),
                 dilation=(dh, dw), groups=c if depthwise else 1)
    return inputs, attrs


@diff_settings(150)
@given(call=cvm_conv_calls())
def test_cvm_conv2d(call):
    cvm_same("conv2d", *call)


@diff_settings(150)
@given(m=st.integers(1, 9), k=st.integers(1, 300), units=st.sampled_from((1, 5, 63, 64, 65, 130)),
       bias=st.booleans(), seed=st.integers(0, 2**32 - 1), style=st.sampled_from(("uniform", "extremes", "high")))
def test_cvm_dense(m, k, units, bias, seed, style):
    x = fill(style, seed, (m, k), "int8", -127, 127)
    w = fill(style, seed + 1, (units, k), "int8", -127, 127)
    inputs = [x, w] + ([fill("uniform", seed + 2, (units,), "int32", -(1 << 20), 1 << 20)] if bias else [])
    cvm_same("dense", inputs, dict(units=units, use_bias=bias))
