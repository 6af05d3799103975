"""What the plots of `qsim simulate` cost for deep networks, and how large they are.

1. Synthetic reports of 70, 500 and 5,000 layers (built here: array and vector layers with
   spread-out cycles and energies): the time to render each plot part
   (qsim.report.throughput.render_part) and each PNG's size in pixels.
2. A real simulate of a generated 500-stage network: an ONNX chain of 250 blocks (3x3
   convolution 16->16 channels on 16x16 or 32x32 + ReLU, then a residual Add), quantized with
   `qsim quantize`, run with `qsim simulate --workers 1` in this process (RUNS: engine and
   size); the plotting's share of the command's wall and CPU time. Tiny layers are the worst
   case for that share: the plots cost the same whatever the layers' sizes.

    python benchmarks/plot_scale.py [--blocks 250] [--out reports/plot_scale]

Prints one line per measurement and writes reports/plot_scale.json and .md; the four PNGs of
the 500-stage simulate go to --out, for looking at.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# --tree DIR: time another checkout's plotting (e.g. the code before a change); its reports
# module must have render_part and PARTS
TREE = Path(sys.argv[sys.argv.index("--tree") + 1]) if "--tree" in sys.argv else ROOT
sys.path.insert(0, str(TREE))

from qsim.report import throughput  # noqa: E402
from qsim.report.throughput import LayerThroughput, ThroughputReport, render_part  # noqa: E402


C = 16                  # channels of the generated network's tensors
RUNS = (("model", 16), ("model", 32), ("verilator", 32))     # (engine, height = width of the tensors)


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    return struct.unpack(">II", data[16:24])


def synthetic_report(layers: int, seed: int = 0) -> ThroughputReport:
    rng = random.Random(seed)
    records = []
    for i in range(layers):
        array = i % 2 == 0
        compute = int(rng.lognormvariate(9, 1.2))
        macs = compute * rng.randint(32, 256) if array else 0
        records.append(LayerThroughput(
            name=f"block{i // 2}/{'conv' if array else 'add'}_{i}", op="CONV2D+RESCALE+CLAMP" if array else "ADD",
            unit="array" if array else "vector", macs=macs, compute_cycles=compute,
            fill_drain_cycles=rng.randint(20, 400), stall_cycles=rng.randint(0, compute // 3 + 1),
            mapping_efficiency=rng.random(), dram_input_bytes=rng.randint(256, 65536),
            dram_weight_bytes=rng.randint(0, 65536) if array else 0, dram_output_bytes=rng.randint(256, 65536),
            verified=True, rtl=False,
            energy_by_component_pj={"mac": macs * 0.2, "dram": rng.uniform(1e3, 1e6), "vector": 0.0 if array else 5e3}))
    return ThroughputReport(model=f"synthetic-{layers}", engine="model",
                            config={"name": "16x16", "rows": 16, "cols": 16, "dataflow": "ws",
                                    "clock_mhz": 500.0, "dram_bytes_per_cycle": 16},
                            layers=tuple(records), tech={"name": "45nm"})


def time_plots(report: ThroughputReport) -> dict:
    row = {"layers": len(report.layers), "plots": {}}
    for part in throughput.PARTS[1:]:
        start = time.perf_counter()
        data = render_part(report, part)[part]
        row["plots"][part] = {"seconds": round(time.perf_counter() - start, 3), "px": list(png_size(data))}
    row["seconds"] = round(sum(p["seconds"] for p in row["plots"].values()), 3)
    return row


def deep_onnx(path: Path, blocks: int, hw: int, seed: int = 0) -> None:
    import onnx   # deferred: benchmark-only dependency
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "input"
    for b in range(blocks):
        w = numpy_helper.from_array((rng.standard_normal((C, C, 3, 3)) * 0.01).astype(np.float32), f"w{b}")
        bias = numpy_helper.from_array((rng.standard_normal(C) * 0.05).astype(np.float32), f"b{b}")
        inits += [w, bias]
        nodes += [helper.make_node("Conv", [x, f"w{b}", f"b{b}"], [f"c{b}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{b}"], [f"r{b}"]),
                  helper.make_node("Add", [f"r{b}", x], [f"y{b}"])]
        x = f"y{b}"
    graph = helper.make_graph(nodes, "deep", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, C, hw, hw])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, C, hw, hw])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children."""
    import resource
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def simulate_share(blocks: int, hw: int, out: Path, engine: str) -> dict:
    from qsim.commands import simulate
    from qsim.npu.engines import Engine
    work = Path(tempfile.gettempdir()) / f"plot-scale-{blocks}-{hw}"
    quantize_s = 0.0
    if not (work / "deep-int8").is_dir():           # made once, reused by the next engine
        work.mkdir(exist_ok=True)
        deep_onnx(work / "deep.onnx", blocks, hw)
        rng = np.random.default_rng(1)
        np.save(work / "calib.npy", rng.standard_normal((8, C, hw, hw)).astype(np.float32))
        np.save(work / "x.npy", rng.standard_normal((1, C, hw, hw)).astype(np.float32))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "qsim", "quantize", str(work / "deep.onnx"), "--calib",
                        str(work / "calib.npy"), "-o", str(work / "deep-int8"), "-q"], check=True, cwd=ROOT)
        quantize_s = time.perf_counter() - start
    report_dir = work / f"report-{engine}"
    if report_dir.exists():
        import shutil
        shutil.rmtree(report_dir)
    # the report's writing (plots, JSON, CSV, HTML) as the command does it: its plots may be
    # drawn half in a forked child (qsim.report.forked), whose CPU time counts once it is reaped
    writing = []
    original = simulate.write_throughput_report

    def timed(report, folder):
        begin, cpu = time.perf_counter(), _cpu()
        try:
            return original(report, folder)
        finally:
            writing.append((time.perf_counter() - begin, _cpu() - cpu))
    simulate.write_throughput_report = timed
    try:
        start, cpu = time.perf_counter(), _cpu()
        result = simulate.simulate_command(str(work / "deep-int8"), "16x16", Engine.parse(engine),
                                           str(work / "x.npy"), str(report_dir), show_progress=False, workers=1)
        wall, cpu = time.perf_counter() - start, _cpu() - cpu
    finally:
        simulate.write_throughput_report = original
    (plot_s, plot_cpu_s), = writing
    report = result.reports[0]
    out.mkdir(parents=True, exist_ok=True)
    for png in report_dir.glob("*.png"):
        (out / png.name).write_bytes(png.read_bytes())
    return {"engine": engine, "blocks": blocks, "hw": hw, "stages": len(report.layers), "quantize_s": round(quantize_s, 1),
            "simulate_s": round(wall, 2), "plot_s": round(plot_s, 2), "plot_share": round(plot_s / wall, 3),
            "simulate_cpu_s": round(cpu, 2), "plot_cpu_s": round(plot_cpu_s, 2),
            "plot_cpu_share": round(plot_cpu_s / cpu, 3), "verified": result.verified,
            "px": {p.name: list(png_size(p.read_bytes())) for p in sorted(out.glob("*.png"))}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=250)
    parser.add_argument("--out", default=str(ROOT / "reports" / "plot_scale"))
    parser.add_argument("--synthetic-only", action="store_true")
    parser.add_argument("--tree", default=str(ROOT), help="the qsim checkout to time (default: this one)")
    args = parser.parse_args()
    results = {"synthetic": [], "simulate": []}
    for layers in (70, 500) if TREE != ROOT else (70, 500, 5000):
        row = time_plots(synthetic_report(layers))
        results["synthetic"].append(row)
        print(f"synthetic {layers:>5} layers: plots {row['seconds']:.2f} s, "
              + ", ".join(f"{k} {v['px'][0]}x{v['px'][1]} px {v['seconds']:.2f} s" for k, v in row["plots"].items()))
    for engine, hw in () if args.synthetic_only else RUNS:
        sim = simulate_share(args.blocks, hw, Path(args.out), engine)
        results["simulate"].append(sim)
        print(f"simulate ({engine}) of {sim['stages']} stages: {sim['simulate_s']:.1f} s wall, report {sim['plot_s']:.2f} s "
              f"({100 * sim['plot_share']:.1f} %); CPU {sim['simulate_cpu_s']:.1f} s, report {sim['plot_cpu_s']:.2f} s "
              f"({100 * sim['plot_cpu_share']:.1f} %); verified {sim['verified']}")
    results.update(load_average=round(os.getloadavg()[0], 2), cores=os.cpu_count())
    if TREE != ROOT:
        (ROOT / "reports" / "plot_scale_before.json").write_text(json.dumps(results, indent=2) + "\n")
    else:
        (ROOT / "reports" / "plot_scale.json").write_text(json.dumps(results, indent=2) + "\n")
        (ROOT / "reports" / "plot_scale.md").write_text(markdown(results))


