"""Elementwise binary/unary/ternary and comparison operators, per element against Python
integer semantics of the spec pseudocode, with broadcasting and the REQUIRE/ERROR_IF paths."""
import numpy as np
import pytest

from qsim.errors import InvalidGraphError, UnpredictableError
from qsim.tosa import run
from qsim.tosa.ops.activation import sigmoid_table, tanh_table

INT_TYPES = [np.int8, np.int16, np.int32]


def _wrap(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _full_range(rng, dtype, shape):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, size=shape, dtype=np.int64)
    x.flat[0], x.flat[-1] = info.min, info.max
    return x.astype(dtype)


def _elementwise(got, a, b, fn):
    a, b = np.broadcast_arrays(a, b)
    want = [fn(int(x), int(y)) for x, y in zip(a.ravel(), b.ravel())]
    assert got.shape == a.shape
    assert got.ravel().tolist() == [int(w) if not isinstance(w, bool) else w for w in want]


@pytest.mark.parametrize("op,fn", [
    ("ADD", lambda a, b: a + b), ("SUB", lambda a, b: a - b),
    ("MAXIMUM", max), ("MINIMUM", min),
])
def test_int32_arithmetic(rng, op, fn):
    a = rng.integers(-(1 << 30), 1 << 30, size=(3, 1, 4)).astype(np.int32)
    b = rng.integers(-(1 << 30), 1 << 30, size=(1, 5, 4)).astype(np.int32)
    got, = run(op, [a, b], {})
    assert got.dtype == np.int32
    _elementwise(got, a, b, fn)


@pytest.mark.parametrize("op,a,b", [("ADD", 2 ** 31 - 1, 1), ("ADD", -(2 ** 31), -1), ("SUB", -(2 ** 31), 1),
                                    ("SUB", 2 ** 31 - 1, -1)])
def test_add_sub_overflow_is_unpredictable(op, a, b):
    with pytest.raises(UnpredictableError, match=rf"{op}.*apply_{op.lower()}"):
        run(op, [np.array([a], np.int32), np.array([b], np.int32)], {})


@pytest.mark.parametrize("dtype", INT_TYPES)
@pytest.mark.parametrize("op,fn", [("BITWISE_AND", lambda a, b: a & b), ("BITWISE_OR", lambda a, b: a | b),
                                   ("BITWISE_XOR", lambda a, b: a ^ b)])
def test_bitwise(rng, dtype, op, fn):
    a, b = _full_range(rng, dtype, (4, 6)), _full_range(rng, dtype, (4, 1))
    got, = run(op, [a, b], {})
    assert got.dtype == dtype
    _elementwise(got, a, b, fn)


@pytest.mark.parametrize("dtype", INT_TYPES)
@pytest.mark.parametrize("rnd", [False, True])
def test_arithmetic_right_shift(rng, dtype, rnd):
    bits = np.dtype(dtype).itemsize * 8
    a = _full_range(rng, dtype, (50,))
    b = rng.integers(0, bits, size=(50,)).astype(dtype)

    def fn(v, s):
        r = v >> s
        if rnd and s > 0 and (v >> (s - 1)) & 1:
            r += 1
        return min(max(r, -(1 << (bits - 1))), (1 << (bits - 1)) - 1)
    got, = run("ARITHMETIC_RIGHT_SHIFT", [a, b], {"round": rnd})
    _elementwise(got, a, b, fn)


def test_arithmetic_right_shift_round_hand_values():
    a = np.array([5, -5, 6, -6, 7, -7], np.int8)
    got, = run("ARITHMETIC_RIGHT_SHIFT", [a, np.full(6, 1, np.int8)], {"round": True})
    # 2.5 -> 3, -2.5 -> -2 (half up), 3 -> 3, -3 -> -3, 3.5 -> 4, -3.5 -> -3
    assert got.tolist() == [3, -2, 3, -3, 4, -3]


