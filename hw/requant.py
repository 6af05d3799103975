"""Requantization unit: int32 accumulators -> int8, bit-exact with TOSA RESCALE + CLAMP.

Per lane c (TOSA 0.30 RESCALE 2.13 with scale32, apply_scale_32 1.9.2):
    v      = acc + bias                        (wraps at 32 bits, like apply_add)
    scaled = apply_scale_32(v, multiplier, shift, double_round)     (hw/scale.py)
    out    = clamp(scaled + out_zp, clamp_lo, clamp_hi)
Supported: multiplier 0 .. 2^31-1 (its low 31 bits are used), shift 2 .. 62 (the
spec's REQUIRE range; the 6-bit field also encodes 63, outside the contract).
Where the reference REQUIREs |v| < 2^(shift-2), the RTL still computes the
formula of hw/scale.py (the reference raises instead).

Three pipeline stages (REQUANT_LATENCY_CYCLES): bias add | multiply + round |
shift, zero point, clamp. The whole pipeline stalls while `o` is valid and not
ready (stream back-pressure). bias/multiplier/shift travel with the data
(sampled with `i`); double_round, out_zp and the clamp bounds are per
instruction and must be stable while data is in flight.
"""
from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .scale import ApplyScale, saturate


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
            mult1 = Signal(unsigned(31), name=f"mult{c}")
            shift1 = Signal(unsigned(6), name=f"shift1_{c}")
            # Stage 2: the product and round register inside ApplyScale.
            scale = ApplyScale()
            m.submodules[f"scale{c}"] = scale
            m.d.comb += [scale.en.eq(advance), scale.value.eq(v1), scale.multiplier.eq(mult1),
                         scale.shift.eq(shift1), scale.double_round.eq(self.double_round)]
            with_zp = Signal(signed(34), name=f"zp{c}")
            m.d.comb += with_zp.eq(scale.result + self.out_zp)
            with m.If(advance):
                m.d.sync += [v1.eq((self.i.payload[c] + self.bias[c])[:32]),
                             mult1.eq(self.multiplier[c][:31]), shift1.eq(self.shift[c]),
                             self.o.payload[c].eq(saturate(with_zp, self.clamp_lo, self.clamp_hi))]
        return m
