"""Numpy cycle model of the NPU: the same schedule as the RTL, the same values and cycle count.

Timing (hw/top.py, hw/dma.py, hw/compute.py): instruction i is held from cycle
a_i = d_{i-1} + 1 (a_0 = 1: accepted in cycle 0) and dispatches at
d_i = max(a_i, free[unit], free[dma] if wait_dma, free[compute] if wait_compute);
its unit is then busy for D cycles and free again at d_i + D + 1. The program
ends at max(d_last + 1, free[dma], free[compute]): the first cycle `idle` is high.
Durations (n words of W bytes at B bytes/cycle; R x C array; L requant latency):
  LOAD/STORE   max(n-1, ceil(n*W/B)-1) + 2
  COMPUTE ws   2R + C + M + L'        (M = count, L' = L if requant else 0)
  COMPUTE os   K + 2R + C - 1 + L'    (K = count)
  VRUN         from the stream pattern in the VCONFIG register file (hw/vdma.py,
               qsim/npu/vector/model.py vrun_timing); it occupies the DMA unit
  LOADW        from the window descriptor behind it in the same register file (hw/wdma.py,
               qsim/npu/array/window.py window_timing); it occupies the DMA unit
Values: each instruction is executed on numpy buffers, a whole tile at a time.
VRUN and LOADW durations depend on the configuration words the program LOADs into VCONFIG,
so timing functions take the program's initial DRAM image (configurations are
constants there, never written by the program).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import UsageError
from ..hw.isa import Instr, LoadBuffer, Opcode, StoreBuffer
from ..hw.vector_isa import VectorOp, config_words, decode_config
from ..hw.window_isa import window_base, window_words
from ..hw.isa import Plane
from ..hw.params import PARAM_DEPTH_WORDS, PARAM_LANE_BYTES, REQUANT_LATENCY_CYCLES, Dataflow, Geometry
from ..tosa.arith import apply_scale_16, apply_scale_32
from .vector.model import VectorUnitModel, vrun_execute, vrun_timing, vrun_write_cycles
from .array.window import window_timing, window_words_values


@dataclass
class CycleStats:
    """Cycle accounting of one program run. compute + fill_drain + stall == total."""
    total_cycles: int = 0
    compute_cycles: int = 0       # compute unit streaming operands (a row of A or a k step per cycle)
    fill_drain_cycles: int = 0    # compute unit busy with weight preload, skew, drain, requant tail
    stall_cycles: int = 0         # compute unit idle: waiting for DMA (or nothing left to do)
    dma_busy_cycles: int = 0
    pe_mac_slots: int = 0         # useful MACs issued (rows x cols x streaming cycles)
    dram_read_bytes: dict = field(default_factory=lambda: {b.name.lower(): 0 for b in LoadBuffer})
    dram_write_bytes: int = 0
    instructions: int = 0
    vector_beats: int = 0         # beats through the vector unit (VRUN)
    vector_ops: int = 0           # element operations of the vector unit: beats x lanes in use
    vector_mul_ops: int = 0       # of them, through MUL or DOT (energy.py)
    vector_div_ops: int = 0       # of them, through INTDIV


def dma_duration(count: int, word_bytes: int, bytes_per_cycle: int) -> int:
    last_issue = max(count - 1, -(-count * word_bytes // bytes_per_cycle) - 1)
    return last_issue + 2


def compute_duration(geom: Geometry, count: int, requant: bool) -> int:
    R, C = geom.rows, geom.cols
    tail = REQUANT_LATENCY_CYCLES if requant else 0
    if geom.dataflow is Dataflow.WEIGHT_STATIONARY:
        return 2 * R + C + count + tail
    return count + 2 * R + C - 1 + tail


def instr_unit(instr: Instr) -> str | None:
    if instr.opcode in (Opcode.LOAD, Opcode.STORE, Opcode.VRUN, Opcode.LOADW):
        return "dma"
    return "compute" if instr.opcode is Opcode.COMPUTE else None


def register_words(geom: Geometry) -> int:
    """Words of the register file LOAD buf=3 fills: the vector configuration, then the
    window descriptor."""
    P = geom.dram_port_bytes
    return window_base(geom.cols, P) + window_words(P)


def _window_blob(geom: Geometry, regs: np.ndarray) -> bytes:
    base = window_base(geom.cols, geom.dram_port_bytes)
    return regs[base:].tobytes()


def vrun_configs(geom: Geometry, instrs, dram) -> dict:
    """instruction index -> what each VRUN (its VectorConfig) and LOADW (its window
    descriptor, bytes) executes: the register file as the program's LOADs leave it (read
    from the initial DRAM image)."""
    words = register_words(geom)
    vwords = config_words(geom.cols, geom.dram_port_bytes)
    P = geom.dram_port_bytes
    regs = np.zeros((words, P), np.uint8)
    out = {}
    for i, instr in enumerate(instrs):
        if instr.opcode is Opcode.LOAD and instr.get("buf") == LoadBuffer.VCONFIG:
            take = min(instr.get("word_bytes"), P)
            for k in range(instr.get("count")):
                addr = instr.get("dram_addr") + k * instr.get("dram_stride")
                row = np.zeros(P, np.uint8)
                row[:take] = dram[addr:addr + take]
                if instr.get("buf_addr") + k < words:
                    regs[instr.get("buf_addr") + k] = row
        elif instr.opcode in (Opcode.VRUN, Opcode.LOADW):
            if dram is None:
                raise UsageError(f"the timing of a program with {instr.opcode.name} needs its DRAM image")
            out[i] = (decode_config(regs[:vwords].tobytes(), geom.cols) if instr.opcode is Opcode.VRUN
                      else _window_blob(geom, regs))
    return out


def instr_duration(geom: Geometry, instr: Instr, vconfig=None) -> int:
    if instr.opcode is Opcode.VRUN:
        return vrun_timing(vconfig, geom.dram_bytes_per_cycle).duration
    if instr.opcode is Opcode.LOADW:
        return window_timing(vconfig, instr.get("count"), geom.rows, geom.dram_bytes_per_cycle).duration
    if instr.opcode in (Opcode.LOAD, Opcode.STORE):
        return dma_duration(instr.get("count"), instr.get("word_bytes"), geom.dram_bytes_per_cycle)
    if instr.opcode is Opcode.COMPUTE:
        return compute_duration(geom, instr.get("count"), bool(instr.get("requant")))
    return 0


def _configured(instrs) -> bool:
    return any(i.opcode in (Opcode.VRUN, Opcode.LOADW) for i in instrs)


def schedule(geom: Geometry, instrs, dram=None) -> tuple[np.ndarray, int]:
    """Dispatch cycle of every instruction and the total cycle count (`dram`: the initial
    image, needed for VRUN)."""
    configs = vrun_configs(geom, instrs, dram) if _configured(instrs) else {}
    free = {"dma": 0, "compute": 0}
    dispatch = np.zeros(len(instrs), dtype=np.int64)
    prev = 0
    for i, instr in enumerate(instrs):
        unit = instr_unit(instr)
        t = prev + 1
        if unit:
            t = max(t, free[unit])
        if instr.wait_dma:
            t = max(t, free["dma"])
        if instr.wait_compute:
            t = max(t, free["compute"])
        if unit:
            free[unit] = t + instr_duration(geom, instr, configs.get(i)) + 1
        dispatch[i] = prev = t
    return dispatch, max(prev + 1, free["dma"], free["compute"])


def vector_write_cycle(geom: Geometry, instrs, dram, byte_addr: int) -> int | None:
    """Program-relative cycle of the last VRUN write of DRAM byte `byte_addr` (None if no
    VRUN writes it): a VRUN dispatched in cycle t has busy cycle 0 at t + 1."""
    dispatch, _ = schedule(geom, instrs, dram)
    found = None
    for index, config in vrun_configs(geom, instrs, dram).items():
        if instrs[index].opcode is Opcode.VRUN:
            for busy in vrun_write_cycles(config, geom.dram_bytes_per_cycle, byte_addr):
                found = int(dispatch[index]) + 1 + busy
    return found


class NpuState:
    """The NPU's buffers as numpy arrays (uint8 words; accumulators as int32 lanes)."""

    def __init__(self, geom: Geometry):
        g = self.geom = geom
        self.input = np.zeros((g.input_depth_words, g.input_word_bytes), np.uint8)
        self.weight = np.zeros((g.weight_depth_words, g.weight_word_bytes), np.uint8)
        self.param = np.zeros((PARAM_DEPTH_WORDS, g.param_word_bytes), np.uint8)
        self.acc = np.zeros((g.acc_depth_words, g.cols), np.int64)     # int48 lanes (hw/compute.py)
        self.output = np.zeros((g.acc_depth_words, g.output_buffer_word_bytes), np.uint8)
        self.vconfig = np.zeros((register_words(g), g.dram_port_bytes), np.uint8)
        self.vector = VectorUnitModel(g.cols)

    def _rows(self, buffer: np.ndarray, start: int, count: int, what: str) -> slice:
        if start < 0 or start + count > buffer.shape[0]:
            raise UsageError(f"{what}: words [{start}, {start + count}) outside the buffer's "
                             f"{buffer.shape[0]} words")
        return slice(start, start + count)

    def load(self, instr: Instr, dram: np.ndarray) -> None:
        buf = {LoadBuffer.INPUT: self.input, LoadBuffer.WEIGHT: self.weight,
               LoadBuffer.PARAM: self.param, LoadBuffer.VCONFIG: self.vconfig}[LoadBuffer(instr.get("buf"))]
        n, wb = instr.get("count"), instr.get("word_bytes")
        rows = self._rows(buf, instr.get("buf_addr"), n, "LOAD")
        take = min(wb, buf.shape[1])
        index = instr.get("dram_addr") + instr.get("dram_stride") * np.arange(n)[:, None] + np.arange(take)
        if index.size and index.max() >= dram.size:
            raise UsageError(f"LOAD reads DRAM byte {int(index.max())} beyond its {dram.size} bytes")
        words = np.zeros((n, buf.shape[1]), np.uint8)
        words[:, :take] = dram[index]
        buf[rows] = words

    def loadw(self, instr: Instr, dram: np.ndarray) -> None:
        n = instr.get("count")
        rows = self._rows(self.input, instr.get("buf_addr"), n, "LOADW")
        try:
            words = window_words_values(_window_blob(self.geom, self.vconfig), n, self.geom.rows, dram)
        except IndexError as err:
            raise UsageError(str(err)) from None
        self.input[rows] = words

    def store(self, instr: Instr, dram: np.ndarray) -> None:
        n, wb = instr.get("count"), instr.get("word_bytes")
        if StoreBuffer(instr.get("buf")) is StoreBuffer.ACCUMULATOR:
            src = self.acc[self._rows(self.acc, instr.get("buf_addr"), n, "STORE")]
            src = _wrap(src, 32).astype("<i4").view(np.uint8).reshape(n, -1)
        else:
            src = self.output[self._rows(self.output, instr.get("buf_addr"), n, "STORE")]
        index = instr.get("dram_addr") + instr.get("dram_stride") * np.arange(n)[:, None] + np.arange(wb)
        if index.size and index.max() >= dram.size:
            raise UsageError(f"STORE writes DRAM byte {int(index.max())} beyond its {dram.size} bytes")
        dram[index] = src[:, :wb]

    def compute(self, instr: Instr) -> None:
        g = self.geom
        R, C = g.rows, g.cols
        count = instr.get("count")
        in_zp, w_zp = instr.get("in_zp"), instr.get("w_zp")
        ws = g.dataflow is Dataflow.WEIGHT_STATIONARY
        a = self.input[self._rows(self.input, instr.get("a_addr"), count, "COMPUTE input")]
        w = self.weight[self._rows(self.weight, instr.get("w_addr"), R if ws else count, "COMPUTE weight")]
        a_op = _operand(a, instr.get("a_plane")) - in_zp
        w_op = _operand(w, instr.get("w_plane")) - w_zp
        product = a_op @ w_op if ws else a_op.T @ w_op
        n_rows = count if ws else R
        # The PEs' 32-bit sums (one fold / one K chunk) never wrap on a plane pass (bounds:
        # qsim/npu/array/wide.py); an int8 pass wraps like TOSA's int32 accumulator, which the
        # low 32 bits of the 48-bit lanes reproduce.
        high_bytes = (instr.get("a_plane") == Plane.HI) + (instr.get("w_plane") == Plane.HI)
        product = _wrap(product, 32) << (8 * high_bytes)
        rows = self._rows(self.acc, instr.get("acc_addr"), n_rows, "COMPUTE accumulator")
        old = self.acc[rows] if instr.get("accumulate") else 0
        total = _wrap(old + product, 48)
        self.acc[rows] = total
        if instr.get("requant"):
            p = self.param[instr.get("param_addr")].reshape(C, PARAM_LANE_BYTES)
            bias = p[:, 0:4].copy().view("<i4")[:, 0].astype(np.int64)
            shift = (p[:, 8] & 0x3F).astype(np.int64)
            if instr.get("acc48"):       # 48-bit bias: bits 47:32 in the multiplier's high half
                bias = (p[:, 0:4].copy().view("<u4")[:, 0].astype(np.int64)
                        + (p[:, 6:8].copy().view("<i2")[:, 0].astype(np.int64) << 32))
                mult = p[:, 4:6].copy().view("<u2")[:, 0].astype(np.int64) & 0x7FFF
                scaled = apply_scale_16(_wrap(total + bias, 48), mult, shift, context="NPU requantization unit")
            else:
                mult = p[:, 4:8].copy().view("<i4")[:, 0].astype(np.int64)
                value = _wrap(_wrap(total, 32) + bias, 32)
                scaled = apply_scale_32(value, mult, shift, bool(instr.get("double_round")),
                                        context="NPU requantization unit")
            lo, hi = instr.get("clamp_lo"), instr.get("clamp_hi")
            if instr.get("out16"):
                lo = (instr.get("clamp_lo_msb") << 8) | (lo & 0xFF)
                hi = (instr.get("clamp_hi_msb") << 8) | (hi & 0xFF)
            out = np.clip(scaled.astype(np.int64) + instr.get("out_zp"), lo, hi)
            orows = self._rows(self.output, instr.get("out_addr"), n_rows, "COMPUTE output")
            if instr.get("out16"):
                self.output[orows] = out.astype("<i2").view(np.uint8)
            else:
                self.output[orows] = 0
                self.output[orows, :C] = out.astype(np.int8).view(np.uint8)


