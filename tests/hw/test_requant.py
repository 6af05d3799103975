"""Requantization unit under the Amaranth simulator vs qsim.tosa.arith.apply_scale_32 (the oracle)."""
import numpy as np
from amaranth.sim import Simulator

from qsim.hw.params import REQUANT_LATENCY_CYCLES
from qsim.hw.requant import RequantUnit
from qsim.tosa.arith import apply_scale_32

LANES = 4


def _simulate(acc, bias, mult, shift, *, double_round, out_zp=0, lo=-128, hi=127, stall_every=0):
    """Streams rows of LANES values (one per cycle); returns the output rows in order."""
    dut = RequantUnit(LANES)
    out = []

    async def tb(ctx):
        ctx.set(dut.double_round, int(double_round))
        ctx.set(dut.out_zp, out_zp)
        ctx.set(dut.clamp_lo, lo)
        ctx.set(dut.clamp_hi, hi)
        i, cycle = 0, 0
        while len(out) < len(acc):
            ready = 0 if stall_every and cycle % stall_every == 0 else 1
            ctx.set(dut.o.ready, ready)
            if i < len(acc):
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload, [int(v) for v in acc[i]])
                ctx.set(dut.bias, [int(v) for v in bias[i]])
                ctx.set(dut.multiplier, [int(v) for v in mult[i]])
                ctx.set(dut.shift, [int(v) for v in shift[i]])
            else:
                ctx.set(dut.i.valid, 0)
            accepted = i < len(acc) and ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid) and ready:
                out.append([ctx.get(dut.o.payload[c]) for c in range(LANES)])
            i += int(accepted)
            cycle += 1
            await ctx.tick()
            assert cycle < 10 * len(acc) + 20

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return np.array(out, np.int64)


def _expected(acc, bias, mult, shift, double_round, out_zp=0, lo=-128, hi=127):
    value = (acc.astype(np.int64) + bias).astype(np.uint32).astype(np.int32)
    scaled = apply_scale_32(value, mult, shift, double_round).astype(np.int64)
    return np.clip(np.clip(scaled + out_zp, -128, 127), lo, hi)


def _random_case(rng, rows):
    shift = rng.integers(2, 63, (rows, LANES))
    mult = rng.integers(0, 2**31, (rows, LANES))
    limit = np.left_shift(1, np.minimum(shift - 2, 31))           # REQUIRE |v| < 2^(shift-2)
    value = (rng.random((rows, LANES)) * 2 * limit - limit).astype(np.int64)
    value = np.clip(value, -limit, limit - 1)
    bias = rng.integers(-1000, 1000, (rows, LANES))
    acc = np.clip(value - bias, -2**31, 2**31 - 1)
    return acc, acc * 0 + bias, mult, shift


def test_random_values_all_shifts_match_apply_scale_32(rng):
    acc, bias, mult, shift = _random_case(rng, 120)
    assert set(range(2, 63)) - set(np.unique(shift)) == set() or len(np.unique(shift)) > 50
    for dr in (False, True):
        got = _simulate(acc, bias, mult, shift, double_round=dr, out_zp=-3)
        np.testing.assert_array_equal(got, _expected(acc, bias, mult, shift, dr, out_zp=-3))


def test_rounding_ties_and_double_round_edges():
    # value * multiplier lands exactly on .5 of the output LSB: round half up (toward +inf);
    # with double_round and shift > 31 the extra +-2^30 moves ties away from zero (spec 1.9.2).
    rows = []
    for shift in (2, 3, 31, 32, 33, 40, 62):
        for value in (1, -1, 3, -3, 5, -5):
            mult = 1 << (shift - 1) if shift - 1 < 31 else 1 << 30
            if -(1 << (shift - 2)) <= value < (1 << (shift - 2)):     # REQUIRE range
                rows.append((value, mult, shift))
    rows = np.array(rows, np.int64)
    acc = np.repeat(rows[:, :1], LANES, 1)
    mult = np.repeat(rows[:, 1:2], LANES, 1)
    shift = np.repeat(rows[:, 2:3], LANES, 1)
    bias = np.zeros_like(acc)
    for dr in (False, True):
        got = _simulate(acc, bias, mult, shift, double_round=dr)
        np.testing.assert_array_equal(got, _expected(acc, bias, mult, shift, dr))
    # Hand-worked, shift 4, multiplier 8: (v * 8 + 8) >> 4 = 1, 0, 2, -1 for v = 1, -1, 3, -3
    # (0.5 -> 1, -0.5 -> 0, 1.5 -> 2, -1.5 -> -1: ties round toward +infinity).
    assert _simulate(np.array([[1, -1, 3, -3]]), np.zeros((1, 4), int), np.full((1, 4), 8),
                     np.full((1, 4), 4), double_round=False).tolist() == [[1, 0, 2, -1]]


def test_bias_wrap_zero_point_and_clamp():
    acc = np.array([[2**31 - 1, -2**31, 100, -100]])
    bias = np.array([[1, -1, 0, 0]])                               # wraps to -2^31 and 2^31 - 1
    mult = np.array([[1 << 30] * 4])
    shift = np.array([[40] * 4])                                   # |v| < 2^38: REQUIRE holds
    got = _simulate(acc, bias, mult, shift, double_round=False, out_zp=10, lo=-20, hi=15)
    np.testing.assert_array_equal(got, _expected(acc, bias, mult, shift, False, 10, -20, 15))
    assert got.tolist() == [[-20, 15, 10, 10]]


def test_back_pressure_keeps_order_and_values(rng):
    acc, bias, mult, shift = _random_case(rng, 30)
    got = _simulate(acc, bias, mult, shift, double_round=True, stall_every=3)
    np.testing.assert_array_equal(got, _expected(acc, bias, mult, shift, True))


def test_latency_constant_matches_pipeline():
    assert REQUANT_LATENCY_CYCLES == 3
