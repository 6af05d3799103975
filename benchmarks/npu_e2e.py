"""Whole models on the RTL: ResNet-18 (every layer: convolutions, max pooling, residual ADDs,
average pooling, FC) and the embedded model, `qsim simulate` on the verilator engine with the
vector unit, cold (fresh build cache: Verilog export + Verilator build + run) and warm.

    python benchmarks/npu_e2e.py [--config 16x16] [--out reports]

ResNet-18: torchvision's architecture with seeded random weights (benchmarks/_resnet18_onnx.py,
ONNX -> nnef-tools -> NNEF 1.0), quantized by `qsim quantize` with 4 seeded random
calibration images (not timed), simulated on one seeded random image. Each `qsim simulate`
runs as a child process (`--workers 1`, so the numbers are one process's; ResNet-18 cold also
with the default workers, one Dask worker per core, the wall-clock goal's setting); wall clock and CPU
time (user + system of the child and its children: the C++ compiler of a cold build) are
measured. Verilator simulation speed: cycles per CPU second of the array and vector programs
alone, measured in this process on the warm build (engine time only, no golden values, no
report), each program on the NPU side it uses and, in the same run, on the whole NPU (A/B).
Writes reports/npu_e2e.md and reports/npu_e2e.json.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

WORK = Path(os.environ.get("QSIM_BENCH_WORK", "/tmp/qsim-npu-e2e"))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], env: dict) -> dict:
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def resnet18_quantized() -> tuple[Path, Path]:
    import _resnet18_onnx as r18
    _, nnef_dir = r18.build(WORK)
    rng = np.random.default_rng(0)
    calib, image = WORK / "calib.npy", WORK / "input.npy"
    if not calib.exists():
        np.save(calib, rng.standard_normal((4, 3, 224, 224)).astype(np.float32))
        np.save(image, rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    qmodel = WORK / "resnet18-int8"
    if not (qmodel / "main.sknd").exists():
        subprocess.run([sys.executable, "-m", "qsim", "quantize", str(nnef_dir), "--calib", str(calib),
                        "-o", str(qmodel), "-q"], check=True)
    return qmodel, image


def simulate(model: list[str], config: str, cache: Path, out: Path, workers: str = "1") -> dict:
    env = dict(os.environ, QSIM_CACHE_DIR=str(cache))
    result = timed([sys.executable, "-m", "qsim", "simulate", *model, "--engine", "verilator",
                    "--config", config, *(["--workers", workers] if workers else []), "-q", "-o", str(out)], env)
    report = json.loads((out / "report.json").read_text())
    result.update(total_cycles=report["total_cycles"], all_verified=report["all_verified"],
                  layers=len(report["layers"]),
                  units={u: sum(1 for layer in report["layers"] if layer["unit"] == u)
                         for u in ("array", "vector", "host")},
                  rtl_layers=sum(1 for layer in report["layers"] if layer["rtl"]),
                  vector_cycles=sum(layer["cycles"] for layer in report["layers"] if layer["unit"] == "vector"))
    return result


def engine_speed(qmodel: Path, image: Path, config: str, whole: bool = False) -> dict:
    """Cycles per CPU second of the verilator engine alone (warm build), per unit; `whole`:
    every program on the whole NPU (array and vector unit in one model, as before the engine
    ran each program on the side it uses), for the A/B comparison."""
    from qsim.hw.params import Units
    from qsim.npu import sim_verilator
    from qsim.npu.config import load_config
    from qsim.commands.quantized_model import load_npu_model, read_inputs
    from qsim.npu.program import Unit, prepare_run, run_array_stage
    model = load_npu_model(str(qmodel)).model
    feeds, _ = read_inputs(model, [str(image)])
    cfg = load_config(config)
    prepared = prepare_run(model.graph, feeds, cfg, engine="verilator")
    stages = [s for s in prepared.stages if s.unit is not Unit.HOST]
    chosen = sim_verilator.program_units
    if whole:
        sim_verilator.program_units = lambda geom, instrs: Units.ALL
    try:
        return _time_stages(prepared, stages, Unit, run_array_stage)
    finally:
        sim_verilator.program_units = chosen


def _time_stages(prepared, stages, Unit, run_array_stage) -> dict:
    out = {}
    for unit in (Unit.ARRAY, Unit.VECTOR):
        cpu, cycles = 0.0, 0
        for task, stage in zip(prepared.tasks, stages):
            if stage.unit is not unit:
                continue
            t0 = time.process_time()
            run = task.fn(*task.args)
            cpu += time.process_time() - t0
            cycles += run.cycles if task.fn is run_array_stage else run.stats.total_cycles
        out[unit.value] = {"cycles": cycles, "cpu_s": round(cpu, 2),
                           "cycles_per_cpu_s": int(cycles / cpu) if cpu else None}
    return out


def markdown(data: dict) -> str:
    lines = ["# Whole models on the RTL (verilator engine, vector unit included)", "",
             f"Written by `python benchmarks/npu_e2e.py` on {data['machine']}; `qsim simulate --engine "
             f"verilator --config {data['config']} --workers 1` (the last row: the default, one Dask worker per core), every layer checked bit-exact against "
             "the kernels. Cold = a fresh build cache (Verilog export + Verilator build + run); CPU = "
             "user + system of the command and its children (the C++ compiler).", "",
             "| run | layers (array / vector / host) | RTL layers | cycles | of which vector | wall | CPU | all bit-exact |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for name, r in data["runs"].items():
        u = r["units"]
        lines.append(f"| {name} | {r['layers']} ({u['array']} / {u['vector']} / {u['host']}) | {r['rtl_layers']} | "
                     f"{r['total_cycles']:,} | {r['vector_cycles']:,} | {r['wall_s']} s | {r['cpu_s']} s | "
                     f"{'yes' if r['all_verified'] else 'NO'} |")
    lines += ["", "Verilator simulation speed of the ResNet-18 programs (warm build, engine time only), each "
              "program on the NPU side it uses (the engine's default) and, in the same run, on the whole "
              "NPU:", "",
              "| unit | cycles | model | CPU | cycles per CPU second |", "|---|---:|---|---:|---:|"]
    for model, speed in (("one side", data["speed"]), ("whole NPU", data.get("speed_whole", {}))):
        for unit, s in speed.items():
            lines.append(f"| {unit} | {s['cycles']:,} | {model} | {s['cpu_s']} s | {s['cycles_per_cpu_s']:,} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="16x16")
    parser.add_argument("--out", default="reports")
    args = parser.parse_args(argv)
    qmodel, image = resnet18_quantized()
    runs = {}
    r18 = [str(qmodel), "--input", str(image)]
    for name, model, cold, workers in (("embedded, cold", [], True, "1"), ("embedded, warm", [], False, "1"),
                                       ("ResNet-18, cold", r18, True, "1"), ("ResNet-18, warm", r18, False, "1"),
                                       ("ResNet-18, cold, default workers", r18, True, None)):
        cache = WORK / "cache"
        if cold:
            shutil.rmtree(cache, ignore_errors=True)
        runs[name] = simulate(model, args.config, cache, WORK / "out" / name.replace(", ", "-").replace(" ", "-"),
                              workers)
        print(name, runs[name], flush=True)
    os.environ["QSIM_CACHE_DIR"] = str(WORK / "cache")
    speed = engine_speed(qmodel, image, args.config)
    speed_whole = engine_speed(qmodel, image, args.config, whole=True)
    data = {"config": args.config, "machine": f"{os.cpu_count()} cores, load average "
            f"{os.getloadavg()[0]:.1f} at the end", "runs": runs, "speed": speed, "speed_whole": speed_whole}
    out = Path(args.out)
    (out / "npu_e2e.json").write_text(json.dumps(data, indent=1) + "\n")
    (out / "npu_e2e.md").write_text(markdown(data))
    print(markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
