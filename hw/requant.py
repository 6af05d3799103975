"""Requantization unit: int32 accumulators -> int8, bit-exact with TOSA RESCALE + CLAMP.

Per lane c (TOSA 0.30 RESCALE 2.13 with scale32, apply_scale_32 1.9.2):
    v      = acc + bias                        (wraps at 32 bits, like apply_add)
    round  = 1 << (shift - 1), +/- (1 << 30) if double_round and shift > 31 (sign of v)
    scaled = ((v * multiplier + round) >> shift)[31:0]   (arithmetic shift)
    out    = clamp(scaled + out_zp, clamp_lo, clamp_hi)
Supported: multiplier 0 .. 2^31-1, shift 2 .. 62 (the spec's REQUIRE range; the
6-bit field also encodes 63, outside the contract). Bounds: |v * multiplier| <
2^62 and round <= 2^61 + 2^30, so the stage-2 sum fits 64 signed bits.
Where the reference REQUIREs |v| < 2^(shift-2), the RTL still computes the
formula above (the reference raises instead).

Three pipeline stages (REQUANT_LATENCY_CYCLES); the whole pipeline stalls
while `o` is valid and not ready (stream back-pressure). bias/multiplier/shift
travel with the data (sampled with `i`); double_round, out_zp and the clamp
bounds are per instruction and must be stable while data is in flight.
"""
from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out


class RequantUnit(wiring.Component):
    def __init__(self, cols: int):
        self.cols = cols
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(signed(32), cols))),
            "o": Out(stream.Signature(data.ArrayLayout(signed(8), cols))),
            "bias": In(data.ArrayLayout(signed(32), cols)),
            "multiplier": In(data.ArrayLayout(signed(32), cols)),
            "shift": In(data.ArrayLayout(unsigned(6), cols)),
            "double_round": In(1),
            "out_zp": In(signed(8)),
            "clamp_lo": In(signed(8)),
            "clamp_hi": In(signed(8)),
        })

    def elaborate(self, platform):
        m = Module()
        advance = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(advance)
        valid1, valid2 = Signal(), Signal()
        with m.If(advance):
            m.d.sync += [valid1.eq(self.i.valid), valid2.eq(valid1), self.o.valid.eq(valid2)]
        for c in range(self.cols):
            # Stage 1 registers: v = acc + bias, with this item's multiplier and shift.
            v1 = Signal(signed(32), name=f"v{c}")
            mult1 = Signal(signed(32), name=f"mult{c}")
            shift1 = Signal(unsigned(6), name=f"shift1_{c}")
            # Stage 2 registers: v * multiplier + round, and the shift.
            sum2 = Signal(signed(64), name=f"sum{c}")
            shift2 = Signal(unsigned(6), name=f"shift2_{c}")
            # Every intermediate stays within 64 bits (Verilator: native integers). In the
            # contract (shift <= 62, 0 <= multiplier < 2^31, |v| < 2^31): 2^(shift-1) <= 2^61,
            # |round| < 2^62 and |v * multiplier| < 2^62 fit signed 63 bits; their sum, 64.
            half = Signal(signed(63), name=f"half{c}")
            m.d.comb += half.eq((Const(1, 1) << shift1) >> 1)
            nudge = Const(1 << 30, signed(32))
            round_ = Signal(signed(63), name=f"round{c}")
            with m.If(self.double_round & (shift1 > 31)):
                m.d.comb += round_.eq(half + Mux(v1 >= 0, nudge, -nudge))
            with m.Else():
                m.d.comb += round_.eq(half)
            product = Signal(signed(63), name=f"product{c}")
            m.d.comb += product.eq(v1 * mult1)
            scaled = Signal(signed(32), name=f"scaled{c}")
            m.d.comb += scaled.eq((sum2 >> shift2)[:32])
            with_zp = Signal(signed(34), name=f"zp{c}")
            m.d.comb += with_zp.eq(scaled + self.out_zp)
            with m.If(advance):
                m.d.sync += [v1.eq((self.i.payload[c] + self.bias[c])[:32]),
                             mult1.eq(self.multiplier[c]), shift1.eq(self.shift[c]),
                             sum2.eq(product + round_), shift2.eq(shift1)]
                with m.If(with_zp < self.clamp_lo):
                    m.d.sync += self.o.payload[c].eq(self.clamp_lo)
                with m.Elif(with_zp > self.clamp_hi):
                    m.d.sync += self.o.payload[c].eq(self.clamp_hi)
                with m.Else():
                    m.d.sync += self.o.payload[c].eq(with_zp[:8])
        return m
