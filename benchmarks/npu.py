"""NPU speed benchmark: ResNet-18's 20 convolutions and the embedded model, cycle-simulated
bit-exact, with SCALE-Sim's cycle counts for the same layers, array and dataflow.

    python benchmarks/npu.py [--config 16x16] [--scalesim compute|full|none] [--out reports]

Measures (wall-clock, this machine; medians over --repeat runs where repeated):
- ResNet-18 (224x224, seeded synthetic int8 data, benchmarks/_resnet18_layers.py) on the
  `model` engine (goal < 30 s) and on the `verilator` engine including the Verilog export
  and the Verilator build in a fresh cache (goal < 2 min); every layer's output is compared
  with qsim.tosa.run on the kernels backend (CONV2D -> RESCALE -> CLAMP), and the verilator
  engine's cycle count with the cycle model's (qsim/npu/engines.py checks every program).
- The embedded quantized model on the verilator engine, cold (export + build + run) and
  cached (goals < 60 s / < 10 s).
- SCALE-Sim (`pip install scalesim`, benchmark-only) compute cycles per layer, the issue's
  WS formula ceil(K/R) ceil(N/C) (2R+C+M-2) - 1, and the exact decomposition of qsim's
  difference to it (fill/drain of extra accumulator chunks, +2 per fold, requant tail,
  memory stalls). With --scalesim full also SCALE-Sim's memory-system run (slow).
Writes reports/npu.md, reports/npu.json and reports/npu_cycles.png.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _resnet18_layers import expected_outputs, resnet18_convs  # noqa: E402
import _resnet18_scalesim as scalesim_peer  # noqa: E402

from qsim.npu.config import load_config  # noqa: E402
from qsim.npu.layers import run_layer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run_resnet(geom, layers, data, expected, engine) -> tuple[list[dict], float]:
    rows, start = [], time.perf_counter()
    for layer, (x, conv, rescale, clamp), want in zip(layers, data, expected):
        t = time.perf_counter()
        result = run_layer(geom, "CONV2D", [x], conv, rescale, clamp, engine=engine,
                           name=layer.name)
        seconds = time.perf_counter() - t
        mismatches = int(np.count_nonzero(result.output != want))
        if mismatches:
            index = tuple(int(i) for i in np.argwhere(result.output != want)[0])
            raise SystemExit(f"{layer.name} on {engine}: {mismatches} outputs differ from the "
                             f"kernels, first at {index}: {int(result.output[index])} vs {int(want[index])}")
        rows.append({"layer": layer.name, "gemm_mkn": list(layer.gemm), "macs": layer.macs,
                     "cycles": result.cycles, "compute_cycles": result.compute_cycles,
                     "fill_drain_cycles": result.fill_drain_cycles, "stall_cycles": result.stall_cycles,
                     "utilization": result.utilization, "dram_bytes": result.dram_bytes,
                     "seconds": seconds, "verified": True})
    return rows, time.perf_counter() - start


def explain(geom, layer_rows, peer_rows) -> list[dict]:
    """qsim cycles - SCALE-Sim compute cycles, decomposed exactly.

    Streaming cycles agree (both stream every A row once per fold: nF * nN * M). qsim's
    COMPUTE takes 2R + C + M_chunk cycles (+3 requant on a group's last fold), SCALE-Sim's
    fold 2R + C + M - 2 and its total ends one cycle early (-1); qsim cuts M into chunks that
    fit half the accumulator buffer, each chunk paying the fill/drain again; and qsim counts
    the memory stalls its DMA schedule leaves (SCALE-Sim's compute model assumes none).
    """
    R, C = geom.rows, geom.cols
    out = []
    for ours, peer in zip(layer_rows, peer_rows):
        m, k, n = ours["gemm_mkn"]
        folds = math.ceil(k / R) * math.ceil(n / C)
        n_compute_x = ours["fill_drain_cycles"] * math.ceil(k / R)
        per = math.ceil(k / R) * (2 * R + C) + 3
        computes = n_compute_x // per if n_compute_x % per == 0 else None
        groups = computes // math.ceil(k / R) if computes is not None else None
        row = {"layer": ours["layer"], "scalesim_folds": folds, "qsim_computes": computes,
               "m_chunks": computes // folds if computes is not None else None,
               "qsim_cycles": ours["cycles"], "scalesim_compute_cycles": peer["compute_cycles"],
               "difference": ours["cycles"] - peer["compute_cycles"],
               "streaming_equal": ours["compute_cycles"] == folds * m}
        if computes is not None:
            row["extra_chunk_fill_drain"] = (computes - folds) * (2 * R + C)
            row["plus_two_per_fold"] = 2 * folds
            row["requant_tail"] = 3 * groups
            row["memory_stall"] = ours["stall_cycles"]
            row["scalesim_minus_one"] = 1
            parts = (row["extra_chunk_fill_drain"] + row["plus_two_per_fold"] + row["requant_tail"]
                     + row["memory_stall"] + row["scalesim_minus_one"])
            row["explained"] = parts == row["difference"] and row["streaming_equal"]
        else:
            row["explained"] = False
        out.append(row)
    return out


# -- embedded model ------------------------------------------------------------------------

def embedded_in_process(config) -> dict:
    """`qsim simulate`'s graph run (qsim.npu.simulate.simulate_one) of the embedded model on
    the verilator engine with the build already cached: the run itself, verified per stage."""
    from qsim.npu.engines import Engine
    from qsim.commands.quantized_model import default_input, load_npu_model
    from qsim.npu.simulate import simulate_one
    loaded = load_npu_model(None)
    feeds = default_input(loaded.model)
    start = time.perf_counter()
    run = simulate_one(loaded.model, feeds, config, Engine.VERILATOR, show_progress=False)
    seconds = time.perf_counter() - start
    if not run.verified:
        raise SystemExit(f"embedded model: {run.first_mismatch}")
    return {"run_seconds": seconds, "cycles": run.total_cycles, "stages": len(run.stages)}


def embedded_cli(config_name: str, cache: Path, out: Path) -> float:
    """Wall-clock of `qsim simulate --engine verilator` (embedded model, report written) in a
    fresh process with QSIM_CACHE_DIR=cache: what a user waits for."""
    import subprocess
    env = {**os.environ, "QSIM_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "qsim", "simulate", "--engine", "verilator",
                           "--config", config_name, "-o", str(out), "-q"],
                          env=env, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"qsim simulate failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


# -- main ----------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="16x16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1, help="model-engine repetitions (median)")
    parser.add_argument("--scalesim", choices=("compute", "full", "none"), default="compute",
                        help="SCALE-Sim's compute model on all layers; 'full' adds its memory-system "
                             "run on --full-layers (minutes per large layer)")
    parser.add_argument("--full-layers", default="layer2.0.downsample,layer3.0.downsample,"
                        "layer4.0.downsample",
                        help="comma-separated layers for --scalesim full, or 'all'")
    parser.add_argument("--no-verilator", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "reports"))
    args = parser.parse_args(argv)

    config = load_config(args.config)
    geom = config.geometry
    layers = resnet18_convs()
    results = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                           "load_average_1min": os.getloadavg()[0]},
               "config": {"name": config.name, "rows": config.rows, "cols": config.cols,
                          "dataflow": config.dataflow.value,
                          "dram_bytes_per_cycle": config.dram_bytes_per_cycle,
                          "input_buffer_bytes": config.input_buffer_bytes,
                          "weight_buffer_bytes": config.weight_buffer_bytes,
                          "accumulator_buffer_bytes": config.accumulator_buffer_bytes},
               "seed": args.seed}
    print(f"ResNet-18: {len(layers)} convolutions, {sum(l.macs for l in layers) / 1e9:.3f} GMAC, "
          f"{config.name} {config.dataflow.value}")
    data, expected, kernel_s = expected_outputs(layers, args.seed)
    print(f"  kernels (expected values): {kernel_s:.2f} s")

    model_times, model_rows = [], None
    for _ in range(max(1, args.repeat)):
        model_rows, seconds = run_resnet(geom, layers, data, expected, "model")
        model_times.append(seconds)
    model_s = statistics.median(model_times)
    total_cycles = sum(r["cycles"] for r in model_rows)
    print(f"  model engine: {model_s:.2f} s (median of {len(model_times)}), {total_cycles} cycles, "
          f"all 20 layers bit-exact")
    results["resnet18"] = {"layers": model_rows, "total_cycles": total_cycles,
                           "total_macs": sum(l.macs for l in layers), "kernels_seconds": kernel_s,
                           "model_seconds": model_s, "model_seconds_all": model_times}

    if not args.no_verilator:
        from qsim.hw.params import Units
        from qsim.npu import sim_verilator
        cache = Path(tempfile.mkdtemp(prefix="qsim-npubench-cache-"))
        old = os.environ.get("QSIM_CACHE_DIR")
        os.environ["QSIM_CACHE_DIR"] = str(cache)
        try:
            t = time.perf_counter()
            sim_verilator.cached_verilog(geom, Units.ARRAY)     # convolutions: the array side
            export_s = time.perf_counter() - t
            t = time.perf_counter()
            sim_verilator.build(geom, units=Units.ARRAY)
            build_s = time.perf_counter() - t
            print(f"  verilator: export {export_s:.1f} s, build {build_s:.1f} s (fresh cache)")
            v_rows, v_run_s = run_resnet(geom, layers, data, expected, "verilator")
            assert [r["cycles"] for r in v_rows] == [r["cycles"] for r in model_rows]
            rate = total_cycles / v_run_s
            print(f"  verilator engine: run {v_run_s:.1f} s ({rate / 1e3:.0f}k cycles/s), cold total "
                  f"{export_s + build_s + v_run_s:.1f} s, bit-exact, cycles equal the model's")
            emb = embedded_in_process(config)
            cli_cache = Path(tempfile.mkdtemp(prefix="qsim-npubench-cli-cache-"))
            try:
                cli_cold = embedded_cli(config.name, cli_cache, cli_cache / "out-cold")
                cli_cached = embedded_cli(config.name, cli_cache, cli_cache / "out-cached")
            finally:
                shutil.rmtree(cli_cache, ignore_errors=True)
            print(f"  embedded model, qsim simulate --engine verilator: cold {cli_cold:.1f} s (fresh "
                  f"process and cache: quantize, export, build, run, report), cached {cli_cached:.1f} s; "
                  f"graph run alone {emb['run_seconds']:.2f} s, {emb['cycles']} cycles, verified")
            results["resnet18"].update({"verilator_export_seconds": export_s,
                                        "verilator_build_seconds": build_s,
                                        "verilator_run_seconds": v_run_s,
                                        "verilator_cold_seconds": export_s + build_s + v_run_s,
                                        "verilator_cycles_per_second": rate})
            results["embedded"] = {"cli_cold_seconds": cli_cold, "cli_cached_seconds": cli_cached,
                                   "run_seconds": emb["run_seconds"], "cycles": emb["cycles"],
                                   "stages": emb["stages"],
                                   "path": "qsim simulate (qsim.npu.simulate), verilator engine"}
        finally:
            if old is None:
                os.environ.pop("QSIM_CACHE_DIR", None)
            else:
                os.environ["QSIM_CACHE_DIR"] = old
            shutil.rmtree(cache, ignore_errors=True)

    version = scalesim_peer.available()
    if args.scalesim != "none" and version is None:
        print("  SCALE-Sim not installed (pip install scalesim): no peer comparison")
    elif args.scalesim != "none":
        peer_rows, peer_s = scalesim_peer.compute_cycles(layers, config)
        for layer, peer in zip(layers, peer_rows):
            assert (peer["m"], peer["k"], peer["n"]) == layer.gemm, (layer.name, peer)
            assert peer["compute_cycles"] == peer["formula"], (layer.name, peer)
        explained = explain(geom, model_rows, peer_rows)
        peer_total = sum(p["compute_cycles"] for p in peer_rows)
        print(f"  SCALE-Sim {version} compute model: {peer_s:.1f} s, {peer_total} cycles "
              f"(= the WS formula on every layer); qsim / SCALE-Sim = {total_cycles / peer_total:.4f}")
        results["scalesim"] = {"version": version, "mode": "compute", "seconds": peer_s,
                               "layers": peer_rows, "total_compute_cycles": peer_total,
                               "ratio_qsim_to_scalesim": total_cycles / peer_total,
                               "explained": explained}
        if args.scalesim == "full":
            wanted = [l for l in layers if args.full_layers == "all" or l.name in args.full_layers.split(",")]
            full_rows, full_s = scalesim_peer.full_run(wanted, config)
            for layer, row in zip(wanted, full_rows):
                row["layer"] = layer.name
            results["scalesim"]["full"] = {"seconds": full_s, "layers": full_rows}
            print(f"  SCALE-Sim full run (memory system) on {len(wanted)} layers: {full_s:.0f} s")
        for row in explained:
            if not row["explained"]:
                print(f"  WARNING: {row['layer']}: difference {row['difference']} not fully explained")

    from _resnet18_report import write_report
    paths = write_report(results, Path(args.out))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
