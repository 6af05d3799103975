"""`qsim simulate`: a quantized model on the NPU, verified against the kernels, with a
throughput report (qsim.report.throughput) and optional configuration sweeps.

Inputs (--input x.npy): a float array is quantized with the model's input scale and zero
point; an int8 array is used as is (qsim.quant.qmodel.integer_inputs). Default: the first
embedded Fashion-MNIST test image. A mismatch is reported with layer, tensor, index,
expected and actual values and the cycle of the DRAM write; with --vcd the program that
wrote it is re-run with waveform tracing (amaranth engine: the whole program; verilator
engine: VCD_BEFORE cycles before to VCD_AFTER after the write, from a --trace build).
"""
from __future__ import annotations

import itertools
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..quant.float_side import LoweredModel
from ..quant.pipeline import embedded_quantized_model, model_name_of
from ..quant.qmodel import load_quantized_model
from ..quant.target import TargetKind
from ..report.throughput import COMPONENT_COLORS, write_throughput_report
from ..runtime.executor import execute
from .throughput import LayerThroughput, ThroughputReport
from .config import NpuConfig, load_config, parse_config
from .distributed import InProcess, Task, open_pool
from .energy import EnergyTable, energy_by_component, load_tech
from .engines import Engine
from .program import GraphRun, finish_run, prepare_run

VCD_BEFORE, VCD_AFTER = 256, 64
SWEEP_KEYS = ("size", "rows", "cols", "dataflow", "input_buffer_bytes", "weight_buffer_bytes",
              "accumulator_buffer_bytes", "dram_bytes_per_cycle", "clock_mhz")


@dataclass(frozen=True)
class LoadedModel:
    model: LoweredModel
    name: str                 # for the report and the default output folder
    source: str


def load_qmodel(path: str | None) -> LoadedModel:
    """A folder written by `qsim quantize`, or (None) the embedded model quantized in memory."""
    if path is None:
        return LoadedModel(embedded_quantized_model(), "fashion_cnn", "embedded Fashion-MNIST CNN")
    return LoadedModel(load_quantized_model(path, expect=TargetKind.TOSA), model_name_of(path), str(path))


def resolve_engine(name: str, vcd: str | None) -> Engine:
    engine = Engine.parse(name)
    if vcd and engine is Engine.MODEL:
        raise UsageError("--vcd needs an RTL engine: the model engine has no waveform",
                         hint="use --engine verilator or --engine amaranth with --vcd")
    return engine


# -- sweeps -----------------------------------------------------------------------------------

def parse_sweep(specs: list[str], base: NpuConfig) -> list[NpuConfig]:
    """`KEY=V1,V2,...` terms -> the configurations of their cartesian product over `base`.
    KEY is a configuration key, or `size` for rows = cols."""
    axes = []
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        items = [v.strip() for v in values.split(",")]
        if not sep or not key or not all(items):
            raise UsageError(f"--sweep term {spec!r} is not KEY=V1,V2,...",
                             hint="e.g. --sweep size=8,16,32 dataflow=ws,os")
        if key not in SWEEP_KEYS:
            raise UsageError(f"--sweep key {key!r} is not a configuration key",
                             hint=f"sweepable keys: {', '.join(SWEEP_KEYS)}")
        if any(key == k for k, _ in axes):
            raise UsageError(f"--sweep key {key!r} is given twice", hint="list all values in one term")
        axes.append((key, items))
    configs = []
    for combo in itertools.product(*(values for _, values in axes)):
        fields = {"rows": base.rows, "cols": base.cols, "dataflow": base.dataflow.value,
                  "input_buffer_bytes": base.input_buffer_bytes,
                  "weight_buffer_bytes": base.weight_buffer_bytes,
                  "accumulator_buffer_bytes": base.accumulator_buffer_bytes,
                  "dram_bytes_per_cycle": base.dram_bytes_per_cycle, "clock_mhz": base.clock_mhz}
        for (key, _), value in zip(axes, combo):
            targets = ("rows", "cols") if key == "size" else (key,)
            for target in targets:
                fields[target] = value if target == "dataflow" else _number(key, value)
        name = f"{fields['rows']}x{fields['cols']}-{str(fields['dataflow']).lower()}" + "".join(
            f"-{k}{v}" for (k, _), v in zip(axes, combo) if k not in ("size", "rows", "cols", "dataflow"))
        text = "[npu]\n" + f'name = "{name}"\n' + "".join(
            f'{k} = "{v}"\n' if k == "dataflow" else f"{k} = {v}\n" for k, v in fields.items())
        configs.append(parse_config(text, file=f"--sweep {' '.join(specs)} ({name})"))
    if len({c.name for c in configs}) != len(configs):
        raise UsageError("--sweep produces the same configuration twice", hint="remove repeated values")
    return configs


