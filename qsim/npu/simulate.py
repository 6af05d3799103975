"""Running a quantized model on the NPU for `qsim simulate`: one configuration or a sweep of
them, every array layer a task on a pool (qsim.cluster.distributed), every stage verified against
the kernels (qsim.npu.program). This module returns runs (GraphRun); the reports are
qsim.report.throughput's and the output folder is qsim.commands.simulate's.

The command hands it the model and its integer inputs (qsim.commands.quantized_model: a
folder or the embedded model; --input x.npy, a float array quantized with the model's input
scale and zero point or an int8 array used as is, default the first embedded Fashion-MNIST
test image). A mismatch is reported with layer, tensor, index, expected and actual values
and the cycle of the DRAM write; with --vcd the program that wrote it is re-run with
waveform tracing (amaranth engine: the whole program; verilator engine: VCD_BEFORE cycles
before to VCD_AFTER after the write, from a --trace build).
"""
from __future__ import annotations

import itertools
import sys
import threading
import time

from ..atomic import atomic_file
from ..errors import UsageError
from ..progress import Progress
from ..quant.lowering.float_side import LoweredModel
from ..runtime.executor import execute
from ..hw.params import Units
from .config import NpuConfig, dram_toml, mapping_toml, parse_config
from .mapping.policy import MappingPolicy
from ..cluster.distributed import InProcess
from .engines import Engine
from .program import GraphRun, PreparedRun, Unit, finish_run, plan, prepare_run

VCD_BEFORE, VCD_AFTER = 256, 64
SWEEP_KEYS = ("size", "rows", "cols", "dataflow", "input_buffer_bytes", "weight_buffer_bytes",
              "accumulator_buffer_bytes", "dram_bytes_per_cycle", "clock_mhz", "dram", "cores",
              "mapping")


def resolve_engine(name: str, vcd: str | None) -> Engine:
    engine = Engine.parse(name)
    if vcd and engine is Engine.MODEL:
        raise UsageError("--vcd needs an RTL engine: the model engine has no waveform",
                         hint="use --engine verilator or --engine amaranth with --vcd")
    return engine


# -- sweeps -----------------------------------------------------------------------------------

def parse_sweep(specs: list[str], base: NpuConfig, flag: str = "--sweep") -> list[NpuConfig]:
    """`KEY=V1,V2,...` terms -> the configurations of their cartesian product over `base`.
    KEY is a configuration key, or `size` for rows = cols; `flag` names the option in errors
    (`qsim explore --space` sweeps the same keys)."""
    axes = []
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        items = [v.strip() for v in values.split(",")]
        if not sep or not key or not all(items):
            raise UsageError(f"{flag} term {spec!r} is not KEY=V1,V2,...",
                             hint=f"e.g. {flag} size=8,16,32 dataflow=ws,os")
        if key not in SWEEP_KEYS:
            raise UsageError(f"{flag} key {key!r} is not a configuration key",
                             hint=f"sweepable keys: {', '.join(SWEEP_KEYS)}")
        if any(key == k for k, _ in axes):
            raise UsageError(f"{flag} key {key!r} is given twice", hint="list all values in one term")
        axes.append((key, items))
    configs = []
    for combo in itertools.product(*(values for _, values in axes)):
        fields = {"rows": base.rows, "cols": base.cols, "dataflow": base.dataflow.value,
                  "input_buffer_bytes": base.input_buffer_bytes,
                  "weight_buffer_bytes": base.weight_buffer_bytes,
                  "accumulator_buffer_bytes": base.accumulator_buffer_bytes,
                  "dram_bytes_per_cycle": base.dram_bytes_per_cycle, "clock_mhz": base.clock_mhz,
                  "cores": base.cores}
        mapping = base.mapping
        for (key, _), value in zip(axes, combo):
            if key == "mapping":        # fixed | search[:OBJECTIVE] (qsim/npu/mapping/policy.py)
                mapping = MappingPolicy.parse(value)
                continue
            targets = ("rows", "cols") if key == "size" else (key,)
            for target in targets:
                fields[target] = value if target in ("dataflow", "dram") else _number(key, value, flag)
        name = f"{fields['rows']}x{fields['cols']}-{str(fields['dataflow']).lower()}" + "".join(
            f"-{k}{v.replace(':', '-') if k == 'mapping' else v}" for (k, _), v in zip(axes, combo)
            if k not in ("size", "rows", "cols", "dataflow"))
        text = "[npu]\n" + f'name = "{name}"\n' + "".join(
            f'{k} = "{v}"\n' if k in ("dataflow", "dram") else f"{k} = {v}\n" for k, v in fields.items())
        if "dram" not in fields:        # the base's DRAM timing, unless swept
            text += dram_toml(base.dram)
        text += mapping_toml(mapping)
        configs.append(parse_config(text, file=f"{flag} {' '.join(specs)} ({name})"))
    if len({c.name for c in configs}) != len(configs):
        raise UsageError(f"{flag} produces the same configuration twice", hint="remove repeated values")
    return configs


