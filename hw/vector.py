"""Vector unit: C int32 lanes of TOSA 0.30 elementwise, table, pooling and reduction operators.

Ports (README.md, "Vector unit", has the full contract):
- `cfg`: stream of instructions (hw/vector_isa.py); accepted only while the unit is
  not `busy`, latched for the instruction's `count` input beats.
- `i`: stream of beats {a[C], b[C], last}: operands as int32 lanes (int8/int16
  values sign-extended by the feeder), `last` closes a reduction group.
- `o`: stream of C int32 lanes (the feeder's writer narrows them to the output type).

Pipeline (one beat per cycle, stall-all back-pressure: every register holds while
`o` is valid and not ready; a stage's registers load only when it receives a beat, so an
idle unit computes nothing), beat accepted in cycle t, result valid in t + 5:
  P0  a - zp_a, b - zp_b                                   (32-bit wrap)
  P1  input scalers A', B' (ApplyScale, hw/scale.py)        or bypass
  P2  ALU / MUL (ApplyScale with a signed multiplier) / table read / reduction
      accumulators; the reciprocal ROM is read for AVG
  P3  output scaler (per-lane multiplier and shift, or the ROM's for AVG) or bypass
  P4  + zp_o, clamp to [clamp_lo, clamp_hi]                 (output register)
Reductions emit one result per group, when its `last` beat leaves P2.
"""
from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .scale import ApplyScale, saturate
from .vector_isa import (DEFAULT_MAX_POOL_COUNT, INSTR_FIELDS, LANE_FIELDS, REDUCTIONS, TABLE_DEPTH,
                         VECTOR_LATENCY_CYCLES, VectorOp)


def _fields_layout(spec) -> data.StructLayout:
    return data.StructLayout({name: (signed if s else unsigned)(w) for name, w, s in spec})


def config_layout(lanes: int) -> data.StructLayout:
    return data.StructLayout({"instr": _fields_layout(INSTR_FIELDS),
                              "lanes": data.ArrayLayout(_fields_layout(LANE_FIELDS), lanes)})


def beat_layout(lanes: int) -> data.StructLayout:
    return data.StructLayout({"a": data.ArrayLayout(signed(32), lanes),
                              "b": data.ArrayLayout(signed(32), lanes), "last": 1})


