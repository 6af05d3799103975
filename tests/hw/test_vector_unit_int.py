"""The vector unit's integer, comparison and logic operations (shifts, CLZ, INTDIV, GREATER,
GREATER_EQUAL, EQUAL, SELECT, AND/OR/XOR, ABS, DOT) on the Amaranth RTL, the numpy model and
Verilator, against qsim.tosa's TOSA 0.30 reference: seeded random operands and the corners
(both rails, shifts 0 / 31 / the type's limit, CLZ of 0, INTDIV by +-1 and of the minimum).

Lanes hold sign-extended values; the vector DMA's writer keeps the output type's low bytes,
so a result is compared after the same narrowing (`narrow`)."""
import numpy as np
import pytest

from qsim.errors import UnpredictableError, UsageError
from qsim.hw.vector_isa import INT32_MAX, INT32_MIN, VectorInstr, VectorOp
from qsim.tosa import run
from qsim.npu.vector.model import VectorUnitModel

from .vector_bench import LANES, Job, run_and_compare, simulate, verilator_equals_model

TYPES = {8: np.int8, 16: np.int16, 32: np.int32}


def tosa(op, inputs, attrs=None):
    return run(op, inputs, attrs or {}, backend="reference")[0]


def narrow(values, dtype):
    return np.asarray(values, np.int64).astype(dtype)


def _shift_operands(rng, bits, n):
    info = np.iinfo(TYPES[bits])
    x = rng.integers(info.min, int(info.max) + 1, (n, LANES))
    s = rng.integers(0, bits, (n, LANES))
    x[:3] = [[info.min, info.max, -1, 1][c % 4] for c in range(LANES)]
    s[0], s[1], s[2] = 0, bits - 1, [0, bits - 1, 1, bits - 2][:LANES]
    return x, s


def test_shifts_every_type_at_amounts_0_and_the_limit(rng):
    jobs, wants = [], []
    for bits, dtype in TYPES.items():
        x, s = _shift_operands(rng, bits, 12)
        xs, ss = x.astype(dtype), s.astype(dtype)
        for op, name, attrs in ((VectorOp.ASR, "ARITHMETIC_RIGHT_SHIFT", {"round": False}),
                                (VectorOp.ASR_ROUND, "ARITHMETIC_RIGHT_SHIFT", {"round": True}),
                                (VectorOp.LSL, "LOGICAL_LEFT_SHIFT", {}),
                                (VectorOp.LSR, "LOGICAL_RIGHT_SHIFT", {})):
            jobs.append(Job(VectorInstr(op, 12, mul_shift=bits if op is VectorOp.LSR else 0), x, s))
            wants.append((tosa(name, [xs, ss], attrs), dtype))
    got = run_and_compare(jobs)
    for g, (want, dtype) in zip(got, wants):
        np.testing.assert_array_equal(narrow(g.outputs, dtype), want)
    # hand-worked, int32 lane 0 of row 0 (-2^31): >> 31 is -1; rounded adds bit 30 (0): -1;
    # -1 << 31 is -2^31; logical -1 >> 31 is 1 (row 1, amount 31)
    int32 = [g.outputs for g in got[8:12]]
    assert int32[0][1, 0] == -1 and int32[1][1, 0] == -1 and int32[3][1, 2] == 1
    # rounding: 7 >> 1 rounds 3.5 up to 4, -7 >> 1 gives -4 + 1 = -3 (the bit shifted out is 1)
    ties = run_and_compare([Job(VectorInstr(VectorOp.ASR_ROUND, 1), np.array([[7, -7, 5, -5]]),
                                np.array([[1, 1, 1, 1]]))])
    assert ties[0].outputs.tolist() == [[4, -3, 3, -2]]


def test_clz_every_bit_position_and_zero(rng):
    values = np.array([0, -1, 1, INT32_MIN, INT32_MAX, *[1 << k for k in range(31)],
                       *rng.integers(INT32_MIN, INT32_MAX, 28)], np.int64).reshape(-1, LANES)
    got = run_and_compare([Job(VectorInstr(VectorOp.CLZ, len(values)), values)])
    np.testing.assert_array_equal(got[0].outputs, tosa("CLZ", [values.astype(np.int32)]))
    assert got[0].outputs[0].tolist() == [32, 0, 31, 0] and got[0].outputs[1, 0] == 1


