"""A whole TOSA integer graph on the NPU: plan (which unit runs each operator), run, verify.

Plan: the graph's operators are grouped as the NPU fuses them (qsim.npu.grouping.group_ops:
a CONV2D / DEPTHWISE_CONV2D / FULLY_CONNECTED / MATMUL absorbs the RESCALE that alone
reads its result, and that RESCALE the CLAMP that alone reads its result). A group runs
on the array when its layer operator has int8 or int16 operands (int16: byte-plane passes
into int48 accumulators, qsim/npu/array/wide.py) and its RESCALE fits the requantization
unit (input_zp 0; 32-bit multipliers for int32 sums, 16-bit ones for int48; int8 or int16
output); an unfusable RESCALE/CLAMP becomes its own vector-unit stage after an array stage
that stores int32 sums (int48 sums are never stored: such a layer runs on the host).
Every other operator runs on the vector unit (a VCONFIG + VRUN program compiled by
qsim/npu/vector/ops.py, on the same engine as the array layers) or, for pure reshapes,
on the host at no cost; operators neither unit can take (operators without a vector
mapping, unsigned or int48 tensors, ...) run on the host too, uncounted, and the stage's
note says why.

Run and verify: every stage runs on its golden inputs (the kernels' tensors), and its
output is compared, element for element, with the kernels' tensor of the same name; a
mismatch therefore does not propagate, so every stage is checked on its own (one fault is
reported once, not once per downstream layer). It also makes the array stages independent
of each other: they run as tasks (qsim.cluster.distributed), in this process or on Dask
workers, and the run is assembled in stage order from their results.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import MismatchError, UnsupportedError
from ..ir import DType, Graph, Op
from ..runtime.executor import execute, run_op
from .config import NpuConfig
from ..cluster.distributed import InProcess, Task
from .energy import EventCounts, vector_events
from .array.compile import Program
from .cycle_model import vector_write_cycle
from .engines import Engine, ProgramRun, run_program
from .layers import LAYER_OPS, LayerResult, run_layer
from .cores.layer import run_layer_cores
from .vector.ops import (HOST_OPS, compile_vector_chain, compile_vector_op, fusable_input_rescale,
    vector_support)
from .grouping import group_ops, reader_counts


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
    out_bits: int = 8           # array stages: width of the fused RESCALE's output (8 or 16)

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
    if graph.tensor(op.outputs[0]).dtype not in (DType.I8, DType.I16):
        return f"RESCALE output is {graph.tensor(op.outputs[0]).dtype}, the unit writes int8 or int16"
    if a.get("input_zp", 0) != 0 or (graph.tensor(op.outputs[0]).dtype is DType.I16 and a.get("output_zp", 0)):
        return "RESCALE input_zp != 0 (or output_zp != 0 for int16)"
    acc48 = graph.tensor(op.inputs[0]).dtype is DType.I48
    if a.get("scale32", True) == acc48:      # int48 takes 16-bit multipliers, int32 the 32-bit ones
        return f"RESCALE of {graph.tensor(op.inputs[0]).dtype} with scale32 = {a.get('scale32', True)}"
    shift = np.asarray(a.get("shift", 2))
    mult = np.asarray(a.get("multiplier", 0))
    if np.any(mult < 0) or np.any((shift < 2) | (shift > 62)) or (acc48 and np.any(mult >= 1 << 15)):
        return "RESCALE multiplier/shift outside the unit's range"
    return None


def _array_operands_ok(graph: Graph, op: Op) -> str | None:
    for name in op.inputs:
        if name and graph.tensor(name).dtype not in (DType.I8, DType.I16):
            return (f"{op.kind.short_name} operand {name!r} is {graph.tensor(name).dtype}; the array "
                    "multiplies int8 and int16 (byte planes)")
    return None


def plan(graph: Graph) -> list[Stage]:
    """The stages of `graph` in execution order (module docstring)."""
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
            stages.append(Stage((head,), Unit.HOST) if short in HOST_OPS else _vector_stage(graph, head))
            continue
        why = _array_operands_ok(graph, head)
        if why:
            stages.append(Stage((head,), Unit.HOST, note=f"not on the array: {why}"))
            stages.extend(_vector_stage(graph, op) for op in group[1:])
            continue
        fused = [head]
        why = "no RESCALE reads the sums alone"
        if len(group) > 1:
            reason = _fusable_rescale(graph, group[1])
            if reason is None:
                fused = list(group)
            else:
                why = reason
        if len(fused) == 1 and graph.tensor(head.outputs[0]).dtype is DType.I48:
            # int48 sums never leave the array (qsim/npu/array/wide.py): without a fused RESCALE
            # the layer runs on the host.
            stages.append(Stage((head,), Unit.HOST, note=f"not on the array: int48 sums need a fused RESCALE ({why})"))
            stages.extend(_vector_stage(graph, op) for op in group[1:])
            continue
        note = "" if len(fused) == len(group) else f"int32 sums stored: {why}"
        bits = 16 if graph.tensor(fused[-1].outputs[0]).dtype is DType.I16 and len(fused) > 1 else 8
        stages.append(Stage(tuple(fused), Unit.ARRAY, note=note, out_bits=bits))
        stages.extend(_vector_stage(graph, op) for op in group[len(fused):])
    return fuse_vector_chains(graph, stages)


BINARY = ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM")


def fuse_vector_chains(graph: Graph, stages: list[Stage]) -> list[Stage]:
    """Merges vector stages the vector unit runs as one job (qsim/npu/vector/ops.py
    compile_vector_chain): a binary operator with the per-tensor RESCALEs to int32 that alone
    feed its operands (the input scalers A', B'), then the RESCALE that alone reads its
    result (the output scaler) and the CLAMP that alone reads that; or a RESCALE with the
    CLAMP that alone reads it. The quantizer's residual ADD (RESCALE, RESCALE, ADD, RESCALE,
    CLAMP) becomes one stage: int8 in, int8 out, no int32 tensor in DRAM. The merged stage
    sits where the binary operator (or the RESCALE) was; its output is the last operator's."""
    readers = reader_counts(graph)
    producer = {s.ops[0].outputs[0]: i for i, s in enumerate(stages)
                if s.unit is Unit.VECTOR and len(s.ops) == 1}
    reader_of = {}
    for i, s in enumerate(stages):
        if s.unit is Unit.VECTOR and len(s.ops) == 1:
            for name in s.ops[0].inputs:
                if name and readers.get(name) == 1:
                    reader_of[name] = i

    def single(i, kind):
        return i is not None and stages[i].ops[0].kind.short_name == kind

    merged: dict[int, Stage] = {}
    dropped: set[int] = set()
    for i, s in enumerate(stages):
        if i in dropped or s.unit is not Unit.VECTOR or len(s.ops) != 1:
            continue
        head = s.ops[0]
        kind = head.kind.short_name
        if kind not in BINARY and kind != "RESCALE":
            continue
        chain_in, chain = [], []
        if kind in BINARY:
            for name in head.inputs:
                j = producer.get(name)
                if (single(j, "RESCALE") and readers.get(name) == 1 and j not in dropped
                        and fusable_input_rescale(stages[j].ops[0].attrs,
                                                  np.dtype(graph.tensor(stages[j].ops[0].inputs[0]).dtype.value[4]),
                                                  np.dtype(graph.tensor(name).dtype.value[4]))):
                    chain_in.append(j)
            out = reader_of.get(head.outputs[0])
            if single(out, "RESCALE"):
                chain.append(out)
        else:
            chain.append(i)
        tail = reader_of.get(stages[chain[-1]].ops[0].outputs[0]) if chain else None
        if chain and single(tail, "CLAMP"):
            chain.append(tail)
        members = sorted(set(chain_in + ([i] if kind in BINARY else []) + chain))
        if len(members) < 2:
            continue
        ops = tuple(stages[j].ops[0] for j in chain_in) + \
            ((head,) if kind in BINARY else ()) + tuple(stages[j].ops[0] for j in chain)
        merged[i] = Stage(ops, Unit.VECTOR, note="fused on the vector unit")
        dropped.update(j for j in members if j != i)
    return [merged.get(i, s) for i, s in enumerate(stages) if i not in dropped]


