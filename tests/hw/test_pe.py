"""PE under the Amaranth simulator: hand-worked MACs, -128 x -128, wrap at the int32 limits."""
from amaranth.sim import Simulator

from qsim.hw.params import Dataflow
from qsim.hw.pe import PE


def _run(dut, testbench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()


def test_weight_stationary_pe_holds_weight_and_adds_psum():
    dut = PE(Dataflow.WEIGHT_STATIONARY)
    seen = []

    async def tb(ctx):
        ctx.set(dut.w_in, -128)
        ctx.set(dut.w_shift, 1)
        await ctx.tick()
        ctx.set(dut.w_shift, 0)
        ctx.set(dut.w_in, 77)                      # ignored: w_shift is low
        for a, psum in ((-128, 0), (3, 1000), (127, -5)):
            ctx.set(dut.a_in, a)
            ctx.set(dut.psum_in, psum)
            await ctx.tick()
            seen.append((ctx.get(dut.psum_out), ctx.get(dut.a_out), ctx.get(dut.w_out)))

    _run(dut, tb)
    # -128 * -128 = 16384; 1000 + 3 * -128 = 616; -5 + 127 * -128 = -16261
    assert seen == [(16384, -128, -128), (616, 3, -128), (-16261, 127, -128)]


def test_weight_stationary_pe_wraps_at_int32():
    dut = PE(Dataflow.WEIGHT_STATIONARY)
    seen = []

    async def tb(ctx):
        ctx.set(dut.w_in, 2)
        ctx.set(dut.w_shift, 1)
        await ctx.tick()
        ctx.set(dut.w_shift, 0)
        ctx.set(dut.a_in, 1)
        ctx.set(dut.psum_in, 2**31 - 2)
        await ctx.tick()
        seen.append(ctx.get(dut.psum_out))
        ctx.set(dut.a_in, -1)
        ctx.set(dut.psum_in, -2**31)
        await ctx.tick()
        seen.append(ctx.get(dut.psum_out))

    _run(dut, tb)
    assert seen == [-2**31, 2**31 - 2]            # int32 two's-complement wrap both ways


def test_output_stationary_pe_accumulates_clears_and_drains():
    dut = PE(Dataflow.OUTPUT_STATIONARY)
    seen = []

    async def tb(ctx):
        ctx.set(dut.clear, 1)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        for a, w in ((-128, -128), (-128, -128), (255, -256)):   # 9-bit operands
            ctx.set(dut.a_in, a)
            ctx.set(dut.w_in, w)
            await ctx.tick()
        seen.append(ctx.get(dut.acc_out))
        assert (ctx.get(dut.a_out), ctx.get(dut.w_out)) == (255, -256)
        ctx.set(dut.drain, 1)
        ctx.set(dut.acc_in, 12345)
        await ctx.tick()
        seen.append(ctx.get(dut.acc_out))

    _run(dut, tb)
    assert seen == [16384 + 16384 - 65280, 12345]
