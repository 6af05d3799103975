"""Processing element: one multiply-accumulate per cycle.

Operands are 9-bit signed: int8 buffer values minus an int8 zero point, which
the array subtracts once at its edges (TOSA CONV2D: (value - input_zp) *
(weight - weight_zp), spec 2.3). Products fit 18 bits; sums wrap at 32 bits
like the int32 accumulator of the TOSA reference (a valid graph never wraps:
apply_add REQUIRE).

Weight-stationary: the weight register is loaded through a shift chain down
the column (w_in -> w -> w_out while w_shift); each cycle psum_out <= psum_in +
a_in * w and a_out <= a_in.
Output-stationary: a_out <= a_in, w_out <= w_in, acc <= acc + a_in * w_in;
clear zeroes acc, drain shifts acc_in -> acc (the column becomes a shift
register that carries results out at the bottom).
"""
from amaranth.hdl import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .params import Dataflow

OPERAND = signed(9)
ACC = signed(32)


class PE(wiring.Component):
    def __init__(self, dataflow: Dataflow):
        self.dataflow = Dataflow(dataflow)
        if self.dataflow is Dataflow.WEIGHT_STATIONARY:
            ports = {"a_in": In(OPERAND), "w_in": In(OPERAND), "w_shift": In(1),
                     "psum_in": In(ACC), "a_out": Out(OPERAND), "w_out": Out(OPERAND),
                     "psum_out": Out(ACC)}
        else:
            ports = {"a_in": In(OPERAND), "w_in": In(OPERAND), "clear": In(1), "drain": In(1),
                     "acc_in": In(ACC), "a_out": Out(OPERAND), "w_out": Out(OPERAND),
                     "acc_out": Out(ACC)}
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.a_out.eq(self.a_in)
        if self.dataflow is Dataflow.WEIGHT_STATIONARY:
            weight = Signal(OPERAND)
            with m.If(self.w_shift):
                m.d.sync += weight.eq(self.w_in)
            m.d.comb += self.w_out.eq(weight)
            m.d.sync += self.psum_out.eq((self.psum_in + self.a_in * weight)[:32])
        else:
            acc = Signal(ACC)
            m.d.sync += self.w_out.eq(self.w_in)
            with m.If(self.clear):
                m.d.sync += acc.eq(0)
            with m.Elif(self.drain):
                m.d.sync += acc.eq(self.acc_in)
            with m.Else():
                m.d.sync += acc.eq((acc + self.a_in * self.w_in)[:32])
            m.d.comb += self.acc_out.eq(acc)
        return m
