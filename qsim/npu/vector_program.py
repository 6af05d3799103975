"""Vector-unit programs: stream patterns (loop nests over DRAM) and the VCONFIG/VRUN sequence.

A vector stage's program is, per vector job: LOAD of the job's configuration words from
DRAM into the VCONFIG register file, then VRUN (hw/isa.py). LOAD and VRUN both occupy the
DMA unit, so they run strictly in order and a LOAD never overwrites a configuration still
in use. The DRAM image holds the operands, any table, the configurations and the result
region, each 64-byte aligned.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedError
from ..hw import isa
from ..hw.isa import LoadBuffer
from ..hw.params import Geometry
from ..hw.vector_isa import STREAM_LEVELS, VectorConfig, VectorInstr, config_words
from .compile import ALIGN, Program


@dataclass(frozen=True)
class Stream:
    """One operand stream: base address, byte stride per loop level (level 0 innermost),
    byte distance between lanes, element size in bytes."""
    base: int
    strides: tuple
    lane: int
    nbytes: int


def _steps(counts, strides) -> list[int]:
    """The address increments the hardware adds (hw/vector_isa.py: step_i = stride_i -
    sum_{j<i} (count_j - 1) stride_j)."""
    return [int(strides[i]) - sum((counts[j] - 1) * int(strides[j]) for j in range(i))
            for i in range(STREAM_LEVELS)]


def _pad(values, fill) -> list[int]:
    values = [int(v) for v in values]
    if len(values) > STREAM_LEVELS:
        raise UnsupportedError(f"a vector stream of {len(values)} loop levels; the vector DMA has "
                               f"{STREAM_LEVELS}")
    return values + [fill] * (STREAM_LEVELS - len(values))


def make_config(instr: VectorInstr, lanes: int, counts, a: Stream, out: Stream, out_counts=None,
                b: Stream | None = None, group: int = 1) -> VectorConfig:
    """A VRUN configuration: `counts` loops (innermost first), operand streams `a`, `b`, and
    the output stream over `out_counts` (default `counts`: one result per beat)."""
    counts = _pad(counts, 1)
    out_counts = _pad(out_counts if out_counts is not None else counts, 1)
    if any(c < 1 or c >= 1 << 16 for c in counts + out_counts):
        raise UnsupportedError(f"vector loop counts {counts} outside 1..65535")
    pattern = {"lanes": lanes, "group": group, **{f"count{i}": c for i, c in enumerate(counts)},
               **{f"o_count{i}": c for i, c in enumerate(out_counts)}}
    for prefix, s in (("a", a), ("b", b)):
        if s is None:
            continue
        pattern.update({f"{prefix}_base": s.base, f"{prefix}_lane": s.lane, f"{prefix}_bytes": s.nbytes,
                        **{f"{prefix}_step{i}": v for i, v in enumerate(_steps(counts, _pad(s.strides, 0)))}})
    pattern["b_on"] = int(b is not None)
    pattern.update({"o_base": out.base, "o_bytes": out.nbytes,
                    **{f"o_step{i}": v for i, v in enumerate(_steps(out_counts, _pad(out.strides, 0)))}})
    n = int(np.prod(counts))
    return VectorConfig(replace_count(instr, n), pattern)


def replace_count(instr: VectorInstr, count: int) -> VectorInstr:
    from dataclasses import replace
    return replace(instr, count=count)


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass
class DramImage:
    """A DRAM image built region by region (each ALIGN-byte aligned)."""
    chunks: list = field(default_factory=list)
    size: int = 0

    def add(self, data: bytes | np.ndarray) -> int:
        raw = np.frombuffer(bytes(data), np.uint8) if isinstance(data, (bytes, bytearray)) \
            else np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        base = self.size
        self.chunks.append((base, raw))
        self.size = base + _align(max(1, raw.size))
        return base

    def reserve(self, nbytes: int) -> int:
        return self.add(np.zeros(nbytes, np.uint8))

    def array(self) -> np.ndarray:
        out = np.zeros(self.size, np.uint8)
        for base, raw in self.chunks:
            out[base:base + raw.size] = raw
        return out


def vector_program(geom: Geometry, image: DramImage, configs: list[VectorConfig], out_addr: int,
                   out_shape: tuple, out_dtype, input_bytes: int, weight_bytes: int) -> Program:
    """LOAD VCONFIG + VRUN per configuration; the output tensor at out_addr."""
    P = geom.dram_port_bytes
    words = config_words(geom.cols, P)
    instrs = []
    for config in configs:
        addr = image.add(config.to_bytes(geom.cols, P))
        instrs += [isa.load(LoadBuffer.VCONFIG, 0, words, addr, P, P), isa.vrun()]
    out_dtype = np.dtype(out_dtype)
    return Program(instrs=instrs, dram=image.array(), out_addr=out_addr, out_shape=tuple(out_shape),
                   out_dtype=out_dtype, macs=0, dram_input_bytes=input_bytes,
                   dram_weight_bytes=weight_bytes,
                   dram_output_bytes=int(np.prod(out_shape)) * out_dtype.itemsize)
