"""Vector unit RTL (Amaranth simulator) against the TOSA 0.30 numpy reference and the numpy model.

Every simulated job is checked twice: its values against qsim.tosa's reference run of
the same operator, and its values and cycles (accept, output and idle cycles)
against qsim.npu.vector.model (tests/hw/vector_bench.py does the latter).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from amaranth.back import verilog

from qsim.errors import UnpredictableError, UnsupportedError, UsageError
from qsim.hw.vector import VectorUnit, reciprocal_rom
from qsim.hw.vector_isa import INT32_MAX, INT32_MIN, VectorInstr, VectorOp
from qsim.npu.vector.model import VectorUnitModel, stream_timing
from qsim.npu.vector.stream import pool_result, pool_stream, reduction_result, reduction_stream
from qsim.tosa import run
from qsim.tosa.arith import reciprocal_scale

from .vector_bench import LANES, Job, random_pattern, run_and_compare, verilator_equals_model

RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
         "int32": (INT32_MIN, INT32_MAX)}
RESCALE_MODES = [("int8", "int8"), ("int8", "int16"), ("int8", "int32"), ("int8", "uint8"),
                 ("int16", "int8"), ("int16", "int16"), ("int16", "int32"), ("int16", "uint8"),
                 ("int16", "uint16"), ("int32", "int8"), ("int32", "int16"), ("int32", "int32"),
                 ("uint8", "int8"), ("uint8", "int16"), ("uint16", "int16")]


def tosa(op, inputs, attrs):
    return run(op, inputs, attrs, backend="reference")[0].astype(np.int64)


# ---------------------------------------------------------------- RESCALE

def _zp(rng, t):
    if t in ("int8", "uint8"):
        lo, hi = RANGE[t]
        return int(rng.choice([lo, hi, int(rng.integers(lo, hi + 1))]))
    return int(rng.choice([0, 32768])) if t == "uint16" else 0


def _rescale_instr(n, izp, ozp, mult, shift, double_round, out_t):
    lo, hi = RANGE[out_t]
    return VectorInstr(VectorOp.PASS, n, zp_a=izp, scale_o=True, mult_o=tuple(int(m) for m in mult),
                       shift_o=tuple(int(s) for s in shift), dr_o=double_round, zp_o=ozp,
                       clamp_lo=lo, clamp_hi=hi)


def _rescale_expected(x, in_t, out_t, izp, ozp, mult, shift, scale32, double_round, per_channel):
    nc = LANES if per_channel else 1
    return tosa("RESCALE", [x.astype(in_t)], dict(
        input_zp=izp, output_zp=ozp, multiplier=np.asarray(mult[:nc], np.int32 if scale32 else np.int16),
        shift=np.asarray(shift[:nc], np.int8), scale32=scale32, double_round=double_round,
        per_channel=per_channel, out_t=out_t))


def _rescale_job(rng, in_t, out_t, scale32, double_round, per_channel, n):
    izp, ozp = _zp(rng, in_t), _zp(rng, out_t)
    nc = LANES if per_channel else 1
    if scale32:
        mult = rng.choice([0, 1, 1 << 30, 2**31 - 1, int(rng.integers(1 << 30, 2**31))], nc)
        shift = rng.choice([2, 3, 31, 32, 33, 62, int(rng.integers(2, 63))], nc)
    else:
        mult = rng.choice([0, 1, 1 << 14, 2**15 - 1, int(rng.integers(1, 2**15))], nc)
        shift = rng.choice([2, 14, 62, int(rng.integers(2, 63))], nc)
    mult, shift = np.resize(mult, LANES), np.resize(shift, LANES)
    in_lo, in_hi = RANGE[in_t]
    x = np.zeros((n, LANES), np.int64)
    for c in range(LANES):
        # scale32: REQUIRE |value| < 2^(shift-2); scale16: keep the result within int32
        bound = 1 << int(shift[c] - 2 if scale32 else shift[c] + 15)
        lo, hi = max(in_lo, izp - bound), min(in_hi, izp + bound - 1)
        x[:, c] = rng.integers(lo, hi + 1, n)
        x[:2, c] = lo, hi
    want = _rescale_expected(x, in_t, out_t, izp, ozp, mult, shift, scale32, double_round, per_channel)
    return Job(_rescale_instr(n, izp, ozp, mult, shift, double_round, out_t), x), want


def test_rescale_all_modes_scale32_scale16_per_channel(rng):
    jobs, wants = [], []
    for in_t, out_t in RESCALE_MODES:
        for scale32 in (True, False):
            double_round = scale32 and bool(rng.integers(2))
            job, want = _rescale_job(rng, in_t, out_t, scale32, double_round, bool(rng.integers(2)), 10)
            jobs.append(job)
            wants.append(want)
    for got, want in zip(run_and_compare(jobs), wants):
        np.testing.assert_array_equal(got.outputs, want)


def test_rescale_rounding_ties_double_round_and_shift_limits():
    # value * multiplier exactly half an output step: ties round toward +inf; double rounding
    # (shift > 31) moves ties away from zero by +-2^30 before the shift (spec 1.9.2).
    values = np.array([[1, -1, 3, -3], [5, -5, 7, -7], [0, -2, 2, 1]], np.int64)
    cases = [(8, 4, False), (1 << 30, 33, False), (1 << 30, 33, True), (1 << 30, 32, True),
             (1 << 30, 31, True), (1, 2, False), (2**31 - 1, 62, True), (2**31 - 1, 62, False)]
    jobs, wants = [], []
    for mult, shift, dr in cases:
        mult_l, shift_l = [mult] * LANES, [shift] * LANES
        x = np.clip(values, -(1 << (shift - 2)), (1 << (shift - 2)) - 1)   # REQUIRE |v| < 2^(shift-2)
        jobs.append(Job(_rescale_instr(3, 0, 0, mult_l, shift_l, dr, "int32"), x))
        wants.append(_rescale_expected(x, "int32", "int32", 0, 0, mult_l, shift_l, True, dr, False))
    got = run_and_compare(jobs)
    for g, want in zip(got, wants):
        np.testing.assert_array_equal(g.outputs, want)
    # hand-worked: (v * 8 + 8) >> 4 for v = 1, -1, 3, -3 is 1, 0, 2, -1
    assert got[0].outputs[0].tolist() == [1, 0, 2, -1]
    # shift 33, multiplier 2^30 (scale 1/8): 3/8 -> 0 single, (3*2^30 + 2^32 + 2^30) >> 33 = 1 double;
    # -3/8: single (-3*2^30 + 2^32) >> 33 = 0, double (... - 2^30) >> 33 = 0; 5/8 -> 1, -5/8 -> -1 double
    assert got[1].outputs[:2].tolist() == [[0, 0, 0, 0], [1, -1, 1, -1]]
    assert got[2].outputs[:2].tolist() == [[0, 0, 1, 0], [1, -1, 1, -1]]


def test_rescale_zero_points_at_extremes_and_both_rails():
    # int8 -> int8 with input_zp -128 / output_zp 127 and the reverse; uint8 / uint16 zero points
    x8 = np.array([[-128, 127, 0, -1], [127, -128, 1, 64]], np.int64)
    specs = [("int8", "int8", -128, 127), ("int8", "int8", 127, -128), ("uint8", "int8", 255, -128),
             ("int8", "uint8", -128, 255), ("uint16", "int16", 32768, 0), ("int16", "uint16", 0, 32768)]
    jobs, wants = [], []
    for in_t, out_t, izp, ozp in specs:
        lo, hi = RANGE[in_t]
        x = np.clip(x8 * (256 if in_t.endswith("16") else 1) + (lo if lo == 0 else 0), lo, hi)
        mult, shift = [3 << 29] * LANES, [30] * LANES             # scale 1.5: both rails reached
        jobs.append(Job(_rescale_instr(2, izp, ozp, mult, shift, True, out_t), x))
        wants.append(_rescale_expected(x, in_t, out_t, izp, ozp, mult, shift, True, True, False))
    got = run_and_compare(jobs)
    for g, want in zip(got, wants):
        np.testing.assert_array_equal(g.outputs, want)
    assert got[0].outputs[0].tolist() == [127, 127, 127, 127]          # (v + 128) * 1.5 + 127 saturates
    assert got[1].outputs[0].tolist() == [-128, -128, -128, -128]


# ---------------------------------------------------------------- CLAMP

def test_clamp_int8_int16_bounds_at_extremes(rng):
    jobs, wants = [], []
    for dtype, (lo, hi) in ((np.int8, RANGE["int8"]), (np.int16, RANGE["int16"])):
        x = rng.integers(lo, hi + 1, (12, LANES))
        x[0] = [lo, hi, lo + 1, hi - 1]
        for mn, mx in ((lo, hi), (lo, lo), (hi, hi), (-5, 10), (0, 0)):
            jobs.append(Job(VectorInstr(VectorOp.PASS, 12, clamp_lo=mn, clamp_hi=mx), x))
            wants.append(tosa("CLAMP", [x.astype(dtype)], dict(min_val=mn, max_val=mx)))
    got = run_and_compare(jobs)
    for g, want in zip(got, wants):
        np.testing.assert_array_equal(g.outputs, want)
    assert got[3].outputs[0].tolist() == [-5, 10, -5, 10]


# ---------------------------------------------------------------- timing and back-pressure

def test_back_pressure_and_gaps_keep_values_and_match_model_cycles(rng):
    job, want = _rescale_job(rng, "int8", "int8", True, True, True, 40)
    job.source_valid = random_pattern(rng, 120, 0.6)
    job.sink_ready = random_pattern(rng, 120, 0.5)
    got, = run_and_compare([job])
    np.testing.assert_array_equal(got.outputs, want)
    assert got.cycles > 40 + 7          # the patterns did stall it


def test_stall_free_timing_hand_worked():
    # 3 beats accepted in cycles 1..3, results 5 cycles later, idle from cycle 9
    accept, outputs, end = stream_timing(3, np.ones(3, bool), False)
    assert (accept.tolist(), outputs.tolist(), end) == ([1, 2, 3], [6, 7, 8], 9)
    # the per-cycle stepper agrees with the closed form, also for a non-emitting last beat
    for emits in (np.ones(5, bool), np.array([0, 1, 0, 0, 0], bool), np.zeros(5, bool)):
        closed = stream_timing(5, emits, False)
        stepped = stream_timing(5, emits, False, [True], [True])
        assert [x.tolist() if hasattr(x, "tolist") else x for x in closed] == \
               [x.tolist() if hasattr(x, "tolist") else x for x in stepped]
    assert stream_timing(4, np.zeros(4, bool), True)[2] == 5       # LOAD_TABLE: n + 1
    assert stream_timing(0, np.zeros(0, bool), False)[2] == 1


# ---------------------------------------------------------------- model error paths

def test_model_rejects_bad_operands_and_unpredictable_results():
    model = VectorUnitModel(LANES)
    with pytest.raises(UsageError, match=r"operand a has shape \[3, 2\], expected \[3, 4\]"):
        model.run(VectorInstr(VectorOp.PASS, 3), np.zeros((3, 2)))
    with pytest.raises(UsageError, match=r"`last` flags have shape \[2\], expected \[3\]"):
        model.run(VectorInstr(VectorOp.REDUCE_SUM, 3), np.zeros((3, LANES)), last=[0, 1])
    big = np.full((1, LANES), INT32_MAX)
    with pytest.raises(UnpredictableError, match="vector unit ADD"):
        model.run(VectorInstr(VectorOp.ADD, 1), big, big)
    with pytest.raises(UnpredictableError, match=r"output scale: REQUIRE\(value >= "):  # scale32 REQUIRE
        model.run(VectorInstr(VectorOp.PASS, 1, scale_o=True, dr_o=True, mult_o=(1,), shift_o=(4,)), big)
    small = VectorUnitModel(LANES, max_pool_count=4)
    with pytest.raises(UnsupportedError, match="window of 5 elements.*counts up to 4"):
        small.run(VectorInstr(VectorOp.AVG, 5), np.zeros((5, LANES)), last=[0, 0, 0, 0, 1])


def test_instruction_fields_are_range_checked():
    with pytest.raises(ValueError, match=r"lanes \(0\) and max_pool_count \(16\) must be >= 1"):
        VectorUnit(0, max_pool_count=16)
    with pytest.raises(ValueError, match=r"VectorInstr.zp_a = 70000 outside \[-65536, 65535\]"):
        VectorInstr(VectorOp.PASS, 1, zp_a=70000).encode(LANES)
    with pytest.raises(ValueError, match="mult_o has 3 values for 4 lanes"):
        VectorInstr(VectorOp.PASS, 1, mult_o=(1, 2, 3)).encode(LANES)


# ---------------------------------------------------------------- Verilog

def test_reciprocal_rom_equals_tosa_reciprocal_scale():
    rom = reciprocal_rom(300)
    counts = np.arange(1, 301)
    mult, shift = reciprocal_scale(counts)
    assert [e & (2**31 - 1) for e in rom] == mult.tolist()
    assert [e >> 31 for e in rom] == shift.tolist()


def test_converts_to_verilog():
    text = verilog.convert(VectorUnit(2, max_pool_count=16), name="qsim_vector")
    assert "module qsim_vector" in text
    for port in ("cfg__valid", "cfg__ready", "i__payload", "o__valid", "o__ready", "busy"):
        assert port in text


# ---------------------------------------------------------------- ADD / SUB / MUL / MAXIMUM / MINIMUM

def _rescale_attrs(izp, ozp, mult, shift, double_round, out_t):
    return dict(input_zp=izp, output_zp=ozp, multiplier=np.array([mult], np.int32),
                shift=np.array([shift], np.int8), scale32=True, double_round=double_round,
                per_channel=False, out_t=out_t)


def test_quantized_residual_add_and_sub_fused_with_their_rescales(rng):
    """int8 a, b -> RESCALE to int32 (each its zero point and scale) -> ADD/SUB -> RESCALE to
    int8: one instruction, equal to the four TOSA operators in sequence."""
    jobs, wants = [], []
    for op, tosa_op in ((VectorOp.ADD, "ADD"), (VectorOp.SUB, "SUB")) * 3:
        n = 16
        a, b = rng.integers(-128, 128, (n, LANES)), rng.integers(-128, 128, (n, LANES))
        a[0], b[0] = [-128, 127, -128, 127], [-128, 127, 127, -128]
        zpa, zpb, zpo = _zp(rng, "int8"), _zp(rng, "int8"), _zp(rng, "int8")
        sa, sb = int(rng.integers(12, 21)), int(rng.integers(12, 21))
        ma, mb, mo = (int(rng.integers(1 << 30, 2**31)) for _ in range(3))
        so = min(62, 62 - min(sa, sb) + int(rng.integers(-1, 3)))
        dr = bool(rng.integers(2))
        ra = tosa("RESCALE", [a.astype(np.int8)], _rescale_attrs(zpa, 0, ma, sa, dr, "int32"))
        rb = tosa("RESCALE", [b.astype(np.int8)], _rescale_attrs(zpb, 0, mb, sb, dr, "int32"))
        v = tosa(tosa_op, [ra.astype(np.int32), rb.astype(np.int32)], {})
        wants.append(tosa("RESCALE", [v.astype(np.int32)], _rescale_attrs(0, zpo, mo, so, dr, "int8")))
        jobs.append(Job(VectorInstr(op, n, zp_a=zpa, scale_a=True, mult_a=ma, shift_a=sa, dr_a=dr,
                                    zp_b=zpb, scale_b=True, mult_b=mb, shift_b=sb, dr_b=dr,
                                    scale_o=True, mult_o=(mo,), shift_o=(so,), dr_o=dr, zp_o=zpo,
                                    clamp_lo=-128, clamp_hi=127), a, b))
    got = run_and_compare(jobs)
    for g, want in zip(got, wants):
        np.testing.assert_array_equal(g.outputs, want)
    outs = np.concatenate([g.outputs for g in got])
    assert (outs == -128).any() and (outs == 127).any() and ((outs > -128) & (outs < 127)).any()


def test_int32_add_sub_maximum_minimum_at_the_limits(rng):
    a = rng.integers(-2**30, 2**30, (12, LANES))
    b = rng.integers(-2**30, 2**30, (12, LANES))
    a[0], b[0] = [INT32_MIN, INT32_MAX, INT32_MAX - 5, 0], [0, 0, 5, INT32_MIN]
    a[1], b[1] = [-1, INT32_MIN + 1, 7, INT32_MAX], [INT32_MIN + 1, -1, -7, INT32_MIN]   # ADD in range
    jobs, wants = [], []
    for op, name in ((VectorOp.ADD, "ADD"), (VectorOp.MAXIMUM, "MAXIMUM"), (VectorOp.MINIMUM, "MINIMUM")):
        jobs.append(Job(VectorInstr(op, 12), a, b))
        wants.append(tosa(name, [a.astype(np.int32), b.astype(np.int32)], {}))
    sub_b = b.copy()
    sub_b[0], sub_b[1] = [0, 0, -5, -INT32_MAX], [INT32_MAX, -1, 7, 0]             # SUB in range
    jobs.append(Job(VectorInstr(VectorOp.SUB, 12), a, sub_b))
    wants.append(tosa("SUB", [a.astype(np.int32), sub_b.astype(np.int32)], {}))
    got = run_and_compare(jobs)
    for g, want in zip(got, wants):
        np.testing.assert_array_equal(g.outputs, want)
    assert got[0].outputs[0].tolist() == [INT32_MIN, INT32_MAX, INT32_MAX, INT32_MIN]


def _mul_operands(rng, n, shift):
    """int32 operands whose rounded product fits int32 (the REQUIRE of MUL with shift > 0)."""
    bits_a = rng.integers(0, 32, (n, LANES))
    bits_b = np.minimum(31, np.maximum(0, 29 + shift - bits_a)) if shift else 31 - bits_a
    a = rng.integers(-(1 << bits_a), 1 << bits_a)
    b = rng.integers(-(1 << bits_b), 1 << bits_b)
    return np.clip(a, INT32_MIN, INT32_MAX), np.clip(b, INT32_MIN, INT32_MAX)


def test_mul_int8_int16_and_int32_with_rounding_shifts(rng):
    jobs, wants = [], []
    for dtype in (np.int8, np.int16):
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max + 1, (10, LANES))
        b = rng.integers(info.min, info.max + 1, (10, LANES))
        a[0], b[0] = [info.min, info.min, info.max, -1], [info.min, info.max, info.max, info.min]
        jobs.append(Job(VectorInstr(VectorOp.MUL, 10), a, b))
        wants.append(tosa("MUL", [a.astype(dtype), b.astype(dtype)], {"shift": 0}))
    for shift in (0, 1, 15, 31, 32, 62, 63):
        a, b = _mul_operands(rng, 10, shift)
        if shift == 0:
            a[0], b[0] = [INT32_MIN, INT32_MAX, INT32_MIN, 65536], [-1, INT32_MAX, INT32_MIN, 65536]  # low 32 bits
        if shift == 63:
            a[0], b[0] = [INT32_MIN, INT32_MIN, INT32_MAX, INT32_MIN], [INT32_MIN, INT32_MAX, INT32_MAX, 1]
        jobs.append(Job(VectorInstr(VectorOp.MUL, 10, mul_shift=shift), a, b))
        wants.append(tosa("MUL", [a.astype(np.int32), b.astype(np.int32)], {"shift": shift}))
    got = run_and_compare(jobs)
    for g, want in zip(got, wants):
        np.testing.assert_array_equal(g.outputs, want)
    # (-2^31)^2 = 2^62; + 2^62 >> 63 = 1 (needs the 65th bit); (-2^31)(2^31-1) + 2^62 >> 63 = 0
    assert got[-1].outputs[0].tolist() == [1, 0, 0, 0]
    assert got[2].outputs[0].tolist() == [INT32_MIN, 1, 0, 0]   # low 32 bits of the products


def test_quantized_mul_fused_with_its_rescales(rng):
    n = 12
    a, b = rng.integers(-128, 128, (n, LANES)), rng.integers(-128, 128, (n, LANES))
    zpa, zpb, zpo = -128, 127, -3
    one = (1 << 30, 30)                                   # scale 1.0: value - zp as int32
    ra = tosa("RESCALE", [a.astype(np.int8)], _rescale_attrs(zpa, 0, *one, False, "int32"))
    rb = tosa("RESCALE", [b.astype(np.int8)], _rescale_attrs(zpb, 0, *one, False, "int32"))
    v = tosa("MUL", [ra.astype(np.int32), rb.astype(np.int32)], {"shift": 0})
    mo, so = 1_518_500_250, 38
    want = tosa("RESCALE", [v.astype(np.int32)], _rescale_attrs(0, zpo, mo, so, True, "int8"))
    job = Job(VectorInstr(VectorOp.MUL, n, zp_a=zpa, scale_a=True, mult_a=one[0], shift_a=one[1],
                          zp_b=zpb, scale_b=True, mult_b=one[0], shift_b=one[1], scale_o=True,
                          mult_o=(mo,), shift_o=(so,), dr_o=True, zp_o=zpo, clamp_lo=-128, clamp_hi=127),
              a, b)
    got, = run_and_compare([job])
    np.testing.assert_array_equal(got.outputs, want)


# ---------------------------------------------------------------- TABLE

def _load_table(table, rng):
    """LOAD_TABLE: lane 0 carries the entries; the other lanes carry noise the unit ignores."""
    beats = rng.integers(-1000, 1000, (len(table), LANES))
    beats[:, 0] = table
    return Job(VectorInstr(VectorOp.LOAD_TABLE, len(table)), beats)


def test_table_int8_every_input_value(rng):
    table = rng.integers(-128, 128, 256)
    table[[0, 255, 128]] = [127, -128, 0]
    x = rng.permutation(np.arange(-128, 128)).reshape(-1, LANES)
    got = run_and_compare([_load_table(table, rng), Job(VectorInstr(VectorOp.TABLE8, len(x)), x)])
    assert got[0].outputs.shape == (0, LANES) and got[0].cycles == 257      # n + 1, no results
    want = tosa("TABLE", [x.astype(np.int8)], {"table": table.astype(np.int8)})
    np.testing.assert_array_equal(got[1].outputs, want)
    assert got[1].outputs[x == -128].tolist() == [127] and got[1].outputs[x == 127].tolist() == [-128]


def test_table_int16_interpolation_and_fused_rescale_to_int16(rng):
    from qsim.tosa.ops.activation import sigmoid_table
    walk = np.clip(np.cumsum(rng.integers(-20000, 20000, 513)), -32768, 32767)   # |slope| < 2^15
    x = rng.integers(-32768, 32768, (24, LANES))
    x[0] = [-32768, 32767, 0, -1]
    x[1] = [-32768 + 127, 32767 - 127, 128, 127]         # fraction 127 / 0 at segment edges
    jobs, wants = [], []
    for table in (walk, sigmoid_table().astype(np.int64)):
        jobs += [_load_table(table, rng), Job(VectorInstr(VectorOp.TABLE16, len(x)), x)]
        wants.append(tosa("TABLE", [x.astype(np.int16)], {"table": table.astype(np.int16)}))
    # int16 -> int16 table (spec 2.5.17): TABLE, then RESCALE scale 1<<14, shift 21, fused; with
    # scale16 (apply_scale_32 would REQUIRE |value| < 2^19 of the 23-bit lookup results)
    jobs.append(Job(VectorInstr(VectorOp.TABLE16, len(x), scale_o=True, mult_o=(1 << 14,), shift_o=(21,),
                                clamp_lo=-32768, clamp_hi=32767), x))
    wants.append(tosa("RESCALE", [wants[-1].astype(np.int32)],
                      dict(_rescale_attrs(0, 0, 1 << 14, 21, False, "int16"), scale32=False,
                           multiplier=np.array([1 << 14], np.int16))))
    got = run_and_compare(jobs)
    for g, want in zip((got[1], got[3], got[4]), wants):
        np.testing.assert_array_equal(g.outputs, want)
    # x = 32767: index 511, fraction 127: (t[511] << 7) + (t[512] - t[511]) * 127, t[512] = 32767
    # (32768 clipped); x = -32768: index 0, fraction 0: t[0] << 7 = 0
    t511 = int(sigmoid_table()[511])
    assert got[3].outputs[0, :2].tolist() == [0, (t511 << 7) + (32767 - t511) * 127]


# ---------------------------------------------------------------- pooling and reductions

def _pool_job(op, x, kernel, stride, pad, izp=0, ozp=0, dtype=np.int8):
    beats, last = pool_stream(x, kernel, stride, pad, LANES)
    info = np.iinfo(dtype)
    return Job(VectorInstr(op, len(beats), zp_a=izp, zp_o=ozp, clamp_lo=int(info.min),
                           clamp_hi=int(info.max)), beats, last=last)


# (kernel, stride, pad) on 7 x 7 inputs: border windows lose 1..5 taps to padding
POOLS = [((3, 3), (2, 2), (1, 1, 1, 1)), ((3, 3), (1, 1), (1, 1, 1, 1)), ((2, 2), (2, 2), (0, 1, 0, 1)),
         ((1, 2), (1, 2), (0, 0, 0, 1)), ((2, 3), (1, 2), (1, 0, 2, 0))]


def test_max_pool2d_int8_int16_padding_and_partial_channel_tiles(rng):
    jobs, wants = [], []
    for dtype in (np.int8, np.int16):
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max + 1, (1, 7, 7, 6))        # 6 channels: 2 tiles of 4 lanes
        x[0, :2, :2, :] = info.min                                      # an all-minimum window
        x[0, 4, 5, 0] = info.max
        for kernel, stride, pad in POOLS:
            attrs = dict(kernel=kernel, stride=stride, pad=pad)
            want = tosa("MAX_POOL2D", [x.astype(dtype)], attrs)
            jobs.append(_pool_job(VectorOp.REDUCE_MAX, x, kernel, stride, pad, dtype=dtype))
            wants.append(want)
    got = run_and_compare(jobs)
    for g, want, (kernel, stride, pad) in zip(got, wants, POOLS * 2):
        np.testing.assert_array_equal(pool_result(g.outputs, x.shape, kernel, stride, pad), want)
    assert got[2].outputs[0, 0] == -128           # 2x2 window of the all -128 corner


def test_avg_pool2d_int8_zero_points_counts_and_ties(rng):
    jobs, wants, shapes = [], [], []
    x = rng.integers(-128, 128, (2, 7, 7, 6))
    for (kernel, stride, pad), (izp, ozp) in zip(POOLS, [(-128, 127), (127, -128), (0, 0), (5, -7), (-3, 3)]):
        jobs.append(_pool_job(VectorOp.AVG, x, kernel, stride, pad, izp, ozp))
        wants.append(tosa("AVG_POOL2D", [x.astype(np.int8)], dict(kernel=kernel, stride=stride, pad=pad,
                                                                   input_zp=izp, output_zp=ozp)))
        shapes.append((x.shape, kernel, stride, pad))
    # ties: pairs summing to odd values (x.5 averages, both signs), kernel 1x2
    ties = np.array([[[[1, -1, 3, -3], [0, 0, 0, -4], [-128, 127, -128, 127], [127, 126, -127, -128]]]])
    jobs.append(_pool_job(VectorOp.AVG, ties, (1, 2), (1, 2), (0, 0, 0, 0)))
    wants.append(tosa("AVG_POOL2D", [ties.astype(np.int8)], dict(kernel=(1, 2), stride=(1, 2),
                                                                 pad=(0, 0, 0, 0), input_zp=0, output_zp=0)))
    shapes.append((ties.shape, (1, 2), (1, 2), (0, 0, 0, 0)))
    got = run_and_compare(jobs)
    for g, want, (shape, kernel, stride, pad) in zip(got, wants, shapes):
        np.testing.assert_array_equal(pool_result(g.outputs, shape, kernel, stride, pad), want)
    # count 2: reciprocal_scale = (2^30 + 1, 31). 1/2: (2^30 + 1 + 2^30) >> 31 = 1; -1/2:
    # (-(2^30 + 1) + 2^30) >> 31 = -1; 3/2: (3(2^30 + 1) + 2^30) >> 31 = 2; -7/2: -4
    assert got[-1].outputs[0].tolist() == [1, -1, 2, -4]


def test_avg_pool2d_int16_global_window_at_the_reciprocal_table_limit(rng):
    # 8 x 8 = 64 elements: the last entry of the bench's 64-entry reciprocal ROM
    x = rng.integers(-32768, 32768, (2, 8, 8, 4))
    x[1] = 32767
    kernel, stride, pad = (8, 8), (1, 1), (0, 0, 0, 0)
    want = tosa("AVG_POOL2D", [x.astype(np.int16)], dict(kernel=kernel, stride=stride, pad=pad,
                                                          input_zp=0, output_zp=0))
    got, = run_and_compare([_pool_job(VectorOp.AVG, x, kernel, stride, pad, dtype=np.int16)])
    np.testing.assert_array_equal(pool_result(got.outputs, x.shape, kernel, stride, pad), want)
    assert got.outputs[1].tolist() == [32767] * LANES


def _reduce_job(op, x, axis):
    beats, last = reduction_stream(x, axis, LANES)
    return Job(VectorInstr(op, len(beats)), beats, last=last)


def test_reduce_sum_max_min_argmax_along_every_axis(rng):
    cases = []
    x8 = rng.integers(-128, 128, (3, 5, 6))
    x8[1, :, 2] = -128                                     # an all-minimum slice: ARGMAX 0
    x8[2, 1, :] = 7                                        # ties: the first index wins
    x16 = rng.integers(-32768, 32768, (3, 5, 6))
    x32 = rng.integers(-2**26, 2**26, (3, 5, 6))
    for axis in (0, 1, 2):
        cases += [(VectorOp.REDUCE_SUM, "REDUCE_SUM", x32, np.int32, axis),
                  (VectorOp.REDUCE_MAX, "REDUCE_MAX", x8, np.int8, axis),
                  (VectorOp.REDUCE_MIN, "REDUCE_MIN", x16, np.int16, axis),
                  (VectorOp.ARGMAX, "ARGMAX", x8, np.int8, axis)]
    cases.append((VectorOp.ARGMAX, "ARGMAX", x16, np.int16, 1))
    cases.append((VectorOp.REDUCE_MAX, "REDUCE_MAX", x32, np.int32, 2))
    got = run_and_compare([_reduce_job(op, x, axis) for op, _, x, _, axis in cases])
    for g, (op, name, x, dtype, axis) in zip(got, cases):
        want = tosa(name, [x.astype(dtype)], {"axis": axis})
        np.testing.assert_array_equal(reduction_result(g.outputs, x.shape, axis, op is not VectorOp.ARGMAX), want)
    assert reduction_result(got[7].outputs, x8.shape, 1, False)[1, 2] == 0       # all -128
    assert reduction_result(got[11].outputs, x8.shape, 2, False)[2, 1] == 0      # all 7: first wins


def test_long_reduction_sum_near_int32_limit_with_stalls(rng):
    # 600 terms of up to 3.5e6: partial sums up to 2.1e9, inside int32 (apply_add REQUIRE)
    x = rng.integers(3_000_000, 3_500_000, (600, LANES))
    x[:, 1] *= -1
    x[:, 2] = [INT32_MAX // 600] * 600
    beats, last = reduction_stream(x, 0, LANES)
    job = Job(VectorInstr(VectorOp.REDUCE_SUM, len(beats)), beats, last=last,
              source_valid=random_pattern(rng, 800, 0.8), sink_ready=random_pattern(rng, 800, 0.3))
    got, = run_and_compare([job])
    want = tosa("REDUCE_SUM", [x.astype(np.int32)], {"axis": 0})
    np.testing.assert_array_equal(got.outputs, want)
    assert got.outputs[0, 2] == (INT32_MAX // 600) * 600


def test_readme_documents_the_instruction_layout():
    import re
    from pathlib import Path

    import qsim.hw
    from qsim.hw.vector_isa import INSTR_BITS, INSTR_FIELDS, LANE_BITS, LANE_FIELDS
    text = (Path(qsim.hw.__file__).parent / "README.md").read_text()
    section = text[text.index("### Instruction (`hw/vector_isa.py`"):text.index("### Timing")]
    rows = {name: (int(hi), int(lo), int(width)) for name, hi, lo, width in
            re.findall(r"\| (?:lane c: )?`(\w+)` \| \[(\d+):(\d+)\] \| (\d+)", section)}
    for spec in (INSTR_FIELDS, LANE_FIELDS):
        pos = 0
        for name, width, _ in spec:
            if name in rows:
                assert rows[name] == (pos + width - 1, pos, width), name
            pos += width
    assert len(rows) == len(INSTR_FIELDS) + len(LANE_FIELDS) - 5          # zp_b .. dr_b: one row
    assert f"{INSTR_BITS} + {LANE_BITS}C" in text and f"at bit {INSTR_BITS} + {LANE_BITS}c" in text


@settings(derandomize=True, deadline=None, max_examples=150)
@given(mode=st.sampled_from(RESCALE_MODES), scale32=st.booleans(), double_round=st.booleans(),
       per_channel=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_model_rescale_equals_tosa_reference(mode, scale32, double_round, per_channel, seed):
    """The model alone (fast) over many more RESCALE cases than the RTL runs."""
    job, want = _rescale_job(np.random.default_rng(seed), *mode, scale32, scale32 and double_round,
                             per_channel, 32)
    got = VectorUnitModel(LANES).run(job.instr, job.a)
    np.testing.assert_array_equal(got.outputs, want)


def test_verilator_build_equals_model_on_every_operation_group(rng):
    """The exported Verilog under Verilator (cached build) on one job per operation group,
    with stalls: the same values and cycles as the model (and so as the Amaranth runs)."""
    from qsim.npu.vector.verilator import VerilatedVectorUnit
    from qsim.tosa.ops.activation import sigmoid_table

    rtl, model = VerilatedVectorUnit(LANES, max_pool_count=64), VectorUnitModel(LANES, max_pool_count=64)
    x8 = rng.integers(-128, 128, (1, 7, 7, 6))
    pool_beats, pool_last = pool_stream(x8, (3, 3), (2, 2), (1, 1, 1, 1), LANES)
    x16 = rng.integers(-32768, 32768, (40, LANES))
    table = sigmoid_table().astype(np.int64)
    jobs = [_rescale_job(rng, "int32", "int8", True, True, True, 50)[0],
            Job(VectorInstr(VectorOp.MUL, 40, mul_shift=63), *_mul_operands(rng, 40, 63)),
            _load_table(table, rng), Job(VectorInstr(VectorOp.TABLE16, 40), x16),
            Job(VectorInstr(VectorOp.AVG, len(pool_beats), zp_a=-128, zp_o=127, clamp_lo=-128, clamp_hi=127),
                pool_beats, last=pool_last),
            _reduce_job(VectorOp.ARGMAX, x16.reshape(8, 5, 4), 1)]
    verilator_equals_model(rtl, model, jobs, rng, 300)
    want_table = tosa("TABLE", [x16.astype(np.int16)], {"table": table.astype(np.int16)})
    np.testing.assert_array_equal(rtl.run(jobs[3].instr, x16).outputs, want_table)


@settings(derandomize=True, deadline=None, max_examples=50)
@given(kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)), stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       out_hw=st.tuples(st.integers(1, 4), st.integers(1, 4)), pad_seed=st.integers(0, 2**16),
       channels=st.integers(1, 9), avg=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_model_pooling_stream_equals_tosa_reference(kernel, stride, out_hw, pad_seed, channels, avg, seed):
    """Many more pooling geometries than the RTL runs: the stream order (vector_stream) and the
    model together equal MAX_POOL2D / AVG_POOL2D; the input size follows from the output size."""
    rng = np.random.default_rng(seed)
    pad = [int(v) % k for v, k in zip(np.random.default_rng(pad_seed).integers(0, 4, 4),
                                      (kernel[0], kernel[0], kernel[1], kernel[1]))]
    h = (out_hw[0] - 1) * stride[0] + kernel[0] - pad[0] - pad[1]
    w = (out_hw[1] - 1) * stride[1] + kernel[1] - pad[2] - pad[3]
    if h < 1 or w < 1:
        return
    x = rng.integers(-128, 128, (2, h, w, channels))
    attrs = dict(kernel=kernel, stride=stride, pad=tuple(pad))
    izp, ozp = (int(v) for v in rng.integers(-128, 128, 2)) if avg else (0, 0)
    job = _pool_job(VectorOp.AVG if avg else VectorOp.REDUCE_MAX, x, kernel, stride, pad, izp, ozp)
    got = VectorUnitModel(LANES).run(job.instr, job.a, last=job.last)
    want = tosa("AVG_POOL2D", [x.astype(np.int8)], dict(attrs, input_zp=izp, output_zp=ozp)) if avg \
        else tosa("MAX_POOL2D", [x.astype(np.int8)], attrs)
    np.testing.assert_array_equal(pool_result(got.outputs, x.shape, kernel, stride, pad), want)


@pytest.mark.parametrize("lanes", [1, 3])
def test_other_lane_counts(rng, lanes):
    """Lane count is a parameter: a per-channel RESCALE and an ARGMAX on 1 and 3 lanes."""
    x = rng.integers(-128, 128, (9, lanes))
    mult = rng.integers(1 << 30, 2**31, lanes)
    shift = rng.integers(30, 40, lanes)
    rescale = VectorInstr(VectorOp.PASS, 9, zp_a=-128, scale_o=True, mult_o=tuple(int(m) for m in mult),
                          shift_o=tuple(int(s) for s in shift), dr_o=True, zp_o=127, clamp_lo=-128, clamp_hi=127)
    beats, last = reduction_stream(x.T.reshape(lanes, 3, 3), 2, lanes)
    jobs = [Job(rescale, x), Job(VectorInstr(VectorOp.ARGMAX, len(beats)), beats, last=last)]
    got = run_and_compare(jobs, lanes=lanes)
    want = tosa("RESCALE", [x.astype(np.int8)], dict(
        input_zp=-128, output_zp=127, multiplier=mult.astype(np.int32), shift=shift.astype(np.int8),
        scale32=True, double_round=True, per_channel=True, out_t="int8"))
    np.testing.assert_array_equal(got[0].outputs, want)
    np.testing.assert_array_equal(reduction_result(got[1].outputs, (lanes, 3, 3), 2, False),
                                  tosa("ARGMAX", [x.T.reshape(lanes, 3, 3).astype(np.int8)], {"axis": 2}))