def _number(key: str, value: str):
    try:
        return float(value) if key == "clock_mhz" else int(value)
    except ValueError:
        raise UsageError(f"--sweep {key}={value!r}: not a number") from None


# -- one configuration ------------------------------------------------------------------------

def throughput_report(model_name: str, run: GraphRun, tech: EnergyTable | None = None) -> ThroughputReport:
    config = run.config
    tech = load_tech(None) if tech is None else tech
    layers = []
    for s in run.stages:
        layers.append(LayerThroughput(
            name=s.stage.name, op=s.stage.op_text, unit=s.stage.unit.value, macs=s.macs,
            compute_cycles=s.compute_cycles, fill_drain_cycles=s.fill_drain_cycles,
            stall_cycles=s.stall_cycles,
            mapping_efficiency=s.macs / s.mac_slots if s.mac_slots else 0.0,
            dram_input_bytes=s.dram_input_bytes, dram_weight_bytes=s.dram_weight_bytes,
            dram_output_bytes=s.dram_output_bytes, verified=s.verified, rtl=s.rtl,
            energy_by_component_pj=energy_by_component(s.events, tech, config.geometry),
            events=s.events.to_json()))
    notes = [f"{s.stage.name}: {s.stage.note}" for s in run.stages if s.stage.note]
    where = ("the numpy cycle model (same values and cycles as the RTL)" if run.engine is Engine.MODEL
             else f"the RTL ({run.engine.value} engine)")
    notes.append(f"array layers run on {where}; vector-unit layers use the documented cost model "
                 "(docs/npu.md) with the kernels' values; host layers (reshapes, and array "
                 "operators the array cannot take) cost no NPU cycles.")
    notes += [s.mismatch for s in run.stages if s.mismatch]
    cfg = {"name": config.name, "rows": config.rows, "cols": config.cols,
           "dataflow": config.dataflow.value, "input_buffer_bytes": config.input_buffer_bytes,
           "weight_buffer_bytes": config.weight_buffer_bytes,
           "accumulator_buffer_bytes": config.accumulator_buffer_bytes,
           "dram_bytes_per_cycle": config.dram_bytes_per_cycle, "clock_mhz": config.clock_mhz}
    notes.append(f"energy: event counts of each stage's program (MACs, buffer words, DRAM bytes, "
                 f"vector operations) x the '{tech.name}' table ({tech.source}); host stages count "
                 "none (docs/npu.md, Energy).")
    return ThroughputReport(model=model_name, engine=run.engine.value, config=cfg,
                            layers=tuple(layers), notes=tuple(notes), tech=tech.to_json())


def prepare_engine(config: NpuConfig, engine: Engine, stream=sys.stderr) -> None:
    """Builds (or finds cached) the Verilator model before the progress bar starts."""
    if engine is not Engine.VERILATOR:
        return
    from .sim_verilator import build
    start = time.perf_counter()
    build(config.geometry)
    took = time.perf_counter() - start
    if took > 1.0:
        print(f"verilator: built the {config.name} NPU model in {took:.1f} s (cached for next time)",
              file=stream)


