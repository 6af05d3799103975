"""Vector DMA: executes VRUN, streaming DRAM operands through the vector unit and its results
back to DRAM, as the VCONFIG register file describes (hw/vector_isa.py, "stream pattern").

Busy cycle s = 0 is the cycle after dispatch. In it the vector unit is offered (and, being
idle, accepts) the configuration's instruction. Reads: each beat needs read transactions
for A (1, or `lanes` for a gather) and then for B (none without b_on); transaction j
issues at busy cycle s_j, one per cycle at most, when the byte credit allows:

    s_j = max(s_{j-1} + g_j, ceil(cum_j / B) - 1)

g_j = 1, except in indirect mode (a_indirect: B, the row index, is read first, then A at
its address + index * a_lane), where A's read waits for the index: g = 2.

cum_j = the costs of transactions 0..j, B = dram_bytes_per_cycle. A transaction costs the
bytes it reads, and a beat's last transaction also pays for the result its beat will write
(lanes * o_bytes when the beat emits one), so reads and writes share the bandwidth B.
Read data returns one cycle after the read (the DRAM port's latency) and is captured;
the beat whose last transaction issued at s enters the vector unit at s + 2. The vector
unit's result (VECTOR_LATENCY_CYCLES later; `o` is always ready, so it never stalls) is
written in the cycle it appears, on the write channel, at the output stream's address.
Busy until the vector unit is idle again: s_last + 9 cycles in all (s_last + 4 for
LOAD_TABLE, which writes nothing). qsim/npu/cycle_model.py computes the same.
"""
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .params import Geometry
from .vector import VectorUnit
from .vector_isa import (INSTR_FIELDS, PATTERN_BITS, PATTERN_FIELDS, REDUCTIONS, STREAM_LEVELS,
                         VECTOR_LATENCY_CYCLES, VectorOp, config_bits)

CREDIT_BITS = 48
ASSEMBLY_CYCLES = 2         # last read issued at s -> data captured at s + 1 -> beat offered at s + 2


def pattern_field(bits, name: str):
    pos = 0
    for n, width, signed_ in PATTERN_FIELDS:
        if n == name:
            value = bits[pos:pos + width]
            return value.as_signed() if signed_ else value
        pos += width
    raise KeyError(name)


def _instr_field(bits, name: str):
    pos = PATTERN_BITS
    for n, width, signed_ in INSTR_FIELDS:
        if n == name:
            return bits[pos:pos + width]
        pos += width
    raise KeyError(name)


def _sext(value, width_bytes, data):
    """data's low `width_bytes` (1, 2 or 4, a signal) bytes, sign-extended to 32 bits."""
    return Mux(width_bytes == 1, data[:8].as_signed(),
               Mux(width_bytes == 2, data[:16].as_signed(), data[:32].as_signed()))


class _Walker:
    """Loop indices over STREAM_LEVELS levels and the index of the lowest level that advances."""

    def __init__(self, m, counts, name):
        self.idx = [Signal(16, name=f"{name}_i{i}") for i in range(STREAM_LEVELS)]
        self.at_max = [Signal(name=f"{name}_max{i}") for i in range(STREAM_LEVELS)]
        for i in range(STREAM_LEVELS):
            m.d.comb += self.at_max[i].eq(self.idx[i] + 1 >= counts[i])
        self.all_max = Signal(name=f"{name}_done")
        m.d.comb += self.all_max.eq(Cat(*self.at_max).all())
        self.m, self.counts = m, counts

    def step(self, address_regs):
        """Sync statements advancing the indices and, per (register, steps), the address."""
        m = self.m
        for i in range(STREAM_LEVELS):
            lower_max = Cat(*self.at_max[:i]).all() if i else Const(1)
            with m.If(lower_max & ~self.at_max[i]):
                m.d.sync += self.idx[i].eq(self.idx[i] + 1)
                for j in range(i):
                    m.d.sync += self.idx[j].eq(0)
                for reg, steps in address_regs:
                    m.d.sync += reg.eq(reg + steps[i])

    def reset(self):
        return [i.eq(0) for i in self.idx]


