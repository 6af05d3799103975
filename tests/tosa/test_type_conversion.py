"""RESCALE against exact rational arithmetic (all in/out type pairs, scale32/16, double_round,
per-channel) and CAST in every integer and bool mode."""
from fractions import Fraction

import numpy as np
import pytest

import tosa_oracle as oracle
from qsim.errors import InvalidGraphError, UnpredictableError, UsageError
from qsim.tosa import run

PAIRS = [("int8", "int8"), ("int8", "int16"), ("int8", "int32"), ("int8", "uint8"), ("int16", "int8"),
         ("int16", "int16"), ("int16", "int32"), ("int16", "uint8"), ("int16", "uint16"), ("int32", "int8"),
         ("int32", "int16"), ("int32", "int32"), ("int48", "int8"), ("int48", "int16"), ("int48", "int32"),
         ("uint8", "int8"), ("uint8", "int16"), ("uint16", "int16")]

RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
          "int32": (-(2 ** 31), 2 ** 31 - 1), "int48": (-(2 ** 47), 2 ** 47 - 1)}


def _zp(rng, t):
    if t in ("int8", "uint8"):
        lo, hi = RANGES[t]
        return int(rng.choice([lo, hi, int(rng.integers(lo, hi + 1))]))
    if t == "uint16":
        return int(rng.choice([0, 32768]))
    return 0


def _rescale(x, out_t, multiplier, shift, *, izp=0, ozp=0, scale32=True, double_round=False, per_channel=False):
    return run("RESCALE", [x], dict(input_zp=izp, output_zp=ozp, multiplier=np.atleast_1d(multiplier),
                                    shift=np.atleast_1d(shift), scale32=scale32, double_round=double_round,
                                    per_channel=per_channel, out_t=out_t))[0]


@pytest.mark.parametrize("in_t,out_t", PAIRS)
def test_rescale_matches_rationals(in_t, out_t):
    rng = np.random.default_rng(abs(hash((in_t, out_t))) % 2 ** 32)
    storage = np.int64 if in_t == "int48" else np.dtype(in_t)
    lo, hi = RANGES[in_t]
    izp, ozp = _zp(rng, in_t), _zp(rng, out_t)
    scale32 = in_t != "int48"
    shapes_ok = 0
    for double_round in ([False, True] if scale32 else [False]):
        for per_channel in (False, True):
            c = 3 if per_channel else 1
            x = rng.integers(lo, hi + 1, size=(2, 5, 3), dtype=np.int64)
            x.flat[0], x.flat[1] = lo, hi
            if scale32:
                multiplier = rng.integers(1 << 30, 1 << 31, size=c)
                # keep |value| < 2^(shift-2) (apply_scale_32's REQUIRE): shift >= bits(value) + 2
                need = max(abs(lo - izp), abs(hi - izp)).bit_length() + 2
                shift = rng.integers(max(need, 2), 63, size=c)
            else:
                multiplier = rng.integers(1 << 14, 1 << 15, size=c)
                shift = rng.integers(32, 63, size=c)
            got = _rescale(x.astype(storage), out_t, multiplier, shift, izp=izp, ozp=ozp, scale32=scale32,
                           double_round=double_round, per_channel=per_channel)
            olo, ohi = RANGES[out_t]
            want = [min(max(oracle.rounded_scale(int(v) - izp, int(multiplier[i % c]), int(shift[i % c]),
                                                 double_round) + ozp, olo), ohi)
                    for i, v in enumerate(x.ravel())]
            assert got.dtype == np.dtype(out_t) and got.ravel().tolist() == want
            shapes_ok += 1
    assert shapes_ok


