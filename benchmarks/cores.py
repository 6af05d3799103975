"""Several NPU cores on ResNet-18 (config key `cores`, qsim/npu/cores/): cores = 1, 2, 4 on the
model engine and on the verilator engine (RTL), every stage verified bit-exact against the
kernels, the RTL's cycles checked equal to the cycle model's core by core (run_round raises
otherwise) and stage by stage here; cycles in total and per core, arbitration waits, energy per
core and the arbiter's (45 nm table). Writes reports/cores.md, reports/cores.json and
reports/cores.png.

    PYTHONPATH=. python benchmarks/cores.py [--config 16x16] [--engines model,verilator] [--size 224]

ResNet-18: torchvision's architecture with seeded random weights (benchmarks/_resnet18_onnx.py,
ONNX -> nnef-tools -> NNEF 1.0), quantized by `qsim quantize` with 4 seeded random calibration
images, simulated on one seeded random image (the model of benchmarks/npu_e2e.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from qsim.commands.quantized_model import load_npu_model, read_inputs  # noqa: E402
from qsim.npu.config import load_config  # noqa: E402
from qsim.npu.energy import energy_by_component, load_tech  # noqa: E402
from qsim.npu.program import run_graph_on_npu  # noqa: E402
from qsim.runtime.executor import execute  # noqa: E402

CORES = (1, 2, 4)


def measure(graph, feeds, expected, config, engine: str, table) -> dict:
    start = time.perf_counter()
    run = run_graph_on_npu(graph, feeds, config, engine, expected)
    seconds = time.perf_counter() - start
    geom = config.geometry
    array = [s for s in run.stages if s.layer is not None]
    n = config.cores
    per_core = [sum(s.layer.core_cycles[k] if s.layer.core_cycles else s.cycles for s in array) for k in range(n)]
    waits = [sum(s.layer.arbitration_cycles[k] for s in array if s.layer.arbitration_cycles) for k in range(n)]
    core_pj = [sum(sum(energy_by_component(s.layer.core_events[k], table, geom).values()) for s in array
                   if s.layer.core_events) for k in range(n)] if n > 1 else \
        [sum(sum(energy_by_component(s.events, table, geom).values()) for s in array)]
    parts = {}
    for s in run.stages:
        for key, pj in energy_by_component(s.events, table, geom).items():
            parts[key] = parts.get(key, 0.0) + pj
    return {"cores": n, "engine": engine, "verified": run.verified, "total_cycles": run.total_cycles,
            "stage_cycles": [s.cycles for s in run.stages],
            "array_cycles": sum(s.cycles for s in array), "other_cycles": run.total_cycles - sum(s.cycles for s in array),
            "core_cycles": per_core, "arbitration_cycles": waits, "core_array_energy_uj": [e / 1e6 for e in core_pj],
            "energy_uj": sum(parts.values()) / 1e6, "arbiter_energy_uj": parts.get("arbiter", 0.0) / 1e6,
            "dram_bytes": sum(s.dram_input_bytes + s.dram_weight_bytes + s.dram_output_bytes for s in run.stages),
            "seconds": round(seconds, 1),
            "outputs": {s.stage.name: s.output for s in run.stages}}


def plot(rows: list[dict], path: Path) -> None:
    """Left: speed-up over one core per DRAM bandwidth (model engine); right: each core's
    array-layer cycles with its waits for the port on top, at each bandwidth and N."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    model = [r for r in rows if r["engine"] == "model"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    groups = sorted({(r["config"], r["bandwidth"]) for r in model})
    for config, bandwidth in groups:
        series = [r for r in model if (r["config"], r["bandwidth"]) == (config, bandwidth)]
        n = [r["cores"] for r in series]
        left.plot(n, [series[0]["total_cycles"] / r["total_cycles"] for r in series], "o-",
                  label=f"{config}, {bandwidth} B/cycle: network")
        left.plot(n, [series[0]["array_cycles"] / r["array_cycles"] for r in series], "s--",
                  label=f"{config}, {bandwidth} B/cycle: array layers")
    left.plot(CORES, CORES, ":", color="grey", label="ideal (N)")
    left.set_xlabel("cores N")
    left.set_ylabel("speed-up over one core (same bandwidth)")
    left.set_xticks(CORES)
    left.set_title("ResNet-18, N cores sharing one DRAM port")
    left.legend(fontsize=8)
    width, labels = 0.8 / max(CORES), []
    for i, r in enumerate(model):
        labels.append(f"{r['config']}\n{r['bandwidth']} B\nN={r['cores']}")
        for k, cycles in enumerate(r["core_cycles"]):
            x, busy = i + (k - (r["cores"] - 1) / 2) * width, cycles - r["arbitration_cycles"][k]
            right.bar(x, busy / 1e6, width * 0.9, color="tab:blue", label="running" if (i, k) == (0, 0) else None)
            right.bar(x, r["arbitration_cycles"][k] / 1e6, width * 0.9, bottom=busy / 1e6, color="tab:red",
                      label="waiting for the DRAM port" if (i, k) == (1, 0) else None)
        right.hlines(r["array_cycles"] / 1e6, i - 0.45, i + 0.45, color="black",
                     label="array layers (slowest core per round)" if i == 0 else None)
    right.set_xticks(range(len(model)), labels, fontsize=8)
    right.set_ylabel("array-layer cycles per core (millions)")
    right.set_title("each core's cycles, arbitration waits on top")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _merge_earlier(path: Path, rows: list[dict]) -> list[dict]:
    """The rows of earlier runs of this script for the configurations, engines and bandwidths
    not run now, then these, model first: each can be measured in a run of its own."""
    runs = {(r["config"], r["engine"], r["bandwidth"]) for r in rows}
    earlier = []
    if path.exists():
        doc = json.loads(path.read_text())
        earlier = [dict(r, bandwidth=r.get("bandwidth", 16), config=r.get("config", doc.get("config")))
                   for r in doc["rows"]]
        earlier = [r for r in earlier if (r["config"], r["engine"], r["bandwidth"]) not in runs]
    return sorted(earlier + rows, key=lambda r: (r["engine"] != "model", r["engine"], r["config"],
                                                 r["bandwidth"], r["cores"]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="16x16")
    parser.add_argument("--engines", default="model,verilator")
    parser.add_argument("--out", default="reports")
    parser.add_argument("--bandwidths", default="",
                        help="dram_bytes_per_cycle values to run (default: the configuration's)")
    args = parser.parse_args()
    from npu_e2e import resnet18_quantized
    qmodel, image = resnet18_quantized()
    loaded = load_npu_model(str(qmodel))
    feeds, _ = read_inputs(loaded.model, [str(image)])
    graph = loaded.model.graph
    expected = execute(graph, feeds, backend="kernels")
    base, table = load_config(args.config), load_tech("45nm")
    rows = []
    bandwidths = [int(b) for b in args.bandwidths.split(",") if b] or [base.dram_bytes_per_cycle]
    for engine in args.engines.split(","):
        for bandwidth in bandwidths:
            for n in CORES:
                config = dataclasses.replace(base, cores=n, dram_bytes_per_cycle=bandwidth)
                row = measure(graph, feeds, expected, config, engine, table)
                row["bandwidth"], row["config"] = bandwidth, base.name
                rows.append(row)
                print(f"{engine} B={bandwidth} cores={n}: {row['total_cycles']:,} cycles, verified "
                      f"{row['verified']}, {row['seconds']} s", flush=True)
    single = {(r["engine"], r["bandwidth"]): r for r in rows if r["cores"] == 1}
    for r in rows:      # bit-exact with the single-core run of the same engine
        r["bit_exact_with_one_core"] = all(np.array_equal(v, single[r["engine"], r["bandwidth"]]["outputs"][k])
                                           for k, v in r["outputs"].items())
    for r in rows:
        del r["outputs"]
    out = Path(args.out)
    rows = _merge_earlier(out / "cores.json", rows)
    for r in rows:      # the RTL's cycles the model's, stage by stage and core by core
        model = next((m for m in rows if m["engine"] == "model" and m["cores"] == r["cores"]
                      and m["bandwidth"] == r["bandwidth"] and m["config"] == r["config"]), None)
        r["cycles_equal_model"] = model is not None and (r["stage_cycles"], r["core_cycles"]) == \
            (model["stage_cycles"], model["core_cycles"])
    single = {(r["config"], r["engine"], r["bandwidth"]): r for r in rows if r["cores"] == 1}
    plot(rows, out / "cores.png")
    (out / "cores.json").write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    lines = ["# Several cores on ResNet-18 (one shared DRAM port)", "",
             "Written by `PYTHONPATH=. python benchmarks/cores.py --config CFG [--engines ...] [--bandwidths ...]` "
             f"(one run per configuration, engine and bandwidth set, merged) on {platform.processor() or platform.machine()} "
             "(2 CPU cores shared with other jobs; the times are wall clock under that load). ResNet-18 at "
             "224x224 (benchmarks/_resnet18_onnx.py, seeded random weights, quantized with 4 random "
             "calibration images), one random image. Every stage is checked bit-exact against the kernels "
             "(`verified`), every layer's output against the one-core run, and every RTL stage's and core's "
             "cycles against the cycle model. DRAM: the ideal memory at "
             "B bytes/cycle (the table's second column), shared: one DMA instruction owns the port at a time "
             "(round-robin arbiter, docs/npu.md, Several cores).", "",
             "| engine | cores of | B/cycle | N | total cycles | speed-up | array-layer cycles | other stages | cycles per core (array layers) "
             "| waits for the port per core | energy (uJ) | of it arbiter (uJ) | DRAM bytes | verified | = one core | cycles = model | run time |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---|---|---|---:|"]
    for r in rows:
        s = single[r["config"], r["engine"], r["bandwidth"]]
        lines.append(f"| {r['engine']} | {r['config']} | {r['bandwidth']} | {r['cores']} | {r['total_cycles']:,} | {s['total_cycles'] / r['total_cycles']:.2f}x | "
                     f"{r['array_cycles']:,} | {r['other_cycles']:,} | {' / '.join(f'{c:,}' for c in r['core_cycles'])} | "
                     f"{' / '.join(f'{c:,}' for c in r['arbitration_cycles'])} | {r['energy_uj']:.1f} | "
                     f"{r['arbiter_energy_uj']:.3f} | {r['dram_bytes']:,} | {'yes' if r['verified'] else 'NO'} | "
                     f"{'yes' if r['bit_exact_with_one_core'] else 'NO'} | {'yes' if r['cycles_equal_model'] else 'NO'} | "
                     f"{r['seconds']} s |")
    lines += ["", "Energy per core (array layers, uJ): " + "; ".join(
        f"{r['engine']} {r['config']} B={r['bandwidth']} N={r['cores']}: {' / '.join(f'{e:.1f}' for e in r['core_array_energy_uj'])}" for r in rows), "",
        "![speed-up and per-core cycles](cores.png)", ""]
    (out / "cores.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
