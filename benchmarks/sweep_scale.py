"""Distributed simulation benchmark: `qsim simulate --sweep` on 1 vs 2 Dask workers, and the
per-task costs docs/scale.md extrapolates from.

    python benchmarks/sweep_scale.py [--repeat 3] [--out reports]

Measures (wall-clock on this machine, medians over --repeat runs, the two settings alternated
so that load from other jobs hits both alike):
1. The 4-point sweep `--sweep size=8,16 dataflow=ws,os` of the embedded model with the
   verilator engine (builds cached beforehand), as whole `qsim simulate` commands in new
   processes: `--workers 1` (in-process) vs `--workers 2` (the command starts a LocalCluster),
   once with the embedded model quantized by the command, once from a quantized model folder
   (the embedded model saved by `qsim quantize`'s writer). Every run's report.json and
   sweep.json must be identical.
2. The same sweep against an already running 2-worker cluster (`--scheduler`).
3. The task phase alone (the sweep's 20 layer tasks, in this process vs on the warm cluster).
4. Per task, for extrapolation (docs/scale.md): ResNet-18's 20 convolutions (224x224,
   synthetic int8, benchmarks/_resnet18_layers.py) as layer tasks at 16x16 and 32x32 on the
   model and verilator engines, and ResNet-50's 53 at 32x32 on the model engine (at a 224x224
   and at a 32x32 input, benchmarks/_resnet18_layers.resnet50_convs): seconds per
   task serially, all tasks on the warm 2-worker cluster, bytes sent per task and returned;
   and the scheduler's round trip for empty tasks.
Writes reports/sweep_scale.md and reports/sweep_scale.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cloudpickle
import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from _resnet18_layers import expected_outputs, resnet18_convs, resnet50_convs  # noqa: E402

from qsim import ir  # noqa: E402
from qsim.npu.config import load_config  # noqa: E402
from qsim.cluster.distributed import InProcess, Task, open_pool  # noqa: E402
from qsim.npu.engines import Engine  # noqa: E402
from qsim.npu.program import Stage, Unit, prepare_run, run_array_stage  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["size=8,16", "dataflow=ws,os"]
SWEEP_CONFIGS = ("8x8", "8x8:os", "16x16", "16x16:os")


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_cli(model: str | None, out: Path, extra: list[str], sweep=SWEEP, engine: str = "verilator",
            tree: Path = ROOT) -> tuple[float, float]:
    """One `qsim simulate --sweep` command in a new process, run from `tree` (a qsim checkout):
    its wall-clock seconds and the CPU seconds of it and its children (the Dask workers)."""
    argv = [sys.executable, "-m", "qsim", "simulate", *([model] if model else []), "--engine", engine,
            "--sweep", *sweep, "-q", "-o", str(out), *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=tree, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} (in {tree}) failed:\n{done.stdout}{done.stderr}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def reports_of(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): json.loads(p.read_text()) for p in sorted(folder.rglob("*.json"))}


def compare_cli(model, work: Path, name: str, settings: dict[str, list[str]], repeat: int,
                trees: dict[str, Path] | None = None, **how) -> dict:
    """Each setting `repeat` times, alternated; all outputs must be equal. `trees`: the settings
    run from each of these qsim checkouts in turn (keys prefixed "TREE "), default this one.
    `how`: run_cli's sweep and engine."""
    trees = trees or {"": ROOT}
    keys = [(f"{t} {k}".strip(), k, tree) for t, tree in trees.items() for k in settings]
    times = {key: [] for key, _, _ in keys}
    cpu = {key: [] for key, _, _ in keys}
    reference = None
    for r in range(repeat):
        for key, setting, tree in keys:
            out = work / f"{name}-{key.replace(' ', '-')}-{r}"
            wall, used = run_cli(model, out, settings[setting], tree=tree, **how)
            times[key].append(wall)
            cpu[key].append(used)
            got = reports_of(out)
            if reference is None:
                reference = got
            elif got != reference:
                raise SystemExit(f"{name} {key} run {r}: reports differ from the first run")
    return {"runs_s": times, "median_s": {k: statistics.median(v) for k, v in times.items()},
            "cpu_s": cpu, "median_cpu_s": {k: statistics.median(v) for k, v in cpu.items()},
            "load_average_end": load_average(), "identical": True, "files_compared": len(reference)}


RESNET_SWEEP = ["size=16,32", "dataflow=ws,os"]


