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
"""
from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .compute import ComputeUnit
from .dma import DMA, field
from .isa import INSTR_BITS, Opcode
from .params import PARAM_DEPTH_WORDS, Geometry
from .vdma import VectorDMA
from .vector_isa import config_bits
from .wdma import WindowDMA
from .window_isa import WINDOW_BITS, window_base, window_words


class NPU(wiring.Component):
    def __init__(self, geom: Geometry):
        self.geom = geom
        P = geom.dram_port_bytes
        super().__init__({
            "instr": In(stream.Signature(unsigned(INSTR_BITS))),
            "idle": Out(1),
            "dram_addr": Out(32), "dram_re": Out(1), "dram_we": Out(1),
            "dram_wdata": Out(8 * P), "dram_wlen": Out(16), "dram_rdata": In(8 * P),
            "dram_waddr": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        m.submodules.dma = dma = DMA(g)
        m.submodules.compute = cu = ComputeUnit(g)
        m.submodules.vdma = vd = VectorDMA(g)
        m.submodules.wdma = wd = WindowDMA(g)
        # The configuration register file: LOAD ... VCONFIG writes whole words; the vector
        # configuration first, then the window descriptor (hw/window_isa.py).
        P = g.dram_port_bytes
        wbase = window_base(g.cols, P)
        vcfg = [Signal(8 * P, name=f"vconfig{k}") for k in range(wbase + window_words(P))]
        for k, word in enumerate(vcfg):
            with m.If(dma.wr_vconfig & (dma.wr_addr == k)):
                m.d.sync += word.eq(dma.wr_data)
        m.d.comb += [vd.cfg.eq(Cat(*vcfg[:wbase])[:config_bits(g.cols)]),
                     wd.desc.eq(Cat(*vcfg[wbase:])[:WINDOW_BITS])]

        # Buffers: synchronous read ports (data one cycle after the address).
        m.submodules.input_buf = input_buf = memory.Memory(
            shape=unsigned(8 * g.input_word_bytes), depth=g.input_depth_words, init=[])
        m.submodules.weight_buf = weight_buf = memory.Memory(
            shape=unsigned(8 * g.weight_word_bytes), depth=g.weight_depth_words, init=[])
        m.submodules.param_buf = param_buf = memory.Memory(
            shape=unsigned(8 * g.param_word_bytes), depth=PARAM_DEPTH_WORDS, init=[])
        m.submodules.acc_buf = acc_buf = memory.Memory(
            shape=unsigned(8 * g.acc_word_bytes), depth=g.acc_depth_words, init=[])
        m.submodules.output_buf = output_buf = memory.Memory(
            shape=unsigned(8 * g.output_word_bytes), depth=g.acc_depth_words, init=[])

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
            m.d.comb += [rp.addr.eq(dma.rd_addr), data.eq(rp.data)]

        vbusy = vd.busy
        m.d.comb += [self.dram_addr.eq(Mux(vbusy, vd.raddr, Mux(wd.busy, wd.raddr, dma.dram_addr))),
                     self.dram_re.eq(dma.dram_re | vd.re | wd.re), self.dram_we.eq(dma.dram_we | vd.we),
                     self.dram_waddr.eq(Mux(vbusy, vd.waddr, dma.dram_addr)),
                     self.dram_wdata.eq(Mux(vbusy, vd.wdata, dma.dram_wdata)),
                     self.dram_wlen.eq(Mux(vbusy, vd.wlen, dma.dram_wlen)),
                     dma.dram_rdata.eq(self.dram_rdata), vd.rdata.eq(self.dram_rdata),
                     wd.rdata.eq(self.dram_rdata)]

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
        dram_busy = dma.busy | vd.busy | wd.busy
        fire = Signal()
        m.d.comb += fire.eq(cur_valid & ~(to_dma & dram_busy) & ~(to_compute & cu.busy)
                            & ~(wait_dma & dram_busy) & ~(wait_compute & cu.busy))
        m.d.comb += [self.instr.ready.eq(~cur_valid | fire),
                     dma.instr.eq(cur), cu.instr.eq(cur), wd.instr.eq(cur),
                     wd.start.eq(fire & (opcode == Opcode.LOADW)),
                     dma.start.eq(fire & ((opcode == Opcode.LOAD) | (opcode == Opcode.STORE))),
                     vd.start.eq(fire & (opcode == Opcode.VRUN)), cu.start.eq(fire & to_compute),
                     self.idle.eq(~cur_valid & ~dram_busy & ~cu.busy)]
        with m.If(self.instr.valid & self.instr.ready):
            m.d.sync += [cur.eq(self.instr.payload), cur_valid.eq(1)]
        with m.Elif(fire):
            m.d.sync += cur_valid.eq(0)
        return m