def markdown(results: dict) -> str:
    """reports/plot_scale.md from the results."""
    lines = ["# Plot cost at depth (`python benchmarks/plot_scale.py`)", "",
             "Synthetic reports (array and vector layers, spread-out cycles): the four plots' render "
             "time and size (\"before\": the same reports drawn by the code before the change, "
             "`--tree OLD_CHECKOUT --synthetic-only`).", "", "| layers | plots (s) | cycles.png | utilization.png | roofline.png | energy.png |",
             "|---|---|---|---|---|---|"]
    before = ROOT / "reports" / "plot_scale_before.json"
    rows = [("", row) for row in results["synthetic"]]
    if before.exists():
        rows += [("before: ", row) for row in json.loads(before.read_text())["synthetic"]]
    for what, row in rows:
        cells = [f"{v['px'][0]}x{v['px'][1]} px, {v['seconds']:.2f} s" for v in row["plots"].values()]
        lines.append(f"| {what}{row['layers']} | {row['seconds']:.2f} | " + " | ".join(cells) + " |")
    for sim in results["simulate"]:
        lines += ["", f"`qsim simulate --engine {sim['engine']} --workers 1` of a generated network of {sim['blocks']} "
                  f"residual conv blocks ({C} channels, {sim['hw']}x{sim['hw']}; {sim['stages']} NPU stages), in process: "
                  f"{sim['simulate_s']:.1f} s wall, of which writing the report (the four plots, "
                  f"JSON, CSV, HTML) {sim['plot_s']:.2f} s "
                  f"({100 * sim['plot_share']:.1f} %); CPU {sim['simulate_cpu_s']:.1f} s, of which the report "
                  f"{sim['plot_cpu_s']:.2f} s ({100 * sim['plot_cpu_share']:.1f} %; matplotlib is imported "
                  f"in the background while the layers run); every stage "
                  f"verified: {sim['verified']}. PNG sizes: "
                  + ", ".join(f"{k} {v[0]}x{v[1]}" for k, v in sim["px"].items()) + "."]
    if results["simulate"]:
        lines += ["", f"Load average at the end: {results['load_average']:.1f} on {results['cores']} cores (the "
                  "machine is shared; a command's wall time is then several times its CPU time). The "
                  "four plots cost about the same whatever the layers' number (past 40) and size, so "
                  "their share is largest where the simulation is cheapest: the model engine on "
                  "layers of 4-16 KB. With `--workers 1` on two or more cores the report's parts are "
                  "drawn half in a forked child (qsim.report.forked), which shortens the wall time "
                  "only when a core is free."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
