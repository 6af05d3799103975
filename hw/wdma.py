"""Window DMA: executes LOADW, im2col in hardware. It walks convolution windows over a
tensor DRAM holds as it is and assembles input-buffer words, as the window descriptor
(hw/window_isa.py, in the register file behind the vector configuration) describes.

Per busy cycle at most one read transaction: a piece of a unit (weight-stationary: up to
R lanes of one output pixel's K run that are contiguous in DRAM) or one lane (output-
stationary: one output pixel's byte at one K index). Only the in-bounds part of a piece is
read; padding taps and lanes at or beyond K keep the zero point the word starts with. A
byte credit (B per busy cycle, shared by nothing else while LOADW runs) paces the reads:
transaction j issues at s_j = max(s_{j-1} + 1, ceil(cum_j / B) - 1). Read data returns
one cycle later, is shifted to its lanes and merged; a word's last transaction writes the
word to the input buffer in that cycle (s + 1). Busy for s_last + 2 cycles, like LOAD.
Descriptor `plane` 1/2 (hw/isa.py Plane): the tensor is int16 and the walkers count elements;
a piece of n elements reads the 2n - 1 bytes from byte 2e + (plane == 2) and keeps every
other one, so each lane gets its element's low (1) or high (2) byte.
The walkers only add and compare (the compiler precomputes every product); the address
arithmetic wraps at 32 bits. qsim/npu/array/window.py is the numpy model of the same sequence.
"""
from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .dma import field
from .isa import INSTR_BITS, Opcode
from .params import Geometry
from .window_isa import WINDOW_BITS, window_layout

CREDIT_BITS = 48


def _desc(bits, name: str):
    lo, width, signed_ = window_layout()[name]
    value = bits[lo:lo + width]
    return value.as_signed() if signed_ else value


def _clamp(m, value, hi, name):
    """value clamped to [0, hi] (hi unsigned)."""
    out = Signal(17, name=name)
    m.d.comb += out.eq(Mux(value < 0, 0, Mux(value > hi, hi, value)))
    return out