def simulate_one(loaded: LoadedModel, feeds: dict, config: NpuConfig, engine: Engine,
                 show_progress: bool = True, pool=None) -> GraphRun:
    """One configuration; its array layers run as tasks on `pool` (default: this process)."""
    from ..progress import Progress
    if pool is None or isinstance(pool, InProcess):
        prepare_engine(config, engine)       # the build message before the bar (workers build their own)
    pool = pool or InProcess()
    prepared = prepare_run(loaded.model.graph, feeds, config, engine)
    bar = Progress(f"simulate {config.name} ({engine.value}, {pool.what}) tasks", len(prepared.tasks),
                   enabled=show_progress)
    try:
        layers = pool.run(prepared.tasks, bar.advance)
    finally:
        bar.close()
    return finish_run(prepared, layers)


def dump_vcd(run: GraphRun, path: str, engine: Engine | None = None) -> str:
    """Re-runs the program that wrote the first mismatching element with waveform tracing,
    on `engine` (default: the run's; the program is the same on every engine)."""
    engine = run.engine if engine is None else engine
    found = run.first_mismatch
    stage = next(s for s in run.stages if s.stage.name == found.stage)
    if stage.layer is None:
        return (f"no waveform: layer {found.stage!r} runs on the {stage.stage.unit.value} unit, "
                "not on the RTL")
    record = stage.layer.runs[found.program]
    geom = run.config.geometry
    dram = record.program.dram.copy()
    if engine is Engine.MODEL:
        raise UsageError("the model engine has no waveform", hint="use the verilator or amaranth engine")
    from ..atomic import atomic_file
    if engine is Engine.AMARANTH:
        from .sim_amaranth import run_amaranth
        with atomic_file(path) as tmp:
            run_amaranth(geom, record.program.instrs, dram, vcd_path=str(tmp))
        return f"wrote {path}: the whole program {found.program} of layer {found.stage!r} (amaranth)"
    from .sim_verilator import run_verilator
    first = max(0, found.program_cycle - VCD_BEFORE)
    last = found.program_cycle + VCD_AFTER
    with atomic_file(path) as tmp:
        run_verilator(geom, record.program.instrs, dram, vcd_path=str(tmp), vcd_window=(first, last))
    return (f"wrote {path}: cycles {first}..{last} of program {found.program} of layer "
            f"{found.stage!r} (verilator --trace; the write is in cycle {found.program_cycle}, "
            f"VCD time 10 x cycle)")


def summary_lines(report: ThroughputReport) -> list[str]:
    """The console table: one line per layer, then the totals."""
    head = (f"{'layer':<22} {'op':<28} {'unit':<6} {'MACs':>9} {'cycles':>8} {'compute':>8} "
            f"{'fill/dr':>8} {'stall':>7} {'util%':>6} {'DRAM B':>8} {'nJ':>8}  verified")
    lines = [head, "-" * len(head)]
    for layer in report.layers:
        verified = {True: "yes", False: "MISMATCH", None: "-"}[layer.verified]
        lines.append(f"{layer.name[:22]:<22} {layer.op[:28]:<28} {layer.unit:<6} {layer.macs:>9} "
                     f"{layer.cycles:>8} {layer.compute_cycles:>8} {layer.fill_drain_cycles:>8} "
                     f"{layer.stall_cycles:>7} {100 * report.utilization(layer):>6.1f} "
                     f"{layer.dram_bytes:>8} {layer.energy_pj / 1e3:>8.2f}  {verified}")
    cfg = report.config
    lines.append("-" * len(head))
    lines.append(f"total: {report.total_cycles} cycles, {report.total_macs} MACs on {cfg['rows']}x"
                 f"{cfg['cols']} {cfg['dataflow']} at {cfg['clock_mhz']:g} MHz: latency "
                 f"{report.latency_s * 1e6:.2f} us, {report.inferences_per_s:.0f} inferences/s, "
                 f"{report.gops:.2f} GOPS; engine {report.engine}")
    parts = ", ".join(f"{name} {pj / 1e3:.1f}" for name, pj in report.energy_by_component_pj.items() if pj)
    lines.append(f"energy ({report.tech.get('name', '?')}): {report.total_energy_pj / 1e3:.2f} nJ per "
                 f"inference ({parts} nJ)")
    return lines


