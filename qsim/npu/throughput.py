"""What one run of a model on the NPU costs, layer by layer: the result qsim.npu.simulate computes
(cycles, MACs, DRAM traffic, energy per layer) and the totals that follow from it by definition
(sums, latency at the clock, GOPS). qsim.report.throughput writes it out."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class LayerThroughput:
    """One layer on the NPU. `unit`: "array" (systolic array), "vector" (vector unit) or "host"."""
    name: str
    op: str
    unit: str
    macs: int
    compute_cycles: int
    fill_drain_cycles: int
    stall_cycles: int
    mapping_efficiency: float          # fraction of PEs holding useful work while computing
    dram_input_bytes: int
    dram_weight_bytes: int
    dram_output_bytes: int
    verified: bool | None = None       # None: not compared (e.g. host op)
    rtl: bool = False                  # values and cycles came from an RTL engine
    energy_by_component_pj: dict[str, float] = field(default_factory=dict)   # qsim.npu.energy
    events: dict[str, int] = field(default_factory=dict)                     # counts behind it

    @property
    def cycles(self) -> int:
        return self.compute_cycles + self.fill_drain_cycles + self.stall_cycles

    @property
    def dram_bytes(self) -> int:
        return self.dram_input_bytes + self.dram_weight_bytes + self.dram_output_bytes

    @property
    def energy_pj(self) -> float:
        return sum(self.energy_by_component_pj.values())


@dataclass(frozen=True)
class ThroughputReport:
    model: str
    engine: str
    config: dict[str, Any]             # at least rows, cols, dataflow, clock_mhz, dram_bytes_per_cycle
    layers: tuple[LayerThroughput, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    tech: dict[str, Any] = field(default_factory=dict)   # the energy table used (name, figures)

    @property
    def pes(self) -> int:
        return int(self.config["rows"]) * int(self.config["cols"])

    @property
    def total_cycles(self) -> int:
        return sum(layer.cycles for layer in self.layers)

    @property
    def total_macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    @property
    def latency_s(self) -> float:
        return self.total_cycles / (float(self.config["clock_mhz"]) * 1e6)

    @property
    def inferences_per_s(self) -> float:
        return 1.0 / self.latency_s if self.total_cycles else float("inf")

    @property
    def gops(self) -> float:
        """Achieved giga-operations per second (one MAC = 2 operations)."""
        return 2.0 * self.total_macs / self.latency_s / 1e9 if self.total_cycles else 0.0

    @property
    def total_energy_pj(self) -> float:
        return sum(layer.energy_pj for layer in self.layers)

    @property
    def energy_by_component_pj(self) -> dict[str, float]:
        """Whole-run energy per component, components in the layers' order."""
        total: dict[str, float] = {}
        for layer in self.layers:
            for key, value in layer.energy_by_component_pj.items():
                total[key] = total.get(key, 0.0) + value
        return total

    def utilization(self, layer: LayerThroughput) -> float:
        """MACs done over MAC slots available during the layer (all its cycles)."""
        return layer.macs / (self.pes * layer.cycles) if layer.cycles and layer.unit == "array" else 0.0

    def compute_utilization(self, layer: LayerThroughput) -> float:
        busy = layer.cycles - layer.stall_cycles
        return layer.macs / (self.pes * busy) if busy and layer.unit == "array" else 0.0

    def to_json(self) -> dict[str, Any]:
        layers = []
        for layer in self.layers:
            row = asdict(layer)
            row.update(cycles=layer.cycles, utilization=self.utilization(layer),
                       dram_bytes=layer.dram_bytes, energy_pj=layer.energy_pj)
            layers.append(row)
        return {"model": self.model, "engine": self.engine, "config": self.config,
                "layers": layers, "total_cycles": self.total_cycles, "total_macs": self.total_macs,
                "latency_ms": self.latency_s * 1e3, "inferences_per_s": self.inferences_per_s,
                "gops": self.gops, "all_verified": all(l.verified is not False for l in self.layers),
                # one run of the model on one input is one inference (as latency_ms counts it)
                "total_energy_pj": self.total_energy_pj, "energy_per_inference_pj": self.total_energy_pj,
                "energy_by_component_pj": self.energy_by_component_pj, "tech": self.tech,
                "notes": list(self.notes)}