def _vector_stage(graph: Graph, op: Op) -> Stage:
    why = vector_support(graph, op)
    return Stage((op,), Unit.HOST, note=f"not on the vector unit: {why}") if why else Stage((op,), Unit.VECTOR)


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
    engine: str = ""                    # the engine that computed values and cycles ("" on the host)
    program: Program | None = None      # vector stages whose output mismatched: their program

    @property
    def rtl(self) -> bool:
        """Values and cycles came from an RTL engine (array and vector stages under
        verilator/amaranth; never host stages)."""
        return self.engine in (Engine.AMARANTH.value, Engine.VERILATOR.value)

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
                 if self.cycle is not None else "; computed on the host (no RTL cycle)")
        return (f"NPU mismatch in layer {self.stage!r} (tosa.{self.op_text} {self.op_label!r}): "
                f"tensor {self.tensor!r} index {list(self.index)}: expected {self.expected} "
                f"({hexed(self.expected)}), NPU {self.actual} ({hexed(self.actual)}){where}; "
                f"{self.differing} of {self.size} elements differ")


def _first_mismatch(result: StageResult, expected: np.ndarray, geom) -> Mismatch:
    actual = result.output
    diff = np.argwhere(actual != expected)
    index = tuple(int(i) for i in diff[0])
    cycle = program = program_cycle = None
    if result.layer is not None and result.layer.runs:     # (several cores keep no program records)
        record, row, col = result.layer.locate(index)
        program = result.layer.runs.index(record)
        program_cycle = record.write_cycle(geom, row, col)
        cycle = result.start_cycle + record.start_cycle + program_cycle
    elif result.program is not None:        # a vector stage: the VRUN write of that element
        prog = result.program
        byte = prog.out_addr + int(np.ravel_multi_index(index, actual.shape)) * prog.out_dtype.itemsize
        program_cycle = vector_write_cycle(geom, prog.instrs, prog.dram, byte)
        if program_cycle is not None:
            program, cycle = 0, result.start_cycle + program_cycle
    stage = result.stage
    return Mismatch(stage=stage.name, op_text=stage.op_text, op_label=stage.ops[0].label,
                    tensor=stage.output, index=index, expected=int(expected[index]),
                    actual=int(actual[index]), dtype=actual.dtype, differing=len(diff),
                    size=int(actual.size), cycle=cycle, program=program, program_cycle=program_cycle)


