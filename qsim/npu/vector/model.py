"""Numpy model of the vector unit RTL (hw/vector.py): the same values and the same cycles.

Values follow the RTL's pipeline stage by stage, each stage computed with qsim's
TOSA arithmetic helpers (qsim.tosa.arith, and the MUL reference for the rounding
shift), so where the TOSA reference raises a REQUIRE failure the model raises
too (the RTL then computes its 32-bit formula, hw/scale.py):
  A' = scale_a ? scale(a - zp_a) : a - zp_a       (a - zp_a wraps at 32 bits, as in P0)
  v  = op(A', B') per beat, or per group of beats for reductions
  out = clip((scale_o ? scale(v) : v) + zp_o, clamp_lo, clamp_hi)
scale() is apply_scale_32 with double rounding and apply_scale_16 without it: the
RTL has one datapath for both, and apply_scale_16's formula is apply_scale_32's
without double rounding (its weaker REQUIRE admits every value the RTL computes
exactly).

Timing (cycle 0 = the cycle the instruction is accepted): `stream_timing` steps the
stall-all pipeline of hw/vector.py cycle by cycle for given source-valid and
sink-ready patterns; without stalls, beat k is accepted in cycle k + 1, its result
is taken in cycle k + 1 + VECTOR_LATENCY_CYCLES, and the unit is idle again (the
next instruction is accepted) in cycle n + 1 + VECTOR_LATENCY_CYCLES when the last
beat has a result (n + 3 when it has none, n + 1 for LOAD_TABLE: no results at all).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...errors import UnpredictableError, UnsupportedError, UsageError
from ...hw.vector_isa import (DEFAULT_MAX_POOL_COUNT, REDUCTIONS, STREAM_LEVELS, TABLE_DEPTH,
    VECTOR_LATENCY_CYCLES, VectorInstr, VectorOp)
from ...tosa.arith import (INT32_MAX, INT32_MIN, apply_add, apply_clip, apply_lookup, apply_scale_16,
    apply_scale_32, apply_sub, count_leading_zeros, reciprocal_scale, require_running_sums)
from ...tosa.run import run as run_tosa  # always with backend="reference": the model is the oracle

TABLE_ENTRIES = TABLE_DEPTH + 1     # 513: the int16 table; int8 tables use the first 256


@dataclass(frozen=True)
class VectorRun:
    outputs: np.ndarray         # [results, lanes] int32, in output order
    accept_cycles: np.ndarray   # cycle each input beat was accepted
    output_cycles: np.ndarray   # cycle each result was taken from the output stream
    cycles: int                 # first cycle the unit is idle again (next instruction accepted)


def _wrap32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64).astype(np.uint32).astype(np.int32).astype(np.int64)


def _scale(value, multiplier, shift, double_round: bool, context: str) -> np.ndarray:
    if double_round:
        return apply_scale_32(value, multiplier, shift, True, context=context).astype(np.int64)
    return apply_scale_16(value, multiplier, shift, context=context).astype(np.int64)


def group_bounds(last: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of every reduction group: beats up to and including one with `last`.
    Beats after the final `last` form no group (the RTL emits nothing for them)."""
    ends = np.flatnonzero(np.asarray(last, dtype=bool)) + 1
    starts = np.concatenate([[0], ends[:-1]]).astype(int)
    return list(zip(starts.tolist(), ends.tolist()))