@dataclass(frozen=True)
class SimulateResult:
    out: Path
    reports: list[ThroughputReport]     # one configuration: its report; a sweep: none
    sweep: list[dict]                   # a sweep: one summary per configuration
    verified: bool
    messages: list[str]                 # mismatches, waveform notes


def default_out(model_name: str, sweep: bool) -> Path:
    return Path("qsim-out") / f"{model_name}-npu{'-sweep' if sweep else ''}"


def simulate_command(model: str | None, config_spec: str, engine_name: str, input_path: str | None,
                     out: str | None, sweep: list[str] | None = None, vcd: str | None = None,
                     show_progress: bool = True, tech: str | None = None, workers: int | None = 1,
                     scheduler: str | None = None) -> SimulateResult:
    """The whole `qsim simulate` job; the output folder appears complete or not at all.
    The array layers (of every sweep point) run as tasks on `workers` local processes or
    the Dask cluster at `scheduler` (qsim.npu.distributed.open_pool)."""
    from ..atomic import atomic_directory
    from ..outpath import SIMULATION_REPORT, check_output
    from .golden_vectors import read_inputs
    engine = resolve_engine(engine_name, vcd)
    base = load_config(config_spec)
    table = load_tech(tech)
    configs = parse_sweep(sweep, base) if sweep else [base]
    if vcd and sweep:
        raise UsageError("--vcd and --sweep do not combine", hint="dump a waveform for one configuration")
    with open_pool(workers, scheduler) as pool:      # a LocalCluster starts while the model loads
        loaded = load_qmodel(model)
        feeds, _ = read_inputs(loaded.model, [input_path] if input_path else None)
        target = Path(out) if out is not None else default_out(loaded.name, bool(sweep))
        inputs = [("quantized model", model), ("NPU configuration", config_spec),
                  ("--input", input_path)]
        check_output(out if out is not None else target,
                     "-o" if out is not None else "the default output folder",
                     inputs, replaces=SIMULATION_REPORT)
        if vcd:
            check_output(vcd, "--vcd", inputs, outputs=[("output folder", target)], folder=False)
        with atomic_directory(target) as tmp:
            if sweep:
                summaries, messages = _sweep(loaded, feeds, configs, engine, tmp, show_progress, pool,
                                             table)
                return SimulateResult(target, [], summaries, all(p["all_verified"] for p in summaries),
                                      messages)
            run = simulate_one(loaded, feeds, base, engine, show_progress, pool)
            report = throughput_report(loaded.name, run, table)
            write_throughput_report(report, tmp)
            messages = [s.mismatch for s in run.stages if s.mismatch]
            if vcd:
                messages.append(dump_vcd(run, vcd) if run.first_mismatch is not None
                                else f"--vcd {vcd}: no mismatch, no waveform written")
    return SimulateResult(target, [report], [], run.verified, messages)


def _sweep_summary(report: ThroughputReport, config: NpuConfig) -> dict:
    doc = report.to_json()
    return {"config": doc["config"], "total_cycles": doc["total_cycles"],
            "latency_ms": doc["latency_ms"], "inferences_per_s": doc["inferences_per_s"],
            "gops": doc["gops"], "all_verified": doc["all_verified"],
            "array_utilization": _array_utilization(report),
            "energy_per_inference_pj": doc["energy_per_inference_pj"],
            "energy_by_component_pj": doc["energy_by_component_pj"], "tech": doc["tech"]["name"],
            "report": f"{config.name}/report.json"}


