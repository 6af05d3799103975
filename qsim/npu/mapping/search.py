"""Mapping search: per GEMM, the candidate mapping (space.py) that minimizes the objective, as
the cycle model and the energy events measure the very program it would run.

A candidate is compiled (qsim/npu/array/compile.py), timed by the cycle model (plus the DRAM
timing waits when the configuration has a DRAM profile: the cycles every engine reports) and
costed by its energy events (qsim/npu/energy.py) with the energy table of the policy; the
objective is cycles, energy (pJ) or their product (energy-delay). Ties go to the earlier
candidate, so the fixed rule (always first) is kept unless another mapping is strictly better:
the search never makes a layer worse than the fixed rule on its objective.

Cycles and energy depend on the GEMM's shape, its window (padding decides which bytes LOADW
moves), whether it requantizes, and the geometry, never on the values: the choice is
memoized on those, so the repeated layers of a network are searched once.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from ...hw.isa import LoadBuffer, Opcode
from ...hw.params import Geometry
from ...hw.window_isa import window_base, window_words
from ..array.compile import Gemm, Program, compile_gemm, gemm_shape
from ..array.window import window_timing
from ..cycle_model import compute_duration, cycle_stats, dma_duration
from ..dram.trace import program_dram_stalls
from ..energy import energy_by_component, load_tech, program_events
from .policy import MappingMode, MappingPolicy, Objective
from .space import FIXED, Mapping, candidates


@dataclass(frozen=True)
class Cost:
    cycles: int
    energy_pj: float

    def value(self, objective: Objective) -> float:
        if objective is Objective.CYCLES:
            return float(self.cycles)
        if objective is Objective.ENERGY:
            return self.energy_pj
        return self.cycles * self.energy_pj


def gemm_cycles(geom: Geometry, program: Program) -> int:
    """The cycle model's total (cycle_model.schedule) of a program compile_gemm wrote, computed
    from the instruction fields in one pass: a search times 10k-100k instructions per candidate,
    and the general schedule's register-file replay costs most of that. A GEMM program loads
    one whole window descriptor (VCONFIG at the descriptor's base) before each LOADW, so that
    descriptor is the LOADW's; anything else takes the general path. Tests hold the two equal."""
    P, B = geom.dram_port_bytes, geom.dram_bytes_per_cycle
    base, words = window_base(geom.cols, P), window_words(P)
    free = {"dma": 0, "compute": 0}
    prev, blob = 0, None
    for instr in program.instrs:
        f, op = instr.fields, instr.opcode
        if op is Opcode.COMPUTE:
            unit, busy = "compute", compute_duration(geom, f["count"], bool(f.get("requant")))
        elif op is Opcode.LOADW:
            unit, busy = "dma", window_timing(blob, f["count"], geom.rows, B).duration
        elif op in (Opcode.LOAD, Opcode.STORE):
            unit, busy = "dma", dma_duration(f["count"], f["word_bytes"], B)
            if op is Opcode.LOAD and f["buf"] == LoadBuffer.VCONFIG:
                if f["buf_addr"] != base or f["count"] != words or f["word_bytes"] != P:
                    return cycle_stats(geom, program.instrs, program.dram).total_cycles
                blob = program.dram[f["dram_addr"]:f["dram_addr"] + words * P].tobytes()
        else:
            return cycle_stats(geom, program.instrs, program.dram).total_cycles
        t = max(prev + 1, free[unit])
        if instr.wait_dma:
            t = max(t, free["dma"])
        if instr.wait_compute:
            t = max(t, free["compute"])
        free[unit] = t + busy + 1
        prev = t
    return max(prev + 1, free["dma"], free["compute"])


def program_cost(geom: Geometry, program: Program, tech: str | None = None) -> Cost:
    """Cycles (the engines' count, DRAM waits included) and energy of one compiled program."""
    cycles = gemm_cycles(geom, program) + program_dram_stalls(geom, program.instrs, program.dram, geom.dram)
    events = program_events(geom, program.instrs, program.dram_input_bytes)
    return Cost(cycles, sum(energy_by_component(events, _table(tech), geom).values()))


@dataclass(frozen=True)
class Choice:
    mapping: Mapping
    cost: Cost
    fixed: Cost                 # the fixed rule's, for the report's gain
    candidates: int
    costs: tuple = ()           # (Mapping, Cost) of every candidate, in search order

    def best(self, objective: Objective) -> tuple[Mapping, Cost]:
        """The candidate `objective` would choose (the first of equals)."""
        return min(self.costs, key=lambda mc: mc[1].value(objective))


@functools.lru_cache(maxsize=8)
def _table(tech: str | None):
    return load_tech(tech)


def _key(geom: Geometry, gemm: Gemm) -> tuple:
    """What a GEMM's costs depend on. The window's first channel (c0, a depthwise GEMM's
    channel group) only moves LOADW's addresses, never which bytes it reads or when, so the
    groups of a depthwise layer share one search. The operand types decide the byte-plane
    passes, the output width the STOREs."""
    return (geom, geom.dram, dataclasses.replace(gemm.reading, c0=0), gemm.a.shape, gemm.w.shape,
            gemm.a.dtype, gemm.w.dtype, None if gemm.requant is None else gemm.requant.out_bits)


_CHOICES: dict = {}             # (_key, policy) -> Choice
_CHOICES_MAX = 4096


def _search(geom: Geometry, gemm: Gemm, policy: MappingPolicy) -> Choice:
    costs = tuple((mapping, program_cost(geom, compile_gemm(geom, gemm, mapping), policy.tech))
                  for mapping in candidates(gemm_shape(geom, gemm)))
    choice = Choice(FIXED, None, costs[0][1], len(costs), costs)
    mapping, cost = choice.best(policy.objective)
    return Choice(mapping, cost, costs[0][1], len(costs), costs)


def forget_choices() -> None:
    """Empties the memo (a benchmark timing a cold search)."""
    _CHOICES.clear()


def choose(geom: Geometry, gemm: Gemm, policy: MappingPolicy) -> Choice:
    """The mapping `policy` runs `gemm` with (the fixed rule without a search)."""
    if policy.mode is MappingMode.FIXED:
        return Choice(FIXED, None, None, 1)
    key = (_key(geom, gemm), policy)
    if key not in _CHOICES:
        if len(_CHOICES) >= _CHOICES_MAX:
            _CHOICES.clear()
        _CHOICES[key] = _search(geom, gemm, policy)
    return _CHOICES[key]


def compile_mapped(geom: Geometry, gemm: Gemm, policy: MappingPolicy) -> tuple[Program, Choice]:
    """The program of `gemm` under `policy`, and the choice that made it."""
    choice = choose(geom, gemm, policy)
    return compile_gemm(geom, gemm, choice.mapping), choice
