"""DMA unit: executes LOAD (DRAM -> input/weight/param buffer or the vector configuration
register file) and STORE (output/
accumulator buffer -> DRAM), one buffer word per beat.

Bandwidth: a byte credit grows by dram_bytes_per_cycle (B) each busy cycle and a
beat of word_bytes (W) bytes needs W credit, at most one beat per cycle; so beat
j issues at busy cycle s_j = max(j, ceil((j+1)W/B) - 1) (credit starts at 0 on
every instruction and is capped at W, which does not change s_j).
LOAD beat: DRAM read at s_j, data (fixed 1-cycle latency) written to the buffer
at s_j + 1; bytes beyond W are written as zero. STORE beat: buffer read at s_j,
DRAM write of W bytes at s_j + 1. Busy for s_{n-1} + 2 cycles (n = count >= 1).
"""
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .isa import INSTR_BITS, LoadBuffer, Opcode, StoreBuffer, layout
from .params import Geometry


def field(instr, opcode: Opcode, name: str):
    lo, width, signed = layout(opcode)[name]
    value = instr[lo:lo + width]
    return value.as_signed() if signed else value


class DMA(wiring.Component):
    def __init__(self, geom: Geometry):
        self.geom = geom
        P = geom.dram_port_bytes
        super().__init__({
            "start": In(1), "instr": In(INSTR_BITS), "busy": Out(1),
            "dram_addr": Out(32), "dram_re": Out(1), "dram_we": Out(1),
            "dram_wdata": Out(8 * P), "dram_wlen": Out(16), "dram_rdata": In(8 * P),
            # buffer write side (LOAD): one address/data shared, enables per buffer
            "wr_addr": Out(16), "wr_data": Out(8 * P),
            "wr_input": Out(1), "wr_weight": Out(1), "wr_param": Out(1), "wr_vconfig": Out(1),
            # buffer read side (STORE)
            "rd_addr": Out(16), "rd_en": Out(1),
            "rd_output": In(8 * geom.output_buffer_word_bytes), "rd_acc": In(8 * geom.acc_word_bytes),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        is_store = Signal()
        buf = Signal(2)
        buf_addr, count = Signal(16), Signal(16)
        addr_ptr, stride, word_bytes = Signal(32), Signal(24), Signal(16)
        issued = Signal(17)
        credit = Signal(17)
        beat_d = Signal()           # a beat issued last cycle: its data moves this cycle
        index_d = Signal(16)
        addr_d = Signal(32)

        with m.If(self.start):
            m.d.sync += [
                self.busy.eq(1),
                is_store.eq(field(self.instr, Opcode.LOAD, "opcode") == Opcode.STORE),
                buf.eq(field(self.instr, Opcode.LOAD, "buf")),
                buf_addr.eq(field(self.instr, Opcode.LOAD, "buf_addr")),
                count.eq(field(self.instr, Opcode.LOAD, "count")),
                addr_ptr.eq(field(self.instr, Opcode.LOAD, "dram_addr")),
                stride.eq(field(self.instr, Opcode.LOAD, "dram_stride")),
                word_bytes.eq(field(self.instr, Opcode.LOAD, "word_bytes")),
                issued.eq(0), credit.eq(0), beat_d.eq(0),
            ]

        credit_now = Signal(18)
        go = Signal()
        m.d.comb += [credit_now.eq(credit + g.dram_bytes_per_cycle),
                     go.eq(self.busy & (issued < count) & (credit_now >= word_bytes))]
        with m.If(self.busy):
            left = Signal(18)
            m.d.comb += left.eq(credit_now - Mux(go, word_bytes, 0))
            m.d.sync += [credit.eq(Mux(left > word_bytes, word_bytes, left)), beat_d.eq(go),
                         index_d.eq(issued), addr_d.eq(addr_ptr)]
            with m.If(go):
                m.d.sync += [issued.eq(issued + 1), addr_ptr.eq(addr_ptr + stride)]
            with m.If(beat_d & (issued == count) & ~go):
                m.d.sync += [self.busy.eq(0), beat_d.eq(0)]

        # Issue side: DRAM read (LOAD) or buffer read (STORE) at s_j.
        m.d.comb += [self.rd_addr.eq(buf_addr + issued), self.rd_en.eq(go & is_store)]
        with m.If(~is_store):
            m.d.comb += [self.dram_re.eq(go), self.dram_addr.eq(addr_ptr)]
        # Data side at s_j + 1.
        # Byte mask of the low word_bytes bytes, computed once per instruction.
        mask = Signal(8 * g.dram_port_bytes)
        with m.If(self.start):
            new_bytes = field(self.instr, Opcode.LOAD, "word_bytes")
            m.d.sync += mask.eq(Cat(*((b < new_bytes).replicate(8) for b in range(g.dram_port_bytes))))
        with m.If(is_store):
            m.d.comb += [self.dram_we.eq(beat_d), self.dram_addr.eq(addr_d),
                         self.dram_wlen.eq(word_bytes),
                         self.dram_wdata.eq(Mux(buf == StoreBuffer.ACCUMULATOR,
                                                    self.rd_acc, self.rd_output) & mask)]
        with m.Else():
            m.d.comb += [self.wr_addr.eq(buf_addr + index_d), self.wr_data.eq(self.dram_rdata & mask),
                         self.wr_input.eq(beat_d & (buf == LoadBuffer.INPUT)),
                         self.wr_weight.eq(beat_d & (buf == LoadBuffer.WEIGHT)),
                         self.wr_param.eq(beat_d & (buf == LoadBuffer.PARAM)),
                         self.wr_vconfig.eq(beat_d & (buf == LoadBuffer.VCONFIG))]
        return m