class _Config:
    """The VCONFIG register's fields as the DMA reads them, and what follows from them: per
    operand stream its read shape (contiguous: lane == bytes, broadcast: lane == 0, else a
    gather of `lanes` reads) and the bytes a beat's read costs."""

    def __init__(self, m, cfg):
        self.bits = cfg
        f = self.field
        self.lanes, self.group = f("lanes"), f("group")
        self.counts = [f(f"count{i}") for i in range(STREAM_LEVELS)]
        self.o_counts = [f(f"o_count{i}") for i in range(STREAM_LEVELS)]
        op = _instr_field(cfg, "op")
        is_reduce = Const(0)
        for r in REDUCTIONS:
            is_reduce = is_reduce | (op == r)
        self.is_reduce, self.table_load = is_reduce, op == VectorOp.LOAD_TABLE
        self.indirect = f("a_indirect")
        self.a_bytes, self.a_lane, self.a_gather, self.a_reads, self.a_cost = self._stream("a", self.indirect)
        self.b_bytes, self.b_lane, self.b_gather, self.b_reads, self.b_cost = self._stream("b")
        self.b_on = f("b_on")
        reads_per_beat = Signal(17)
        m.d.comb += reads_per_beat.eq(self.a_reads + Mux(self.b_on, self.b_reads, 0))
        self.reads_per_beat = reads_per_beat
        self.o_bytes = f("o_bytes")

    def field(self, name: str):
        return pattern_field(self.bits, name)

    def steps(self, prefix: str) -> list:
        return [self.field(f"{prefix}_step{i}") for i in range(STREAM_LEVELS)]

    def _stream(self, prefix, indirect=Const(0)):
        """Indirect A (a_lane = row bytes) is always one contiguous read."""
        nbytes, lane = self.field(f"{prefix}_bytes"), self.field(f"{prefix}_lane")
        gather = (lane != 0) & (lane != nbytes) & ~indirect
        reads = Mux(gather, self.lanes, 1)
        cost = Mux(~indirect & (gather | (lane == 0)), nbytes, self.lanes * nbytes)
        return nbytes, lane, gather, reads, cost


@dataclass
class _InFlight:
    """The read issued this cycle, as the next cycle captures it."""
    active: Signal          # beats still to read
    cfg_offer: Signal       # the configuration's instruction offered to the vector unit
    d_valid: Signal         # read data arrives this cycle
    d_is_a: Signal          # ... for operand A (else B)
    d_last: Signal          # ... and it is its beat's last read
    d_flag: Signal          # ... of a beat that ends its reduction group
    d_lane: Signal          # ... for this lane (gathers)


