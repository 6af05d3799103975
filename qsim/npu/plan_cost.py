"""What a precision plan costs on the NPU: cycles and energy of a lowered model from the cycle
model (or an RTL engine) and the energy tables, by float layer, for precision search.

The array multiplies int8 by int8 (hw/pe.py): a CONV2D, DEPTHWISE_CONV2D or FULLY_CONNECTED
with int16 activations (TOSA 16x8) or a MATMUL of int16 operands (16x16) runs on the host
(qsim.npu.program, the stage note says so) and so costs nothing in a run. A plan search
must not read that as free: each such layer is costed as the same layer of the all-int8
lowering (its array stage, with the fused RESCALE) run once per byte plane of its 16-bit
operands, 2 passes for 16x8 and 4 for 16x16 (a 16-bit value is hi * 256 + lo, two int8
planes; the partial sums are shifted and added in the int48 accumulator). That is a model,
not a simulation, and `PlanCost.modelled_cycles` keeps it apart; the int8 stages, the
vector stages (int16 element work included) and the conversions between widths are run.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import DType
from .energy import EnergyTable, energy_by_component
from .layers import LAYER_OPS
from .program import GraphRun, StageResult, Unit

BYTE_PLANES = {"MATMUL": 4}      # 16x16; every other array operator reads one 16-bit operand: 2


@dataclass(frozen=True)
class StageCost:
    cycles: int
    energy_pj: float


@dataclass(frozen=True)
class PlanCost:
    cycles: int                      # run + modelled
    energy_pj: float
    modelled_cycles: int             # of `cycles`: 16-bit array layers costed by BYTE_PLANES
    modelled_energy_pj: float
    by_layer: dict[str, StageCost]   # by the label of the float op the integer ops came from
    host_layers: tuple[str, ...]     # 16-bit array layers (run on the host, costed by model)
    verified: bool                   # every stage equal to the kernels

    def value(self, measure: str) -> float:
        return float(self.cycles) if measure == "cycles" else self.energy_pj

    def to_json(self) -> dict:
        return {"cycles": self.cycles, "energy_pj": self.energy_pj,
                "modelled_cycles": self.modelled_cycles, "modelled_energy_pj": self.modelled_energy_pj,
                "host_16bit_layers": list(self.host_layers), "verified": self.verified}


def stage_cost(stage: StageResult, tech: EnergyTable, run: GraphRun) -> StageCost:
    energy = sum(energy_by_component(stage.events, tech, run.config.geometry).values())
    return StageCost(stage.cycles, energy)


def _wide_array_op(stage: StageResult, dtypes: dict[str, DType]) -> bool:
    head = stage.stage.ops[0]
    return (stage.stage.unit is Unit.HOST and head.kind.short_name in LAYER_OPS
            and any(dtypes.get(name) is DType.I16 for name in head.inputs if name))


def array_layer_costs(run: GraphRun, tech: EnergyTable) -> dict[str, StageCost]:
    """The array stages of an (all-int8) run by float-op label: what a 16-bit layer is costed from."""
    out: dict[str, StageCost] = {}
    for s in run.stages:
        if s.stage.unit is Unit.ARRAY:
            c = stage_cost(s, tech, run)
            prev = out.get(s.stage.ops[0].name, StageCost(0, 0.0))
            out[s.stage.ops[0].name] = StageCost(prev.cycles + c.cycles, prev.energy_pj + c.energy_pj)
    return out


def plan_cost(run: GraphRun, dtypes: dict[str, DType], tech: EnergyTable,
              int8_layers: dict[str, StageCost]) -> PlanCost:
    """The cost of `run` (a lowered plan on the NPU; `dtypes`: its tensors' types), 16-bit
    array layers costed from `int8_layers` (array_layer_costs of the all-int8 lowering)."""
    by_layer: dict[str, StageCost] = {}
    cycles, energy, m_cycles, m_energy, host = 0, 0.0, 0, 0.0, []
    for s in run.stages:
        label = s.stage.ops[0].name
        if _wide_array_op(s, dtypes):
            planes = BYTE_PLANES.get(s.stage.ops[0].kind.short_name, 2)
            base = int8_layers.get(label, StageCost(0, 0.0))
            c = StageCost(planes * base.cycles, planes * base.energy_pj)
            m_cycles, m_energy = m_cycles + c.cycles, m_energy + c.energy_pj
            host.append(label)
        else:
            c = stage_cost(s, tech, run)
        cycles, energy = cycles + c.cycles, energy + c.energy_pj
        prev = by_layer.get(label, StageCost(0, 0.0))
        by_layer[label] = StageCost(prev.cycles + c.cycles, prev.energy_pj + c.energy_pj)
    return PlanCost(cycles, energy, m_cycles, m_energy, by_layer, tuple(host), run.verified)