def _number(key: str, value: str, flag: str = "--sweep"):
    try:
        return float(value) if key == "clock_mhz" else int(value)
    except ValueError:
        raise UsageError(f"{flag} {key}={value!r}: not a number",
                         hint="whole numbers (clock_mhz may have a fraction), e.g. rows=8,16") from None


# -- one configuration ------------------------------------------------------------------------

def prepare_engine(config: NpuConfig, engine: Engine, stream=None, prepared: PreparedRun | None = None) -> None:
    """Builds (or finds cached) the Verilator models before the progress bar starts: both NPU
    sides, or those `prepared`'s stages use. The note goes to `stream`, default the sys.stderr
    of the moment of the call (not of import: an in-process caller may have replaced it since)."""
    if engine is not Engine.VERILATOR:
        return
    from .sim_verilator import SPLIT, build       # deferred: exporting the Verilog needs amaranth
    start = time.perf_counter()
    used = {s.unit for s in prepared.stages} if prepared is not None else None
    side = {Units.ARRAY: Unit.ARRAY, Units.VECTOR: Unit.VECTOR}
    for units in SPLIT:
        if used is None or side[units] in used:
            build(config.geometry, units=units)
    if config.cores > 1 and (used is None or Unit.ARRAY in used):
        from .cores.verilator import build_cores    # deferred: as above
        build_cores(config.geometry, config.cores)
    took = time.perf_counter() - start
    if took > 1.0:
        print(f"verilator: built the {config.name} NPU model in {took:.1f} s (cached for next time)",
              file=stream if stream is not None else sys.stderr)


def prepare_engines(configs: list[NpuConfig], engine: Engine, pool, prepared: list[PreparedRun]) -> None:
    """prepare_engine for each configuration, when `pool`'s workers share this machine's build
    cache (pool.same_machine). An existing Dask cluster's workers may be on other machines:
    each builds or finds the models in its own cache on its first task of a configuration,
    and a build here would only keep them idle (and need Verilator here)."""
    if engine is not Engine.VERILATOR:
        return
    if not pool.same_machine:
        print(f"verilator: each Dask worker builds or reuses the NPU models of the {len(configs)} "
              "configuration(s) in its own machine's cache (a new one takes minutes, during its "
              "first task)", file=sys.stderr)
        return
    for config, run in zip(configs, prepared):
        prepare_engine(config, engine, prepared=run)


def start_builds(configs: list[NpuConfig], engine: Engine) -> list:
    """Cold Verilator builds started in the background (sim_verilator.build_in_background)
    before the golden values and programs are prepared; prepare_engine waits for them."""
    if engine is not Engine.VERILATOR:
        return []
    from .sim_verilator import build_in_background   # deferred: exporting the Verilog needs amaranth
    return [child for c in configs for child in build_in_background(c.geometry)]


def simulate_one(model: LoweredModel, feeds: dict, config: NpuConfig, engine: Engine,
                 show_progress: bool = True, pool=None) -> GraphRun:
    """`model` on one configuration; its array layers run as tasks on `pool` (default: this process).
    The programs are prepared first, so that a cold build started by start_builds overlaps
    that work; then the build (or its cache lookup) before the progress bar."""
    pool = pool or InProcess()
    _preload_plotting()
    prepared = prepare_run(model.graph, feeds, config, engine)
    prepare_engines([config], engine, pool, [prepared])
    bar = Progress(f"simulate {config.name} ({engine.value}, {pool.what}) tasks", len(prepared.tasks),
                   enabled=show_progress)
    try:
        layers = pool.run(prepared.tasks, bar.advance)
    finally:
        bar.close()
    return finish_run(prepared, layers)


