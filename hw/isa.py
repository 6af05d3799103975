"""The NPU instruction format: one definition shared by the RTL decoder and the compiler.

Every instruction is INSTR_BITS wide, little-endian, fields packed from bit 0 in
the order listed. Bits [2:0] opcode, bit 3 wait_dma, bit 4 wait_compute; the
rest depends on the opcode. README.md renders the same tables for users.

Execution model (README.md, "Dispatch"): instructions dispatch in order, one per
cycle at most, to the DMA unit (LOAD, STORE), the compute unit (COMPUTE) or the
vector DMA with its vector unit (VRUN), or the window DMA (LOADW). LOAD, STORE, LOADW
and VRUN share the DRAM channels, so they exclude each other: each counts as the "DMA" for dispatch and
for wait_dma. An
instruction waits until its unit is idle, and additionally until the DMA unit
is idle (wait_dma) and/or the compute unit is idle (wait_compute). Double
buffering is the compiler's: it alternates between halves of each buffer.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

INSTR_BITS = 160
INSTR_BYTES = INSTR_BITS // 8


class Opcode(enum.IntEnum):
    NOP = 0       # dispatches without occupying a unit
    LOAD = 1      # DRAM -> input / weight / param buffer
    STORE = 2     # output / accumulator buffer -> DRAM
    COMPUTE = 3   # buffers -> array -> accumulators (-> requantization -> output buffer)
    VRUN = 4      # DRAM -> vector unit -> DRAM, as configured by the VCONFIG register file
    LOADW = 5     # DRAM tensor -> input buffer through convolution windows (im2col in hardware),
                  # as the window descriptor in the register file says (hw/window_isa.py)


class Plane(enum.IntEnum):
    """What the lanes of an array operand hold (COMPUTE a_plane / w_plane, LOADW's descriptor
    `plane`): an int16 value x is hi * 256 + lo with hi = x >> 8 (int8) and lo = x & 255
    (uint8), so sum x * w = 256 * sum hi * w + sum lo * w, each sum an int8 pass of the array."""
    INT8 = 0      # int8 values (signed lanes)
    LO = 1        # low bytes of int16 values: unsigned lanes
    HI = 2        # high bytes of int16 values: signed lanes, weighted 256 in the accumulator


class LoadBuffer(enum.IntEnum):
    INPUT = 0
    WEIGHT = 1
    PARAM = 2
    VCONFIG = 3   # the vector configuration register file (hw/vector_isa.py VectorConfig)


class StoreBuffer(enum.IntEnum):
    OUTPUT = 0        # int8 words of C lanes
    ACCUMULATOR = 1   # int32 words of C lanes (layers whose result stays int32)


HEADER = (("opcode", 3, False), ("wait_dma", 1, False), ("wait_compute", 1, False))

# (name, width in bits, signed)
FIELDS = {
    Opcode.NOP: (),
    Opcode.VRUN: (),
    # LOADW: `count` input-buffer words from `buf_addr` (the descriptor gives the rest)
    Opcode.LOADW: (("buf_addr", 16, False), ("count", 16, False)),
    Opcode.LOAD: (("buf", 2, False), ("buf_addr", 16, False), ("count", 16, False),
                  ("dram_addr", 32, False), ("dram_stride", 24, False),
                  ("word_bytes", 16, False)),
    Opcode.COMPUTE: (("a_addr", 16, False), ("w_addr", 16, False), ("acc_addr", 16, False),
                     ("out_addr", 16, False), ("param_addr", 4, False), ("count", 16, False),
                     ("accumulate", 1, False), ("requant", 1, False), ("double_round", 1, False),
                     ("in_zp", 8, True), ("w_zp", 8, True), ("out_zp", 8, True),
                     ("clamp_lo", 8, True), ("clamp_hi", 8, True),
                     # int16 operands as byte planes (Plane) and the int48 / int16 requantization
                     ("a_plane", 2, False), ("w_plane", 2, False), ("acc48", 1, False),
                     ("out16", 1, False), ("clamp_lo_msb", 8, True), ("clamp_hi_msb", 8, True)),
}
FIELDS[Opcode.STORE] = FIELDS[Opcode.LOAD]


def layout(opcode: Opcode) -> dict[str, tuple[int, int, bool]]:
    """name -> (lowest bit, width, signed) for one opcode, header included."""
    out, pos = {}, 0
    for name, width, signed in HEADER + FIELDS[Opcode(opcode)]:
        out[name] = (pos, width, signed)
        pos += width
    assert pos <= INSTR_BITS
    return out


@dataclass(frozen=True)
class Instr:
    """One instruction; `fields` holds the opcode-specific values by name."""
    opcode: Opcode
    wait_dma: bool = False
    wait_compute: bool = False
    fields: dict = field(default_factory=dict)

    def get(self, name: str) -> int:
        return int(self.fields.get(name, 0))

    def encode(self) -> int:
        values = dict(self.fields, opcode=int(self.opcode), wait_dma=int(self.wait_dma),
                      wait_compute=int(self.wait_compute))
        lay = layout(self.opcode)
        unknown = set(values) - set(lay)
        if unknown:
            raise ValueError(f"{self.opcode.name} has no field(s) {sorted(unknown)}")
        word = 0
        for name, value in values.items():
            lo, width, signed = lay[name]
            value = int(value)
            low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
            if not low <= value <= high:
                raise ValueError(f"{self.opcode.name}.{name} = {value} outside [{low}, {high}]")
            word |= (value & ((1 << width) - 1)) << lo
        return word


def load(buf: LoadBuffer, buf_addr: int, count: int, dram_addr: int, dram_stride: int,
         word_bytes: int, **flags) -> Instr:
    return Instr(Opcode.LOAD, fields=dict(buf=int(buf), buf_addr=buf_addr, count=count,
                                          dram_addr=dram_addr, dram_stride=dram_stride,
                                          word_bytes=word_bytes), **flags)


def store(buf: StoreBuffer, buf_addr: int, count: int, dram_addr: int, dram_stride: int,
          word_bytes: int, **flags) -> Instr:
    return Instr(Opcode.STORE, fields=dict(buf=int(buf), buf_addr=buf_addr, count=count,
                                           dram_addr=dram_addr, dram_stride=dram_stride,
                                           word_bytes=word_bytes), **flags)


def loadw(buf_addr: int, count: int, **flags) -> Instr:
    return Instr(Opcode.LOADW, fields=dict(buf_addr=buf_addr, count=count), **flags)


def compute(**kw) -> Instr:
    flags = {k: kw.pop(k) for k in ("wait_dma", "wait_compute") if k in kw}
    return Instr(Opcode.COMPUTE, fields=kw, **flags)


def vrun(**flags) -> Instr:
    return Instr(Opcode.VRUN, **flags)


def pack_program(instrs) -> bytes:
    """The instruction stream as bytes: INSTR_BYTES per instruction, little-endian."""
    return b"".join(i.encode().to_bytes(INSTR_BYTES, "little") for i in instrs)