@pytest.mark.parametrize("dtype,bad", [(np.int8, 8), (np.int16, 16), (np.int32, 32), (np.int32, -1)])
def test_arithmetic_right_shift_requires_shift_range(dtype, bad):
    with pytest.raises(UnpredictableError, match=r"REQUIRE\(0 <= value2"):
        run("ARITHMETIC_RIGHT_SHIFT", [np.ones(2, dtype), np.array([1, bad], dtype)], {"round": False})


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_logical_shifts(rng, dtype):
    bits = np.dtype(dtype).itemsize * 8
    a = _full_range(rng, dtype, (60,))
    b = rng.integers(0, 32, size=(60,)).astype(dtype if bits > 8 else np.int8)
    got, = run("LOGICAL_LEFT_SHIFT", [a, b], {})
    _elementwise(got, a, b, lambda v, s: _wrap(v << s, bits))
    got, = run("LOGICAL_RIGHT_SHIFT", [a, b], {})
    _elementwise(got, a, b, lambda v, s: _wrap((v & ((1 << bits) - 1)) >> s, bits))
    assert run("LOGICAL_RIGHT_SHIFT", [np.array([-1], dtype), np.array([1], dtype)], {})[0].tolist() == \
        [(1 << (bits - 1)) - 1]
    with pytest.raises(UnpredictableError, match=r"REQUIRE\(0 <= value2 && value2 <= 31\)"):
        run("LOGICAL_LEFT_SHIFT", [a[:1], np.array([-1], dtype)], {})


def test_intdiv_truncates_toward_zero(rng):
    a = _full_range(rng, np.int32, (200,))
    b = rng.integers(-1000, 1000, size=(200,)).astype(np.int32)
    b[b == 0] = 7
    b[:4] = [1, -1, 2 ** 31 - 1, -(2 ** 31)]
    a[1] = 5
    got, = run("INTDIV", [a, b], {})
    _elementwise(got, a, b, _c_div)
    assert run("INTDIV", [np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -2, -2], np.int32)], {})[0].tolist() \
        == [3, -3, -3, 3]


def test_intdiv_requires():
    with pytest.raises(UnpredictableError, match=r"REQUIRE\(value2 != 0\).*\[1\]"):
        run("INTDIV", [np.array([1, 2], np.int32), np.array([1, 0], np.int32)], {})
    with pytest.raises(UnpredictableError, match=r"maximum<in_out_t>"):
        run("INTDIV", [np.array([-(2 ** 31)], np.int32), np.array([-1], np.int32)], {})


@pytest.mark.parametrize("op,fn", [("LOGICAL_AND", lambda a, b: a and b), ("LOGICAL_OR", lambda a, b: a or b),
                                   ("LOGICAL_XOR", lambda a, b: a != b)])
def test_logical(op, fn):
    a = np.array([[False, True]])
    b = np.array([[False], [True]])
    got, = run(op, [a, b], {})
    assert got.dtype == np.bool_
    _elementwise(got, a, b, lambda x, y: bool(fn(bool(x), bool(y))))


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_mul_without_shift(rng, dtype):
    a, b = _full_range(rng, dtype, (40,)), _full_range(rng, dtype, (40,))
    got, = run("MUL", [a, b], {"shift": 0})
    assert got.dtype == np.int32
    _elementwise(got, a, b, lambda x, y: _wrap(x * y, 32))     # low 32 bits for int32


def test_mul_min_times_min_int8():
    got, = run("MUL", [np.array([-128], np.int8), np.array([-128], np.int8)], {"shift": 0})
    assert got.tolist() == [16384]


@pytest.mark.parametrize("shift", [1, 2, 15, 31, 62, 63])
def test_mul_int32_shift_rounds(rng, shift):
    a = rng.integers(-(1 << 31), 1 << 31, size=(100,)).astype(np.int32)
    b = rng.integers(-(1 << 31), 1 << 31, size=(100,)).astype(np.int32)
    if shift < 31:
        b = (b >> (31 - shift)).astype(np.int32)        # keeps the product inside int32 after the shift
    got, = run("MUL", [a, b], {"shift": shift})
    _elementwise(got, a, b, lambda x, y: (x * y + (1 << (shift - 1))) >> shift)


def test_mul_shift_requires_and_errors():
    with pytest.raises(UnpredictableError, match=r"REQUIRE\(product >= minimum<int32_t>"):
        run("MUL", [np.array([2 ** 31 - 1], np.int32), np.array([4], np.int32)], {"shift": 1})
    with pytest.raises(InvalidGraphError, match=r"in_t != int32_t && shift > 0"):
        run("MUL", [np.ones(1, np.int8), np.ones(1, np.int8)], {"shift": 1})
    # extremes: (-2^31)^2 = 2^62; shift 62: (2^62 + 2^61) >> 62 = 1; shift 63: (2^62 + 2^62) >> 63 = 1
    m = np.array([-(2 ** 31)], np.int32)
    assert run("MUL", [m, m], {"shift": 62})[0].tolist() == [1]
    assert run("MUL", [m, m], {"shift": 63})[0].tolist() == [1]
    assert run("MUL", [m, m + 1], {"shift": 63})[0].tolist() == [0]   # (2^62 - 2^31 + 2^62) >> 63
    # rounding tie: 3 * 1 >> 1 = 1.5 -> 2; -3 -> -1.5 -> -1 (add half, floor)
    assert run("MUL", [np.array([3, -3], np.int32), np.array([1, 1], np.int32)], {"shift": 1})[0].tolist() == [2, -1]


