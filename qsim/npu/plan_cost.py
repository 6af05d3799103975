"""What a precision plan costs on the NPU: cycles and energy of a lowered model, by float layer,
from the compiled programs' own cycles (cycle model or an RTL engine) and the energy tables.

Every array layer of a plan maps onto the NPU, 16x8 ones included (int16 activations as two
byte-plane passes into int48 accumulators, qsim/npu/array/wide.py), so a plan's cost is the
run's: no layer is costed by a model. A stage that still runs on the host (an arithmetic
operator neither unit takes) costs 0 cycles there; `PlanCost.host_layers` names it so a plan
search or report can say so instead of reading it as free.
"""
from __future__ import annotations

from dataclasses import dataclass

from .energy import EnergyTable, energy_by_component
from .program import GraphRun, StageResult, Unit
from .vector.ops import HOST_OPS


@dataclass(frozen=True)
class StageCost:
    cycles: int
    energy_pj: float


@dataclass(frozen=True)
class PlanCost:
    cycles: int                      # the compiled programs' cycles, every stage
    energy_pj: float
    by_layer: dict[str, StageCost]   # by the label of the float op the integer ops came from
    host_layers: tuple[str, ...]     # arithmetic stages left on the host (0 cycles: not free, unknown)
    verified: bool                   # every stage equal to the kernels

    def value(self, measure: str) -> float:
        return float(self.cycles) if measure == "cycles" else self.energy_pj

    def to_json(self) -> dict:
        return {"cycles": self.cycles, "energy_pj": self.energy_pj,
                "host_arithmetic_layers": list(self.host_layers), "verified": self.verified}


def stage_cost(stage: StageResult, tech: EnergyTable, run: GraphRun) -> StageCost:
    energy = sum(energy_by_component(stage.events, tech, run.config.geometry).values())
    return StageCost(stage.cycles, energy)


def plan_cost(run: GraphRun, tech: EnergyTable) -> PlanCost:
    """The cost of `run` (a lowered plan on the NPU), stage by stage."""
    by_layer: dict[str, StageCost] = {}
    cycles, energy, host = 0, 0.0, []
    for s in run.stages:
        label = s.stage.ops[0].name
        if s.stage.unit is Unit.HOST and s.stage.ops[0].kind.short_name not in HOST_OPS:
            host.append(label)
        c = stage_cost(s, tech, run)
        cycles, energy = cycles + c.cycles, energy + c.energy_pj
        prev = by_layer.get(label, StageCost(0, 0.0))
        by_layer[label] = StageCost(prev.cycles + c.cycles, prev.energy_pj + c.energy_pj)
    return PlanCost(cycles, energy, by_layer, tuple(host), run.verified)