class VectorUnitModel:
    """The vector unit's state (its table memories) and its execution of one instruction."""

    def __init__(self, lanes: int, max_pool_count: int = DEFAULT_MAX_POOL_COUNT):
        self.lanes = lanes
        self.max_pool_count = max_pool_count
        self.table = np.zeros(TABLE_ENTRIES, np.int64)   # RTL: lo[i] = table[i], hi[i] = table[i+1]

    def run(self, instr: VectorInstr, a, b=None, last=None, source_valid=None,
            sink_ready=None) -> VectorRun:
        """Executes `instr` on beats a[n, lanes] (b likewise, `last` [n] bool); the patterns
        are per cycle from cycle 1 (True past their end)."""
        a = self._beats(a, "a", instr.count)
        b = np.zeros_like(a) if b is None else self._beats(b, "b", instr.count)
        last = np.zeros(len(a), bool) if last is None else np.asarray(last, bool)
        if last.shape != (len(a),):
            raise UsageError(f"vector unit `last` flags have shape {list(last.shape)}, expected "
                             f"[{len(a)}] (one per beat)")
        outputs, emits = self.values(instr, a, b, last)
        accept, out_cycles, end = stream_timing(len(a), emits, instr.op is VectorOp.LOAD_TABLE,
                                                source_valid, sink_ready)
        return VectorRun(outputs, accept, out_cycles, end)

    def _beats(self, x, name: str, count: int) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64)
        if x.ndim != 2 or x.shape != (count, self.lanes):
            raise UsageError(f"vector unit operand {name} has shape {list(x.shape)}, expected "
                             f"[{count}, {self.lanes}] (count beats of {self.lanes} lanes)")
        return x

    def values(self, instr: VectorInstr, a, b, last) -> tuple[np.ndarray, np.ndarray]:
        """(outputs [results, lanes] int32, emits [n] bool: the beats that produce a result)."""
        op = VectorOp(instr.op)
        if op is VectorOp.LOAD_TABLE:
            n = min(len(a), TABLE_ENTRIES)
            self.table[:n] = _wrap16(a[:n, 0])
            return np.zeros((0, self.lanes), np.int32), np.zeros(len(a), bool)
        va = _wrap32(a - instr.zp_a)
        vb = _wrap32(b - instr.zp_b)
        if instr.scale_a:
            va = _scale(va, instr.mult_a, instr.shift_a, instr.dr_a, "vector unit input A scale")
        if instr.scale_b:
            vb = _scale(vb, instr.mult_b, instr.shift_b, instr.dr_b, "vector unit input B scale")
        lanes = instr.lane_fields(va.shape[1])
        mult_o = np.array([f["mult_o"] for f in lanes], np.int64)
        shift_o = np.array([f["shift_o"] for f in lanes], np.int64)
        if op in REDUCTIONS:
            groups = group_bounds(last)
            emits = np.zeros(len(a), bool)
            emits[[e - 1 for _, e in groups]] = True
            v = self._reduce(op, va, vb, groups)
            if op is VectorOp.AVG:
                counts = np.array([e - s for s, e in groups], np.int64)[:, None]
                if counts.size and counts.max() > self.max_pool_count:
                    raise UnsupportedError(
                        f"AVG_POOL2D window of {int(counts.max())} elements: the vector unit's "
                        f"reciprocal table holds counts up to {self.max_pool_count}",
                        hint="run this pooling on the host, or build the unit with a larger "
                             "max_pool_count")
                multiplier, shift = reciprocal_scale(counts, context="reciprocal_scale(count)")
                v = apply_scale_32(v, multiplier, shift, False,
                                   context="apply_scale_32(acc, 1/count)").astype(np.int64)
        else:
            emits = np.ones(len(a), bool)
            v = self._elementwise(op, instr, va, vb)
        if instr.scale_o and op is not VectorOp.AVG:
            v = _scale(v, mult_o, shift_o, instr.dr_o, "vector unit output scale")
        out = apply_clip(v + instr.zp_o, instr.clamp_lo, instr.clamp_hi)
        return out.astype(np.int32), emits

    def _elementwise(self, op: VectorOp, instr: VectorInstr, va, vb) -> np.ndarray:
        if op is VectorOp.PASS:
            return va
        if op is VectorOp.ADD:
            return apply_add(va, vb, INT32_MIN, INT32_MAX, "vector unit ADD")
        if op is VectorOp.SUB:
            return apply_sub(va, vb, INT32_MIN, INT32_MAX, "vector unit SUB")
        if op is VectorOp.MUL:
            return run_tosa("MUL", [va.astype(np.int32), vb.astype(np.int32)],
                            {"shift": instr.mul_shift}, backend="reference")[0].astype(np.int64)
        if op is VectorOp.MAXIMUM:
            return np.maximum(va, vb)
        if op is VectorOp.MINIMUM:
            return np.minimum(va, vb)
        if op is VectorOp.TABLE8:
            return self.table[(va + 128) & 0xFF]          # int8 entries, held sign-extended
        if op is VectorOp.TABLE16:
            return apply_lookup(self.table, va, context="apply_lookup").astype(np.int64)
        if op in _SHIFTS:      # the int32 reference: it REQUIREs amounts in [0, 31] as the lanes do
            return run_tosa(_SHIFTS[op], [va.astype(np.int32), vb.astype(np.int32)],
                            {"round": op is VectorOp.ASR_ROUND} if op is not VectorOp.LSL else {},
                            backend="reference")[0].astype(np.int64)
        if op is VectorOp.LSR:
            return _logical_right_shift(va, vb, instr.mul_shift)
        if op is VectorOp.CLZ:
            return count_leading_zeros(va, 32).astype(np.int64)
        if op in (VectorOp.INTDIV, VectorOp.ABS):
            operands = [va.astype(np.int32)] + ([vb.astype(np.int32)] if op is VectorOp.INTDIV else [])
            return run_tosa(op.name, operands, {}, backend="reference")[0].astype(np.int64)
        if op in _LOGIC:
            return _LOGIC[op](va, vb).astype(np.int64)
        if op is VectorOp.SELECT:
            return np.where(va != 0, vb, 0)
        raise UsageError(f"vector unit: {op.name} is not an elementwise operation")

    @staticmethod
    def _reduce(op: VectorOp, va, vb, groups) -> np.ndarray:
        out = np.zeros((len(groups), va.shape[1]), np.int64)
        for g, (s, e) in enumerate(groups):
            part = va[s:e]
            if op is VectorOp.DOT:          # products and sum wrap at 32 bits, as the lanes do
                out[g] = _wrap32((_wrap32(part * vb[s:e])).sum(axis=0))
            elif op in (VectorOp.REDUCE_SUM, VectorOp.AVG):
                out[g] = require_running_sums(part, INT32_MIN, INT32_MAX, f"vector unit {op.name}", axis=0)
            elif op is VectorOp.REDUCE_MAX:
                out[g] = part.max(axis=0)
            elif op is VectorOp.REDUCE_MIN:
                out[g] = part.min(axis=0)
            else:
                out[g] = part.argmax(axis=0)       # the first maximum, like the spec's strict >
        return out


