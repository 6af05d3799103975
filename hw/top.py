"""The NPU: in-order dispatcher, DMA unit, window DMA (LOADW), compute unit, vector DMA +
vector unit, on-chip buffers, DRAM port.

Dispatch (README.md): an instruction accepted from the `instr` stream sits in
one register; it dispatches in the first cycle its unit is idle and its wait
flags are satisfied (NOP dispatches at once), and the next instruction is
accepted in that same cycle. A unit dispatched at cycle t is busy from t+1 for
its duration D (dma.py, compute.py) and can take the next instruction at t+D+1.
`idle` is high when no instruction is held and both units are idle.

DRAM port: a read channel and a write channel (AXI-like), fixed latency.
dram_re with dram_addr at cycle t returns dram_rdata at t+1 (byte k =
DRAM[addr+k]); dram_we writes dram_wlen low bytes of dram_wdata at dram_waddr
(the write of a cycle lands before its read). The DMA unit uses one channel at a
time (and also drives dram_addr = dram_waddr for its writes); the vector DMA
reads and writes in the same cycle. The DRAM itself is modelled by the simulation harness;
its bandwidth is enforced by the DMA unit's credit counter.
dram_stall (input, low with the ideal memory) is the memory's not-ready: a memory with
DRAM timing (qsim/npu/dram/timing.py) holds it high while a presented request waits for its row.
In a stalled cycle no register or buffer of the NPU changes (the whole NPU is clock-
enabled by ~dram_stall), so the requests stay presented; the memory serves neither the
read nor the write and accepts no instruction in that cycle, and keeps dram_rdata as it was.

Units: `NPU(geom)` is the whole NPU (what `qsim export-rtl` writes). `NPU(geom, Units.ARRAY)`
leaves out the vector DMA and vector unit, `NPU(geom, Units.VECTOR)` the compute unit, the
window DMA and the array's buffers: the same RTL minus a unit, for simulators that run a
program needing only one of them (the verilator engine: Verilator evaluates every unit every
cycle, and the idle vector unit halved the array's simulation speed). A program that uses
only the units present behaves identically, cycle for cycle, on the whole NPU: an absent
unit's busy is 0 and its DRAM port drives nothing, exactly as an idle one does.
"""
from amaranth.hdl import Cat, Const, EnableInserter, Module, Mux, Signal, unsigned
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .compute import ComputeUnit
from .dma import DMA, field
from .isa import INSTR_BITS, Opcode
from .params import ACC_LANE_BITS, PARAM_DEPTH_WORDS, Geometry, Units
from .vdma import VectorDMA
from .vector_isa import config_bits
from .wdma import WindowDMA
from .window_isa import WINDOW_BITS, window_base, window_words