def run_array_stage(geom, engine: Engine, stage: Stage, inputs: list, want, cores: int = 1,
                    mapping=None) -> LayerResult:
    """One array stage on `inputs` (its golden inputs): a task that runs on any worker, on
    `cores` cores (qsim/npu/cores/); `mapping` the configuration's mapping policy
    (qsim/npu/mapping/policy.py).
    The per-program records (each with its DRAM image) are kept only when the output differs
    from `want`, where fault location and waveforms need them; a verified layer travels back
    without them."""
    head = stage.ops[0]
    args = (head.kind.short_name, inputs, dict(head.attrs), *fused_attrs(stage))
    layer = (run_layer(geom, *args, engine=engine, name=stage.name, out_bits=stage.out_bits, mapping=mapping)
             if cores == 1 else
             run_layer_cores(geom, cores, *args, engine=engine, name=stage.name,    # qsim/npu/cores/
                             out_bits=stage.out_bits, mapping=mapping))
    if want is not None and layer.output.dtype == want.dtype and np.array_equal(layer.output, want):
        layer.runs = []
    return layer


def fused_attrs(stage: Stage) -> tuple[dict | None, dict | None]:
    """The attributes of an array stage's fused RESCALE and CLAMP (None when absent)."""
    rescale = clamp = None
    for op in stage.ops[1:]:
        if op.kind.short_name == "RESCALE":
            rescale = dict(op.attrs)
        else:
            clamp = dict(op.attrs)
    return rescale, clamp


@dataclass
class PreparedRun:
    """A graph run split for distribution. Layers are independent given their golden inputs
    (the kernels' values, which are also what the NPU run continues with after every stage,
    verified or not), so every array stage is one Task; vector and host stages are cheap and
    computed here, in graph order."""
    config: NpuConfig
    engine: Engine
    expected: dict
    stages: list[Stage]
    tasks: list[Task]
    local: dict                         # stage index -> host output, or a LayerResult/ProgramRun


def run_vector_stage(geom, engine: Engine, program, what: str, want) -> ProgramRun:
    """One vector stage's program on `engine`: a task that runs on any worker (the program's
    DRAM image holds the stage's golden inputs)."""
    run = run_program(geom, program, engine, what=what)
    run.table_bytes = program.dram_weight_bytes
    if want is None or run.output.dtype != want.dtype or not np.array_equal(run.output, want):
        run.program = program           # fault location and the waveform re-run need it
    return run