_SHIFTS = {VectorOp.ASR: "ARITHMETIC_RIGHT_SHIFT", VectorOp.ASR_ROUND: "ARITHMETIC_RIGHT_SHIFT",
           VectorOp.LSL: "LOGICAL_LEFT_SHIFT"}
_LOGIC = {VectorOp.GREATER: np.greater, VectorOp.GREATER_EQUAL: np.greater_equal, VectorOp.EQUAL: np.equal,
          VectorOp.AND: np.bitwise_and, VectorOp.OR: np.bitwise_or, VectorOp.XOR: np.bitwise_xor}


def _logical_right_shift(va, vb, bits: int) -> np.ndarray:
    """LOGICAL_RIGHT_SHIFT (spec 2.5.9) of lanes holding sign-extended `bits`-bit values: the
    value as unsigned `bits` bits, shifted; the writer keeps the type's low bytes."""
    if bits not in (8, 16, 32):
        raise UsageError(f"vector unit LSR: mul_shift = {bits} is not an element width (8, 16, 32)")
    if not ((vb >= 0) & (vb <= 31)).all():
        raise UnpredictableError(f"REQUIRE(0 <= value2 && value2 <= 31) fails: shift amounts range over "
                                 f"[{int(vb.min())}, {int(vb.max())}]")
    return _wrap32((va & ((1 << bits) - 1)) >> vb)


def _wrap16(values) -> np.ndarray:
    return np.asarray(values, np.int64).astype(np.uint16).astype(np.int16).astype(np.int64)


def _pattern(pattern, t: int) -> bool:
    return True if pattern is None or t - 1 >= len(pattern) else bool(pattern[t - 1])


def stream_timing(n: int, emits, table_load: bool, source_valid=None, sink_ready=None):
    """(accept cycles [n], output cycles [results], idle cycle) of one instruction.

    Mirrors hw/vector.py: stages P0..P3 and the output register shift together when
    the output register is empty or taken (`adv`); P1 -> P2 drops beats that do not
    emit (reduction beats other than a group's last); LOAD_TABLE beats never enter P0.
    """
    emits = np.asarray(emits, bool)
    if source_valid is None and sink_ready is None:
        accept = np.arange(1, n + 1)
        outputs = accept[emits] + VECTOR_LATENCY_CYCLES
        if n == 0 or table_load:
            return accept, outputs, n + 1
        # a last beat that emits nothing leaves after P1 (2 cycles); a result 1 cycle after it is taken
        return accept, outputs, max(n + 3, int(outputs[-1]) + 1 if outputs.size else 0)
    stages = [None] * 4           # beat index held by P0..P3
    out_reg = None
    accept, outputs = [], []
    k, t = 0, 1
    while k < n or out_reg is not None or any(s is not None for s in stages):
        ready = _pattern(sink_ready, t)
        adv = out_reg is None or ready
        if out_reg is not None and ready:
            outputs.append(t)
        take = k < n and adv and _pattern(source_valid, t)
        if take:
            accept.append(t)
        if adv:
            p2 = stages[1] if stages[1] is not None and emits[stages[1]] else None
            out_reg = stages[3]
            stages = [k if take and not table_load else None, stages[0], p2, stages[2]]
        k += int(take)
        t += 1
    return np.array(accept, np.int64), np.array(outputs, np.int64), t


