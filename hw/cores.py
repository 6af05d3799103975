"""N NPU cores (hw/top.py, the same RTL each) sharing one DRAM port through a round-robin
arbiter (hw/arbiter.py): the multi-core top `qsim_cores`.

Each core has its own instruction stream (`instr<k>`), `idle<k>` and address window: core k's
DRAM addresses are offset by `base<k>` (an input, constant during a run), so every core runs a
program compiled for an address space of its own and the cores' data lie in disjoint regions
of the one memory. The port carries the signals of the core whose DRAM unit is busy (at most
one: the arbiter grants a transfer only when none is); the read data goes to every core, and
only the owner's DMA takes it. The memory is the ideal one (no dram_stall).
"""
from amaranth.hdl import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.hdl import unsigned

from .arbiter import RoundRobinArbiter
from .isa import INSTR_BITS
from .params import Geometry, Units
from .top import NPU

DRAM_OUTPUTS = ("dram_addr", "dram_re", "dram_we", "dram_waddr", "dram_wdata", "dram_wlen")


class MultiCore(wiring.Component):
    def __init__(self, geom: Geometry, cores: int, units: Units = Units.ALL):
        self.geom, self.cores, self.units = geom, cores, units
        P = geom.dram_port_bytes
        ports = {}
        for k in range(cores):
            ports.update({f"instr{k}": In(stream.Signature(unsigned(INSTR_BITS))), f"idle{k}": Out(1),
                          f"base{k}": In(32)})
        ports.update({"dram_addr": Out(32), "dram_re": Out(1), "dram_we": Out(1), "dram_wdata": Out(8 * P),
                      "dram_wlen": Out(16), "dram_rdata": In(8 * P), "dram_waddr": Out(32)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.arbiter = arbiter = RoundRobinArbiter(self.cores)
        busy = 0
        port = {name: 0 for name in DRAM_OUTPUTS}
        for k in range(self.cores):
            core = NPU(self.geom, self.units, arbitrated=True)
            m.submodules[f"core{k}"] = core
            wiring.connect(m, wiring.flipped(getattr(self, f"instr{k}")), core.instr)
            base = getattr(self, f"base{k}")
            m.d.comb += [getattr(self, f"idle{k}").eq(core.idle), core.dram_stall.eq(0),
                         core.dram_rdata.eq(self.dram_rdata), arbiter.req[k].eq(core.dram_req),
                         core.dram_grant.eq(arbiter.grant[k])]
            busy = busy | core.dram_busy
            # only the owner's signals pass: an idle core's DMA may leave an address behind
            owned = {"dram_addr": core.dram_addr + base, "dram_waddr": core.dram_waddr + base}
            for name in DRAM_OUTPUTS:
                port[name] = port[name] | Mux(core.dram_busy, owned.get(name, getattr(core, name)), 0)
        m.d.comb += arbiter.busy.eq(busy)
        m.d.comb += [getattr(self, name).eq(value) for name, value in port.items()]
        return m