class NPU(wiring.Component):
    def __init__(self, geom: Geometry, units: Units = Units.ALL):
        self.geom = geom
        self.units = units
        P = geom.dram_port_bytes
        super().__init__({
            "instr": In(stream.Signature(unsigned(INSTR_BITS))),
            "idle": Out(1),
            "dram_addr": Out(32), "dram_re": Out(1), "dram_we": Out(1),
            "dram_wdata": Out(8 * P), "dram_wlen": Out(16), "dram_rdata": In(8 * P),
            "dram_waddr": Out(32), "dram_stall": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        m.submodules.dma = dma = DMA(g)
        array, vector = Units.ARRAY in self.units, Units.VECTOR in self.units
        # The configuration register file: LOAD ... VCONFIG writes whole words; the vector
        # configuration first, then the window descriptor (hw/window_isa.py). Only the words
        # of the units present exist (the addresses stay those of the whole NPU).
        P = g.dram_port_bytes
        wbase = window_base(g.cols, P)
        present = [k for k in range(wbase + window_words(P)) if (vector if k < wbase else array)]
        vcfg = {k: Signal(8 * P, name=f"vconfig{k}") for k in present}
        for k, word in vcfg.items():
            with m.If(dma.wr_vconfig & (dma.wr_addr == k)):
                m.d.sync += word.eq(dma.wr_data)
        # An absent unit is an idle one: busy 0, no DRAM request.
        cu_busy = wd_busy = vd_busy = Const(0)
        rd_addr, re, we = dma.dram_addr, dma.dram_re, dma.dram_we
        waddr, wdata, wlen = dma.dram_addr, dma.dram_wdata, dma.dram_wlen
        if array:
            m.submodules.compute = cu = ComputeUnit(g)
            m.submodules.wdma = wd = WindowDMA(g)
            m.d.comb += wd.desc.eq(Cat(*(vcfg[k] for k in range(wbase, wbase + window_words(P))))[:WINDOW_BITS])
            self._buffers(m, g, dma, cu, wd)
            cu_busy, wd_busy = cu.busy, wd.busy
            rd_addr, re = Mux(wd.busy, wd.raddr, rd_addr), re | wd.re
            m.d.comb += wd.rdata.eq(self.dram_rdata)
        if vector:
            m.submodules.vdma = vd = VectorDMA(g)
            m.d.comb += [vd.cfg.eq(Cat(*(vcfg[k] for k in range(wbase)))[:config_bits(g.cols)]),
                         vd.rdata.eq(self.dram_rdata)]
            vd_busy = vd.busy
            rd_addr, re, we = Mux(vd.busy, vd.raddr, rd_addr), re | vd.re, we | vd.we
            waddr, wdata, wlen = (Mux(vd.busy, vd.waddr, waddr), Mux(vd.busy, vd.wdata, wdata),
                                  Mux(vd.busy, vd.wlen, wlen))
        m.d.comb += [self.dram_addr.eq(rd_addr), self.dram_re.eq(re), self.dram_we.eq(we),
                     self.dram_waddr.eq(waddr), self.dram_wdata.eq(wdata), self.dram_wlen.eq(wlen),
                     dma.dram_rdata.eq(self.dram_rdata)]

        # In-order dispatcher.
        cur = Signal(INSTR_BITS)
        cur_valid = Signal()
        opcode = field(cur, Opcode.NOP, "opcode")
        wait_dma = field(cur, Opcode.NOP, "wait_dma")
        wait_compute = field(cur, Opcode.NOP, "wait_compute")
        # LOAD, STORE, LOADW and VRUN share the DRAM channels: one "DMA" for dispatch and wait_dma.
        to_dma = ((opcode == Opcode.LOAD) | (opcode == Opcode.STORE) | (opcode == Opcode.VRUN)
                  | (opcode == Opcode.LOADW))
        to_compute = opcode == Opcode.COMPUTE
        dram_busy = dma.busy | vd_busy | wd_busy
        fire = Signal()
        m.d.comb += fire.eq(cur_valid & ~(to_dma & dram_busy) & ~(to_compute & cu_busy)
                            & ~(wait_dma & dram_busy) & ~(wait_compute & cu_busy))
        m.d.comb += [self.instr.ready.eq(~cur_valid | fire), dma.instr.eq(cur),
                     dma.start.eq(fire & ((opcode == Opcode.LOAD) | (opcode == Opcode.STORE))),
                     self.idle.eq(~cur_valid & ~dram_busy & ~cu_busy)]
        if array:
            m.d.comb += [cu.instr.eq(cur), wd.instr.eq(cur), cu.start.eq(fire & to_compute),
                         wd.start.eq(fire & (opcode == Opcode.LOADW))]
        if vector:
            m.d.comb += vd.start.eq(fire & (opcode == Opcode.VRUN))
        with m.If(self.instr.valid & self.instr.ready):
            m.d.sync += [cur.eq(self.instr.payload), cur_valid.eq(1)]
        with m.Elif(fire):
            m.d.sync += cur_valid.eq(0)
        return EnableInserter(~self.dram_stall)(m)

    @staticmethod
    def _buffers(m, g: Geometry, dma, cu, wd) -> None:
        """The array's on-chip buffers: synchronous read ports (data one cycle after the address)."""
        m.submodules.input_buf = input_buf = memory.Memory(
            shape=unsigned(8 * g.input_word_bytes), depth=g.input_depth_words, init=[])
        m.submodules.weight_buf = weight_buf = memory.Memory(
            shape=unsigned(8 * g.weight_word_bytes), depth=g.weight_depth_words, init=[])
        m.submodules.param_buf = param_buf = memory.Memory(
            shape=unsigned(8 * g.param_word_bytes), depth=PARAM_DEPTH_WORDS, init=[])
        m.submodules.acc_buf = acc_buf = memory.Memory(
            shape=unsigned(ACC_LANE_BITS * g.cols), depth=g.acc_depth_words, init=[])
        m.submodules.output_buf = output_buf = memory.Memory(
            shape=unsigned(8 * g.output_buffer_word_bytes), depth=g.acc_depth_words, init=[])

        wp = input_buf.write_port()     # LOAD or LOADW (never both: one DRAM mover at a time)
        m.d.comb += [wp.addr.eq(Mux(wd.wr_en, wd.wr_addr, dma.wr_addr)),
                     wp.data.eq(Mux(wd.wr_en, wd.wr_data, dma.wr_data[:8 * g.input_word_bytes])),
                     wp.en.eq(dma.wr_input | wd.wr_en)]
        for mem, en, width in ((weight_buf, dma.wr_weight, g.weight_word_bytes),
                               (param_buf, dma.wr_param, g.param_word_bytes)):
            wp = mem.write_port()
            m.d.comb += [wp.addr.eq(dma.wr_addr), wp.data.eq(dma.wr_data[:8 * width]), wp.en.eq(en)]
        for mem, addr, data in ((input_buf, cu.in_addr, cu.in_data), (weight_buf, cu.w_addr, cu.w_data),
                                (param_buf, cu.param_addr, cu.param_data),
                                (acc_buf, cu.acc_rd_addr, cu.acc_rd_data)):
            rp = mem.read_port()
            m.d.comb += [rp.addr.eq(addr), data.eq(rp.data)]
        for mem, addr, data, en in ((acc_buf, cu.acc_wr_addr, cu.acc_wr_data, cu.acc_wr_en),
                                    (output_buf, cu.out_wr_addr, cu.out_wr_data, cu.out_wr_en)):
            wp = mem.write_port()
            m.d.comb += [wp.addr.eq(addr), wp.data.eq(data), wp.en.eq(en)]
        for mem, data in ((acc_buf, dma.rd_acc), (output_buf, dma.rd_output)):
            rp = mem.read_port()
            word = rp.data
            if mem is acc_buf:      # STORE of accumulators writes their int32 low halves
                word = Cat(*(rp.data[ACC_LANE_BITS * c:ACC_LANE_BITS * c + 32] for c in range(g.cols)))
            m.d.comb += [rp.addr.eq(dma.rd_addr), data.eq(word)]