def test_intdiv_truncates_toward_zero_by_plus_minus_one_and_both_rails(rng):
    a = rng.integers(INT32_MIN, INT32_MAX, (10, LANES))
    b = rng.integers(-1000, 1000, (10, LANES))
    b[b == 0] = 7
    a[0], b[0] = [7, -7, 7, -7], [2, 2, -2, -2]                       # 3, -3, -3, 3
    a[1], b[1] = [INT32_MIN, INT32_MAX, INT32_MIN, INT32_MAX], [1, 1, INT32_MAX, -1]
    a[2], b[2] = [0, 5, -5, INT32_MAX], [INT32_MIN, INT32_MIN, INT32_MAX, INT32_MIN]
    got = run_and_compare([Job(VectorInstr(VectorOp.INTDIV, 10), a, b)])
    np.testing.assert_array_equal(got[0].outputs, tosa("INTDIV", [a.astype(np.int32), b.astype(np.int32)]))
    assert got[0].outputs[0].tolist() == [3, -3, -3, 3]
    assert got[0].outputs[1].tolist() == [INT32_MIN, INT32_MAX, -1, -INT32_MAX]


def test_intdiv_by_zero_and_minimum_by_minus_one_hardware_values_and_model_errors():
    """TOSA REQUIREs b != 0 and a quotient within int32: the model raises like the reference;
    the RTL gives -1 for b = 0 and the wrapped 2^31 = minimum for minimum / -1 (hw/vector.py)."""
    a = np.array([[5, -5, 0, INT32_MIN]])
    b = np.array([[0, 0, 0, -1]])
    job = Job(VectorInstr(VectorOp.INTDIV, 1), a, b)
    assert simulate([job])[0].outputs.tolist() == [[-1, -1, -1, INT32_MIN]]
    for a_, b_, text in ((a[:, :1], b[:, :1], "value2 != 0"), (a[:, 3:], b[:, 3:], "minimum<int32_t> / -1")):
        with pytest.raises(UnpredictableError, match=text):
            VectorUnitModel(1).run(VectorInstr(VectorOp.INTDIV, 1), a_, b_)


def test_shift_amount_outside_0_31_model_raises_and_rtl_uses_the_low_5_bits():
    a, b = np.array([[-64, 64, 3, 256]]), np.array([[33, 32, -1, 40]])
    got = simulate([Job(VectorInstr(VectorOp.ASR, 1), a, b)])[0].outputs
    assert got.tolist() == [[-32, 64, 0, 1]]         # amounts 1, 0, 31, 8
    for op in (VectorOp.ASR, VectorOp.LSL, VectorOp.LSR):
        with pytest.raises(UnpredictableError, match="value2 <= 31"):
            VectorUnitModel(LANES).run(VectorInstr(op, 1, mul_shift=32), a, b)
    with pytest.raises(UsageError, match="element width"):
        VectorUnitModel(LANES).run(VectorInstr(VectorOp.LSR, 1, mul_shift=12), a, b * 0)