def test_rescale_rounding_ties_single_and_double():
    x = np.array([1, -1, 3, -3, 5, -5], np.int32)
    # multiplier 2^30, shift 31: x/2 rounded half up: 0.5 -> 1, -0.5 -> 0, 1.5 -> 2, -1.5 -> -1
    assert _rescale(x, "int32", 1 << 30, 31).tolist() == [1, 0, 2, -1, 3, -2]
    # shift 33: x/8. single: 0.125->0, 0.375->0, 0.625->1; double adds +-2^30/2^33 = 1/8 away from zero
    assert _rescale(x, "int32", 1 << 30, 33).tolist() == [0, 0, 0, 0, 1, -1]
    assert _rescale(x, "int32", 1 << 30, 33, double_round=True).tolist() == [0, 0, 1, 0, 1, -1]
    # exact tie at shift 34 (x/16 for x = 8 -> 0.5): double round 0.5+1/16 -> 1; -0.5-1/16 -> -1
    t = np.array([8, -8, 24, -24], np.int32)
    assert _rescale(t, "int32", 1 << 30, 34).tolist() == [1, 0, 2, -1]
    assert _rescale(t, "int32", 1 << 30, 34, double_round=True).tolist() == [1, -1, 2, -2]


def test_rescale_shift_limits():
    # shift 2: value must lie in [-1, 1)
    assert _rescale(np.array([-1, 0], np.int32), "int32", 3, 2).tolist() == [(-3 + 2) >> 2, 0]
    with pytest.raises(UnpredictableError, match=r"RESCALE.*value >= \(-1<<\(shift-2\)\)"):
        _rescale(np.array([1], np.int32), "int32", 3, 2)
    # shift 62: full int32 range
    m = 2 ** 31 - 1
    got = _rescale(np.array([-(2 ** 31), 2 ** 31 - 1], np.int32), "int32", m, 62)
    assert got.tolist() == [(-(2 ** 31) * m + 2 ** 61) >> 62, ((2 ** 31 - 1) * m + 2 ** 61) >> 62]
    for bad in (1, 63):
        with pytest.raises(UnpredictableError, match=r"2 <= shift && shift <= 62"):
            _rescale(np.array([0], np.int32), "int32", 1, bad)


def test_rescale_per_channel_vs_per_tensor(rng):
    x = rng.integers(-128, 128, size=(4, 3)).astype(np.int8)
    m, s = np.array([1 << 30, 3 << 29, 1 << 29]), np.array([31, 33, 35])
    per_ch = _rescale(x, "int8", m, s, per_channel=True)
    for c in range(3):
        assert np.array_equal(per_ch[:, c], _rescale(x[:, c].copy(), "int8", m[c], s[c]))
    same = _rescale(x, "int8", np.full(3, m[1]), np.full(3, s[1]), per_channel=True)
    assert np.array_equal(same, _rescale(x, "int8", m[1], s[1]))


def test_rescale_unsigned_hand_values():
    # uint8 128 with zp 128 is 0: scaled by 1 -> 0 - 128 as int8? output_zp -128 -> -128
    x = np.array([0, 128, 255], np.uint8)
    assert _rescale(x, "int8", 1 << 30, 30, izp=128, ozp=0).tolist() == [-128, 0, 127]
    # int8 -> uint8 with output_zp 128
    assert _rescale(np.array([-128, 0, 127], np.int8), "uint8", 1 << 30, 30, ozp=128).tolist() == [0, 128, 255]
    # uint16 with zero point 32768 -> int16
    u = np.array([0, 32768, 65535], np.uint16)
    assert _rescale(u, "int16", 1 << 30, 30, izp=32768).tolist() == [-32768, 0, 32767]
    # int16 -> uint16 with zero point 32768, and clipping
    assert _rescale(np.array([-32768, 0, 32767], np.int16), "uint16", 1 << 30, 30, ozp=32768).tolist() == \
        [0, 32768, 65535]


def test_rescale_scale16_int48():
    x = np.array([(1 << 46), -(1 << 46), 12345], np.int64)
    got = _rescale(x, "int32", 1 << 14, 14 + 20, scale32=False)
    assert got.tolist() == [1 << 26, -(1 << 26), 0]
    with pytest.raises(UnpredictableError, match=r"minimum<int32_t>"):
        _rescale(np.array([1 << 46], np.int64), "int32", 1 << 14, 14, scale32=False)