class VectorDMA(wiring.Component):
    def __init__(self, geom: Geometry):
        self.geom = geom
        P = geom.dram_port_bytes
        super().__init__({
            "start": In(1), "busy": Out(1), "cfg": In(config_bits(geom.cols)),
            "raddr": Out(32), "re": Out(1), "rdata": In(8 * P),
            "waddr": Out(32), "we": Out(1), "wdata": Out(8 * P), "wlen": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.vector = vu = VectorUnit(self.geom.cols)
        cfg = _Config(m, self.cfg)
        C = self.geom.cols
        pa = [Signal(signed(32), name=f"pa{c}") for c in range(C)]
        pb = [Signal(signed(32), name=f"pb{c}") for c in range(C)]
        read = self._issue_reads(m, vu, cfg, pb[0])
        i_valid = self._assemble_beats(m, vu, cfg, read, pa, pb)
        self._write_results(m, vu, cfg)
        with m.If(self.busy & ~self.start & ~read.active & ~read.d_valid & ~i_valid & ~read.cfg_offer
                  & ~vu.busy):
            m.d.sync += self.busy.eq(0)
        assert VECTOR_LATENCY_CYCLES == 5 and ASSEMBLY_CYCLES == 2   # the durations in the docstring
        return m

    def _issue_reads(self, m, vu, cfg: _Config, pb0) -> _InFlight:
        """The read transactions of every beat, one per cycle when the byte credit allows, and
        the walk of the operands' addresses (pb0: B's lane 0, the index of an indirect beat)."""
        f = cfg.field
        active, cfg_offer = Signal(), Signal()
        walker = _Walker(m, cfg.counts, "beat")
        a_addr, b_addr, a_lane_addr, b_lane_addr = (Signal(32, name=n) for n in
                                                    ("a_addr", "b_addr", "a_lane_addr", "b_lane_addr"))
        tr = Signal(17)                 # read transaction within the beat
        gpos = Signal(24)               # beat position within its reduction group
        granted, consumed = Signal(CREDIT_BITS), Signal(CREDIT_BITS)

        with m.If(self.start):
            m.d.sync += [self.busy.eq(1), active.eq(1), cfg_offer.eq(1), tr.eq(0), gpos.eq(0),
                         granted.eq(0), consumed.eq(0), *walker.reset(),
                         a_addr.eq(f("a_base")), b_addr.eq(f("b_base")),
                         a_lane_addr.eq(f("a_base")), b_lane_addr.eq(f("b_base"))]
        with m.Elif(cfg_offer):
            m.d.sync += cfg_offer.eq(0)
        m.d.comb += [vu.cfg.valid.eq(cfg_offer), vu.cfg.payload.eq(cfg.bits[PATTERN_BITS:])]

        # The transaction on offer and its cost. Indirect: B (the row index) first, then A,
        # which waits a cycle for the index (`index_wait`) and reads at a_addr + index * row.
        is_a = Mux(cfg.indirect, tr >= cfg.b_reads, tr < cfg.a_reads)
        index_wait = Signal()
        last_tr = tr + 1 >= cfg.reads_per_beat
        group_end = gpos + 1 >= cfg.group
        emits = ~cfg.table_load & (~cfg.is_reduce | group_end)
        cost = Signal(CREDIT_BITS)
        m.d.comb += cost.eq(Mux(is_a, cfg.a_cost, cfg.b_cost) + Mux(last_tr & emits, cfg.lanes * cfg.o_bytes, 0))
        granted_now = Signal(CREDIT_BITS)
        go = Signal()
        m.d.comb += [granted_now.eq(granted + self.geom.dram_bytes_per_cycle),
                     go.eq(active & ~index_wait & (granted_now >= consumed + cost))]
        m.d.sync += index_wait.eq(go & cfg.indirect & ~is_a)
        row_offset = Signal(32)
        m.d.comb += row_offset.eq(pb0 * cfg.a_lane)
        with m.If(active):
            m.d.sync += granted.eq(granted_now)
        m.d.comb += [self.re.eq(go),
                     self.raddr.eq(Mux(is_a, Mux(cfg.a_gather, a_lane_addr,
                                                 a_addr + Mux(cfg.indirect, row_offset, 0)),
                                       Mux(cfg.b_gather, b_lane_addr, b_addr)))]

        # What the read in flight fills (captured the next cycle).
        d_valid, d_is_a, d_last, d_flag = Signal(), Signal(), Signal(), Signal()
        d_lane = Signal(16)
        m.d.sync += [d_valid.eq(go), d_is_a.eq(is_a), d_last.eq(go & last_tr), d_flag.eq(group_end),
                     d_lane.eq(Mux(is_a, tr, tr - cfg.a_reads))]
        with m.If(go):
            m.d.sync += consumed.eq(consumed + cost)
            with m.If(last_tr):
                m.d.sync += [tr.eq(0), gpos.eq(Mux(group_end, 0, gpos + 1))]
                a_steps, b_steps = cfg.steps("a"), cfg.steps("b")
                # the next beat starts at the advanced address; its gathers start there too
                for i in range(STREAM_LEVELS):
                    lower_max = Cat(*walker.at_max[:i]).all() if i else Const(1)
                    with m.If(lower_max & ~walker.at_max[i]):
                        m.d.sync += [a_lane_addr.eq(a_addr + a_steps[i]), b_lane_addr.eq(b_addr + b_steps[i])]
                walker.step([(a_addr, a_steps), (b_addr, b_steps)])
                with m.If(walker.all_max):
                    m.d.sync += active.eq(0)
            with m.Else():
                m.d.sync += tr.eq(tr + 1)
                with m.If(is_a & cfg.a_gather):
                    m.d.sync += a_lane_addr.eq(a_lane_addr + cfg.a_lane)
                with m.If(~is_a & cfg.b_gather):
                    m.d.sync += b_lane_addr.eq(b_lane_addr + cfg.b_lane)
        return _InFlight(active, cfg_offer, d_valid, d_is_a, d_last, d_flag, d_lane)

    def _assemble_beats(self, m, vu, cfg: _Config, read: _InFlight, pa, pb):
        """Captures read data into the beat registers pa, pb; the beat is offered the cycle after
        its last read's data. Returns the beat-offered signal."""
        C = self.geom.cols
        i_valid, i_last = Signal(), Signal()
        with m.If(read.d_valid):
            for regs, nbytes, lane_stride, gather in ((pa, cfg.a_bytes, cfg.a_lane, cfg.a_gather),
                                                      (pb, cfg.b_bytes, cfg.b_lane, cfg.b_gather)):
                with m.If(read.d_is_a == (regs is pa)):
                    first = _sext(nbytes, nbytes, self.rdata)
                    for c in range(C):
                        contiguous = _sext(nbytes, nbytes, Mux(nbytes == 1, self.rdata[8 * c:],
                                                               Mux(nbytes == 2, self.rdata[16 * c:],
                                                                   self.rdata[32 * c:])))
                        with m.If(gather):
                            with m.If(read.d_lane == c):
                                m.d.sync += regs[c].eq(first)
                        with m.Elif(lane_stride == 0):
                            m.d.sync += regs[c].eq(first)
                        with m.Else():
                            m.d.sync += regs[c].eq(contiguous)
        m.d.sync += [i_valid.eq(read.d_last), i_last.eq(read.d_flag)]
        m.d.comb += [vu.i.valid.eq(i_valid), vu.i.payload.last.eq(i_last)]
        for c in range(C):
            m.d.comb += [vu.i.payload.a[c].eq(pa[c]), vu.i.payload.b[c].eq(pb[c])]
        return i_valid

    def _write_results(self, m, vu, cfg: _Config):
        """Results written as they appear, contiguous lanes of o_bytes each."""
        C = self.geom.cols
        o_walker = _Walker(m, cfg.o_counts, "out")
        o_addr = Signal(32)
        with m.If(self.start):
            m.d.sync += [o_addr.eq(cfg.field("o_base")), *o_walker.reset()]
        m.d.comb += vu.o.ready.eq(1)
        packed = {n: Cat(*(vu.o.payload[c][:8 * n] for c in range(C))) for n in (1, 2, 4)}
        o_bytes = cfg.o_bytes
        m.d.comb += [self.we.eq(vu.o.valid), self.waddr.eq(o_addr), self.wlen.eq(cfg.lanes * o_bytes),
                     self.wdata.eq(Mux(o_bytes == 1, packed[1], Mux(o_bytes == 2, packed[2], packed[4])))]
        with m.If(vu.o.valid):
            o_walker.step([(o_addr, cfg.steps("o"))])
