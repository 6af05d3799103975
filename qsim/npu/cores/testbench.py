"""`amaranth` engine for several cores: the multi-core RTL (hw/cores.py) under Amaranth's
simulator, with the testbench of qsim/npu/sim_amaranth.py widened to one instruction stream per
core and the shared memory of memory.py (ideal: 1-cycle reads, a cycle's write before its
read, reads past the end zeros). Core k's cycle count is the first cycle in which idle<k> is
high with none of its instructions left (cycle 0: the first after reset), as on one core."""
from __future__ import annotations

import numpy as np

from ...errors import MismatchError
from ...hw.isa import INSTR_BYTES, pack_program
from ...hw.params import Geometry, Units
from .memory import scatter, shared_image


def _words(instrs) -> list[int]:
    blob = pack_program(instrs)
    return [int.from_bytes(blob[i:i + INSTR_BYTES], "little") for i in range(0, len(blob), INSTR_BYTES)]


def run_amaranth_cores(geom: Geometry, programs: list[tuple[list, np.ndarray]],
                       max_cycles: int = 1_000_000, units: Units = Units.ARRAY) -> list[int]:
    """Runs every core's (instructions, DRAM image) at once; the images are updated in place.
    Returns each core's cycle count."""
    from amaranth.sim import Simulator          # deferred: the simulator
    from ...hw.cores import MultiCore          # deferred: the HDL needs amaranth

    n = len(programs)
    dut = MultiCore(geom, n, units)
    streams = [_words(instrs) for instrs, _ in programs]
    drams = [dram for _, dram in programs]
    memory, starts = shared_image(drams, geom.dram_port_bytes)
    port = geom.dram_port_bytes
    finish: list[int | None] = [None] * n

    async def testbench(ctx):
        index, rdata, cycle = [0] * n, 0, 0
        for k in range(n):
            ctx.set(getattr(dut, f"base{k}"), starts[k])
        while True:
            for k in range(n):
                stream, pending = getattr(dut, f"instr{k}"), index[k] < len(streams[k])
                ctx.set(stream.valid, int(pending))
                if pending:
                    ctx.set(stream.payload, streams[k][index[k]])
                if not pending and finish[k] is None and ctx.get(getattr(dut, f"idle{k}")):
                    finish[k] = cycle
            ctx.set(dut.dram_rdata, rdata)
            if all(f is not None for f in finish):
                return
            if cycle >= max_cycles:
                raise MismatchError(f"the {n} cores did not finish within {max_cycles} cycles")
            if ctx.get(dut.dram_we):        # the write lands before this cycle's read
                waddr, count = ctx.get(dut.dram_waddr), ctx.get(dut.dram_wlen)
                data = ctx.get(dut.dram_wdata).to_bytes(port, "little")[:count]
                memory[waddr:waddr + count] = np.frombuffer(data, np.uint8)[: max(0, memory.size - waddr)]
            rdata = 0
            if ctx.get(dut.dram_re):
                addr = ctx.get(dut.dram_addr)
                rdata = int.from_bytes(bytes(memory[addr:addr + port]).ljust(port, b"\0"), "little")
            for k in range(n):
                if index[k] < len(streams[k]) and ctx.get(getattr(dut, f"instr{k}").ready):
                    index[k] += 1
            await ctx.tick()
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    scatter(memory, starts, drams)
    return [int(f) for f in finish]
