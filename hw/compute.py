"""Compute unit: executes COMPUTE on the systolic array, accumulators and requantization unit.

Busy cycle j = 0 is the cycle after dispatch. With R rows, C columns,
L = REQUANT_LATENCY_CYCLES if requant else 0:
- Weight-stationary (count = M rows of A):
  j in [0, R)       read weight word w_addr + R-1-j (shifted in at j+1)
  j in [R, R+M)     read input word a_addr + (j-R) (on the array edge at j+1)
  j in [S, S+M)     result row i = j-S (S = 2R+C): acc[acc_addr+i] = (accumulate ? acc : 0) + result
  busy for 2R + C + M + L cycles.
- Output-stationary (count = K; the tile is R rows of A x C columns of W):
  j = 0             clear the PE accumulators
  j in [0, K)       read input word a_addr+j (A column k, R lanes) and weight word w_addr+j
  j in [S, S+R)     result row i = R-1-(j-S) (S = K+R+C-1), drained bottom row first
  busy for K + 2R + C - 1 + L cycles.
With requant, each result row also enters the requantization unit and is written
to the output buffer at out_addr + i, L cycles later. The parameter word is read
at j = 0 and held for the instruction.

int16 operands (hw/isa.py Plane; qsim/npu/array/wide.py plans the passes): a_plane /
w_plane say what the operand lanes hold. A low-byte lane enters the array unsigned
(0..255; its zero point is 0, as TOSA requires for int16), a high-byte or int8 lane
signed; the 9-bit edge operands are unchanged. The accumulators are 48 bits: each
result row is added shifted left by 8 per high-byte operand, so the passes over the
planes sum to the exact int48 product sum (bounds in qsim/npu/array/wide.py). int8
instructions see the low 32 bits, which wrap as the int32 accumulator of TOSA does.
acc48 feeds the requantization unit the 48-bit sum with a 48-bit bias and a 16-bit
multiplier (apply_scale_16); out16 writes int16 output lanes with 16-bit clamp bounds
(clamp_lo_msb / clamp_hi_msb are their high bytes).
"""
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .array import SystolicArray
from .dma import field
from .isa import INSTR_BITS, Opcode, Plane
from .params import ACC_LANE_BITS, PARAM_LANE_BYTES, REQUANT_LATENCY_CYCLES, Dataflow, Geometry
from .requant import RequantUnit


