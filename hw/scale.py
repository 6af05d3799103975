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

- wide (the requantization unit, ApplyScale(wide=True)): value is signed(48) and, with
  `scale16` high, apply_scale_16 of the 48-bit value with the multiplier's low 15 bits
  (TOSA 0.30 RESCALE of int48 requires scale32 = false, so no double rounding):
  |value * multiplier| < 2^47 * 2^15 = 2^62, round <= 2^61: the same signed 64-bit sum.
  With `scale16` low only the value's low 32 bits are used (apply_scale_32), so each
  product stays within 64 bits.

One register stage: value, multiplier, shift and double_round are sampled when
`en` is high; `result` is combinational from the registered sum and shift.
"""
from amaranth.hdl import Const, Module, Mux, Shape, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

SHIFT = unsigned(6)


class ApplyScale(wiring.Component):
    def __init__(self, multiplier_shape=unsigned(31), wide: bool = False):
        self.multiplier_shape = Shape.cast(multiplier_shape)
        self.sum_bits = 65 if self.multiplier_shape.signed else 64
        self.wide = wide
        extra = {"scale16": In(1)} if wide else {}
        super().__init__({
            **extra,
            "en": In(1),
            "value": In(signed(48 if wide else 32)),
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
            if self.wide:
                product = Mux(self.scale16, self.value * self.multiplier[:15],
                              self.value[:32].as_signed() * self.multiplier)
            else:
                product = self.value * self.multiplier
            m.d.sync += [total.eq(product + round_), shift_r.eq(self.shift)]
        m.d.comb += self.result.eq((total >> shift_r)[:32])
        return m


def saturate(value, lo, hi):
    """clamp(value, lo, hi) as an expression (TOSA apply_clip, spec 3.3) for signed `lo`/`hi`
    of one width; `value` may be wider (e.g. a result plus a zero point)."""
    return Mux(value < lo, lo, Mux(value > hi, hi, value[:len(lo)].as_signed()))
