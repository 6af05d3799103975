"""Drives a DUT with the qsim NPU's port protocol (the `qsim_npu` of `qsim export-rtl`; its
README lists the ports): an instruction stream in, a DRAM port out, one clock, synchronous
reset. The driver models the DRAM as the qsim harness does: separate read and write channels,
read data one cycle after `dram_re`, a write of `dram_wlen` bytes at `dram_waddr` landing
before the same cycle's read, reads past the end returning zeros.

Your own RTL:
- same protocol, other port names: edit SIGNALS (testbench name -> your port name), or pass
  `signals=` when constructing the driver;
- another interface: write a driver with the same two methods, `supports(layer)` and
  `async run_layer(layer) -> (tensor, cycles)`, that loads the layer's golden inputs
  (`layer.golden(tb_dir, "input")`, "weight", "bias", "multiplier", "shift", with
  `layer.scalars`) into your design and returns what it computed as the tensor of role
  `layer.check`; test_golden.py then compares it with the golden vectors.
"""
from __future__ import annotations

import numpy as np
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from golden_check import Layer, Program, assemble

SIGNALS = {
    "clk": "clk", "rst": "rst",
    "instr_valid": "instr__valid", "instr_ready": "instr__ready", "instr_payload": "instr__payload",
    "idle": "idle",
    "dram_addr": "dram_addr", "dram_re": "dram_re", "dram_rdata": "dram_rdata",
    "dram_we": "dram_we", "dram_waddr": "dram_waddr", "dram_wdata": "dram_wdata",
    "dram_wlen": "dram_wlen", "dram_stall": "dram_stall",
}
CLOCK_NS = 10
RESET_CYCLES = 2
CYCLE_MARGIN = 4            # a program may take up to 4x its cycle model's count (+ 1000) ...


class DutTimeout(AssertionError):
    """... before the DUT counts as hung."""


class QsimNpuDriver:
    def __init__(self, dut, instr_bytes: int, port_bytes: int, signals: dict | None = None,
                 check_cycles: bool = True):
        names = dict(SIGNALS, **(signals or {}))
        missing = [port for port in names.values() if not hasattr(dut, port)]
        if missing:
            raise AttributeError(f"DUT {dut._name} has no port(s) {', '.join(missing)}: map the "
                                 "testbench's names to yours in npu_driver.SIGNALS")
        self.s = {key: getattr(dut, port) for key, port in names.items()}
        self.instr_bytes = instr_bytes
        self.port_bytes = port_bytes
        self.check_cycles = check_cycles     # the qsim NPU also matches qsim's cycle model
        self._clock = None

    def supports(self, layer: Layer) -> bool:
        return bool(layer.programs)

    async def run_layer(self, layer: Layer, shape, dtype) -> tuple[np.ndarray, list[int]]:
        """Runs every program of `layer`; returns the assembled tensor and each program's cycles."""
        results, cycles = [], []
        for number, program in enumerate(layer.programs):
            dram, took = await self.run_program(program, f"layer {layer.name!r} program {number}")
            results.append(program.result(dram))
            cycles.append(took)
        return assemble(layer, shape, dtype, results), cycles

    async def run_program(self, program: Program, what: str) -> tuple[bytearray, int]:
        """Resets the DUT, streams the program in and serves its DRAM port until it is idle with
        no instruction left; returns the DRAM and the cycle count (cycle 0: the first after reset,
        as in qsim's cycle model)."""
        s = self.s
        if self._clock is None:
            self._clock = cocotb.start_soon(Clock(s["clk"], CLOCK_NS, unit="ns").start())
        dram = bytearray(program.dram.tobytes())
        size, port, width = len(dram), self.port_bytes, self.instr_bytes
        count = len(program.instrs) // width
        words = [int.from_bytes(program.instrs[i * width:(i + 1) * width], "little") for i in range(count)]
        s["rst"].value = 1
        s["instr_valid"].value = 0
        s["instr_payload"].value = 0
        s["dram_rdata"].value = 0
        s["dram_stall"].value = 0         # the ideal memory: never stalls (qsim/npu/dram/timing.py)
        for _ in range(RESET_CYCLES):
            await FallingEdge(s["clk"])
        s["rst"].value = 0
        limit = CYCLE_MARGIN * program.cycles + 1000
        index, shown, rdata = 0, -1, 0
        cycle = 0
        # Each iteration is one cycle, entered at the falling edge: the DUT's outputs (all
        # registered) hold this cycle's values; the inputs set here are sampled at the next
        # rising edge.
        while True:
            pending = index < count
            if not pending and int(s["idle"].value):
                break
            if cycle >= limit:
                raise DutTimeout(f"{what}: not idle after {cycle} cycles (qsim's cycle model: "
                                 f"{program.cycles}); {index} of {count} instructions accepted")
            addr = int(s["dram_addr"].value)
            if int(s["dram_we"].value):                 # lands before this cycle's read
                waddr = int(s["dram_waddr"].value)
                n = min(int(s["dram_wlen"].value), max(0, size - waddr))
                if n:
                    data = int(s["dram_wdata"].value).to_bytes(port, "little")
                    dram[waddr:waddr + n] = data[:n]
            accepted = pending and int(s["instr_ready"].value)
            s["instr_valid"].value = int(pending)
            if pending and shown != index:
                s["instr_payload"].value = words[index]
                shown = index
            s["dram_rdata"].value = rdata
            rdata = (int.from_bytes(dram[addr:addr + port], "little")
                     if int(s["dram_re"].value) and addr < size else 0)
            if accepted:
                index += 1
            await FallingEdge(s["clk"])
            cycle += 1
        s["instr_valid"].value = 0
        if self.check_cycles and cycle != program.cycles:
            raise AssertionError(f"{what}: the DUT took {cycle} cycles, qsim's cycle model "
                                 f"{program.cycles} (hw/README.md, Dispatch and timing)")
        return dram, cycle