# ------------------------------------------------------------------ VRUN: the vector DMA

VRUN_FILL_CYCLES = 8          # busy = last read issue + 9: one cycle of streaming + this overhead
TABLE_LOAD_FILL_CYCLES = 3    # LOAD_TABLE: last read issue + 4 (no result leaves the pipeline)


def _levels(config, prefix: str = "") -> list[int]:
    return [max(1, config.field(f"{prefix}count{i}")) for i in range(STREAM_LEVELS)]


def pattern_strides(counts, steps) -> list[int]:
    """Byte strides of the levels from the steps (hw/vector_isa.py: step_i = stride_i -
    sum_{j<i} (count_j - 1) stride_j)."""
    strides = []
    for i, step in enumerate(steps):
        strides.append(int(step) + sum((counts[j] - 1) * strides[j] for j in range(i)))
    return strides


def _addresses(base: int, counts, steps) -> np.ndarray:
    """Address of every iteration, level 0 fastest."""
    strides = pattern_strides(counts, steps)
    addr = np.full(1, base, np.int64)
    for count, stride in zip(reversed(counts), reversed(strides)):
        addr = (addr[:, None] + stride * np.arange(count, dtype=np.int64)[None, :]).reshape(-1)
    return addr


def _read(dram: np.ndarray, addr: np.ndarray, nbytes: int) -> np.ndarray:
    if addr.size and (addr.min() < 0 or addr.max() + nbytes > dram.size):
        raise UsageError(f"VRUN reads DRAM bytes [{int(addr.min())}, {int(addr.max()) + nbytes}) "
                         f"outside its {dram.size} bytes")
    dtype = {1: np.int8, 2: "<i2", 4: "<i4"}[nbytes]
    raw = dram[addr[..., None] + np.arange(nbytes)]
    return raw.copy().view(dtype)[..., 0].astype(np.int64)


def stream_operand(config, dram: np.ndarray, prefix: str) -> np.ndarray:
    """[beats, lanes] operand values the vector DMA feeds (lanes = the pattern's `lanes`).
    Indirect A: beat address + index * a_lane (B's lane 0 is the index), lanes contiguous;
    the address wraps at 32 bits as the RTL's adder does."""
    counts, lanes = _levels(config), config.field("lanes")
    beat = _addresses(config.field(f"{prefix}_base"), counts,
                      [config.field(f"{prefix}_step{i}") for i in range(STREAM_LEVELS)])
    nbytes, lane = config.field(f"{prefix}_bytes"), config.field(f"{prefix}_lane")
    if prefix == "a" and config.field("a_indirect"):
        index = stream_operand(config, dram, "b")[:, 0]
        beat = (beat + index * lane) & 0xFFFFFFFF
        lane = nbytes
    addr = beat[:, None] + lane * np.arange(lanes)[None, :]
    return _read(dram, addr, nbytes)


def vrun_emits(config) -> np.ndarray:
    counts = _levels(config)
    n = int(np.prod(counts))
    op = VectorOp(config.instr.op)
    if op is VectorOp.LOAD_TABLE:
        return np.zeros(n, bool)
    if op in REDUCTIONS:
        return np.arange(n) % config.field("group") == config.field("group") - 1
    return np.ones(n, bool)


def vrun_transactions(config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cost [transactions], index of each beat's last transaction, gap [transactions]: the
    fewest cycles after the previous transaction) of a VRUN. Indirect: B (the index) then A,
    one contiguous read, 2 cycles after B's."""
    lanes = config.field("lanes")
    emits = vrun_emits(config)
    indirect = bool(config.field("a_indirect"))
    if indirect and not (config.field("b_on") and config.field("b_lane") == 0 and config.field("b_bytes") == 4):
        raise UsageError("VRUN in indirect mode reads its row indices as operand B: b_on 1, b_lane 0, "
                         "b_bytes 4 (hw/README.md, Vector DMA)")
    per_beat = []
    for prefix in ("b", "a") if indirect else ("a", "b"):
        if prefix == "b" and not config.field("b_on"):
            continue
        nbytes, lane = config.field(f"{prefix}_bytes"), config.field(f"{prefix}_lane")
        if prefix == "a" and indirect:
            lane = nbytes
        gather = lane not in (0, nbytes)
        per_beat += [nbytes] * lanes if gather else [nbytes if lane == 0 else lanes * nbytes]
    k = len(per_beat)
    cost = np.tile(np.asarray(per_beat, np.int64), len(emits))
    gap = np.tile(np.asarray([1] * (k - 1) + [2 if indirect else 1], np.int64), len(emits))
    last = np.arange(len(emits)) * k + k - 1
    cost[last] += emits * lanes * config.field("o_bytes")
    return cost, last, gap


