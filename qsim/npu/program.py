"""A whole TOSA integer graph on the NPU: plan (which unit runs each operator), run, verify.

Plan: the graph's operators are grouped as the NPU fuses them (qsim.npu.vectors.group_ops:
a CONV2D / DEPTHWISE_CONV2D / FULLY_CONNECTED / MATMUL absorbs the RESCALE that alone
reads its result, and that RESCALE the CLAMP that alone reads its result). A group runs
on the array when its layer operator has int8 operands and its RESCALE fits the
requantization unit (input_zp 0, 32-bit multipliers, int8 output); an unfusable
RESCALE/CLAMP becomes its own vector-unit stage after an array stage that stores int32
sums. Every other operator runs on the modelled vector unit (vector_unit.py) or, for
pure reshapes, on the host at no cost; array-type operators the array cannot take
(int16 operands, ...) run on the host too, uncounted, and the report says so.

Run and verify: stages run in graph order on the NPU's own tensors. Each stage's output
is compared, element for element, with the kernels' tensor of the same name; on a
mismatch the stage's later consumers get the kernels' value, so every stage is checked
on its own (one fault is reported once, not once per downstream layer).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import MismatchError, UnsupportedError
from ..ir import DType, Graph, Op
from .config import NpuConfig
from .energy import EventCounts, vector_events
from .engines import Engine
from .layers import LAYER_OPS, LayerResult, run_layer
from .vector_unit import HOST_OPS, VectorCost, vector_cost


class Unit(enum.Enum):
    ARRAY = "array"
    VECTOR = "vector"
    HOST = "host"


@dataclass(frozen=True)
class Stage:
    """One step of the NPU program: the TOSA operators it covers and the unit running them."""
    ops: tuple[Op, ...]
    unit: Unit
    note: str = ""

    @property
    def name(self) -> str:
        return self.output

    @property
    def output(self) -> str:
        return self.ops[-1].outputs[0]

    @property
    def op_text(self) -> str:
        return "+".join(op.kind.short_name for op in self.ops)


def _fusable_rescale(graph: Graph, op: Op) -> str | None:
    """Why RESCALE `op` cannot run in the requantization unit, or None if it can."""
    a = op.attrs
    if graph.tensor(op.outputs[0]).dtype is not DType.I8:
        return f"RESCALE output is {graph.tensor(op.outputs[0]).dtype}, the unit writes int8"
    if a.get("input_zp", 0) != 0:
        return "RESCALE input_zp != 0"
    if not a.get("scale32", True):
        return "RESCALE with 16-bit multipliers (scale32 = false)"
    shift = np.asarray(a.get("shift", 2))
    if np.any(np.asarray(a.get("multiplier", 0)) < 0) or np.any((shift < 2) | (shift > 62)):
        return "RESCALE multiplier/shift outside the unit's range"
    return None


def _array_operands_ok(graph: Graph, op: Op) -> str | None:
    for name in op.inputs:
        if name and graph.tensor(name).dtype is not DType.I8:
            return f"{op.kind.short_name} operand {name!r} is {graph.tensor(name).dtype}; the array multiplies int8"
    return None


def plan(graph: Graph) -> list[Stage]:
    """The stages of `graph` in execution order (module docstring)."""
    from .vectors import group_ops
    stages: list[Stage] = []
    for group in group_ops(graph):
        head = group[0]
        short = head.kind.short_name
        if head.kind.dialect != "tosa":
            raise UnsupportedError(f"{head.kind.name} {head.label!r}: the NPU runs TOSA integer graphs",
                                   hint="quantize with --target tosa")
        if head.subgraphs:
            raise UnsupportedError(f"{head.kind.name} {head.label!r}: control flow does not run on the NPU")
        if short not in LAYER_OPS:
            stages.append(Stage((head,), Unit.HOST if short in HOST_OPS else Unit.VECTOR))
            continue
        why = _array_operands_ok(graph, head)
        if why:
            stages.append(Stage((head,), Unit.HOST, note=f"not on the array: {why}"))
            stages.extend(Stage((op,), Unit.VECTOR) for op in group[1:])
            continue
        fused = [head]
        if len(group) > 1:
            why = _fusable_rescale(graph, group[1])
            if why is None:
                fused = list(group)
        note = "" if len(fused) == len(group) else f"int32 sums stored: {why}"
        stages.append(Stage(tuple(fused), Unit.ARRAY, note=note))
        stages.extend(Stage((op,), Unit.VECTOR) for op in group[len(fused):])
    return stages


@dataclass
class StageResult:
    stage: Stage
    output: np.ndarray
    macs: int
    compute_cycles: int
    fill_drain_cycles: int
    stall_cycles: int
    mac_slots: int                      # PE slots offered while streaming (array stages)
    dram_input_bytes: int
    dram_weight_bytes: int
    dram_output_bytes: int
    start_cycle: int                    # model cycle at which the stage starts
    verified: bool | None = None
    mismatch: str | None = None
    layer: LayerResult | None = None    # array stages: per-program records for fault location
    events: EventCounts = field(default_factory=EventCounts)   # energy events (qsim.npu.energy)

    @property
    def rtl(self) -> bool:
        """Values and cycles came from an RTL engine (array stages under verilator/amaranth)."""
        return self.layer is not None and self.layer.engine != "model"

    @property
    def cycles(self) -> int:
        return self.compute_cycles + self.fill_drain_cycles + self.stall_cycles


@dataclass
class GraphRun:
    config: NpuConfig
    engine: Engine
    stages: list[StageResult] = field(default_factory=list)
    first_mismatch: "Mismatch | None" = None

    @property
    def total_cycles(self) -> int:
        return sum(s.cycles for s in self.stages)

    @property
    def verified(self) -> bool:
        return all(s.verified is not False for s in self.stages)


@dataclass(frozen=True)
class Mismatch:
    """The first differing element of a stage: everything needed to find it in a waveform."""
    stage: str
    op_text: str
    op_label: str
    tensor: str
    index: tuple
    expected: int
    actual: int
    dtype: np.dtype
    differing: int
    size: int
    cycle: int | None                   # model cycle of the DRAM write (array stages)
    program: int | None = None          # program index within the stage
    program_cycle: int | None = None    # cycle within that program

    def message(self) -> str:
        bits = self.dtype.itemsize * 8
        hexed = lambda v: f"0x{int(v) & ((1 << bits) - 1):0{bits // 4}x}"   # noqa: E731
        where = (f"; written to DRAM in cycle {self.cycle} of the model run (cycle "
                 f"{self.program_cycle} of program {self.program} of the layer)"
                 if self.cycle is not None else "; computed on the vector unit/host (no RTL cycle)")
        return (f"NPU mismatch in layer {self.stage!r} (tosa.{self.op_text} {self.op_label!r}): "
                f"tensor {self.tensor!r} index {list(self.index)}: expected {self.expected} "
                f"({hexed(self.expected)}), NPU {self.actual} ({hexed(self.actual)}){where}; "
                f"{self.differing} of {self.size} elements differ")


def _first_mismatch(result: StageResult, expected: np.ndarray, geom) -> Mismatch:
    actual = result.output
    diff = np.argwhere(actual != expected)
    index = tuple(int(i) for i in diff[0])
    cycle = program = program_cycle = None
    if result.layer is not None:
        record, row, col = result.layer.locate(index)
        program = result.layer.runs.index(record)
        program_cycle = record.write_cycle(geom, row, col)
        cycle = result.start_cycle + record.start_cycle + program_cycle
    stage = result.stage
    return Mismatch(stage=stage.name, op_text=stage.op_text, op_label=stage.ops[0].label,
                    tensor=stage.output, index=index, expected=int(expected[index]),
                    actual=int(actual[index]), dtype=actual.dtype, differing=len(diff),
                    size=int(actual.size), cycle=cycle, program=program, program_cycle=program_cycle)


def _run_array(stage: Stage, values: dict, config: NpuConfig, engine: Engine) -> tuple[np.ndarray, LayerResult]:
    head = stage.ops[0]
    rescale = clamp = None
    for op in stage.ops[1:]:
        if op.kind.short_name == "RESCALE":
            rescale = dict(op.attrs)
        else:
            clamp = dict(op.attrs)
    inputs = [values[n] for n in head.inputs if n]
    layer = run_layer(config.geometry, head.kind.short_name, inputs, dict(head.attrs), rescale, clamp,
                      engine=engine, name=stage.name)
    return layer.output, layer


def run_graph_on_npu(graph: Graph, feeds: dict, config: NpuConfig, engine="verilator",
                     expected: dict | None = None, on_stage: Callable | None = None) -> GraphRun:
    """Runs `graph` on `feeds` (integer inputs by name) stage by stage and verifies every
    stage output against `expected` (default: the kernels' execution of `graph`)."""
    from ..runtime.executor import execute, run_op
    engine = Engine.parse(engine)
    if expected is None:
        expected = execute(graph, feeds, backend="kernels")
    geom = config.geometry
    values = {name: t.data for name, t in graph.tensors.items() if t.is_constant}
    values.update(feeds)
    run = GraphRun(config=config, engine=engine)
    cycle = 0
    for stage in plan(graph):
        layer = None
        if stage.unit is Unit.ARRAY:
            out, layer = _run_array(stage, values, config, engine)
            result = StageResult(stage, out, layer.macs, layer.compute_cycles, layer.fill_drain_cycles,
                                 layer.stall_cycles, layer.mac_slots, layer.dram_bytes["input"],
                                 layer.dram_bytes["weight"], layer.dram_bytes["output"], cycle, layer=layer,
                                 events=layer.events)
        else:
            op = stage.ops[0]
            inputs = [values[n] if n else None for n in op.inputs]
            outs = run_op(graph, op, inputs, backend="kernels")
            for name, value in zip(op.outputs[1:], outs[1:]):
                values[name] = value
            out = outs[0]
            if stage.unit is Unit.VECTOR:
                cost = vector_cost(op.kind.short_name, op.attrs, inputs, outs, geom.cols,
                                   geom.dram_bytes_per_cycle)
            else:
                cost = VectorCost(0, 0, 0, 0, 0, 0, 0)
            result = StageResult(stage, out, 0, cost.compute_cycles, cost.fill_drain_cycles,
                                 cost.stall_cycles, 0, cost.dram_input_bytes, cost.dram_weight_bytes,
                                 cost.dram_output_bytes, cycle,
                                 events=vector_events(cost.work, cost.dram_input_bytes + cost.dram_weight_bytes,
                                                      cost.dram_output_bytes))
        want = expected.get(stage.output)
        if want is not None:
            result.verified = bool(out.dtype == want.dtype and out.shape == want.shape
                                   and np.array_equal(out, want))
            if not result.verified:
                if out.shape != want.shape or out.dtype != want.dtype:
                    result.mismatch = (f"layer {stage.name!r}: NPU output {out.dtype} {list(out.shape)}, "
                                       f"kernels {want.dtype} {list(want.shape)}")
                    raise MismatchError(result.mismatch)
                found = _first_mismatch(result, want, geom)
                result.mismatch = found.message()
                if run.first_mismatch is None:
                    run.first_mismatch = found
                out = want            # later stages are checked on the kernels' values
        values[stage.output] = out
        cycle += result.cycles
        run.stages.append(result)
        if on_stage is not None:
            on_stage(result)
    return run


def stage_count(graph: Graph) -> int:
    return len(plan(graph))