def _preload_plotting() -> threading.Thread:
    """Imports matplotlib with its Agg backend in a background thread, for the report's plots
    made after the run (qsim.report.layer_plots): the import is ~0.45 s of CPU, about as much
    as drawing the four plots, and overlaps the layers' run (the engines and kernels release
    the GIL in their native code). Started after the pool: a LocalCluster forks its workers
    when it starts, and a fork in the middle of an import would leave the child's import lock
    held."""
    def load() -> None:
        import matplotlib                   # deferred: the point of this thread
        matplotlib.use("Agg")
        import matplotlib.pyplot            # noqa: F401  deferred: as above
    # the name is known to qsim.report.forked, which waits for this thread before it forks
    thread = threading.Thread(target=load, name="qsim-preload-plotting", daemon=True)
    thread.start()
    return thread


def prepare_sweep(model: LoweredModel, feeds: dict, configs: list[NpuConfig], engine: Engine,
                  pool) -> list[PreparedRun]:
    """Every configuration's run, split into tasks (qsim.npu.program.prepare_run); the golden
    values and the plan are made once, so every point's tasks pass the same golden tensors and
    layers (sent to each Dask worker once). The caller sends all points' tasks to the pool as
    one batch, so workers stay busy across configuration boundaries, and assembles each point
    from its slice of the results (point_tasks) as soon as that slice is in."""
    graph = model.graph
    expected = execute(graph, feeds, backend="kernels")     # the same for every point
    stages = plan(graph)
    prepared = [prepare_run(graph, feeds, c, engine, expected, stages) for c in configs]
    prepare_engines(configs, engine, pool, prepared)
    return prepared


def point_tasks(prepared: list[PreparedRun]) -> list[range]:
    """Where each point's tasks sit in the batch of all points' tasks, in prepare_sweep's order."""
    spans, start = [], 0
    for p in prepared:
        spans.append(range(start, start + len(p.tasks)))
        start += len(p.tasks)
    return spans


def dump_vcd(run: GraphRun, path: str, engine: Engine | None = None) -> str:
    """Re-runs the program that wrote the first mismatching element with waveform tracing,
    on `engine` (default: the run's; the program is the same on every engine)."""
    engine = run.engine if engine is None else engine
    found = run.first_mismatch
    stage = next(s for s in run.stages if s.stage.name == found.stage)
    if stage.layer is not None:
        program = stage.layer.runs[found.program].program
    elif stage.program is not None and found.program_cycle is not None:
        program = stage.program             # a vector stage: its VCONFIG + VRUN program
    else:
        return (f"no waveform: layer {found.stage!r} runs on the {stage.stage.unit.value} unit, "
                "not on the RTL")
    geom = run.config.geometry
    dram = program.dram.copy()
    if engine is Engine.MODEL:
        raise UsageError("the model engine has no waveform", hint="use the verilator or amaranth engine")
    if engine is Engine.AMARANTH:
        from .sim_amaranth import run_amaranth     # deferred: amaranth's simulator
        with atomic_file(path) as tmp:
            run_amaranth(geom, program.instrs, dram, vcd_path=str(tmp))
        return f"wrote {path}: the whole program {found.program} of layer {found.stage!r} (amaranth)"
    from .sim_verilator import run_verilator   # deferred: exporting the Verilog needs amaranth
    first = max(0, found.program_cycle - VCD_BEFORE)
    last = found.program_cycle + VCD_AFTER
    with atomic_file(path) as tmp:
        run_verilator(geom, program.instrs, dram, vcd_path=str(tmp), vcd_window=(first, last))
    return (f"wrote {path}: cycles {first}..{last} of program {found.program} of layer "
            f"{found.stage!r} (verilator --trace; the write is in cycle {found.program_cycle}, "
            f"VCD time 10 x cycle)")


