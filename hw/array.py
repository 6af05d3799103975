"""The R x C systolic array with its edge skew/deskew registers, for both dataflows.

Timing (cycle x = the cycle a value is on the array's edge input):
- Weight-stationary: a_in[r] carries A[m, r] for row m at cycle x_m; the C
  results of row m are on `out` at x_m + R + C - 1 (row r is skewed by r
  registers, column c deskewed by C - 1 - c). Weights enter with w_shift high
  for R cycles, last row first (PE[r][c] ends up with the (R-1-r)-th word).
- Output-stationary: a_in[r] carries A[r, k] and w_in[c] carries W[k, c] at
  cycle x_k; PE[r][c] accumulates at x_k + r + c, so all sums are final
  R + C - 1 cycles after the last k. With drain high, each column shifts down
  one row per cycle: `out` shows row R-1 first, then R-2, ...
Edge inputs are already zero-point corrected (9-bit signed).
"""
from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .params import Dataflow
from .pe import ACC, OPERAND, PE


def _delay(m: Module, value, cycles: int, name: str):
    """`value` delayed by `cycles` registers (0: the value itself)."""
    for i in range(cycles):
        reg = Signal.like(value, name=f"{name}_d{i}")
        m.d.sync += reg.eq(value)
        value = reg
    return value


class SystolicArray(wiring.Component):
    def __init__(self, rows: int, cols: int, dataflow: Dataflow):
        self.rows, self.cols, self.dataflow = rows, cols, Dataflow(dataflow)
        ports = {"a_in": In(data.ArrayLayout(OPERAND, rows)),
                 "w_in": In(data.ArrayLayout(OPERAND, cols)),
                 "out": Out(data.ArrayLayout(ACC, cols))}
        if self.dataflow is Dataflow.WEIGHT_STATIONARY:
            ports["w_shift"] = In(1)
        else:
            ports["clear"] = In(1)
            ports["drain"] = In(1)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        R, C = self.rows, self.cols
        ws = self.dataflow is Dataflow.WEIGHT_STATIONARY
        pes = [[PE(self.dataflow) for _ in range(C)] for _ in range(R)]
        for r in range(R):
            for c in range(C):
                m.submodules[f"pe_{r}_{c}"] = pes[r][c]
        for r in range(R):
            skewed = _delay(m, self.a_in[r], r, f"a_skew{r}")
            for c in range(C):
                pe = pes[r][c]
                m.d.comb += pe.a_in.eq(skewed if c == 0 else pes[r][c - 1].a_out)
                if ws:
                    m.d.comb += [pe.w_shift.eq(self.w_shift),
                                 pe.w_in.eq(self.w_in[c] if r == 0 else pes[r - 1][c].w_out),
                                 pe.psum_in.eq(0 if r == 0 else pes[r - 1][c].psum_out)]
                else:
                    w_edge = _delay(m, self.w_in[c], c, f"w_skew{c}") if r == 0 else None
                    m.d.comb += [pe.clear.eq(self.clear), pe.drain.eq(self.drain),
                                 pe.w_in.eq(w_edge if r == 0 else pes[r - 1][c].w_out),
                                 pe.acc_in.eq(0 if r == 0 else pes[r - 1][c].acc_out)]
        for c in range(C):
            if ws:
                m.d.comb += self.out[c].eq(_delay(m, pes[R - 1][c].psum_out, C - 1 - c, f"deskew{c}"))
            else:
                m.d.comb += self.out[c].eq(pes[R - 1][c].acc_out)
        return m
