"""N NPU cores (hw/top.py, the same RTL each) sharing one DRAM port through a round-robin
arbiter (hw/arbiter.py): the multi-core top `qsim_cores`.

Each core has its own instruction stream (`instr<k>`), `idle<k>` and address window: core k's
DRAM addresses are offset by `base<k>` (an input, constant during a run), so every core runs a
program compiled for an address space of its own and the cores' data lie in disjoint regions
of the one memory. The port (SharedPort: the arbiter and the port multiplexer, everything the
cores add to N single NPUs) carries the signals of the core whose DRAM unit is busy (at most
one: the arbiter grants a transfer only when none is); the read data goes to every core, and
only the owner's DMA takes it. The memory is the ideal one (no dram_stall).
"""
from amaranth.hdl import Module, Mux, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .arbiter import RoundRobinArbiter
from .isa import INSTR_BITS
from .params import Geometry, Units
from .top import NPU


def port_members(P: int) -> dict:
    """A DRAM port's outputs (hw/top.py), as seen from the NPU driving it."""
    return {"dram_addr": Out(32), "dram_re": Out(1), "dram_we": Out(1), "dram_wdata": Out(8 * P),
            "dram_wlen": Out(16), "dram_waddr": Out(32)}


class SharedPort(wiring.Component):
    """The arbiter and the port multiplexer of `cores` cores (per core k: its requests and port
    signals `c<k>_*` and `base<k>` in, `grant<k>` out; the memory's port out)."""

    def __init__(self, geom: Geometry, cores: int):
        self.cores = cores
        ports = dict(port_members(geom.dram_port_bytes))
        for k in range(cores):
            ports.update({f"c{k}_{name}": In(member.shape) for name, member in port_members(geom.dram_port_bytes).items()})
            ports.update({f"c{k}_req": In(1), f"c{k}_busy": In(1), f"base{k}": In(32), f"grant{k}": Out(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.arbiter = arbiter = RoundRobinArbiter(self.cores)
        busy, port = 0, {}
        for k in range(self.cores):
            core = {name: getattr(self, f"c{k}_{name}") for name in port_members(1)}
            owned = dict(core, dram_addr=core["dram_addr"] + getattr(self, f"base{k}"),
                         dram_waddr=core["dram_waddr"] + getattr(self, f"base{k}"))
            mine = getattr(self, f"c{k}_busy")
            m.d.comb += [arbiter.req[k].eq(getattr(self, f"c{k}_req")), getattr(self, f"grant{k}").eq(arbiter.grant[k])]
            busy = busy | mine
            for name, value in owned.items():   # only the owner's signals pass: an idle DMA may leave an address
                port[name] = port.get(name, 0) | Mux(mine, value, 0)
        m.d.comb += arbiter.busy.eq(busy)
        m.d.comb += [getattr(self, name).eq(value) for name, value in port.items()]
        return m


class MultiCore(wiring.Component):
    def __init__(self, geom: Geometry, cores: int, units: Units = Units.ALL):
        self.geom, self.cores, self.units = geom, cores, units
        P = geom.dram_port_bytes
        ports = {}
        for k in range(cores):
            ports.update({f"instr{k}": In(stream.Signature(unsigned(INSTR_BITS))), f"idle{k}": Out(1),
                          f"base{k}": In(32)})
        ports.update({**port_members(P), "dram_rdata": In(8 * P)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.port = port = SharedPort(self.geom, self.cores)
        for k in range(self.cores):
            core = NPU(self.geom, self.units, arbitrated=True)
            m.submodules[f"core{k}"] = core
            wiring.connect(m, wiring.flipped(getattr(self, f"instr{k}")), core.instr)
            m.d.comb += [getattr(self, f"idle{k}").eq(core.idle), core.dram_stall.eq(0),
                         core.dram_rdata.eq(self.dram_rdata), getattr(port, f"c{k}_req").eq(core.dram_req),
                         getattr(port, f"c{k}_busy").eq(core.dram_busy), core.dram_grant.eq(getattr(port, f"grant{k}")),
                         getattr(port, f"base{k}").eq(getattr(self, f"base{k}"))]
            m.d.comb += [getattr(port, f"c{k}_{name}").eq(getattr(core, name)) for name in port_members(1)]
        m.d.comb += [getattr(self, name).eq(getattr(port, name)) for name in port_members(1)]
        return m
