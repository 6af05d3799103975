"""Mixed precision with an accuracy target on real-size networks: a per-layer int8 / 16x8 plan
that meets an output-SQNR target which all-int8 misses, at an NPU cost below all-16x8, and
simulates verified.

    python benchmarks/mixed_precision.py [--models squeezenet1_1,mobilenet_v2,...] [--calib 32]
                                          [--eval 32] [--fraction 0.5] [--cost cycles|energy]
                                          [--config 16x16] [--work DIR] [--out reports]

Per model (benchmarks/_architectures.py, the inputs of benchmarks/models.py):
1. `qsim quantize --precision int8` and `--precision 16x8` (the default recipe otherwise): the
   output SQNR of each (the lowest over the outputs) on the evaluation inputs;
2. the target: all-int8's SQNR + FRACTION x (all-16x8's - all-int8's), rounded up to 0.1 dB
   (so all-int8 misses it and all-16x8 meets it: the plan has something to choose);
3. `qsim quantize --target-sqnr TARGET --config CFG --cost COST`: the plan, the SQNR reached
   (the pipeline's own evaluation of the written model), its NPU cost against all-int8 and
   all-16x8 (report.json "precision_plan");
4. `qsim simulate` of the written plan on the NPU's cycle model: every layer bit-exact.
Writes reports/mixed_precision.md and .json (models not run keep their previous rows). Needs
the benchmark packages of benchmarks/models.py (torch, onnx, scikit-image, scikit-learn;
facenet-pytorch for MTCNN). Times depend on the machine's load (recorded), never asserted.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))     # this checkout's qsim

from qsim.commands.precision_search import PlanRequest  # noqa: E402
from qsim.commands.quantize import quantize_to_folder  # noqa: E402
from qsim.commands.simulate import simulate_command  # noqa: E402
from qsim.errors import QsimError  # noqa: E402
from qsim.npu.engines import Engine  # noqa: E402
from qsim.quant.options import QuantizeOptions  # noqa: E402
from qsim.quant.params import Precision  # noqa: E402
from qsim.quant.precision_plan.scoring import AccuracyTarget  # noqa: E402

from _architectures import ARCHITECTURES  # noqa: E402
from _rows import merged_rows, read_previous, run_header, with_kept_sections, write_report  # noqa: E402
from models import prepare  # noqa: E402

DEFAULT_MODELS = ("squeezenet1_1", "transformer_encoder", "mtcnn_onet", "mobilenet_v2")


def lowest_sqnr(result) -> float:
    return min(o.sqnr_db for o in result.report.outputs)


def run_model(name: str, args) -> dict:
    row = {"model": name, "weights": ARCHITECTURES[name].weights, "run": run_header()}
    stage = "export"
    try:
        files = prepare(name, Path(args.work), args.calib, args.eval)
        folder = Path(args.work) / name
        seconds = {}
        base = {}
        for precision in Precision:
            stage = f"quantize {precision.value}"
            t0 = time.perf_counter()
            r = quantize_to_folder(str(files["model"]), str(files["calib"]), str(folder / precision.value),
                                   QuantizeOptions(precision=precision, show_progress=False),
                                   evaluation=str(files["eval"]))
            seconds[precision.value] = round(time.perf_counter() - t0, 1)
            base[precision.value] = lowest_sqnr(r)
        a8, a16 = base["int8"], base["16x8"]
        target = math.ceil(10 * (a8 + args.fraction * (a16 - a8))) / 10
        row.update(sqnr_int8=a8, sqnr_16x8=a16, target_sqnr=target)
        stage = "search"
        out = folder / "mixed"
        t0 = time.perf_counter()
        r = quantize_to_folder(str(files["model"]), str(files["calib"]), str(out),
                               QuantizeOptions(show_progress=False), evaluation=str(files["eval"]),
                               plan_request=PlanRequest(AccuracyTarget(target), args.config, args.cost))
        seconds["search"] = round(time.perf_counter() - t0, 1)
        plan = json.loads((out / "report.json").read_text())["precision_plan"]
        row.update(sqnr_plan=lowest_sqnr(r), summary=r.summary[0], plan=plan["plan"]["layers"],
                   cost={k: v for k, v in plan["cost"].items()}, cost_vs_int8=plan["cost_vs_int8"],
                   cost_vs_16x8=plan["cost_vs_16x8"], evaluated=len(plan["sensitivity"]) + len(plan["tried"]),
                   sensitivity=plan["sensitivity"][:5])
        stage = "simulate"
        x1 = folder / "x1.npy"
        np.save(x1, np.load(files["eval"])[:1])
        t0 = time.perf_counter()
        sim = simulate_command(str(out), args.config, Engine.MODEL, str(x1), str(folder / "mixed-npu"),
                               show_progress=False, workers=1)
        seconds["simulate"] = round(time.perf_counter() - t0, 1)
        report = sim.reports[0]
        row["simulate"] = {"verified": sim.verified, "stages": len(report.layers),
                           "host_stages": sum(layer.unit == "host" for layer in report.layers),
                           "cycles": report.total_cycles}
        row["seconds"] = seconds
    except QsimError as err:
        row["failed"] = {"stage": stage, "message": str(err).splitlines()[0]}
    except Exception as err:  # a traceback is a qsim bug: recorded, the run goes on
        row["failed"] = {"stage": stage, "message": f"{type(err).__name__}: {err}",
                         "traceback": traceback.format_exc(limit=8)}
    return row


def markdown(rows: dict, args) -> str:
    head = next(iter(rows.values()))["run"] if rows else run_header()
    lines = ["# Mixed precision with an accuracy target", "",
             f"Generated by `python benchmarks/mixed_precision.py --models {','.join(rows)} --calib "
             f"{args.calib} --eval {args.eval} --fraction {args.fraction} --cost {args.cost} --config "
             f"{args.config}` on {head['machine']} (2 cores, shared; the 1-minute load average of each run "
             "is in its row; times are indicative only).", "",
             "Models: benchmarks/_architectures.py (random weights except MTCNN's), inputs as in "
             "benchmarks/models.py. Target: all-int8's output SQNR + "
             f"{args.fraction} x (all-16x8's - all-int8's), rounded up to 0.1 dB. SQNR: the lowest over "
             "the model's outputs, float vs dequantized integer, on the evaluation inputs (the pipeline's "
             "report of the written model). Cost: NPU "
             f"{args.cost} on {args.config} from the cycle model, 16x8 array layers included (byte-plane "
             "passes on the array, qsim/npu/plan_cost.py). Simulate: `qsim simulate --engine model` of the written plan, every "
             "stage compared with the kernels.", "",
             "| model | SQNR int8 / 16x8 (dB) | target (dB) | plan SQNR (dB) | 16x8 layers | cost vs all-int8 | "
             "cost vs all-16x8 | simulate | times (s) | commit, load |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        run = f"{row['run']['commit']}, {row['run']['load']}"
        if "failed" in row:
            lines.append(f"| {name} | failed at {row['failed']['stage']}: {row['failed']['message']} "
                         f"| | | | | | | | {run} |")
            continue
        wide = sum(v == "16x8" for v in row["plan"].values())
        sim = row["simulate"]
        lines.append(
            f"| {name} | {row['sqnr_int8']:.2f} / {row['sqnr_16x8']:.2f} | {row['target_sqnr']:.1f} | "
            f"{row['sqnr_plan']:.2f} | {wide} of {len(row['plan'])} | {100 * row['cost_vs_int8']:.1f} % | "
            f"{100 * row['cost_vs_16x8']:.1f} % | {'verified' if sim['verified'] else 'MISMATCH'}, "
            f"{sim['stages']} stages ({sim['host_stages']} host), {sim['cycles']} cycles | "
            + ", ".join(f"{k} {v}" for k, v in row["seconds"].items()) + f" | {run} |")
    lines += ["", "Plans (MAC layer -> precision, 16x8 layers only; the others int8) and the most sensitive layers:", ""]
    for name, row in rows.items():
        if "failed" in row:
            continue
        wide = [k for k, v in row["plan"].items() if v == "16x8"]
        top = ", ".join(f"{s['layer']} ({s['sqnr_loss_db']:.2f} dB)" for s in row["sensitivity"]
                        if s["sqnr_loss_db"] is not None)
        energy = {k: row["cost"][k]["energy_pj"] for k in ("plan", "int8", "16x8")}
        lines.append(f"- **{name}**: 16x8: {', '.join(wide)}. Most sensitive: {top}. "
                     f"{row['evaluated']} plans scored. Energy (45nm): {energy['plan'] / 1e6:.1f} uJ, "
                     f"{100 * energy['plan'] / energy['int8']:.1f} % of all-int8, "
                     f"{100 * energy['plan'] / energy['16x8']:.1f} % of all-16x8.")
        lines.append(f"  - `{row['summary']}`")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--calib", type=int, default=32)
    p.add_argument("--eval", type=int, default=32)
    p.add_argument("--fraction", type=float, default=0.5)
    p.add_argument("--cost", default="cycles", choices=("cycles", "energy"))
    p.add_argument("--config", default="16x16")
    p.add_argument("--work", default="/tmp/qsim-mixed-precision")
    p.add_argument("--out", default=str(HERE.parent / "reports"))
    p.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    args = p.parse_args(argv)
    if args.render:
        path = Path(args.out) / "mixed_precision.md"
        rows = read_previous(Path(args.out) / "mixed_precision.json")
        write_report(Path(args.out), "mixed_precision", rows,
                     lambda r: with_kept_sections(markdown(r, args), path.read_text() if path.is_file() else None))
        return 0
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in ARCHITECTURES]
    if unknown:
        p.error(f"unknown models {unknown}; choose from {', '.join(ARCHITECTURES)}")
    json_path = Path(args.out) / "mixed_precision.json"
    rows = {}
    for name in names:
        print(f"{name} ...", flush=True)
        rows[name] = run_model(name, args)
        # written after every model: a long run interrupted keeps the models it finished
        merged = merged_rows(read_previous(json_path), rows, list(ARCHITECTURES))
        md_path = Path(args.out) / "mixed_precision.md"
        previous = md_path.read_text() if md_path.is_file() else None
        # (the `## ` sections after the generated table are written readings: kept)
        write_report(Path(args.out), "mixed_precision", merged,
                     lambda r: with_kept_sections(markdown(r, args), previous))
    return 0 if all("failed" not in r for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
