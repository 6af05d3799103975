"""`qsim simulate`: run a quantized model on the cycle-simulated NPU (one configuration or a
sweep), verify every layer against the kernels, write the report folder (one report, or one
per sweep point with sweep.json and sweep.png) and print the cycle and energy summary.

The array and vector layers (of every sweep point) and the sweep points' report renderings
run as tasks on the pool of qsim.cluster.distributed: this process for --workers 1, else Dask
workers; a point's renderings start as soon as its layers are done."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..atomic import atomic_directory, atomic_write_text
from ..errors import UsageError
from ..npu.config import load_config, with_cores
from ..cluster.distributed import FollowUp, Task, open_pool, scheduler_address
from ..npu.energy import load_tech
from ..npu.mapping.policy import MappingPolicy
from ..npu.engines import Engine
from ..npu.program import finish_run
from ..npu.simulate import (dump_vcd, parse_sweep, point_tasks, prepare_sweep, resolve_engine,
                            simulate_one, start_builds)
from ..outpath import SIMULATION_REPORT, check_output
from ..progress import Progress
from ..report.sweep import sweep_plot_png, sweep_summary
from ..report.throughput import (PARTS, ThroughputReport, render_part, summary_lines,
                                throughput_report, write_throughput_report)
from .arguments import input_files, pool_scheduler
from .npu_options import add_npu_arguments
from .quantized_model import load_npu_model, read_inputs

NAME = "simulate"
HELP = "run a quantized model on the cycle-simulated NPU, verify every layer against the kernels, report cycles"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    p = parser
    p.add_argument("model", nargs="?", metavar="QMODEL",
                   help="quantized model folder from qsim quantize (default: the embedded model)")
    add_npu_arguments(p, config_role="NPU configuration", engine_default="verilator",
                      engine_role="the engine that runs the NPU",
                      input_default="the first embedded test image", tasks="the layers (of every sweep point)")
    p.add_argument("-o", "--out", metavar="OUT",
                   help="report folder (default qsim-out/<model>-npu/, -npu-sweep/ for sweeps)")
    p.add_argument("--sweep", nargs="+", metavar="KEY=V1,V2",
                   help="run the product of these configuration values in parallel, e.g. "
                        "size=8,16,32 dataflow=ws,os (keys: size, rows, cols, dataflow, "
                        "*_buffer_bytes, dram_bytes_per_cycle, clock_mhz, dram, cores)")
    p.add_argument("--cores", type=int, metavar="N",
                   help="N identical NPU cores sharing the DRAM port, each layer's output channels split "
                        "across them (default: the configuration's `cores`, 1)")
    p.add_argument("--vcd", metavar="FILE.vcd",
                   help="on a mismatch, write the waveform around the first wrong DRAM write")
    p.add_argument("--mapping", metavar="fixed|search[:OBJ]",
                   help="how the compiler maps each layer: fixed (the one rule) or search (per layer "
                        "the loop order and tile sizes that minimize OBJ: cycles, energy or edp, the "
                        "energy-delay product, the default); default: the configuration's (fixed)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


@dataclass(frozen=True)
class SimulateResult:
    out: Path
    reports: list[ThroughputReport]     # one configuration: its report; a sweep: none
    sweep: list[dict]                   # a sweep: one summary per configuration
    verified: bool
    messages: list[str]                 # mismatches, waveform notes


def default_out(model_name: str, sweep: bool) -> Path:
    return Path("qsim-out") / f"{model_name}-npu{'-sweep' if sweep else ''}"


def simulate_command(model: str | None, config_spec: str, engine: Engine, input_path: str | list[str] | None,
                     out: str | None, sweep: list[str] | None = None, vcd: str | None = None,
                     show_progress: bool = True, tech: str | None = None, workers: int | None = 1,
                     scheduler: str | None = None, cores: int | None = None,
                     mapping: str | None = None) -> SimulateResult:
    """The whole `qsim simulate` job; the output folder appears complete or not at all.
    The array layers (of every sweep point) run as tasks on `workers` local processes or
    the Dask cluster at `scheduler` (qsim.cluster.distributed.open_pool)."""
    base = with_cores(load_config(config_spec), cores)
    table = load_tech(tech)
    if mapping is not None:
        base = dataclasses.replace(base, mapping=MappingPolicy.parse(mapping))
    configs = parse_sweep(sweep, base) if sweep else [base]
    if vcd and any(c.cores > 1 for c in configs):
        raise UsageError("--vcd needs one core: several cores keep no per-program records to re-run",
                         hint="reproduce the mismatch with --cores 1 and --vcd")
    # the search's energy objectives read the energy table the report uses
    configs = [dataclasses.replace(c, mapping=dataclasses.replace(c.mapping, tech=tech)) for c in configs]
    base = configs[0] if not sweep else base
    if vcd and sweep:
        raise UsageError("--vcd and --sweep do not combine", hint="dump a waveform for one configuration")
    if vcd is not None and not vcd.lower().endswith(".vcd"):
        raise UsageError(f"--vcd {vcd}: the waveform is written in VCD format; its file name must "
                         "end in .vcd", hint=f"e.g. --vcd {os.path.splitext(vcd)[0] or 'wave'}.vcd")
    if scheduler_address(scheduler) is None:
        # cold Verilator builds start now, in child processes, and overlap loading the model,
        # the golden values and the programs; simulate_one / prepare_sweep wait for them
        start_builds(configs, engine)
    with open_pool(workers, scheduler) as pool:
        if sweep:
            pool.warm_up(_load_plotting)    # the workers render the reports, and are idle until
        loaded = load_npu_model(model)      # the model is loaded and its tasks are made
        specs = [input_path] if isinstance(input_path, str) else list(input_path or [])
        feeds, _ = read_inputs(loaded.model, specs or None)
        target = Path(out) if out is not None else default_out(loaded.name, bool(sweep))
        inputs = [("quantized model", model), ("NPU configuration", config_spec), *input_files(specs)]
        check_output(out if out is not None else target, "-o", inputs, replaces=SIMULATION_REPORT,
                     default=out is None)
        if vcd:
            check_output(vcd, "--vcd", inputs, outputs=[("output folder", target)], folder=False)
        with atomic_directory(target, command=SIMULATION_REPORT.command) as tmp:
            if sweep:
                summaries, messages = _sweep(loaded, feeds, configs, engine, tmp, show_progress, pool,
                                             table)
                return SimulateResult(target, [], summaries, all(p["all_verified"] for p in summaries),
                                      messages)
            run = simulate_one(loaded.model, feeds, base, engine, show_progress, pool)
            report = throughput_report(loaded.name, run, table)
            write_throughput_report(report, tmp)
            messages = [s.mismatch for s in run.stages if s.mismatch]
            if vcd:
                messages.append(dump_vcd(run, vcd) if run.first_mismatch is not None
                                else f"--vcd {vcd}: no mismatch, no waveform written")
    return SimulateResult(target, [report], [], run.verified, messages)


def _sweep(loaded, feeds: dict, configs: list, engine, tmp: Path, show_progress: bool, pool, table):
    """Every configuration's array and vector layers as one batch of tasks on `pool`; as soon as
    a point's layers are in, its run is assembled and verified here and every part of its
    report (qsim.report.throughput.PARTS) becomes a task, while other points' layers still run;
    once all are in, the sweep plot is one more. Writes each point's report folder, sweep.json
    and sweep.png."""
    prepared = prepare_sweep(loaded.model, feeds, configs, engine, pool)
    tasks = [task for p in prepared for task in p.tasks]
    runs, reports = {}, {}

    def report_parts(k: int):
        def make(layers: list) -> list[Task]:
            runs[k] = finish_run(prepared[k], layers)
            report = reports[k] = throughput_report(loaded.name, runs[k], table)
            return [Task(render_part, (report, part), f"report-{configs[k].name}-{part}") for part in PARTS]
        return make

    def sweep_plot(_: list) -> list[Task]:
        return [Task(sweep_plot_png, ([sweep_summary(reports[k]) for k in range(len(configs))],), "sweep-plot")]

    spans = point_tasks(prepared)
    follow_ups = [FollowUp(span, report_parts(k)) for k, span in enumerate(spans)]
    follow_ups.append(FollowUp(range(len(tasks)), sweep_plot))      # after every point's (list order)
    bar = Progress(f"sweep of {len(configs)} configurations ({engine.value}, {pool.what}) tasks",
                   len(tasks) + len(PARTS) * len(configs) + 1, enabled=show_progress)
    try:
        _, rendered = pool.run_with_follow_ups(tasks, follow_ups, bar.advance)
    finally:
        bar.close()
    for k, config in enumerate(configs):
        for files in rendered[k]:
            _write_files(tmp / config.name, files)
    (tmp / "sweep.png").write_bytes(rendered[-1][0])
    summaries = [sweep_summary(reports[k]) for k in range(len(configs))]
    atomic_write_text(tmp / "sweep.json", json.dumps({"engine": engine.value, "points": summaries},
                                                     indent=2) + "\n")
    mismatches = [s.mismatch for k in range(len(configs)) for s in runs[k].stages if s.mismatch]
    return summaries, mismatches


def _load_plotting() -> None:
    """Imports matplotlib and draws a small figure, so that a worker's first report plot does not
    pay for it (~0.4 s: the import, the Agg backend, the font cache)."""
    import io

    import matplotlib                   # deferred: the worker's warm-up is the point
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt     # deferred: as above
    fig, ax = plt.subplots()
    ax.bar([0, 1], [1, 2], label="warm-up")
    ax.set_title("warm-up")
    ax.legend()
    fig.tight_layout()
    fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)


def _write_files(folder: Path, files: dict[str, bytes]) -> None:
    """Rendered report files (qsim.report.throughput.render_part) into `folder`."""
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def run(args: argparse.Namespace) -> int:
    engine = resolve_engine(args.engine, args.vcd)       # a bad name fails before any work
    scheduler = pool_scheduler(args)
    result = simulate_command(args.model, args.config, engine, args.input, args.out,
                              sweep=args.sweep, vcd=args.vcd, show_progress=not args.quiet,
                              tech=args.tech, workers=args.workers, scheduler=scheduler, cores=args.cores,
                              mapping=args.mapping)
    for report in result.reports:
        print("\n".join(summary_lines(report)))
    for point in result.sweep:
        print(f"{point['config']['name']:<24} {point['total_cycles']:>9} cycles  "
              f"{100 * point['array_utilization']:5.1f} % PE utilization  "
              f"{point['inferences_per_s']:>10.0f} inferences/s  "
              f"{point['energy_per_inference_pj'] / 1e3:>9.2f} nJ/inference  "
              f"{'verified' if point['all_verified'] else 'MISMATCH'}"
              + (f"; WARNING: {point['host_arithmetic']}" if point["host_arithmetic"] else ""))
    for message in result.messages:
        print(message, file=sys.stderr)
    print(f"wrote {result.out}/ ({'every layer bit-exact with the kernels' if result.verified else 'VERIFICATION FAILED'})")
    return 0 if result.verified else 1