@pytest.mark.parametrize("kwargs,x,out_t,match", [
    (dict(izp=5), np.zeros(2, np.uint16), "int16", r"in_t == uint16_t && \(input_zp != 0 && input_zp != 32768\)"),
    (dict(ozp=1), np.zeros(2, np.int16), "uint16", r"out_t == uint16_t && \(output_zp != 0"),
    (dict(izp=1), np.zeros(2, np.int16), "int8", r"in_t != int8_t && in_t != uint8_t && in_t != uint16_t"),
    (dict(ozp=1), np.zeros(2, np.int8), "int32", r"out_t != int8_t"),
    (dict(scale32=True), np.zeros(2, np.int64), "int8", r"scale32 && in_t == int48_t"),
    (dict(scale32=False, double_round=True), np.zeros(2, np.int8), "int8", r"!scale32 && double_round"),
])
def test_rescale_error_if(kwargs, x, out_t, match):
    with pytest.raises(InvalidGraphError, match=match):
        _rescale(x, out_t, 1 << 14, 20, **kwargs)


def test_rescale_uint16_zero_point_32768_is_valid():
    assert _rescale(np.array([32768], np.uint16), "int16", 1 << 30, 30, izp=32768).tolist() == [0]


def test_rescale_bad_calls():
    with pytest.raises(InvalidGraphError, match=r"multiplier shape != \[NC\]"):
        _rescale(np.zeros((2, 3), np.int8), "int8", [1 << 30] * 2, [30] * 2, per_channel=True)
    with pytest.raises(InvalidGraphError, match=r"no supported data type mode of RESCALE"):
        _rescale(np.zeros(2, np.uint8), "uint8", 1 << 30, 30)
    with pytest.raises(UsageError, match=r"out_t"):
        run("RESCALE", [np.zeros(2, np.int8)], dict(input_zp=0, output_zp=0, multiplier=np.array([1]),
                                                   shift=np.array([30]), scale32=True, double_round=False,
                                                   per_channel=False))
    with pytest.raises(InvalidGraphError, match=r"multiplier has values .* int16_t"):
        _rescale(np.zeros(2, np.int8), "int8", 1 << 20, 30, scale32=False)
    with pytest.raises(InvalidGraphError, match=r"shift has values .* uint6_t"):
        _rescale(np.zeros(2, np.int8), "int8", 1, 64)


# ---------------------------------------------------------------- CAST

CAST_MODES = [("bool", "int8"), ("bool", "int16"), ("bool", "int32"), ("int8", "bool"), ("int8", "int16"),
              ("int8", "int32"), ("int16", "bool"), ("int16", "int8"), ("int16", "int32"), ("int32", "bool"),
              ("int32", "int8"), ("int32", "int16")]


@pytest.mark.parametrize("in_t,out_t", CAST_MODES)
def test_cast_integer_and_bool_modes(rng, in_t, out_t):
    if in_t == "bool":
        x = np.array([True, False, True])
    else:
        info = np.iinfo(in_t)
        x = rng.integers(info.min, info.max + 1, size=50, dtype=np.int64).astype(in_t)
        x[:3] = [info.min, 0, info.max]
    got, = run("CAST", [x], {"out_t": out_t})
    assert got.dtype == np.dtype(out_t)
    if out_t == "bool":
        want = [int(v) != 0 for v in x]
    elif in_t == "bool":
        want = [1 if v else 0 for v in x]
    else:
        bits = np.dtype(out_t).itemsize * 8
        # sign_extend when widening; truncate to the low bits (two's complement) when narrowing
        want = [((int(v) & ((1 << bits) - 1)) ^ (1 << (bits - 1))) - (1 << (bits - 1)) for v in x]
    assert got.tolist() == want


def test_cast_float_rounds_and_clips():
    x = np.array([0.5, 1.5, -0.5, -2.5, 2.6, 1e10, -1e10, np.nan], np.float32)
    assert run("CAST", [x], {"out_t": "int8"})[0].tolist() == [0, 2, 0, -2, 3, 127, -128, 0]
    assert run("CAST", [np.array([3, -7], np.int16)], {"out_t": "float32"})[0].tolist() == [3.0, -7.0]


def test_cast_unsupported_mode():
    with pytest.raises(InvalidGraphError, match=r"no supported data type mode of CAST"):
        run("CAST", [np.zeros(2, np.int8)], {"out_t": "uint8"})
    with pytest.raises(UsageError, match=r"out_t"):
        run("CAST", [np.zeros(2, np.int8)], {})