def test_broadcast_error_if():
    with pytest.raises(InvalidGraphError, match=r"rank\(out_shape\) != rank\(in_shape\)"):
        run("ADD", [np.zeros((2, 3), np.int32), np.zeros((3,), np.int32)], {})
    with pytest.raises(InvalidGraphError, match=r"in_shape\[i\] != 1"):
        run("ADD", [np.zeros((2, 3), np.int32), np.zeros((2, 2), np.int32)], {})


# ---------------------------------------------------------------- TABLE

def test_table_int8_indexes_value_plus_128(rng):
    table = rng.integers(-128, 128, size=256).astype(np.int8)
    x = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    got, = run("TABLE", [x], {"table": table})
    assert got.dtype == np.int8 and np.array_equal(got.ravel(), table)


def test_table_int16_interpolates_at_index_extremes():
    table = np.zeros(513, np.int16)
    table[0], table[1] = -32768, -32768 + 1000
    table[511], table[512] = 32767 - 1000, 32767
    x = np.array([-32768, -32768 + 64, -32768 + 127, 32767 - 127, 32767, 0], np.int16)
    got, = run("TABLE", [x], {"table": table})
    assert got.dtype == np.int32
    # index = (x + 32768) >> 7, fraction = x & 127; result = (base << 7) + slope * fraction
    assert got.tolist() == [-32768 * 128, -32768 * 128 + 1000 * 64, -32768 * 128 + 1000 * 127,
                            (32767 - 1000) * 128, (32767 - 1000) * 128 + 1000 * 127, 0]


def test_table_int16_random_matches_formula(rng):
    table = np.cumsum(rng.integers(-100, 100, size=513)).astype(np.int16)
    x = _full_range(rng, np.int16, (300,))
    got, = run("TABLE", [x], {"table": table})
    t = table.astype(int).tolist()
    want = [(t[(v + 32768) >> 7] << 7) + (t[((v + 32768) >> 7) + 1] - t[(v + 32768) >> 7]) * (v & 127)
            for v in x.astype(int).tolist()]
    assert got.tolist() == want


def test_table_requires():
    with pytest.raises(UnpredictableError, match=r"length\(table\) == TABLE_SIZE"):
        run("TABLE", [np.zeros(3, np.int8)], {"table": np.zeros(255, np.int8)})
    steep = np.zeros(513, np.int16)
    steep[1] = 32767
    steep[0] = -32768
    with pytest.raises(UnpredictableError, match=r"slope"):
        run("TABLE", [np.array([-32768], np.int16)], {"table": steep})
    with pytest.raises(InvalidGraphError, match=r"int8_t \[-128, 127\]"):
        run("TABLE", [np.zeros(3, np.int8)], {"table": np.full(256, 300)})


def test_spec_tables_are_monotone_and_centered():
    s, t = sigmoid_table(), tanh_table()
    assert s.shape == t.shape == (513,)
    assert s[256] == 16384 and t[256] == 0                      # sigmoid(0) = 0.5, tanh(0) = 0
    assert np.all(np.diff(s.astype(int)) >= 0) and np.all(np.diff(t.astype(int)) >= 0)
    assert s[0] == 0 and s[512] == 32767 and t[512] == 32767   # clipped to int16


# ---------------------------------------------------------------- unary

def test_abs_and_negate(rng):
    a = _full_range(rng, np.int32, (50,))
    a[0] = -(2 ** 31) + 1
    got, = run("ABS", [a], {})
    assert got.tolist() == [abs(int(v)) for v in a]
    with pytest.raises(UnpredictableError, match=r"ABS"):
        run("ABS", [np.array([-(2 ** 31)], np.int32)], {})
    got, = run("NEGATE", [a], {"input1_zp": 0, "output_zp": 0})
    assert got.tolist() == [-int(v) for v in a]
    with pytest.raises(UnpredictableError, match=r"NEGATE"):
        run("NEGATE", [np.array([-(2 ** 31)], np.int32)], {"input1_zp": 0, "output_zp": 0})