def test_comparisons_select_bitwise_and_abs(rng):
    a = rng.integers(INT32_MIN, INT32_MAX, (9, LANES))
    b = a.copy()
    b[::2] = rng.integers(INT32_MIN, INT32_MAX, (5, LANES))           # equal rows 1, 3, 5, 7
    a[0], b[0] = [INT32_MIN, INT32_MAX, 0, -1], [INT32_MAX, INT32_MIN, 0, 0]
    i32 = [a.astype(np.int32), b.astype(np.int32)]
    cond = rng.integers(0, 2, (9, LANES))
    cond[0] = [0, 1, 1, 0]
    abs_in = a.copy()
    abs_in[0, 0] = INT32_MIN + 1
    jobs = [Job(VectorInstr(op, 9), a, b) for op in (VectorOp.GREATER, VectorOp.GREATER_EQUAL, VectorOp.EQUAL,
                                                    VectorOp.AND, VectorOp.OR, VectorOp.XOR)]
    jobs += [Job(VectorInstr(VectorOp.SELECT, 9), cond, b), Job(VectorInstr(VectorOp.ABS, 9), abs_in)]
    got = run_and_compare(jobs)
    for g, name in zip(got, ("GREATER", "GREATER_EQUAL", "EQUAL", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR")):
        np.testing.assert_array_equal(narrow(g.outputs, i32[0].dtype if "BITWISE" in name else bool),
                                      tosa(name, i32))
    assert got[0].outputs[0].tolist() == [0, 1, 0, 0] and got[1].outputs[0].tolist() == [0, 1, 1, 0]
    np.testing.assert_array_equal(got[6].outputs, np.where(cond != 0, b, 0))
    np.testing.assert_array_equal(got[7].outputs, tosa("ABS", [abs_in.astype(np.int32)]))
    # |minimum| does not fit: the reference and the model raise, the RTL wraps to minimum
    assert simulate([Job(VectorInstr(VectorOp.ABS, 1), np.array([[INT32_MIN, -1, 0, 1]]))])[0].outputs.tolist() \
        == [[INT32_MIN, 1, 0, 1]]
    with pytest.raises(UnpredictableError):
        VectorUnitModel(LANES).run(VectorInstr(VectorOp.ABS, 1), np.array([[INT32_MIN, -1, 0, 1]]))


def test_dot_groups_wrap_at_32_bits(rng):
    a = rng.integers(-128, 128, (12, LANES))
    b = rng.integers(0, 1 << 22, (12, LANES))
    last = np.zeros(12, bool)
    last[[3, 4, 11]] = True                           # groups of 4, 1 and 7 beats
    a[5:12, 0], b[5:12, 0] = INT32_MAX, INT32_MAX      # 7 x (2^31 - 1)^2: wraps
    got = run_and_compare([Job(VectorInstr(VectorOp.DOT, 12), a, b, last)])
    sums = [(a[s:e].astype(object) * b[s:e]).sum(axis=0) for s, e in ((0, 4), (4, 5), (5, 12))]
    want = narrow(np.array([[int(v) & 0xFFFFFFFF for v in row] for row in sums]).astype(np.uint32), np.int32)
    np.testing.assert_array_equal(got[0].outputs, want)


def test_verilator_equals_model_on_the_integer_operations(rng):
    """The Verilator build with random gaps and back-pressure on one job per new operation."""
    from qsim.npu.vector.verilator import VerilatedVectorUnit

    rtl, model = VerilatedVectorUnit(LANES, max_pool_count=64), VectorUnitModel(LANES, max_pool_count=64)
    x, s = _shift_operands(rng, 16, 20)
    a = rng.integers(INT32_MIN, INT32_MAX, (20, LANES))
    d = rng.integers(-300, 300, (20, LANES))
    d[d == 0] = -1
    last = np.arange(20) % 5 == 4
    jobs = [Job(VectorInstr(op, 20, mul_shift=16), x, s)
            for op in (VectorOp.ASR, VectorOp.ASR_ROUND, VectorOp.LSL, VectorOp.LSR)]
    jobs += [Job(VectorInstr(op, 20), a, d) for op in (VectorOp.INTDIV, VectorOp.GREATER, VectorOp.GREATER_EQUAL,
                                                       VectorOp.EQUAL, VectorOp.SELECT, VectorOp.AND,
                                                       VectorOp.OR, VectorOp.XOR)]
    jobs += [Job(VectorInstr(VectorOp.CLZ, 20), a), Job(VectorInstr(VectorOp.ABS, 20), a),
             Job(VectorInstr(VectorOp.DOT, 20), x, d, last)]
    verilator_equals_model(rtl, model, jobs, rng, 60)
    corner = rtl.run(VectorInstr(VectorOp.INTDIV, 1), np.array([[5, INT32_MIN, 0, 9]]), np.array([[0, -1, 0, 3]]))
    assert corner.outputs.tolist() == [[-1, INT32_MIN, -1, 3]]