def chain_roles(stage: Stage) -> tuple[list, list[str]]:
    """A fused vector stage's operators with their roles (compile_vector_chain) and the
    names of its input tensors (A, then B)."""
    binary = [op for op in stage.ops if op.kind.short_name in BINARY]
    roles, inputs = [], []
    if binary:
        head = binary[0]
        for k, name in enumerate(head.inputs):
            feeding = [op for op in stage.ops if op.outputs[0] == name]
            if feeding:
                roles.append((feeding[0].kind.short_name, dict(feeding[0].attrs), "ab"[k]))
                inputs.append(feeding[0].inputs[0])
            else:
                inputs.append(name)
        roles.append((head.kind.short_name, dict(head.attrs), "op"))
        after = stage.ops[stage.ops.index(head) + 1:]
    else:
        after = stage.ops
        inputs.append(after[0].inputs[0])
    for op in after:
        roles.append((op.kind.short_name, dict(op.attrs), "out" if op.kind.short_name == "RESCALE" else "clamp"))
    return roles, inputs


def _vector_program(geom, graph: Graph, stage: Stage, values: dict):
    """The stage's vector program, or (None, why) when the compiler cannot map it."""
    op = stage.ops[0]
    out = graph.tensor(stage.output)
    dtype = np.dtype(out.dtype.value[4])
    try:
        if len(stage.ops) > 1:
            roles, names = chain_roles(stage)
            return compile_vector_chain(geom, roles, [values[n] for n in names], out.shape, dtype), None
        inputs = [values[n] if n else None for n in op.inputs]
        computed = op.kind.short_name == "GATHER" and not graph.tensor(op.inputs[1]).is_constant
        return compile_vector_op(geom, op.kind.short_name, dict(op.attrs), inputs, out.shape, dtype,
                                 run_time_indices=computed), None
    except UnsupportedError as err:
        return None, err.message


def _array_cost(stage: Stage, inputs: list, want) -> float:
    """About the layer's MACs plus its weight bytes, to order tasks (qsim.cluster.distributed.Task.cost).
    MACs: output elements times the weights' elements per output channel (KH*KW*IC for CONV2D,
    KH*KW for DEPTHWISE_CONV2D, IC for FULLY_CONNECTED; an upper bound for MATMUL). The weights
    are the second operand, or the `weight` attribute of a layer that carries them there. The
    weight bytes break ties between layers of equal MACs: a layer with more weights loads more
    weight tiles, and takes longer on every engine (ResNet-18's 512-channel 3x3 convolutions
    take 6x as long as its 256-channel ones of the same MACs at 16x16 ws, model engine)."""
    weight = inputs[1] if len(inputs) > 1 else stage.ops[0].attrs.get("weight")
    if want is None or weight is None or want.ndim == 0:
        return 0.0
    weight = np.asarray(weight)
    return float(want.size) * weight.size / max(1, want.shape[-1]) + weight.size


def prepare_run(graph: Graph, feeds: dict, config: NpuConfig, engine="verilator",
                expected: dict | None = None, stages: list[Stage] | None = None) -> PreparedRun:
    """`graph`'s run on `config`, split into tasks. A sweep passes `expected` (the golden values)
    and `stages` (plan(graph)) made once for all points: its points' tasks then pass the very
    same golden tensors and Stage objects, which a Dask pool sends to each worker once
    (Task.shared)."""
    engine = Engine.parse(engine)
    if expected is None:
        expected = execute(graph, feeds, backend="kernels")
    geom = config.geometry
    values = {name: t.data for name, t in graph.tensors.items() if t.is_constant}
    values.update(feeds)
    stages = plan(graph) if stages is None else list(stages)   # a copy: host fallbacks replace entries
    tasks, local = [], {}
    for index, stage in enumerate(stages):
        want = expected.get(stage.output)
        if stage.unit is Unit.ARRAY:
            inputs = [values[n] for n in stage.ops[0].inputs if n]
            task = Task(run_array_stage, (geom, engine, stage, inputs, want, config.cores, config.mapping),
                        f"{config.name}-{stage.name}",
                        cost=_array_cost(stage, inputs, want), shared=(2, 3, 4))
            _check_shape(stage, None, graph.tensor(stage.output).shape, want)
            if want is None:        # nothing to continue with but this layer's own output: run it now
                local[index] = run_array_stage(*task.args)
                out = local[index].output
            else:
                tasks.append(task)
        else:
            op = stage.ops[0]
            inputs = [values[n] if n else None for n in op.inputs]
            if stage.unit is Unit.VECTOR:
                program, why = _vector_program(geom, graph, stage, values)
                if program is None:
                    if len(stage.ops) > 1:
                        raise UnsupportedError(f"fused vector stage {stage.name!r} ({stage.op_text}): {why}")
                    stage = stages[index] = Stage(stage.ops, Unit.HOST, note=f"not on the vector unit: {why}")
            if stage.unit is Unit.VECTOR:
                task = Task(run_vector_stage, (geom, engine, program, f"{stage.name} (tosa.{stage.op_text})", want),
                            f"{config.name}-{stage.name}", cost=float(np.prod(program.out_shape)),
                            shared=(4,))
                _check_shape(stage, program.out_dtype, program.out_shape, want)
                if want is None:
                    local[index] = run_vector_stage(*task.args)
                    out = local[index].output
                else:
                    tasks.append(task)
            else:
                outs = run_op(graph, op, inputs, backend="kernels")
                for name, value in zip(op.outputs[1:], outs[1:]):
                    values[name] = value
                out = outs[0]
                local[index] = out
                _check_shape(stage, out.dtype, out.shape, want)
        values[stage.output] = out if want is None else want
    return PreparedRun(config, engine, expected, stages, tasks, local)


