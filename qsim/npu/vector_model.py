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

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedError, UsageError
from ..hw.vector import DEFAULT_MAX_POOL_COUNT, TABLE_DEPTH, VECTOR_LATENCY_CYCLES
from ..hw.vector_isa import REDUCTIONS, VectorInstr, VectorOp
from ..tosa.arith import (INT32_MAX, INT32_MIN, apply_add, apply_clip, apply_lookup, apply_scale_16,
                          apply_scale_32, apply_sub, reciprocal_scale, require_running_sums)
from ..tosa.run import run as run_tosa

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
        lanes = instr.lane_fields(self.lanes)
        mult_o = np.array([f["mult_o"] for f in lanes], np.int64)
        shift_o = np.array([f["shift_o"] for f in lanes], np.int64)
        if op in REDUCTIONS:
            groups = group_bounds(last)
            emits = np.zeros(len(a), bool)
            emits[[e - 1 for _, e in groups]] = True
            v = self._reduce(op, va, groups)
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
        raise UsageError(f"vector unit: {op.name} is not an elementwise operation")

    @staticmethod
    def _reduce(op: VectorOp, va, groups) -> np.ndarray:
        out = np.zeros((len(groups), va.shape[1]), np.int64)
        for g, (s, e) in enumerate(groups):
            part = va[s:e]
            if op in (VectorOp.REDUCE_SUM, VectorOp.AVG):
                out[g] = require_running_sums(part, INT32_MIN, INT32_MAX, f"vector unit {op.name}", axis=0)
            elif op is VectorOp.REDUCE_MAX:
                out[g] = part.max(axis=0)
            elif op is VectorOp.REDUCE_MIN:
                out[g] = part.min(axis=0)
            else:
                out[g] = part.argmax(axis=0)       # the first maximum, like the spec's strict >
        return out


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
