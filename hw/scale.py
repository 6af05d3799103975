"""TOSA 0.30 scaling arithmetic in hardware, defined once for the requantization and vector units.

`ApplyScale` is one lane of apply_scale_32 / apply_scale_16 (spec 1.9.2) and of
MUL's rounding shift (2.5.14); both have the form

    result = ((value * multiplier + round) >> shift)[31:0]        (arithmetic shift)
    round  = (1 << shift) >> 1,  +/- (1 << 30) if double_round and shift > 31 (sign of value)

apply_scale_16 is apply_scale_32 without double rounding and with a multiplier
below 2^15 (the 48-bit values it allows do not occur on 32-bit lanes), so it
needs no datapath of its own. MUL's round is 0 for shift 0 (the formula gives
it) and its multiplier is a signed operand.

Widths (exact for every operand, so the 32-bit result equals the reference
wherever the reference has no REQUIRE failure):
- unsigned(31) multiplier (TOSA: 0 <= multiplier < 2^31), shift <= 63:
  |value * multiplier| < 2^62, round <= 2^62 + 2^30: the sum fits signed 64 bits
  (Verilator keeps it in a native 64-bit integer).
- signed(32) multiplier (MUL): value * multiplier in [-(2^62 - 2^31), 2^62], round <= 2^62:
  signed 65 bits (only (-2^31)^2 with shift 63 needs the 65th bit).

One register stage: value, multiplier, shift and double_round are sampled when
`en` is high; `result` is combinational from the registered sum and shift.
"""
from amaranth.hdl import Const, Module, Mux, Shape, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

SHIFT = unsigned(6)


class ApplyScale(wiring.Component):
    def __init__(self, multiplier_shape=unsigned(31)):
        self.multiplier_shape = Shape.cast(multiplier_shape)
        self.sum_bits = 65 if self.multiplier_shape.signed else 64
        super().__init__({
            "en": In(1),
            "value": In(signed(32)),
            "multiplier": In(self.multiplier_shape),
            "shift": In(SHIFT),
            "double_round": In(1),
            "result": Out(signed(32)),
        })

    def elaborate(self, platform):
        m = Module()
        half = Signal(unsigned(63))
        m.d.comb += half.eq((Const(1, 1) << self.shift) >> 1)
        nudge = Const(1 << 30, signed(32))
        round_ = Signal(signed(64))
        with m.If(self.double_round & (self.shift > 31)):
            m.d.comb += round_.eq(half + Mux(self.value >= 0, nudge, -nudge))
        with m.Else():
            m.d.comb += round_.eq(half)
        total = Signal(signed(self.sum_bits))
        shift_r = Signal(SHIFT)
        with m.If(self.en):
            m.d.sync += [total.eq(self.value * self.multiplier + round_), shift_r.eq(self.shift)]
        m.d.comb += self.result.eq((total >> shift_r)[:32])
        return m


def saturate(value, lo, hi):
    """clamp(value, lo, hi) as an expression (TOSA apply_clip, spec 3.3) for signed `lo`/`hi`
    of one width; `value` may be wider (e.g. a result plus a zero point)."""
    return Mux(value < lo, lo, Mux(value > hi, hi, value[:len(lo)].as_signed()))