def _array_utilization(report: ThroughputReport) -> float:
    """MACs over the PE slots of the whole run (all layers' cycles)."""
    return report.total_macs / (report.pes * report.total_cycles) if report.total_cycles else 0.0


def render_report(report: ThroughputReport) -> dict[str, bytes]:
    """A sweep point's report files (JSON, CSV, plots, HTML) rendered in a scratch folder and
    returned as bytes: a task, so a sweep's plotting (the largest per-point cost after the
    layers of a small model) spreads over the workers too, remote ones included."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="qsim-report-") as scratch:
        write_throughput_report(report, scratch)
        return {p.relative_to(scratch).as_posix(): p.read_bytes()
                for p in sorted(Path(scratch).rglob("*")) if p.is_file()}


def _sweep(loaded: LoadedModel, feeds: dict, configs: list[NpuConfig], engine: Engine, tmp: Path,
           show_progress: bool, pool, table: EnergyTable):
    """Every configuration's array layers as one batch of tasks on `pool` (so workers stay busy
    across configuration boundaries), then every point's report rendering as tasks; writes
    each point's report folder, sweep.json and sweep.png."""
    import json

    from ..atomic import atomic_write_text
    from ..progress import Progress
    if isinstance(pool, InProcess):
        for config in configs:
            prepare_engine(config, engine)
    expected = execute(loaded.model.graph, feeds, backend="kernels")     # the same for every point
    prepared = [prepare_run(loaded.model.graph, feeds, c, engine, expected) for c in configs]
    tasks = [task for p in prepared for task in p.tasks]
    bar = Progress(f"sweep of {len(configs)} configurations ({engine.value}, {pool.what}) tasks",
                   len(tasks) + len(configs), enabled=show_progress)
    try:
        layers = pool.run(tasks, bar.advance)
        reports, mismatches, start = [], [], 0
        for config, p in zip(configs, prepared):
            run = finish_run(p, layers[start:start + len(p.tasks)])
            start += len(p.tasks)
            reports.append(throughput_report(loaded.name, run, table))
            mismatches += [s.mismatch for s in run.stages if s.mismatch]
        rendered = pool.run([Task(render_report, (r,), f"report-{c.name}") for c, r in zip(configs, reports)],
                            bar.advance)
    finally:
        bar.close()
    for config, files in zip(configs, rendered):
        for name, data in files.items():
            path = tmp / config.name / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    summaries = [_sweep_summary(r, c) for c, r in zip(configs, reports)]
    atomic_write_text(tmp / "sweep.json", json.dumps({"engine": engine.value, "points": summaries},
                                                     indent=2) + "\n")
    _sweep_plot(summaries, tmp / "sweep.png")
    return summaries, mismatches


def _sweep_plot(points: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [p["config"]["name"] for p in points]
    x = range(len(names))
    fig, (left, right, energy) = plt.subplots(1, 3, figsize=(max(11.0, 1.6 * len(names) + 5), 4))
    left.bar(x, [p["total_cycles"] for p in points], color="#3b7dd8")
    left.set_ylabel("total cycles")
    left.set_title("cycles per inference")
    right.bar(x, [100 * p["array_utilization"] for p in points], color="#e9a23b")
    right.set_ylabel("PE utilization over the run (%)")
    right.set_title("utilization")
    base = [0.0] * len(names)
    components = list(points[0]["energy_by_component_pj"]) if points else []
    for component in components:
        vals = [p["energy_by_component_pj"].get(component, 0.0) / 1e3 for p in points]
        energy.bar(x, vals, bottom=base, label=component, color=COMPONENT_COLORS.get(component, "#999"))
        base = [b + v for b, v in zip(base, vals)]
    energy.set_ylabel("energy per inference (nJ)")
    energy.set_title(f"energy ({points[0]['tech'] if points else '?'})")
    if components:
        energy.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    for ax in (left, right, energy):
        ax.set_xticks(list(x), names, rotation=30, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