class ComputeUnit(wiring.Component):
    def __init__(self, geom: Geometry):
        self.geom = geom
        R, C = geom.rows, geom.cols
        super().__init__({
            "start": In(1), "instr": In(INSTR_BITS), "busy": Out(1),
            "in_addr": Out(16), "in_data": In(8 * R),
            "w_addr": Out(16), "w_data": In(8 * C),
            "param_addr": Out(2), "param_data": In(8 * PARAM_LANE_BYTES * C),
            "acc_rd_addr": Out(16), "acc_rd_data": In(ACC_LANE_BITS * C),
            "acc_wr_addr": Out(16), "acc_wr_data": Out(ACC_LANE_BITS * C), "acc_wr_en": Out(1),
            "out_wr_addr": Out(16), "out_wr_data": Out(16 * C), "out_wr_en": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        R, C = g.rows, g.cols
        ws = g.dataflow is Dataflow.WEIGHT_STATIONARY
        L = REQUANT_LATENCY_CYCLES
        m.submodules.array = array = SystolicArray(R, C, g.dataflow)
        m.submodules.requant = requant = RequantUnit(C)

        def latched(name, width=None):
            value = field(self.instr, Opcode.COMPUTE, name)
            reg = Signal.like(value, name=f"f_{name}")
            with m.If(self.start):
                m.d.sync += reg.eq(value)
            return reg

        a_addr, w_addr, acc_addr, out_addr = (latched(n) for n in ("a_addr", "w_addr", "acc_addr", "out_addr"))
        param_addr, count = latched("param_addr"), latched("count")
        accumulate, do_requant, double_round = latched("accumulate"), latched("requant"), latched("double_round")
        in_zp, w_zp, out_zp = latched("in_zp"), latched("w_zp"), latched("out_zp")
        clamp_lo, clamp_hi = latched("clamp_lo"), latched("clamp_hi")
        a_plane, w_plane, acc48, out16 = latched("a_plane"), latched("w_plane"), latched("acc48"), latched("out16")
        clamp_lo_msb, clamp_hi_msb = latched("clamp_lo_msb"), latched("clamp_hi_msb")

        j = Signal(20)
        with m.If(self.start):
            m.d.sync += [self.busy.eq(1), j.eq(0)]
        with m.Elif(self.busy):
            m.d.sync += j.eq(j + 1)

        # Schedule boundaries (see module docstring).
        if ws:
            S = 2 * R + C
            n_rows = count
        else:
            S = Signal(20)
            m.d.comb += S.eq(count + R + C - 1)
            n_rows = R
        last = Signal(20)
        m.d.comb += last.eq(S + n_rows - 1 + Mux(do_requant, L, 0))
        with m.If(self.busy & (j == last)):
            m.d.sync += self.busy.eq(0)

        def row_of(i):
            return i if ws else (R - 1 - i)

        # Operand reads and the zero-point-corrected array edges.
        in_valid, w_valid = Signal(), Signal()
        if ws:
            m.d.comb += [self.w_addr.eq(w_addr + (R - 1 - j)), self.in_addr.eq(a_addr + (j - R))]
            m.d.sync += [w_valid.eq(self.busy & (j < R)),
                         in_valid.eq(self.busy & (j >= R) & (j < R + count))]
            m.d.comb += array.w_shift.eq(w_valid)
        else:
            m.d.comb += [self.w_addr.eq(w_addr + j), self.in_addr.eq(a_addr + j)]
            m.d.sync += [in_valid.eq(self.busy & (j < count)), w_valid.eq(self.busy & (j < count))]
            m.d.comb += [array.clear.eq(self.busy & (j == 0)),
                         array.drain.eq(self.busy & (j >= S) & (j < S + R - 1))]

        def operand(byte, plane):
            return Mux(plane == Plane.LO, byte.as_unsigned(), byte.as_signed())

        for r in range(R):
            lane = operand(self.in_data[8 * r:8 * r + 8], a_plane)
            m.d.comb += array.a_in[r].eq(Mux(in_valid, lane - in_zp, 0))
        for c in range(C):
            lane = operand(self.w_data[8 * c:8 * c + 8], w_plane)
            m.d.comb += array.w_in[c].eq(Mux(w_valid, lane - w_zp, 0))

        # Per-channel requantization parameters, read at j = 0 and held.
        param = Signal(8 * PARAM_LANE_BYTES * C)
        m.d.comb += self.param_addr.eq(param_addr)
        with m.If(self.busy & (j == 1)):
            m.d.sync += param.eq(self.param_data)
        # acc48 lanes: bias bits 47:32 sit in the multiplier field's high half (a 16-bit
        # multiplier needs only the low one).
        for c in range(C):
            base = 8 * PARAM_LANE_BYTES * c
            bias48 = Cat(param[base:base + 32], param[base + 48:base + 64]).as_signed()
            m.d.comb += [requant.bias[c].eq(Mux(acc48, bias48, param[base:base + 32].as_signed())),
                         requant.multiplier[c].eq(Mux(acc48, param[base + 32:base + 48],
                                                      param[base + 32:base + 64].as_signed())),
                         requant.shift[c].eq(param[base + 64:base + 70])]
        m.d.comb += [requant.double_round.eq(double_round), requant.out_zp.eq(out_zp),
                     requant.acc48.eq(acc48),
                     requant.clamp_lo.eq(Mux(out16, Cat(clamp_lo, clamp_lo_msb).as_signed(), clamp_lo)),
                     requant.clamp_hi.eq(Mux(out16, Cat(clamp_hi, clamp_hi_msb).as_signed(), clamp_hi)),
                     requant.o.ready.eq(1)]

        # Accumulator read-modify-write over the result window.
        in_window = Signal()
        m.d.comb += in_window.eq(self.busy & (j >= S) & (j < S + n_rows))
        m.d.comb += [self.acc_rd_addr.eq(acc_addr + row_of(j + 1 - S)),
                     self.acc_wr_addr.eq(acc_addr + row_of(j - S)),
                     self.acc_wr_en.eq(in_window)]
        # Result rows enter the 48-bit accumulators weighted 256 per high-byte operand.
        weight_shift = Signal(2)
        m.d.comb += weight_shift.eq((a_plane == Plane.HI) + (w_plane == Plane.HI))
        A = ACC_LANE_BITS
        for c in range(C):
            old = Mux(accumulate, self.acc_rd_data[A * c:A * c + A].as_signed(), 0)
            row = array.out[c]
            shifted = Mux(weight_shift == 0, row, Mux(weight_shift == 1, row << 8, row << 16))
            total = Signal(A, name=f"total{c}")
            m.d.comb += [total.eq(old + shifted),
                         self.acc_wr_data[A * c:A * c + A].eq(total),
                         requant.i.payload[c].eq(total)]
        lanes16 = Cat(*(requant.o.payload[c] for c in range(C)))
        lanes8 = Cat(*(requant.o.payload[c][:8] for c in range(C)))
        m.d.comb += self.out_wr_data.eq(Mux(out16, lanes16, lanes8))
        m.d.comb += [requant.i.valid.eq(in_window & do_requant),
                     self.out_wr_en.eq(requant.o.valid),
                     self.out_wr_addr.eq(out_addr + row_of(j - S - L))]
        return m
