"""`amaranth` engine: the NPU RTL under Amaranth's own simulator (small arrays, tests).

The testbench plays the instruction stream (valid held high while instructions
remain) and the modelled DRAM (hw/top.py: 1-cycle read latency, byte-addressed, separate read and write channels;
reads past the end return zeros). With `dram` timing (qsim/npu/dram/timing.py) the memory holds
dram_stall high while a request waits on its row buffer: in such a cycle it serves nothing,
accepts no instruction and keeps dram_rdata. Cycle 0 is the first cycle after reset; the
result is the first cycle in which `idle` is high with no instruction left.
"""
from __future__ import annotations

import numpy as np

from ..errors import MismatchError
from ..hw.isa import INSTR_BYTES, pack_program
from ..hw.params import Geometry, Units
from ..hw.top import NPU
from .dram import DramTiming, RowBuffers


def run_amaranth(geom: Geometry, instrs, dram: np.ndarray, max_cycles: int = 1_000_000,
                 vcd_path: str | None = None, write_log: list | None = None,
                 units: Units = Units.ALL, dram_timing: DramTiming | None = None) -> int:
    """Runs `instrs` on `dram` (uint8, modified in place) on the NPU with `units` (default:
    the whole NPU); returns the cycle count. `write_log`, when given, receives
    (cycle, dram_addr, bytes) for every DRAM write."""
    from amaranth.sim import Simulator

    dut = NPU(geom, units)
    blob = pack_program(instrs)
    words = [int.from_bytes(blob[i:i + INSTR_BYTES], "little") for i in range(0, len(blob), INSTR_BYTES)]
    port = geom.dram_port_bytes
    result = {}
    rows = RowBuffers(dram_timing) if dram_timing else None

    async def testbench(ctx):
        index, rdata, cycle, owed, charged = 0, 0, 0, 0, False
        while True:
            pending = index < len(words)
            ctx.set(dut.instr.valid, int(pending))
            if pending:
                ctx.set(dut.instr.payload, words[index])
            ctx.set(dut.dram_rdata, rdata)
            if not pending and ctx.get(dut.idle):
                result["cycles"] = cycle
                return
            if cycle >= max_cycles:
                raise MismatchError(f"NPU did not finish within {max_cycles} cycles "
                                    f"({index} of {len(words)} instructions accepted)")
            addr = ctx.get(dut.dram_addr)
            if rows is not None and not charged and (ctx.get(dut.dram_we) or ctx.get(dut.dram_re)):
                # the write of a cycle before its read, as they are served
                owed = sum(rows.cost(a) for a, on in ((ctx.get(dut.dram_waddr), ctx.get(dut.dram_we)),
                                                        (addr, ctx.get(dut.dram_re))) if on)
                charged = True
            ctx.set(dut.dram_stall, int(owed > 0))
            if owed > 0:
                owed -= 1
                await ctx.tick()
                cycle += 1
                continue
            charged = False
            if ctx.get(dut.dram_we):       # the write channel: lands before this cycle's read
                waddr, n = ctx.get(dut.dram_waddr), ctx.get(dut.dram_wlen)
                if write_log is not None:
                    write_log.append((cycle, waddr, n))
                data = ctx.get(dut.dram_wdata).to_bytes(port, "little")[:n]
                dram[waddr:waddr + n] = np.frombuffer(data, np.uint8)[: max(0, dram.size - waddr)]
            if ctx.get(dut.dram_re):
                chunk = bytes(dram[addr:addr + port]).ljust(port, b"\0")
                rdata = int.from_bytes(chunk, "little")
            else:
                rdata = 0
            if pending and ctx.get(dut.instr.ready):
                index += 1
            await ctx.tick()
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    if vcd_path:
        with sim.write_vcd(vcd_path):
            sim.run()
    else:
        sim.run()
    return result["cycles"]
