"""Vector-unit programs: stream patterns (loop nests over DRAM) and the VCONFIG/VRUN sequence.

A vector stage's program is, per vector job: LOAD of the job's configuration words from
DRAM into the VCONFIG register file, then VRUN (hw/isa.py). LOAD and VRUN both occupy the
DMA unit, so they run strictly in order and a LOAD never overwrites a configuration still
in use. The DRAM image holds the operands, any table, the configurations and the result
region, each 64-byte aligned.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ...errors import UnsupportedError
from ...hw import isa
from ...hw.isa import LoadBuffer
from ...hw.params import Geometry
from ...hw.vector_isa import STREAM_LEVELS, VectorConfig, VectorInstr, config_words
from ..array.compile import ALIGN, Program


@dataclass(frozen=True)
class Stream:
    """One operand stream: base address, byte stride per loop level (level 0 innermost),
    byte distance between lanes, element size in bytes."""
    base: int
    strides: tuple
    lane: int
    nbytes: int


def strides_of(shape, nbytes: int) -> list[int]:
    """Row-major byte strides of `shape` with `nbytes` elements."""
    out, step = [], nbytes
    for d in reversed(shape):
        out.append(step)
        step *= int(d)
    return out[::-1]


class Job:
    """One vector job: an instruction over the output index space (module docstring)."""

    def __init__(self, instr_of, out_shape, out_base: int, out_strides, o_bytes: int,
                 operands, lane_dim: int | None = None, group=(), per_tile: bool = False):
        self.instr_of = instr_of          # (first lane index, lanes) -> VectorInstr
        self.out_shape = [int(d) for d in out_shape] or [1]
        self.out_base, self.out_strides, self.o_bytes = out_base, list(out_strides) or [o_bytes], o_bytes
        self.operands = operands          # [(base, strides per output dim, nbytes)], A then B
        # lanes along the innermost dimension of extent > 1 (contiguous: the ones after it are 1)
        wide = [d for d, n in enumerate(self.out_shape) if n > 1]
        self.lane_dim = (wide[-1] if wide else len(self.out_shape) - 1) if lane_dim is None else lane_dim
        self.group = list(group)          # [(count, [stride per operand])], innermost first
        self.per_tile = per_tile

    def configs(self, lanes: int) -> list:
        shape, ld = self.out_shape, self.lane_dim
        if self.out_strides[ld] != self.o_bytes:
            raise UnsupportedError("the vector DMA writes the lanes contiguously")
        D = shape[ld]
        full, tail = divmod(D, lanes)
        pieces = ([(t * lanes, lanes, 1) for t in range(full)] if self.per_tile else
                  ([(0, lanes, full)] if full else []))
        if tail:
            pieces.append((full * lanes, tail, 1))
        outer = [d for d in range(len(shape)) if d != ld and shape[d] > 1][::-1]   # innermost first
        group_size = int(np.prod([c for c, _ in self.group])) if self.group else 1
        out = []
        for first, n_lanes, tiles in pieces:
            counts = [c for c, _ in self.group] + [tiles] + [shape[d] for d in outer]
            levels = [i for i, c in enumerate(counts) if c > 1 or i == 0]
            if len(levels) > STREAM_LEVELS:
                raise UnsupportedError(f"an address pattern of {len(levels)} loop levels; the vector DMA "
                                       f"has {STREAM_LEVELS}")

            def pattern(strides_of_out, group_strides, base):
                full_strides = list(group_strides) + [strides_of_out[ld] * lanes] + \
                    [strides_of_out[d] for d in outer]
                return Stream(base + first * strides_of_out[ld], tuple(full_strides[i] for i in levels),
                              strides_of_out[ld], 0)

            streams = []
            for k, (base, strides, nbytes) in enumerate(self.operands):
                s = pattern(strides, [g[k] for _, g in self.group], base)
                streams.append(replace(s, nbytes=nbytes))
            o = pattern(self.out_strides, [0] * len(self.group), self.out_base)
            o = replace(o, nbytes=self.o_bytes)
            kept = [counts[i] for i in levels]
            o_counts = [1 if i < len(self.group) else counts[i] for i in levels]
            out.append(make_config(self.instr_of(first, n_lanes), n_lanes, kept, streams[0], o,
                                   out_counts=o_counts, b=streams[1] if len(streams) > 1 else None,
                                   group=group_size if self.group else 1))
        return out


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