def _check_shape(stage: Stage, dtype, shape, want) -> None:
    """A stage whose output cannot even be compared (`dtype` None: not known yet) stops the
    run: its golden value could not feed the next stages either."""
    if want is not None and (tuple(shape) != want.shape or (dtype is not None and dtype != want.dtype)):
        raise MismatchError(f"layer {stage.name!r}: NPU output {'' if dtype is None else f'{dtype} '}{list(shape)}, "
                            f"kernels {want.dtype} {list(want.shape)}")


def finish_run(prepared: PreparedRun, layers: list[LayerResult],
               on_stage: Callable | None = None) -> GraphRun:
    """Assembles the run from the array tasks' results (in task order): cycles in stage order,
    every stage verified against the kernels, the first mismatch located."""
    geom = prepared.config.geometry
    run = GraphRun(config=prepared.config, engine=prepared.engine)
    pending = iter(layers)
    cycle = 0
    for index, stage in enumerate(prepared.stages):
        done = prepared.local.get(index)
        if stage.unit is Unit.ARRAY:
            layer = done if done is not None else next(pending)
            out = layer.output
            result = StageResult(stage, out, layer.macs, layer.compute_cycles, layer.fill_drain_cycles,
                                 layer.stall_cycles, layer.mac_slots, layer.dram_bytes["input"],
                                 layer.dram_bytes["weight"], layer.dram_bytes["output"], cycle, layer=layer,
                                 events=layer.events, engine=layer.engine)
        elif stage.unit is Unit.VECTOR:
            run_ = done if done is not None else next(pending)
            out, st = run_.output, run_.stats
            streamed = st.dram_read_bytes.get("vector", 0)
            result = StageResult(stage, out, 0, st.compute_cycles, st.fill_drain_cycles, st.stall_cycles, 0,
                                 streamed - run_.table_bytes,
                                 run_.table_bytes + st.dram_read_bytes.get("vconfig", 0),
                                 st.dram_write_bytes, cycle, engine=run_.engine.value, program=run_.program,
                                 events=vector_events(st.vector_ops, sum(st.dram_read_bytes.values()),
                                                      st.dram_write_bytes, st.vector_mul_ops, st.vector_div_ops))
        else:
            result = StageResult(stage, done, 0, 0, 0, 0, 0, 0, 0, 0, cycle)
            out = done
        want = prepared.expected.get(stage.output)
        if want is not None:
            result.verified = bool(out.dtype == want.dtype and out.shape == want.shape
                                   and np.array_equal(out, want))
            if not result.verified:
                _check_shape(stage, out.dtype, out.shape, want)
                found = _first_mismatch(result, want, geom)
                result.mismatch = found.message()
                if run.first_mismatch is None:
                    run.first_mismatch = found
        cycle += result.cycles
        run.stages.append(result)
        if on_stage is not None:
            on_stage(result)
    return run


def run_graph_on_npu(graph: Graph, feeds: dict, config: NpuConfig, engine="verilator",
                     expected: dict | None = None, on_stage: Callable | None = None,
                     pool=None, on_task: Callable | None = None) -> GraphRun:
    """Runs `graph` on `feeds` (integer inputs by name) stage by stage and verifies every
    stage output against `expected` (default: the kernels' execution of `graph`). The array
    stages run as tasks on `pool` (qsim.cluster.distributed; default: this process), `on_task`
    called as each finishes; the result does not depend on the pool."""
    prepared = prepare_run(graph, feeds, config, engine, expected)
    layers = (pool or InProcess()).run(prepared.tasks, on_task)
    return finish_run(prepared, layers, on_stage)


def stage_count(graph: Graph) -> int:
    return len(plan(graph))