def vrun_issue_cycles(cost: np.ndarray, bytes_per_cycle: int, gap: np.ndarray | None = None) -> np.ndarray:
    """Busy cycle of every read transaction: s_j = max(s_{j-1} + g_j, ceil(cum_j / B) - 1),
    g_j = gap[j] (default 1). With G_j = g_1 + .. + g_j (G_0 = 0):
    s_j = G_j + max(0, max_{i <= j} (c_i - G_i))."""
    c = -(-np.cumsum(cost) // bytes_per_cycle) - 1
    g = np.arange(len(cost)) if gap is None else np.cumsum(gap) - gap[0]
    return g + np.maximum(0, np.maximum.accumulate(c - g))


@dataclass(frozen=True)
class VrunTiming:
    beats: int
    duration: int              # busy cycles of the VRUN (the dispatcher's D)
    push_cycles: np.ndarray    # busy cycle each beat enters the vector unit
    fill_cycles: int           # the fixed part of `duration`
    read_bytes: int
    write_bytes: int


def vrun_timing(config, bytes_per_cycle: int) -> VrunTiming:
    cost, last, gap = vrun_transactions(config)
    issue = vrun_issue_cycles(cost, bytes_per_cycle, gap)
    s_last = int(issue[-1])
    table = VectorOp(config.instr.op) is VectorOp.LOAD_TABLE
    fill = TABLE_LOAD_FILL_CYCLES if table else VRUN_FILL_CYCLES
    written = int(vrun_emits(config).sum()) * config.field("lanes") * config.field("o_bytes")
    return VrunTiming(beats=len(last), duration=s_last + 1 + fill, push_cycles=issue[last] + 2,
                      fill_cycles=fill, read_bytes=int(cost.sum()) - written, write_bytes=written)


def vrun_write_cycles(config, bytes_per_cycle: int, byte_addr: int) -> list[int]:
    """Busy cycles of the VRUN's DRAM writes that cover `byte_addr`: a result is written in
    the cycle it leaves the vector unit, VECTOR_LATENCY_CYCLES after its beat entered."""
    timing = vrun_timing(config, bytes_per_cycle)
    emitting = np.flatnonzero(vrun_emits(config))
    if not emitting.size:
        return []
    rows = _addresses(config.field("o_base"), _levels(config, "o_"),
                      [config.field(f"o_step{i}") for i in range(STREAM_LEVELS)])[:emitting.size]
    width = config.field("lanes") * config.field("o_bytes")
    hits = np.flatnonzero((rows <= byte_addr) & (byte_addr < rows + width))
    return [int(timing.push_cycles[emitting[r]]) + VECTOR_LATENCY_CYCLES for r in hits]


def vrun_execute(config, dram: np.ndarray, unit: "VectorUnitModel") -> None:
    """The values of one VRUN: gathers the beats, runs the vector unit, writes the results."""
    lanes = config.field("lanes")
    a = stream_operand(config, dram, "a")
    b = stream_operand(config, dram, "b") if config.field("b_on") else np.zeros_like(a)
    group = max(1, config.field("group"))
    last = np.arange(len(a)) % group == group - 1
    instr = config.instr
    if len(instr.mult_o) > 1:         # per-lane scales: the lanes in use
        instr = replace(instr, mult_o=instr.mult_o[:lanes], shift_o=instr.shift_o[:lanes])
    outputs, _ = unit.values(instr, a, b, last)
    if not len(outputs):
        return
    o_bytes = config.field("o_bytes")
    rows = _addresses(config.field("o_base"), _levels(config, "o_"),
                      [config.field(f"o_step{i}") for i in range(STREAM_LEVELS)])[:len(outputs)]
    addr = rows[:, None] + o_bytes * np.arange(lanes)[None, :]
    if addr.min() < 0 or addr.max() + o_bytes > dram.size:
        raise UsageError(f"VRUN writes DRAM bytes outside its {dram.size} bytes")
    data = outputs[:, :lanes].astype("<i4").view(np.uint8).reshape(len(outputs), lanes, 4)[..., :o_bytes]
    dram[addr[..., None] + np.arange(o_bytes)] = data