def _wrap(value, bits: int):
    """Two's-complement wrap of int64 values to `bits` bits."""
    shift = 64 - bits
    return (np.asarray(value, np.int64) << shift) >> shift


def _operand(words: np.ndarray, plane: int) -> np.ndarray:
    """Buffer bytes as the array's edge reads them: unsigned for a low-byte plane, else signed."""
    return words.astype(np.int64) if plane == Plane.LO else words.view(np.int8).astype(np.int64)


def cycle_stats(geom: Geometry, instrs, dram=None) -> CycleStats:
    """The cycle accounting of a program (timing only, no values). A VRUN streams one beat
    per cycle at best: its beats count as compute, its fixed pipeline overhead as
    fill/drain, and its bandwidth and gather waits as stall."""
    _, total = schedule(geom, instrs, dram)
    configs = vrun_configs(geom, instrs, dram) if _configured(instrs) else {}
    stats = CycleStats(total_cycles=total, instructions=len(instrs))
    for index, instr in enumerate(instrs):
        if instr.opcode is Opcode.VRUN:
            timing = vrun_timing(configs[index], geom.dram_bytes_per_cycle)
            stats.vector_beats += timing.beats
            stats.vector_ops += timing.beats * configs[index].field("lanes")
            op = configs[index].instr.op
            if op in (VectorOp.MUL, VectorOp.DOT):
                stats.vector_mul_ops += timing.beats * configs[index].field("lanes")
            elif op is VectorOp.INTDIV:
                stats.vector_div_ops += timing.beats * configs[index].field("lanes")
            stats.compute_cycles += timing.beats
            stats.fill_drain_cycles += timing.fill_cycles
            stats.dram_read_bytes["vector"] = stats.dram_read_bytes.get("vector", 0) + timing.read_bytes
            stats.dram_write_bytes += timing.write_bytes
            stats.dma_busy_cycles += timing.duration
            continue
        if instr.opcode is Opcode.LOADW:
            timing = window_timing(configs[index], instr.get("count"), geom.rows, geom.dram_bytes_per_cycle)
            stats.dram_read_bytes["input"] += timing.read_bytes
            stats.dma_busy_cycles += timing.duration
            continue
        busy = instr_duration(geom, instr)
        if instr.opcode is Opcode.LOAD:
            stats.dram_read_bytes[LoadBuffer(instr.get("buf")).name.lower()] += \
                instr.get("count") * instr.get("word_bytes")
            stats.dma_busy_cycles += busy
        elif instr.opcode is Opcode.STORE:
            stats.dram_write_bytes += instr.get("count") * instr.get("word_bytes")
            stats.dma_busy_cycles += busy
        elif instr.opcode is Opcode.COMPUTE:
            streaming = instr.get("count")
            stats.compute_cycles += streaming
            stats.fill_drain_cycles += busy - streaming
            stats.pe_mac_slots += geom.rows * geom.cols * streaming
    stats.stall_cycles = total - stats.compute_cycles - stats.fill_drain_cycles
    return stats


def execute(geom: Geometry, instrs, dram: np.ndarray) -> None:
    """The values of a program: executes `instrs` on `dram` (uint8, modified in place)."""
    state = NpuState(geom)
    for instr in instrs:
        if instr.opcode is Opcode.LOAD:
            state.load(instr, dram)
        elif instr.opcode is Opcode.STORE:
            state.store(instr, dram)
        elif instr.opcode is Opcode.LOADW:
            state.loadw(instr, dram)
        elif instr.opcode is Opcode.COMPUTE:
            state.compute(instr)
        elif instr.opcode is Opcode.VRUN:
            vrun_execute(decode_config(state.vconfig.tobytes(), geom.cols), dram, state.vector)


def run_model(geom: Geometry, instrs, dram: np.ndarray) -> tuple[int, CycleStats]:
    """Executes `instrs` on `dram` (uint8, modified in place); returns (total cycles, stats)."""
    stats = cycle_stats(geom, instrs, dram)
    execute(geom, instrs, dram)
    return stats.total_cycles, stats
