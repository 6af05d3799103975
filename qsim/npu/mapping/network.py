"""The mapping search over a whole network: every array layer's choice with the cost of every
candidate, for reports that compare the search with the fixed rule (benchmarks/mapping.py)."""
from __future__ import annotations

import time
from dataclasses import dataclass

from ..config import NpuConfig
from ..layers import layer_gemms
from ..program import fused_attrs, prepare_run, run_array_stage
from .policy import MappingPolicy, Objective
from .search import Choice, Cost, choose, forget_choices


@dataclass(frozen=True)
class LayerChoices:
    """One array layer: its GEMMs' shapes and the search's choice for each."""
    name: str
    op: str
    shapes: tuple                    # (M, K, N) per GEMM
    choices: tuple[Choice, ...]

    def fixed(self) -> Cost:
        return Cost(sum(c.fixed.cycles for c in self.choices), sum(c.fixed.energy_pj for c in self.choices))

    def best(self, objective: Objective) -> Cost:
        """The layer under the mappings `objective` chooses (per GEMM)."""
        costs = [c.best(objective)[1] for c in self.choices]
        return Cost(sum(c.cycles for c in costs), sum(c.energy_pj for c in costs))

    def labels(self, objective: Objective) -> list[str]:
        return [c.best(objective)[0].label for c in self.choices]


def network_choices(graph, feeds: dict, config: NpuConfig, policy: MappingPolicy,
                    expected: dict | None = None) -> tuple[list[LayerChoices], float]:
    """Every array layer of `graph` on `config` searched under `policy` (a search policy), and
    the CPU seconds of this process the search took (a cold search: memoized choices are
    forgotten first; CPU time, because a shared machine's load inflates wall time)."""
    prepared = prepare_run(graph, feeds, config, engine="model", expected=expected)
    geom = config.geometry
    forget_choices()
    seconds, layers = 0.0, []
    for task in prepared.tasks:
        if task.fn is not run_array_stage:
            continue
        stage, inputs = task.args[2], task.args[3]
        rescale, clamp = fused_attrs(stage)
        head = stage.ops[0]
        gemms = layer_gemms(geom, head.kind.short_name, inputs, dict(head.attrs), rescale, clamp,
                            stage.out_bits)
        start = time.process_time()
        choices = tuple(choose(geom, gemm, policy) for gemm in gemms)
        seconds += time.process_time() - start
        layers.append(LayerChoices(stage.name, head.kind.short_name, tuple(g.shape for g in gemms), choices))
    return layers, seconds
