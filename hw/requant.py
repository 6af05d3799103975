"""Requantization unit: accumulators -> int8 or int16, bit-exact with TOSA RESCALE + CLAMP.

Per lane c (TOSA 0.30 RESCALE 2.13, apply_scale_32 / apply_scale_16 1.9.2):
    int32 accumulators (acc48 low):
        v      = acc[31:0] + bias[31:0]         (wraps at 32 bits, like apply_add)
        scaled = apply_scale_32(v, multiplier, shift, double_round)     (hw/scale.py)
    int48 accumulators (acc48 high; the 16x8 and 16x16 modes):
        v      = acc + bias                     (48 bits; bias is the 48-bit lane parameter)
        scaled = apply_scale_16(v, multiplier[14:0], shift)   (RESCALE of int48 requires
                 scale32 = false, hence no double rounding: the compiler leaves it off)
    out = clamp(scaled + out_zp, clamp_lo, clamp_hi)    int8 lanes, or int16 with out16
Supported: multiplier 0 .. 2^31-1 (its low 31 bits are used; 0 .. 2^15-1 with acc48),
shift 2 .. 62 (the spec's REQUIRE range; the 6-bit field also encodes 63, outside the
contract). Where the reference REQUIREs |v| < 2^(shift-2) (scale32) or a result within
int32 (scale16), the RTL still computes the formula of hw/scale.py (the reference raises).

Three pipeline stages (REQUANT_LATENCY_CYCLES): bias add | multiply + round |
shift, zero point, clamp. The whole pipeline stalls while `o` is valid and not
ready (stream back-pressure). bias/multiplier/shift travel with the data
(sampled with `i`); double_round, acc48, out16, out_zp and the clamp bounds are per
instruction and must be stable while data is in flight.
"""
from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .scale import ApplyScale, saturate


class RequantUnit(wiring.Component):
    def __init__(self, cols: int):
        self.cols = cols
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(signed(48), cols))),
            "o": Out(stream.Signature(data.ArrayLayout(signed(16), cols))),
            "bias": In(data.ArrayLayout(signed(48), cols)),
            "multiplier": In(data.ArrayLayout(signed(32), cols)),
            "shift": In(data.ArrayLayout(unsigned(6), cols)),
            "double_round": In(1),
            "acc48": In(1),
            "out_zp": In(signed(8)),
            "clamp_lo": In(signed(16)),
            "clamp_hi": In(signed(16)),
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
            # int48: |acc| < 2^47 by the compiler's accumulation bound (qsim/npu/array/wide.py)
            # and the bias is an int48 tensor; their sum wraps at 48 bits like the spec's int48_t.
            v1 = Signal(signed(48), name=f"v{c}")
            mult1 = Signal(unsigned(31), name=f"mult{c}")
            shift1 = Signal(unsigned(6), name=f"shift1_{c}")
            v32 = (self.i.payload[c][:32] + self.bias[c][:32])[:32].as_signed()
            v48 = (self.i.payload[c] + self.bias[c])[:48].as_signed()
            # Stage 2: the product and round register inside ApplyScale.
            scale = ApplyScale(wide=True)
            m.submodules[f"scale{c}"] = scale
            m.d.comb += [scale.en.eq(advance), scale.value.eq(v1), scale.multiplier.eq(mult1),
                         scale.shift.eq(shift1), scale.double_round.eq(self.double_round),
                         scale.scale16.eq(self.acc48)]
            with_zp = Signal(signed(34), name=f"zp{c}")
            m.d.comb += with_zp.eq(scale.result + self.out_zp)
            with m.If(advance):
                m.d.sync += [v1.eq(Mux(self.acc48, v48, v32)),
                             mult1.eq(self.multiplier[c][:31]), shift1.eq(self.shift[c]),
                             self.o.payload[c].eq(saturate(with_zp, self.clamp_lo, self.clamp_hi))]
        return m
