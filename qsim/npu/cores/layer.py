"""One array layer on N cores: its GEMMs split by output channels (split.py), compiled per
part, run round by round with the cores sharing DRAM (run.py), the parts' outputs gathered into
the layer output exactly where the single-core run puts them (qsim/npu/layers.py).

Cycles: a round lasts as long as its slowest core, the layer as long as its rounds. The layer's
compute and fill/drain cycles are those of each round's slowest core (the critical path: the
layer's cycles stay compute + fill_drain + stall); every core's own cycles, arbitration waits
and energy events are kept per core. The arbiter's events: one grant per DRAM instruction, and
every DRAM byte through ceil(log2 N) levels of the port multiplexer (qsim/npu/energy.py).
"""
from __future__ import annotations

import math

import numpy as np

from ...hw.params import Geometry
from ..energy import EventCounts, program_events
from ..engines import Engine
from ..layers import LayerResult, _gemms, add_host_bias, place_output
from ..mapping.policy import FIXED_POLICY, MappingPolicy
from ..mapping.search import compile_mapped
from .run import run_round
from .split import split_rounds


def arbiter_events(cores: int, grants: int, dram_bytes: int) -> EventCounts:
    """The arbiter's energy events (none on one core: there is no arbiter)."""
    if cores < 2:
        return EventCounts()
    return EventCounts(arbiter_grants=grants, arbiter_mux_bytes=dram_bytes * math.ceil(math.log2(cores)))


def run_layer_cores(geom: Geometry, cores: int, op: str, inputs, attrs: dict, rescale: dict | None = None,
                    clamp: dict | None = None, engine="model", name: str = "layer",
                    out_bits: int = 8, mapping: MappingPolicy | None = None) -> LayerResult:
    """qsim.npu.layers.run_layer on `cores` cores; the same output, bit for bit. `mapping`: each
    core's part of a GEMM is mapped as one GEMM alone would be (qsim/npu/mapping/)."""
    engine = Engine.parse(engine)
    gemms, out_shape, macs = _gemms(op, inputs, attrs, rescale, clamp, geom, out_bits)
    fused = rescale is not None
    out = np.zeros(out_shape, {8: np.int8, 16: np.int16}[out_bits] if fused else np.int32)
    results = [None] * len(gemms)
    cycles = compute = fill = slots = 0
    core_cycles, waits = [0] * cores, [0] * cores
    core_events = [EventCounts() for _ in range(cores)]
    dram = {"input": 0, "weight": 0, "output": 0}
    for number, parts in enumerate(split_rounds([g for g, _ in gemms], cores, geom.cols)):
        programs = [compile_mapped(geom, part.gemm, mapping or FIXED_POLICY)[0] for part in parts]
        runs = run_round(geom, programs, engine, what=f"{name} (tosa.{op}) round {number}")
        for k, (part, program, run) in enumerate(zip(parts, programs, runs)):
            if results[part.gemm_index] is None:
                results[part.gemm_index] = np.zeros((run.output.shape[0], gemms[part.gemm_index][0].w.shape[1]),
                                                    run.output.dtype)
            results[part.gemm_index][:, part.columns] = run.output
            core_cycles[k] += run.stats.total_cycles
            waits[k] += run.timing.arbitration_cycles
            slots += run.stats.pe_mac_slots
            moved = program.dram_input_bytes + program.dram_weight_bytes + program.dram_output_bytes
            core_events[k] = (core_events[k] + program_events(geom, program.instrs, program.dram_input_bytes)
                              + arbiter_events(cores, run.timing.grants, moved))
            dram["input"] += program.dram_input_bytes
            dram["weight"] += program.dram_weight_bytes
            dram["output"] += program.dram_output_bytes
        slowest = max(runs, key=lambda r: r.stats.total_cycles)
        cycles += slowest.stats.total_cycles
        compute += slowest.stats.compute_cycles
        fill += slowest.stats.fill_drain_cycles
    for (_, where), value in zip(gemms, results):
        place_output(out, op, where, value)
    host = add_host_bias(out, fused, attrs)
    events = sum(core_events, EventCounts())
    return LayerResult(op=op, output=out, macs=int(macs), cycles=cycles, compute_cycles=compute,
                       fill_drain_cycles=fill, stall_cycles=cycles - compute - fill,
                       utilization=macs / (cycles * geom.rows * geom.cols * cores) if cycles else 0.0,
                       dram_bytes=dram, programs=sum(1 for r in results if r is not None), engine=engine.value,
                       host_steps=host, mac_slots=slots, runs=[], events=events,
                       core_cycles=core_cycles, arbitration_cycles=waits, core_events=core_events)
