"""Testbench of the vector unit under Amaranth's simulator, and the cross-checks every test uses.

`simulate` plays a list of jobs (instruction + beats + per-cycle source-valid and
sink-ready patterns) back to back: each instruction is offered from the cycle the
previous one ended and accepted when the unit is idle. Cycles are counted per job
from the cycle its instruction is accepted (cycle 0), like qsim.npu.vector.model.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from amaranth.sim import Simulator

from qsim.hw.vector import VectorUnit
from qsim.hw.vector_isa import INSTR_BITS, VectorInstr
from qsim.npu.vector.model import VectorUnitModel

LANES = 4
MASK32 = (1 << 32) - 1


@dataclass
class Job:
    instr: VectorInstr
    a: np.ndarray                       # [count, lanes]
    b: np.ndarray | None = None
    last: np.ndarray | None = None      # [count] bool
    source_valid: list | None = None    # per cycle from cycle 1; True past the end
    sink_ready: list | None = None


@dataclass
class Observed:
    outputs: np.ndarray
    accept_cycles: np.ndarray
    output_cycles: np.ndarray
    cycles: int
    extra: dict = field(default_factory=dict)


def _beat_word(a_row, b_row, last, lanes) -> int:
    word = 0
    for c in range(lanes):
        word |= (int(a_row[c]) & MASK32) << (32 * c)
        word |= (int(b_row[c]) & MASK32) << (32 * (lanes + c))
    return word | (int(bool(last)) << (64 * lanes))


def _on(pattern, t) -> bool:
    return True if pattern is None or t - 1 >= len(pattern) else bool(pattern[t - 1])


def simulate(jobs: list[Job], lanes: int = LANES, max_pool_count: int = 64,
             max_cycles: int = 20000) -> list[Observed]:
    dut = VectorUnit(lanes, max_pool_count=max_pool_count)
    results: list[Observed] = []

    async def testbench(ctx):
        cycle = 0
        for job in jobs:
            n = job.instr.count
            b = np.zeros_like(job.a) if job.b is None else job.b
            last = np.zeros(n, bool) if job.last is None else job.last
            scalar, lane_word = job.instr.encode(lanes)
            ctx.set(dut.cfg.payload.as_value(), scalar | (lane_word << INSTR_BITS))
            ctx.set(dut.cfg.valid, 1)
            ctx.set(dut.i.valid, 0)
            assert ctx.get(dut.cfg.ready), "the unit must be idle when the previous job ended"
            await ctx.tick()
            base, cycle = cycle, cycle + 1
            ctx.set(dut.cfg.valid, 0)
            k, outs, out_cycles, accepts = 0, [], [], []
            while True:
                t = cycle - base
                if k == n and not ctx.get(dut.busy):
                    break
                assert t < max_cycles
                offer = k < n and _on(job.source_valid, t)
                ready = _on(job.sink_ready, t)
                ctx.set(dut.i.valid, int(offer))
                if offer:
                    ctx.set(dut.i.payload.as_value(), _beat_word(job.a[k], b[k], last[k], lanes))
                ctx.set(dut.o.ready, int(ready))
                if ctx.get(dut.o.valid) and ready:
                    outs.append([ctx.get(dut.o.payload[c]) for c in range(lanes)])
                    out_cycles.append(t)
                if offer and ctx.get(dut.i.ready):
                    accepts.append(t)
                    k += 1
                await ctx.tick()
                cycle += 1
            results.append(Observed(np.array(outs, np.int64).reshape(-1, lanes), np.array(accepts),
                                    np.array(out_cycles), cycle - base))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return results


def run_and_compare(jobs: list[Job], lanes: int = LANES, max_pool_count: int = 64) -> list[Observed]:
    """Runs the jobs on the RTL and on the numpy model; asserts equal values and cycles."""
    observed = simulate(jobs, lanes, max_pool_count)
    model = VectorUnitModel(lanes, max_pool_count=max_pool_count)
    for j, (job, got) in enumerate(zip(jobs, observed)):
        want = model.run(job.instr, job.a, job.b, job.last, job.source_valid, job.sink_ready)
        np.testing.assert_array_equal(got.outputs, want.outputs, err_msg=f"job {j} values")
        np.testing.assert_array_equal(got.accept_cycles, want.accept_cycles, err_msg=f"job {j} accepts")
        np.testing.assert_array_equal(got.output_cycles, want.output_cycles, err_msg=f"job {j} outputs")
        assert got.cycles == want.cycles, f"job {j}: RTL idle at {got.cycles}, model {want.cycles}"
    return observed


def random_pattern(rng, length: int, p_on: float) -> list[bool]:
    return (rng.random(length) < p_on).tolist()


def verilator_equals_model(rtl, model, jobs: list[Job], rng, pattern_length: int) -> None:
    """Runs every job with random source gaps and sink stalls on a VerilatedVectorUnit and
    the model; asserts equal values and cycles."""
    for job in jobs:
        job.source_valid = random_pattern(rng, pattern_length, 0.7)
        job.sink_ready = random_pattern(rng, pattern_length, 0.6)
        got = rtl.run(job.instr, job.a, job.b, job.last, job.source_valid, job.sink_ready)
        want = model.run(job.instr, job.a, job.b, job.last, job.source_valid, job.sink_ready)
        for name in ("outputs", "accept_cycles", "output_cycles", "cycles"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name),
                                          err_msg=f"{job.instr.op.name} {name}")
