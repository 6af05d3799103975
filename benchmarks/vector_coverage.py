"""Which unit runs every layer of the model matrix (issue 14): array, vector or host.

    python benchmarks/vector_coverage.py [--models resnet18,...] [--engine model|verilator]
                                         [--work DIR] [--out reports]

Per model: `qsim quantize` (default recipe, the 32 calibration samples benchmarks/models.py
caches in --models-dir) into --work (a folder already there is reused), then `qsim simulate`
(16x16, one input, the chosen engine) and, from its report: the layers per unit, the
operators still on the host other than the free RESHAPE/IDENTITY/CONST (with the stage's
reason), whether every layer is bit-exact with the kernels and ran on the RTL (`rtl`), the
cycles of the vector stages and the energy per inference. The trained encoder of
tests/quant/transformer (the encoder whose softmax and LayerNorm use INTDIV, CLZ and the
shifts) is always included.

Writes reports/vector_coverage.md and .json. Needs the cached ONNX exports and .npy samples of
benchmarks/models.py (--models-dir, default /tmp/qsim-bench-models); no torch at run time.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))     # this checkout's qsim, not another installed one

from qsim.atomic import atomic_write_text  # noqa: E402
from qsim.commands.quantize import quantize_to_folder  # noqa: E402
from qsim.commands.simulate import simulate_command  # noqa: E402
from qsim.errors import QsimError  # noqa: E402
from qsim.npu.engines import Engine  # noqa: E402
from qsim.quant.options import QuantizeOptions  # noqa: E402

MODELS = ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1", "shufflenet_v2", "mtcnn_rnet",
          "mtcnn_onet", "transformer_encoder")
FREE = ("RESHAPE", "IDENTITY", "CONST")
ENCODER = HERE.parent / "tests" / "quant" / "transformer"


def _files(name: str, models_dir: Path, work: Path) -> dict:
    if name == "trained_encoder":
        data = np.load(ENCODER / "encoder_calib.npz")["x"]
        work.mkdir(parents=True, exist_ok=True)
        np.save(work / "trained_encoder_x1.npy", data[:1])
        return {"model": ENCODER / "encoder_classifier.onnx", "calib": ENCODER / "encoder_calib.npz",
                "x1": work / "trained_encoder_x1.npy"}
    d = models_dir / name
    return {"model": d / f"{name}.onnx", "calib": d / "calib32.npy", "x1": d / "x1.npy"}


def run_one(name: str, args) -> dict:
    files = _files(name, Path(args.models_dir), Path(args.work))
    missing = [str(p) for p in files.values() if not Path(p).exists()]
    if missing:
        return {"model": name, "failed": {"stage": "files", "message": f"missing {', '.join(missing)}"}}
    folder = Path(args.work) / name / "int8"
    row = {"model": name, "seconds": {}}
    stage = "quantize"
    try:
        if not (folder / "main.sknd").exists():
            t0 = time.perf_counter()
            quantize_to_folder(str(files["model"]), str(files["calib"]), str(folder),
                               QuantizeOptions(show_progress=False))
            row["seconds"]["quantize"] = round(time.perf_counter() - t0, 1)
        stage = "simulate"
        t0 = time.perf_counter()
        sim = simulate_command(str(folder), "16x16", Engine.parse(args.engine), str(files["x1"]),
                               str(Path(args.work) / name / f"npu-{args.engine}"), show_progress=False, workers=1)
        row["seconds"]["simulate"] = round(time.perf_counter() - t0, 1)
    except QsimError as err:
        row["failed"] = {"stage": stage, "message": str(err).splitlines()[0]}
        return row
    report = sim.reports[0]
    layers = report.layers
    units = Counter(layer.unit for layer in layers)
    host = [{"layer": layer.name, "op": layer.op} for layer in layers if layer.unit == "host" and layer.op not in FREE]
    npu = [layer for layer in layers if layer.unit != "host"]
    row.update(layers=len(layers), units=dict(units), host_not_free=host,
               vector_ops=dict(Counter(op for layer in layers if layer.unit == "vector"
                                       for op in layer.op.split("+"))),
               all_npu_layers_rtl=all(layer.rtl for layer in npu), verified=sim.verified,
               cycles=report.total_cycles, vector_cycles=sum(layer.cycles for layer in layers if layer.unit == "vector"),
               energy_per_inference_nj=round(report.to_json()["energy_per_inference_pj"] / 1000, 1))
    return row


def _markdown(rows: list[dict], args, load: float) -> str:
    lines = ["# Which unit runs each layer (issue 14)", "",
             f"Written by `python benchmarks/vector_coverage.py --engine {args.engine}` on {os.cpu_count()} cores, "
             f"load average {load:.1f} at the end. Each model is quantized with the default recipe (32 "
             "calibration samples) and simulated on the 16x16 preset with one input. `host (not free)` lists "
             "layers on the host other than RESHAPE / IDENTITY / CONST; `RTL` says whether every array and "
             "vector layer's values and cycles came from the RTL engine (the model engine is the numpy cycle "
             "model, held equal to the RTL by tests/hw and tests/npu).", "",
             "| model | layers (array / vector / host) | host (not free) | RTL | all bit-exact | cycles | "
             "of which vector | energy per inference |",
             "|---|---|---|---|---|---:|---:|---:|"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['model']} | stopped at {r['failed']['stage']}: {r['failed']['message']} | | | | | | |")
            continue
        u = r["units"]
        host = ", ".join(f"{h['op']}" for h in r["host_not_free"]) or "none"
        lines.append(f"| {r['model']} | {r['layers']} ({u.get('array', 0)} / {u.get('vector', 0)} / "
                     f"{u.get('host', 0)}) | {host} | {'yes' if r['all_npu_layers_rtl'] else 'no'} | "
                     f"{'yes' if r['verified'] else 'NO'} | {r['cycles']:,} | {r['vector_cycles']:,} | "
                     f"{r['energy_per_inference_nj']:,} nJ |")
    lines += ["", "Vector-unit operators per model (a fused chain counts each of its operators):", ""]
    for r in rows:
        if "vector_ops" in r:
            ops = ", ".join(f"{k} {v}" for k, v in sorted(r["vector_ops"].items()))
            lines.append(f"- {r['model']}: {ops}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS + ("trained_encoder",)))
    parser.add_argument("--engine", default="model", choices=["model", "verilator", "amaranth"])
    parser.add_argument("--models-dir", default="/tmp/qsim-bench-models")
    parser.add_argument("--work", default="/tmp/qsim-vector-coverage")
    parser.add_argument("--out", default=str(HERE.parent / "reports"))
    args = parser.parse_args()
    rows = []
    for name in args.models.split(","):
        rows.append(run_one(name, args))
        print(json.dumps(rows[-1])[:300], flush=True)
    load = os.getloadavg()[0]
    suffix = "" if args.engine == "model" else f"_{args.engine}"
    out = Path(args.out)
    atomic_write_text(out / f"vector_coverage{suffix}.json", json.dumps(rows, indent=1) + "\n")
    atomic_write_text(out / f"vector_coverage{suffix}.md", _markdown(rows, args, load))


if __name__ == "__main__":
    main()