def resnet18_sweep(work: Path, repeat: int, peer: Path | None = None) -> dict:
    """The 4-point sweep of a real-size network, where the simulation itself is the work: ResNet-18
    (random weights, benchmarks/_resnet18_onnx.py) quantized on 4 noise images, one 224x224 input,
    model engine, `--workers 1` vs `--workers 2`; with `peer` (another qsim checkout, e.g. main)
    the same commands from there too, alternated with this tree's in the same window."""
    from _resnet18_onnx import build_onnx
    onnx_path = build_onnx(work / "resnet18")
    rng = np.random.default_rng(0)
    np.save(work / "calib.npy", rng.standard_normal((4, 3, 224, 224)).astype(np.float32))
    np.save(work / "x.npy", rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    folder = work / "resnet18-int8"
    subprocess.run([sys.executable, "-m", "qsim", "quantize", str(onnx_path), "--calib", str(work / "calib.npy"),
                    "-q", "-o", str(folder)], cwd=ROOT, check=True, capture_output=True)
    inputs = ["--input", str(work / "x.npy")]
    trees = {"": ROOT, "peer": peer} if peer is not None else None
    return compare_cli(str(folder), work, "resnet18", {"workers1": ["--workers", "1", *inputs],
                                                       "workers2": ["--workers", "2", *inputs]},
                       repeat, trees=trees, sweep=RESNET_SWEEP, engine="model")


def sweep_parts(folder: str) -> dict:
    """The sweep's pieces, timed where they run on the command's side: golden values once,
    per point the preparation (vector stages on the kernels) and the assembly of the run."""
    from qsim.npu.program import finish_run
    from qsim.commands.quantized_model import load_npu_model, read_inputs
    from qsim.npu.simulate import parse_sweep
    from qsim.report.throughput import PARTS, render_part, throughput_report
    from qsim.runtime.executor import execute
    loaded = load_npu_model(folder)
    feeds, _ = read_inputs(loaded.model, None)
    start = time.perf_counter()
    expected = execute(loaded.model.graph, feeds, backend="kernels")
    golden_s = time.perf_counter() - start
    configs = parse_sweep(SWEEP, load_config("16x16"))
    start = time.perf_counter()
    prepared = [prepare_run(loaded.model.graph, feeds, c, "verilator", expected) for c in configs]
    prepare_s = (time.perf_counter() - start) / len(configs)
    layers = InProcess().run(prepared[0].tasks)
    start = time.perf_counter()
    report = throughput_report(loaded.name, finish_run(prepared[0], layers))
    finish_s = time.perf_counter() - start
    for part in PARTS:                                     # matplotlib's first-use costs
        render_part(report, part)
    render = []
    for _ in range(3):
        start = time.perf_counter()
        for part in PARTS:
            render_part(report, part)
        render.append(time.perf_counter() - start)
    return {"tasks": [t for p in prepared for t in p.tasks], "golden_s": golden_s,
            "prepare_s_per_point": prepare_s, "finish_s_per_point": finish_s,
            "render_s_per_point": statistics.median(render), "stages": len(prepared[0].stages)}


def timed_run(pool, tasks) -> tuple[float, list]:
    start = time.perf_counter()
    results = pool.run(tasks)
    return time.perf_counter() - start, results


def resnet_tasks(config_name: str, engine: Engine, data, expected, layers) -> list[Task]:
    geom = load_config(config_name).geometry
    kinds = [ir.OpKind.get(f"tosa.{k}") for k in ("CONV2D", "RESCALE", "CLAMP")]
    tasks = []
    for layer, (x, conv, rescale, clamp), want in zip(layers, data, expected):
        ops = (ir.Op(kinds[0], ("x",), ("acc",), conv, name=layer.name),
               ir.Op(kinds[1], ("acc",), ("scaled",), rescale, name=layer.name),
               ir.Op(kinds[2], ("scaled",), (layer.name,), clamp, name=layer.name))
        tasks.append(Task(run_array_stage, (geom, engine, Stage(ops, Unit.ARRAY), [x], want),
                          f"{config_name}-{layer.name}"))
    return tasks


def per_task(pool, model: str, layers, cases) -> list[dict]:
    """The layers of `model` as tasks for each (array, engine) case: serially here, then all
    on the warm cluster; outputs checked against the kernels, cycles equal on both."""
    data, expected, _ = expected_outputs(layers, 0)
    rows = []
    for config_name, engine in cases:
        tasks = resnet_tasks(config_name, engine, data, expected, layers)
        if engine is Engine.VERILATOR:          # build (or find cached) + load, outside the timing
            InProcess().run(tasks[-1:])
            pool.run(tasks[-1:] * 2)
        seconds, cycles = [], []
        for task in tasks:
            took, (result,) = timed_run(InProcess(), [task])
            if not np.array_equal(result.output, task.args[4]):
                raise SystemExit(f"{task.label}: output differs from the kernels")
            seconds.append(took)
            cycles.append(result.cycles)
        spread, results = timed_run(pool, tasks)
        assert [r.cycles for r in results] == cycles
        # cloudpickle: what Dask falls back to for the operator kinds' verifier closures
        sent = [len(cloudpickle.dumps(t.args, protocol=5)) for t in tasks]
        back = [len(cloudpickle.dumps(r, protocol=5)) for r in results]
        rows.append({"model": model, "config": config_name, "engine": engine.value,
                     "layers": [{"layer": t.label.split("-", 1)[1], "macs": layer.macs, "cycles": c,
                                 "seconds": s, "bytes_sent": b, "bytes_returned": r}
                                for t, layer, c, s, b, r in zip(tasks, layers, cycles, seconds, sent, back)],
                     "serial_s": sum(seconds), "two_workers_s": spread,
                     "total_macs": sum(layer.macs for layer in layers), "total_cycles": sum(cycles)})
        print(f"{model} {config_name} {engine.value}: serial {sum(seconds):.1f} s, 2 workers "
              f"{spread:.1f} s, {sum(cycles)} cycles", flush=True)
    return rows


def scheduler_overhead(pool, count: int = 400) -> float:
    pool.run([Task(abs, (-i,), "noop") for i in range(20)])
    took, _ = timed_run(pool, [Task(abs, (-i,), "noop") for i in range(count)])
    return took / count


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "reports"))
    parser.add_argument("--skip-resnet", action="store_true", help="no per-task ResNet measurement")
    parser.add_argument("--skip-resnet-sweep", action="store_true", help="no ResNet-18 sweep command")
    parser.add_argument("--peer", metavar="DIR",
                        help="another qsim checkout (e.g. /work/main) whose ResNet-18 sweep runs alternate "
                             "with this tree's, for a comparison in the same window")
    parser.add_argument("--only-resnet-sweep", action="store_true",
                        help="just the ResNet-18 sweep (prints its table; writes no report)")
    args = parser.parse_args(argv)
    from qsim.npu.simulate import prepare_engine
    from qsim.quant.pipeline import embedded_quantized_model
    from qsim.quant.qmodel import save_quantized_model
    from qsim.quant.tosa.target import TosaTarget

    doc = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "load_average_start": load_average(),
                       "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())},
           "sweep": " ".join(SWEEP), "engine": "verilator", "repeat": args.repeat, "peer": args.peer}
    for name in SWEEP_CONFIGS:
        prepare_engine(load_config(name), Engine.VERILATOR)   # both NPU sides cached: the measurement excludes builds
    with tempfile.TemporaryDirectory(prefix="qsim-sweep-scale-") as tmp:
        work = Path(tmp)
        folder = str(work / "fashion-int8")
        save_quantized_model(embedded_quantized_model(), TosaTarget(), folder)
        one, two = ["--workers", "1"], ["--workers", "2"]
        if not args.skip_resnet_sweep:
            doc["cli_resnet18"] = resnet18_sweep(work, args.repeat, Path(args.peer) if args.peer else None)
            print("\n".join(resnet18_lines(doc["cli_resnet18"], args.peer)), flush=True)
            if args.only_resnet_sweep:
                return 0
        doc["cli_embedded"] = compare_cli(None, work, "embedded", {"workers1": one, "workers2": two},
                                          args.repeat)
        print("embedded:", doc["cli_embedded"]["median_s"], flush=True)
        doc["cli_folder"] = compare_cli(folder, work, "folder", {"workers1": one, "workers2": two},
                                        args.repeat)
        print("folder:", doc["cli_folder"]["median_s"], flush=True)
        with open_pool(workers=2) as pool:
            address = pool.client.scheduler.address
            warm = compare_cli(folder, work, "warm", {"workers1": one, "scheduler": ["--scheduler", address]},
                               args.repeat)
            doc["cli_folder_warm_cluster"] = warm
            print("warm cluster:", warm["median_s"], flush=True)
            parts = sweep_parts(folder)
            tasks = parts.pop("tasks")
            doc["sweep_parts"] = parts
            timed_run(pool, tasks)                          # each worker loads its libraries
            serial = [timed_run(InProcess(), tasks)[0] for _ in range(args.repeat)]
            spread = [timed_run(pool, tasks)[0] for _ in range(args.repeat)]
            doc["task_phase"] = {"tasks": len(tasks), "serial_s": serial, "two_workers_s": spread,
                                 "median_serial_s": statistics.median(serial),
                                 "median_two_workers_s": statistics.median(spread)}
            doc["scheduler_overhead_s_per_task"] = scheduler_overhead(pool)
            if not args.skip_resnet:
                doc["layer_tasks"] = per_task(pool, "ResNet-18", resnet18_convs(), [
                    (c, e) for c in ("16x16", "32x32") for e in (Engine.MODEL, Engine.VERILATOR)])
                for size in RESNET50_INPUTS:
                    doc["layer_tasks"] += per_task(pool, resnet50_name(size), resnet50_convs(size),
                                                   [("32x32", Engine.MODEL)])
    doc["machine"]["load_average_end"] = load_average()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(doc)                                    # also adds doc["extrapolation"]
    (out / "sweep_scale.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "sweep_scale.md").write_text(text)
    print((out / "sweep_scale.md").read_text())
    return 0


def resnet18_lines(result: dict, peer: str | None = None) -> list[str]:
    """The ResNet-18 sweep's table: per tree, median wall and CPU seconds (the command and its
    Dask workers) of --workers 1 and 2, and the speed-up; then every run."""
    med, cpu = result["median_s"], result["median_cpu_s"]
    lines = [f"ResNet-18 folder, `qsim simulate --sweep {' '.join(RESNET_SWEEP)} --engine model`, "
             f"medians of {len(result['runs_s']['workers1'])} runs per setting, settings alternated"
             + (f" with the same commands from {peer} (\"peer\")" if peer else "")
             + f"; load average at the end {result['load_average_end']}. All runs' reports identical "
             "(checked). CPU: the command's and its workers' user + system seconds.", "",
             "| tree | --workers 1 | --workers 2 | speed-up | CPU, 1 worker | CPU, 2 workers |",
             "|---|---|---|---|---|---|"]
    for prefix, name in (("", "this tree"), ("peer ", f"peer ({peer})")):
        one, two = prefix + "workers1", prefix + "workers2"
        if one in med:
            lines.append(f"| {name} | {med[one]:.2f} s | {med[two]:.2f} s | {med[one] / med[two]:.2f}x | "
                         f"{cpu[one]:.1f} s | {cpu[two]:.1f} s |")
    lines += ["", "Runs (wall / CPU seconds): " + "; ".join(
        f"{key}: " + ", ".join(f"{w:.1f}/{c:.1f}" for w, c in zip(result["runs_s"][key], result["cpu_s"][key]))
        for key in result["runs_s"]), ""]
    return lines


def _ratio(medians: dict, slow: str, fast: str) -> str:
    return f"{medians[slow] / medians[fast]:.2f}x"


def markdown(doc: dict) -> str:
    m = doc["machine"]
    lines = ["# Sweep scaling: `qsim simulate --sweep` on Dask workers", "",
             "Generated by `python benchmarks/sweep_scale.py` (raw data in `sweep_scale.json`). "
             f"Machine: {m['cpus']} CPUs, Python {m['python']}, started {m['started_utc']} UTC; "
             f"load average (1, 5, 15 min) {m['load_average_start']} at the start, "
             f"{m['load_average_end']} at the end (the machine is shared with other jobs: wall-clock "
             "times are upper bounds, and a ratio is only as good as the load was even).", "",
             f"Sweep: `--sweep {doc['sweep']}` (4 points), verilator engine, builds cached; medians of "
             f"{doc['repeat']} runs per setting, settings alternated. Every run's `report.json` files and "
             "`sweep.json` are identical to the first run's (checked).", "",
             "| what | --workers 1 | 2 workers | speed-up |", "|---|---|---|---|"]
    for key, what, other in (("cli_embedded", "whole command, embedded model (quantized by the command)", "workers2"),
                             ("cli_folder", "whole command, quantized model folder", "workers2"),
                             ("cli_folder_warm_cluster", "whole command, folder, running 2-worker cluster (`--scheduler`)", "scheduler")):
        med = doc[key]["median_s"]
        lines.append(f"| {what} | {med['workers1']:.2f} s | {med[other]:.2f} s | "
                     f"{_ratio(med, 'workers1', other)} |")
    if "cli_resnet18" in doc:
        med = doc["cli_resnet18"]["median_s"]
        lines.append(f"| whole command, ResNet-18 folder, `--sweep {' '.join(RESNET_SWEEP)}`, model engine | "
                     f"{med['workers1']:.2f} s | {med['workers2']:.2f} s | {_ratio(med, 'workers1', 'workers2')} |")
    phase = doc["task_phase"]
    lines.append(f"| task phase only: the sweep's {phase['tasks']} layer tasks (warm workers) | "
                 f"{phase['median_serial_s']:.2f} s | {phase['median_two_workers_s']:.2f} s | "
                 f"{phase['median_serial_s'] / phase['median_two_workers_s']:.2f}x |")
    parts = doc["sweep_parts"]
    lines += ["", f"Scheduler round trip of an empty task on the warm cluster: "
              f"{1000 * doc['scheduler_overhead_s_per_task']:.2f} ms per task (400 tasks).", "",
              f"The command's own work per sweep point (embedded model, {parts['stages']} stages): "
              f"preparation (vector stages on the kernels) {1000 * parts['prepare_s_per_point']:.1f} ms, "
              f"assembly and verification {1000 * parts['finish_s_per_point']:.1f} ms; once per sweep: "
              f"golden values {1000 * parts['golden_s']:.1f} ms. Rendering one point's report (a task): "
              f"{parts['render_s_per_point']:.2f} s (four PNG plots, HTML, JSON, CSV; a sweep renders them as "
              "five tasks per point, plus one for sweep.png).", ""]
    if "cli_resnet18" in doc:
        lines += ["", "## The ResNet-18 sweep (issue 15: 2 workers at least 1.5x faster than 1)", ""]
        lines += resnet18_lines(doc["cli_resnet18"], doc.get("peer"))
    if "layer_tasks" in doc:
        lines += ["## Per-task costs: ResNet convolutions as layer tasks", "",
                  "Each convolution (224x224 network input, synthetic int8, CONV2D+RESCALE+CLAMP; "
                  "benchmarks/_resnet18_layers.py) is one task, as `qsim simulate` makes it; serial = "
                  "the tasks one after another in this process, 2 workers = all of them on the warm "
                  "cluster. Bytes: the pickled task arguments (golden input, weights, expected output) "
                  "and the pickled result (a verified layer returns without its DRAM images).", "",
                  "| model | array | engine | layers | MACs | cycles | serial | 2 workers | speed-up | "
                  "s per GMAC | Mcycles/s | longest task | sent (total) | returned (total) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in doc["layer_tasks"]:
            longest = max(row["layers"], key=lambda r: r["seconds"])
            lines.append(
                f"| {row['model']} | {row['config']} | {row['engine']} | {len(row['layers'])} | "
                f"{row['total_macs'] / 1e9:.2f} G | {row['total_cycles']} | "
                f"{row['serial_s']:.1f} s | {row['two_workers_s']:.1f} s | "
                f"{row['serial_s'] / row['two_workers_s']:.2f}x | "
                f"{row['serial_s'] / (row['total_macs'] / 1e9):.2f} | "
                f"{row['total_cycles'] / row['serial_s'] / 1e6:.2f} | "
                f"{longest['seconds']:.2f} s ({longest['layer']}) | "
                f"{sum(r['bytes_sent'] for r in row['layers']) / 1e6:.1f} MB | "
                f"{sum(r['bytes_returned'] for r in row['layers']) / 1e6:.2f} MB |")
        lines.append("")
        lines += extrapolation(doc)
    return "\n".join(lines) + "\n"


NETWORK_BYTES_PER_S = 1e9           # assumed: 10 GbE between the command and the scheduler
WORKER_COUNTS = (1, 2, 16, 64, 256)


RESNET50_INPUTS = (224, 32)      # ImageNet-size, and CIFAR-size (the "at 32x32" read as the input)


def resnet50_name(input_size: int) -> str:
    return "ResNet-50" if input_size == 224 else f"ResNet-50 ({input_size}x{input_size} input)"


def extrapolation(doc: dict) -> list[str]:
    """A 1000-point sweep of ResNet-50 on a 32x32 array, at each input size of RESNET50_INPUTS
    whose per-task costs the run measured, from those costs (docs/scale.md explains the
    model). Measured: ResNet-50's cycles and model-engine time at 32x32, the verilator
    engine's cycle rate at 32x32 on ResNet-18, bytes per task, scheduler round trip, report
    rendering; extrapolated: everything for ResNet-50 on the verilator engine."""
    rows = {(r["model"], r["config"], r["engine"]): r for r in doc["layer_tasks"]}
    r18v = rows[("ResNet-18", "32x32", "verilator")]
    rate = r18v["total_cycles"] / r18v["serial_s"]                 # cycles/s, verilator, 32x32
    doc["extrapolation"] = {}
    lines = []
    for size in RESNET50_INPUTS:
        r50 = rows.get((resnet50_name(size), "32x32", "model"))
        if r50 is not None:
            doc["extrapolation"][f"{size}x{size} input"] = _extrapolated(doc, r50, rate, size)
            lines += _extrapolation_lines(doc["extrapolation"][f"{size}x{size} input"], r50, size)
    return lines


def _extrapolated(doc: dict, r50: dict, rate: float, size: int) -> dict:
    points = 1000
    tasks_per_point = len(r50["layers"])
    # A layer task's data (golden input, weights, expected output) is the same at every sweep
    # point, and a Dask pool sends it to each worker once (qsim.cluster.distributed, Task.shared):
    # the transfer grows with the workers, not with the points. Without the sharing it would be
    # `per_point` bytes for every point.
    per_point = sum(r["bytes_sent"] for r in r50["layers"])
    return {"points": points, "verilator_cycles_per_s_32x32": rate,
            "resnet50_cycles_32x32": r50["total_cycles"], "tasks_per_point": tasks_per_point,
            "verilator_point_s": r50["total_cycles"] / rate, "model_point_s": r50["serial_s"],
            "render_s_per_point": doc["sweep_parts"]["render_s_per_point"],
            "scheduler_s": doc["scheduler_overhead_s_per_task"] * tasks_per_point * points,
            "bytes_per_worker": per_point, "unshared_transfer_s": per_point * points / NETWORK_BYTES_PER_S}


def _extrapolation_lines(x: dict, r50: dict, size: int) -> list[str]:
    per_point, points = x["bytes_per_worker"], x["points"]
    lines = [f"## Extrapolated: a 1000-point sweep of ResNet-50 ({size}x{size} input) on a 32x32 array", "",
             f"Measured here: ResNet-50's 53 convolutions at a {size}x{size} input on the 32x32 array take "
             f"{x['resnet50_cycles_32x32']} cycles (model engine, {x['model_point_s']:.1f} s per point); the "
             f"verilator engine runs {x['verilator_cycles_per_s_32x32'] / 1e6:.2f} M cycles/s at 32x32 "
             f"(ResNet-18's convolutions). Extrapolated: {x['verilator_point_s']:.0f} s per point on the "
             f"verilator engine, {x['render_s_per_point']:.1f} s per point to render its report (the "
             f"embedded model's; more layers draw longer), {x['tasks_per_point']} layer tasks per point, "
             f"whose data (golden inputs, weights, expected outputs: {per_point / 1e6:.0f} MB) is the same "
             f"at every point and goes to each worker once ({_duration(per_point / NETWORK_BYTES_PER_S)} "
             f"per worker at an assumed {NETWORK_BYTES_PER_S / 1e9:.0f} GB/s from one sender; sent with "
             f"every point's tasks it would be {per_point * points / 1e9:.0f} GB, "
             f"{_duration(x['unshared_transfer_s'])}), scheduler round trips {_duration(x['scheduler_s'])} "
             "in total (serial in the scheduler). Builds, one per distinct array geometry, come on top "
             "(docs/scale.md). Wall time = the largest of the workers' share of the tasks, the "
             "scheduler's round trips and the transfer; the limiting one in parentheses.", "",
             "| workers | verilator engine | model engine |", "|---|---|---|"]
    for n in WORKER_COUNTS:
        cells = []
        for point_s in (x["verilator_point_s"], x["model_point_s"]):
            parts = {"simulation on the workers": points * (point_s + x["render_s_per_point"]) / n,
                     "scheduler": x["scheduler_s"], "golden data to the workers": n * per_point / NETWORK_BYTES_PER_S}
            limit = max(parts, key=parts.get)
            cells.append(f"{_duration(parts[limit])} ({limit})")
        lines.append(f"| {n} | {cells[0]} | {cells[1]} |")
    lines.append("")
    return lines


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.2g} s"


if __name__ == "__main__":
    sys.exit(main())