@pytest.mark.parametrize("izp,ozp", [(0, 0), (-128, 127), (127, -128), (10, -20)])
def test_negate_int8_zero_points(izp, ozp):
    x = np.arange(-128, 128, dtype=np.int8)
    got, = run("NEGATE", [x], {"input1_zp": izp, "output_zp": ozp})
    assert got.tolist() == [min(max(-(int(v) - izp) + ozp, -128), 127) for v in x]


def test_negate_int16_and_zero_point_error():
    x = np.array([-32768, 0, 32767], np.int16)
    assert run("NEGATE", [x], {"input1_zp": 0, "output_zp": 0})[0].tolist() == [32767, 0, -32767]
    with pytest.raises(InvalidGraphError, match=r"in_out_t != int8_t && input1_zp != 0"):
        run("NEGATE", [x], {"input1_zp": 1, "output_zp": 0})


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_bitwise_not(rng, dtype):
    a = _full_range(rng, dtype, (30,))
    assert run("BITWISE_NOT", [a], {})[0].tolist() == [~int(v) for v in a]


def test_clz_hand_values():
    x = np.array([0, 1, 2, 3, 0x7FFFFFFF, -1, -(2 ** 31), 1 << 20], np.int32)
    assert run("CLZ", [x], {})[0].tolist() == [32, 31, 30, 30, 1, 0, 0, 11]


def test_logical_not():
    assert run("LOGICAL_NOT", [np.array([True, False])], {})[0].tolist() == [False, True]


# ---------------------------------------------------------------- comparison, SELECT

@pytest.mark.parametrize("op,fn", [("EQUAL", lambda a, b: a == b), ("GREATER", lambda a, b: a > b),
                                   ("GREATER_EQUAL", lambda a, b: a >= b)])
def test_comparisons(rng, op, fn):
    a = rng.integers(-3, 3, size=(4, 1)).astype(np.int32)
    b = rng.integers(-3, 3, size=(1, 5)).astype(np.int32)
    got, = run(op, [a, b], {})
    assert got.dtype == np.bool_
    _elementwise(got, a, b, fn)


def test_comparisons_with_nan_are_false():
    a = np.array([np.nan, 1.0], np.float32)
    b = np.array([np.nan, np.nan], np.float32)
    for op in ("EQUAL", "GREATER", "GREATER_EQUAL"):
        assert run(op, [a, b], {})[0].tolist() == [False, False]


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int16, np.int32])
def test_select_broadcasts(rng, dtype):
    cond = rng.integers(0, 2, size=(3, 1)).astype(bool)
    a = rng.integers(0, 2, size=(1, 4)).astype(dtype)
    b = rng.integers(0, 2, size=(3, 4)).astype(dtype)
    got, = run("SELECT", [cond, a, b], {})
    c, x, y = np.broadcast_arrays(cond, a, b)
    assert got.dtype == dtype
    assert got.tolist() == [[xx if cc else yy for cc, xx, yy in zip(*r)] for r in zip(c.tolist(), x.tolist(), y.tolist())]


def test_select_requires_bool_condition():
    with pytest.raises(InvalidGraphError, match=r"no supported data type mode of SELECT"):
        run("SELECT", [np.zeros(2, np.int8), np.zeros(2, np.int8), np.zeros(2, np.int8)], {})


def test_clamp(rng):
    x = _full_range(rng, np.int16, (40,))
    got, = run("CLAMP", [x], {"min_val": -300, "max_val": 32767})
    assert got.dtype == np.int16 and got.tolist() == [min(max(int(v), -300), 32767) for v in x]
    x8 = np.arange(-128, 128, dtype=np.int8)
    assert run("CLAMP", [x8], {"min_val": -128, "max_val": -128})[0].tolist() == [-128] * 256
    with pytest.raises(InvalidGraphError, match=r"ERROR_IF\(max_val < min_val\)"):
        run("CLAMP", [x8], {"min_val": 1, "max_val": 0})
    with pytest.raises(InvalidGraphError, match=r"min_val=-129 is outside the range of its type int8_t"):
        run("CLAMP", [x8], {"min_val": -129, "max_val": 0})