class WindowDMA(wiring.Component):
    def __init__(self, geom: Geometry):
        self.geom = geom
        P, R = geom.dram_port_bytes, geom.rows
        super().__init__({
            "start": In(1), "instr": In(INSTR_BITS), "desc": In(WINDOW_BITS), "busy": Out(1),
            "raddr": Out(32), "re": Out(1), "rdata": In(8 * P),
            "wr_addr": Out(16), "wr_data": Out(8 * R), "wr_en": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        R = g.rows

        def d(name):
            return _desc(self.desc, name)

        unit_len, k_total = d("unit_len"), d("k_total")
        os = d("os")

        # Walker state (hw/window_isa.py).
        oy, ox = Signal(16), Signal(16)
        iy, ixb = Signal(signed(18)), Signal(signed(34))
        paddr, left = Signal(32), Signal(32)
        ky_d, u, ux_b, uoff = Signal(16), Signal(16), Signal(signed(34)), Signal(32)
        q, k = Signal(16), Signal(24)
        lane, widx, count, buf_addr = Signal(16), Signal(16), Signal(16), Signal(16)
        active = Signal()
        granted, consumed = Signal(CREDIT_BITS), Signal(CREDIT_BITS)

        pixel_restore = [oy.eq(d("oy")), ox.eq(d("ox")), iy.eq(d("iy")), ixb.eq(d("ixb")),
                         paddr.eq(d("paddr")), left.eq(d("pixels_left"))]
        k_restore = [ky_d.eq(d("ky_d")), u.eq(d("u")), ux_b.eq(d("ux_b")), uoff.eq(d("uoff")),
                     q.eq(d("q")), k.eq(d("k"))]

        zp_word = Cat(*(d("zp") for _ in range(R)))
        word = Signal(8 * R)
        with m.If(self.start):
            m.d.sync += [self.busy.eq(1), active.eq(1), lane.eq(0), widx.eq(0),
                         count.eq(field(self.instr, Opcode.LOADW, "count")),
                         buf_addr.eq(field(self.instr, Opcode.LOADW, "buf_addr")),
                         granted.eq(0), consumed.eq(0), word.eq(zp_word), *pixel_restore, *k_restore]

        # The transaction on offer: its piece, the in-bounds part and its cost.
        length = Signal(17)
        ws_len = Signal(25)
        to_unit, to_word, to_k = unit_len - q, R - lane, k_total - k
        m.d.comb += ws_len.eq(Mux(to_unit < to_word, to_unit, to_word))
        m.d.comb += length.eq(Mux(os, 1, Mux(to_k < ws_len, to_k, ws_len)))
        ixf = Signal(signed(35))
        m.d.comb += ixf.eq(ixb + ux_b)
        qlo = _clamp(m, -ixf, unit_len, "qlo")
        qhi = _clamp(m, d("width_bytes") - ixf, unit_len, "qhi")
        row = Signal(signed(19))
        m.d.comb += row.eq(iy + ky_d)
        ok = (row >= 0) & (row < d("height")) & (left != 0)
        lo, hi, nbytes = Signal(17), Signal(18), Signal(17)
        m.d.comb += [lo.eq(Mux(q > qlo, q, qlo)),
                     hi.eq(Mux(q + length < qhi, q + length, qhi)),
                     nbytes.eq(Mux(ok & (hi > lo), hi - lo, 0))]
        # int16 planes: the element address doubles (plus 1 for the high byte) and a piece of
        # n elements costs the 2n - 1 bytes from its first plane byte to its last.
        plane = d("plane")
        elem16 = plane != 0
        cost = Signal(18)
        m.d.comb += cost.eq(Mux(elem16 & (nbytes != 0), (nbytes << 1) - 1, nbytes))
        element = Signal(32)
        m.d.comb += element.eq(paddr + uoff + lo)
        granted_now = Signal(CREDIT_BITS)
        go = Signal()
        m.d.comb += [granted_now.eq(granted + g.dram_bytes_per_cycle),
                     go.eq(active & (granted_now >= consumed + cost)),
                     self.re.eq(go & (nbytes != 0)),
                     self.raddr.eq(Mux(elem16, Cat(plane == 2, element[:31]), element))]
        with m.If(active):
            m.d.sync += granted.eq(granted_now)
        word_end = Signal()
        m.d.comb += word_end.eq(Mux(os, lane + 1 >= R, (lane + length >= R) | (k + length >= k_total)))
        final = word_end & (widx + 1 >= count)

        def pixel_advance():
            m.d.sync += left.eq(Mux(left != 0, left - 1, 0))
            with m.If(ox + 1 < d("out_w")):
                m.d.sync += [ox.eq(ox + 1), ixb.eq(ixb + d("x_step")), paddr.eq(paddr + d("x_step"))]
            with m.Else():
                m.d.sync += [ox.eq(0), ixb.eq(d("ixb_reset"))]
                with m.If(oy + 1 < d("out_h")):
                    m.d.sync += [oy.eq(oy + 1), iy.eq(iy + d("stride_y")), paddr.eq(paddr + d("y_step"))]
                with m.Else():
                    m.d.sync += [oy.eq(0), iy.eq(d("iy_reset")), paddr.eq(paddr + d("n_step"))]

        def k_advance(step):
            m.d.sync += k.eq(k + step)
            with m.If(q + step >= unit_len):
                m.d.sync += q.eq(0)
                with m.If(u + 1 < d("units_per_row")):
                    m.d.sync += [u.eq(u + 1), ux_b.eq(ux_b + d("unit_step")), uoff.eq(uoff + d("unit_step"))]
                with m.Else():
                    m.d.sync += [u.eq(0), ux_b.eq(0), ky_d.eq(ky_d + d("dil_y")), uoff.eq(uoff + d("row_step"))]
            with m.Else():
                m.d.sync += q.eq(q + step)

        with m.If(go):
            m.d.sync += consumed.eq(consumed + cost)
            with m.If(word_end):
                m.d.sync += [lane.eq(0), widx.eq(widx + 1)]
                with m.If(final):
                    m.d.sync += active.eq(0)
                with m.If(os):
                    m.d.sync += pixel_restore
                    k_advance(1)
                with m.Else():
                    m.d.sync += k_restore
                    pixel_advance()
            with m.Else():
                m.d.sync += lane.eq(lane + length)
                with m.If(os):
                    pixel_advance()
                with m.Else():
                    k_advance(length)

        dst = Signal(17)
        m.d.comb += dst.eq(lane + lo - q)
        self._capture(m, go, word_end, final, dst, nbytes, widx, word, zp_word, elem16, buf_addr)
        return m

    def _capture(self, m, go, word_end, final, dst, nbytes, widx, word, zp_word, elem16, buf_addr):
        """The read's bytes land in lanes [dst, dst + nbytes) of the word, one cycle after `go`."""
        g = self.geom
        R = g.rows
        lane_bits = max(1, (R - 1).bit_length())
        d_valid, d_last, d_final = Signal(), Signal(), Signal()
        d_dst, d_n, d_widx = Signal(lane_bits + 1), Signal(17), Signal(16)
        m.d.sync += [d_valid.eq(go), d_last.eq(go & word_end), d_final.eq(go & final),
                     d_dst.eq(dst[:lane_bits + 1]), d_n.eq(nbytes), d_widx.eq(widx)]
        # A plane read returns its lanes' bytes at even offsets (2R - 1 <= P: the compiler's check).
        packed = Signal(8 * R)
        P = g.dram_port_bytes
        planar = Cat(*(self.rdata[16 * i:16 * i + 8] for i in range(R) if 2 * i < P))
        m.d.comb += packed.eq(Mux(elem16, planar, self.rdata[:8 * R]))
        shifted = Signal(8 * R)
        m.d.comb += shifted.eq(packed << (d_dst[:lane_bits] * 8))
        merged = Signal(8 * R)
        for ln in range(R):
            inside = (Const(ln) >= d_dst) & (Const(ln) < d_dst + d_n)
            m.d.comb += merged[8 * ln:8 * ln + 8].eq(Mux(inside, shifted[8 * ln:8 * ln + 8],
                                                         word[8 * ln:8 * ln + 8]))
        m.d.comb += [self.wr_en.eq(d_last), self.wr_addr.eq(buf_addr + d_widx), self.wr_data.eq(merged)]
        with m.If(d_valid & ~self.start):
            m.d.sync += word.eq(Mux(d_last, zp_word, merged))
        with m.If(d_final & ~self.start):
            m.d.sync += self.busy.eq(0)