def reciprocal_rom(max_count: int) -> list[int]:
    """Entry count-1 = multiplier | shift << 31 of TOSA reciprocal_scale(count) (spec 1.9.2):
    k = ceil(log2(count)), multiplier = ((1 << 30) + 1) << k) // count, shift = 30 + k."""
    out = []
    for count in range(1, max_count + 1):
        k = (count - 1).bit_length()
        out.append(((((1 << 30) + 1) << k) // count) | ((30 + k) << 31))
    return out


class VectorUnit(wiring.Component):
    def __init__(self, lanes: int, max_pool_count: int = DEFAULT_MAX_POOL_COUNT):
        if lanes < 1 or max_pool_count < 1:
            raise ValueError(f"lanes ({lanes}) and max_pool_count ({max_pool_count}) must be >= 1")
        self.lanes = lanes
        self.max_pool_count = max_pool_count
        super().__init__({
            "cfg": In(stream.Signature(config_layout(lanes))),
            "i": In(stream.Signature(beat_layout(lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(signed(32), lanes))),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        C = self.lanes
        cfg = Signal(config_layout(C))
        ins = cfg.instr
        op = ins.op
        is_reduce = Signal()
        m.d.comb += is_reduce.eq(_any_of(op, REDUCTIONS))
        is_avg, is_table_load = op == VectorOp.AVG, op == VectorOp.LOAD_TABLE

        # Instruction bookkeeping: `remaining` beats to accept, `beat` = beats accepted.
        remaining, beat = Signal(24), Signal(24)
        valid0, valid1, valid2, valid3 = Signal(), Signal(), Signal(), Signal()
        last0, last1 = Signal(), Signal()
        adv = Signal()
        m.d.comb += adv.eq(~self.o.valid | self.o.ready)
        busy = remaining.any() | valid0 | valid1 | valid2 | valid3 | self.o.valid
        m.d.comb += [self.busy.eq(busy), self.cfg.ready.eq(~busy),
                     self.i.ready.eq(adv & remaining.any())]
        take = Signal()
        m.d.comb += take.eq(self.i.valid & self.i.ready)
        pos = Signal(24)        # position in its group of the beat in P1 (0 = first)
        with m.If(self.cfg.valid & self.cfg.ready):
            m.d.sync += [cfg.eq(self.cfg.payload), remaining.eq(self.cfg.payload.instr.count),
                         beat.eq(0), pos.eq(0)]
        with m.Elif(take):
            m.d.sync += [remaining.eq(remaining - 1), beat.eq(beat + 1)]

        with m.If(adv):
            m.d.sync += [valid0.eq(take & ~is_table_load), last0.eq(self.i.payload.last),
                         valid1.eq(valid0), last1.eq(last0),
                         valid2.eq(valid1 & (~is_reduce | last1)),
                         valid3.eq(valid2), self.o.valid.eq(valid3)]
        with m.If(adv & valid1):
            m.d.sync += pos.eq(Mux(last1, 0, pos + 1))
        first = pos == 0

        # Reciprocal ROM for AVG, shared by all lanes (every lane's group has the same count).
        rom = Memory(shape=unsigned(37), depth=self.max_pool_count, init=reciprocal_rom(self.max_pool_count))
        m.submodules.reciprocal = rom
        rom_rd = rom.read_port()
        # Each stage register loads only when its stage holds a beat (and the pipeline advances):
        # results are unchanged, and an idle unit does no arithmetic (Verilator evaluates the
        # stage logic only when its register loads, so an idle vector unit costs the NPU's array
        # programs little).
        en1, en2, en3, en4 = adv & valid0, adv & valid1, adv & valid2, adv & valid3
        m.d.comb += [rom_rd.addr.eq(pos), rom_rd.en.eq(en2)]
        rom_mult, rom_shift = rom_rd.data[:31], rom_rd.data[31:37]

        for c in range(C):
            lane = _Lane(m, c, ins, en2, valid1)
            # P0
            a0, b0 = Signal(signed(32), name=f"a0_{c}"), Signal(signed(32), name=f"b0_{c}")
            with m.If(take):
                m.d.sync += [a0.eq((self.i.payload.a[c] - ins.zp_a)[:32]),
                             b0.eq((self.i.payload.b[c] - ins.zp_b)[:32])]
            # P1
            a1 = lane.scaled(a0, ins.scale_a, ins.mult_a, ins.shift_a, ins.dr_a, "a", en1)
            b1 = lane.scaled(b0, ins.scale_b, ins.mult_b, ins.shift_b, ins.dr_b, "b", en1)
            # P2
            v2 = lane.combine(a1, b1, first, pos, self.i.payload.a[0], take & is_table_load, beat)
            # P3
            y3 = lane.scaled(v2, ins.scale_o | is_avg, Mux(is_avg, rom_mult, cfg.lanes[c].mult_o),
                             Mux(is_avg, rom_shift, cfg.lanes[c].shift_o), ins.dr_o & ~is_avg, "o", en3)
            # P4
            with_zp = Signal(signed(34), name=f"with_zp{c}")
            m.d.comb += with_zp.eq(y3 + ins.zp_o)
            with m.If(en4):
                m.d.sync += self.o.payload[c].eq(saturate(with_zp, ins.clamp_lo, ins.clamp_hi))
        return m


def _count_leading_zeros(value):
    """Leading zero bits of the 32-bit `value` (32 for 0) as one expression: the highest set
    bit wins. No named signals, so a simulator can leave it unevaluated unless CLZ is selected."""
    out = Const(32, 6)
    for bit in range(32):           # the outermost Mux tests the highest bit
        out = Mux(value[bit], 31 - bit, out)
    return out


def _truncating_divide(a, b):
    """a / b rounded toward zero (C division, spec 3.3.2 idiv), low 32 bits, as one expression:
    the magnitudes divided unsigned, the sign applied after. Where TOSA REQUIREs (b != 0, no
    minimum / -1) the hardware gives -1 for b = 0 (all quotient bits set, as a restoring divider
    and RISC-V's DIV do) and minimum for minimum / -1 (the quotient 2^31 wrapped)."""
    mag_a = Mux(a < 0, -a, a)[:32]
    mag_b = Mux(b < 0, -b, b)[:32]
    quotient = (mag_a // Mux(mag_b == 0, 1, mag_b))[:32]
    negative = (a < 0) ^ (b < 0)
    signed_quotient = ((quotient ^ negative.replicate(32)) + negative)[:32]   # -q as ~q + 1: one divider
    return Mux(b == 0, -1, signed_quotient.as_signed())


def _any_of(op, ops):
    out = Const(0)
    for o in ops:
        out = out | (op == o)
    return out


class _Lane:
    """The per-lane datapath of P1..P3, built into the unit's module."""

    def __init__(self, m: Module, c: int, ins, en2, valid1):
        # en2: P2's registers load (a beat in P1 and the pipeline advancing)
        self.m, self.c, self.ins, self.en2, self.valid1 = m, c, ins, en2, valid1

    def scaled(self, value, enable, multiplier, shift, double_round, name, load):
        """One register stage, loaded when `load`: apply_scale_32 of `value` when `enable`, else
        `value` delayed."""
        m, c = self.m, self.c
        scale = ApplyScale()
        m.submodules[f"scale_{name}{c}"] = scale
        m.d.comb += [scale.en.eq(load), scale.value.eq(value), scale.multiplier.eq(multiplier),
                     scale.shift.eq(shift), scale.double_round.eq(double_round)]
        bypass = Signal(signed(32), name=f"{name}_bypass{c}")
        with m.If(load):
            m.d.sync += bypass.eq(value)
        out = Signal(signed(32), name=f"{name}_scaled{c}")
        m.d.comb += out.eq(Mux(enable, scale.result, bypass))
        return out

    def combine(self, a, b, first, pos, table_data, table_we, table_addr):
        """P2: the ALU, MUL, table lookups and reduction accumulators; returns the value for P3."""
        m, c, ins, adv = self.m, self.c, self.ins, self.en2
        op = ins.op
        amount = Signal(5, name=f"amount{c}")          # shift amount: B' modulo 32
        amount_less_1 = Signal(5, name=f"amount_less_1_{c}")   # wraps to 31 for 0 (then unused)
        m.d.comb += [amount.eq(b[:5]), amount_less_1.eq(amount - 1)]
        alu = Signal(signed(32), name=f"alu_next{c}")
        with m.Switch(op):
            with m.Case(VectorOp.ADD):
                m.d.comb += alu.eq((a + b)[:32])
            with m.Case(VectorOp.SUB):
                m.d.comb += alu.eq((a - b)[:32])
            with m.Case(VectorOp.MAXIMUM):
                m.d.comb += alu.eq(Mux(a > b, a, b))
            with m.Case(VectorOp.MINIMUM):
                m.d.comb += alu.eq(Mux(a < b, a, b))
            with m.Case(VectorOp.ASR):
                m.d.comb += alu.eq(a >> amount)
            with m.Case(VectorOp.ASR_ROUND):
                # round: bit amount-1 of a, the last bit shifted out (spec 2.5.2); |a >> 1| + 1 fits
                m.d.comb += alu.eq((a >> amount) + ((amount != 0) & a.bit_select(amount_less_1, 1)))
            with m.Case(VectorOp.LSL):
                m.d.comb += alu.eq((a << amount)[:32])
            with m.Case(VectorOp.LSR):
                # (unsigned in_out_t)a: the type's bits (mul_shift = 8, 16 or 32) zero-extended
                unsigned_a = Mux(ins.mul_shift == 8, a[:8], Mux(ins.mul_shift == 16, a[:16], a[:32]))
                m.d.comb += alu.eq(unsigned_a.as_unsigned() >> amount)
            with m.Case(VectorOp.CLZ):
                m.d.comb += alu.eq(_count_leading_zeros(a))
            with m.Case(VectorOp.INTDIV):
                m.d.comb += alu.eq(_truncating_divide(a, b))
            with m.Case(VectorOp.GREATER):
                m.d.comb += alu.eq(a > b)
            with m.Case(VectorOp.GREATER_EQUAL):
                m.d.comb += alu.eq(a >= b)
            with m.Case(VectorOp.EQUAL):
                m.d.comb += alu.eq(a == b)
            with m.Case(VectorOp.SELECT):
                m.d.comb += alu.eq(Mux(a != 0, b, 0))
            with m.Case(VectorOp.AND):
                m.d.comb += alu.eq(a & b)
            with m.Case(VectorOp.OR):
                m.d.comb += alu.eq(a | b)
            with m.Case(VectorOp.XOR):
                m.d.comb += alu.eq(a ^ b)
            with m.Case(VectorOp.ABS):
                m.d.comb += alu.eq(Mux(a < 0, -a, a)[:32])
            with m.Default():
                m.d.comb += alu.eq(a)
        alu2 = Signal(signed(32), name=f"alu{c}")
        with m.If(adv):
            m.d.sync += alu2.eq(alu)

        mul = ApplyScale(signed(32))
        m.submodules[f"mul{c}"] = mul
        m.d.comb += [mul.en.eq(adv), mul.value.eq(a), mul.multiplier.eq(b),
                     mul.shift.eq(ins.mul_shift), mul.double_round.eq(0)]

        # Tables: lo[i] = table[i], hi[i] = table[i + 1] (LOAD_TABLE beat k writes both).
        lo = Memory(shape=signed(16), depth=TABLE_DEPTH, init=[])
        hi = Memory(shape=signed(16), depth=TABLE_DEPTH, init=[])
        m.submodules[f"table_lo{c}"], m.submodules[f"table_hi{c}"] = lo, hi
        lo_wr, hi_wr = lo.write_port(), hi.write_port()
        m.d.comb += [lo_wr.addr.eq(table_addr), lo_wr.data.eq(table_data[:16]),
                     lo_wr.en.eq(table_we & (table_addr < TABLE_DEPTH)),
                     hi_wr.addr.eq(table_addr - 1), hi_wr.data.eq(table_data[:16]),
                     hi_wr.en.eq(table_we & (table_addr >= 1) & (table_addr <= TABLE_DEPTH))]
        clipped = Signal(signed(16), name=f"clipped{c}")
        m.d.comb += clipped.eq(saturate(a, Const(-32768, signed(16)), Const(32767, signed(16))))
        index16 = (clipped + 32768)[7:16]
        index8 = (a + 128)[:8]
        lo_rd, hi_rd = lo.read_port(), hi.read_port()
        index = Mux(op == VectorOp.TABLE16, index16, index8)
        m.d.comb += [lo_rd.addr.eq(index), hi_rd.addr.eq(index), lo_rd.en.eq(adv), hi_rd.en.eq(adv)]
        fraction = Signal(unsigned(7), name=f"fraction{c}")
        with m.If(adv):
            m.d.sync += fraction.eq(clipped[:7])
        # apply_lookup: (base << 7) + (next - base) * fraction, |.| < 2^24
        lookup = Signal(signed(32), name=f"lookup{c}")
        m.d.comb += lookup.eq((lo_rd.data << 7) + (hi_rd.data - lo_rd.data) * fraction)

        # Reductions: the accumulator starts from the group's first value (equal to the
        # spec's start from minimum<in_t> for MAX/ARGMAX, as inputs are >= that minimum).
        acc, index_of_max = Signal(signed(32), name=f"acc{c}"), Signal(24, name=f"argmax{c}")
        product = Signal(signed(32), name=f"product{c}")      # DOT: low 32 bits of A' * B'
        m.d.comb += product.eq((a * b)[:32])
        greater, less = a > acc, a < acc
        with m.If(adv & self.valid1):
            with m.Switch(op):
                with m.Case(VectorOp.REDUCE_SUM, VectorOp.AVG):
                    m.d.sync += acc.eq(Mux(first, a, (acc + a)[:32]))
                with m.Case(VectorOp.REDUCE_MAX, VectorOp.ARGMAX):
                    m.d.sync += acc.eq(Mux(first | greater, a, acc))
                    with m.If(first | greater):
                        m.d.sync += index_of_max.eq(pos)
                with m.Case(VectorOp.REDUCE_MIN):
                    m.d.sync += acc.eq(Mux(first | less, a, acc))
                with m.Case(VectorOp.DOT):
                    m.d.sync += acc.eq(Mux(first, product, (acc + product)[:32]))

        out = Signal(signed(32), name=f"v2_{c}")
        with m.Switch(op):
            with m.Case(VectorOp.MUL):
                m.d.comb += out.eq(mul.result)
            with m.Case(VectorOp.TABLE8):
                m.d.comb += out.eq(lo_rd.data)
            with m.Case(VectorOp.TABLE16):
                m.d.comb += out.eq(lookup)
            with m.Case(VectorOp.REDUCE_SUM, VectorOp.AVG, VectorOp.REDUCE_MAX, VectorOp.REDUCE_MIN,
                        VectorOp.DOT):
                m.d.comb += out.eq(acc)
            with m.Case(VectorOp.ARGMAX):
                m.d.comb += out.eq(index_of_max)
            with m.Default():
                m.d.comb += out.eq(alu2)
        return out
