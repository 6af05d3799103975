"""TFLite int8 networks: qsim's integer run against LiteRT's reference kernels, and qsim's NPU
beside Arm's Ethos-U compiler (Vela) at the same MACs per cycle.

    pip install tensorflow-cpu ai-edge-litert ethos-u-vela scikit-image     # benchmark-only
    python benchmarks/tflite.py --requantize --verilator ds_cnn,mobilenet_v2,efficientnet_lite0,resnet18
                                                   # the committed report
    python benchmarks/tflite.py [--models mobilenet_v2,ds_cnn,...] [--inputs 2] [--work DIR]
                                [--verilator MODELS] [--requantize] [--keep-names] [--out reports]
    python benchmarks/tflite.py --report-only      # tflite.md and the plot again from tflite.json

--work (default /tmp/qsim-tflite-bench) keeps the .tflite files and qsim's quantized models
between runs; --requantize reruns `qsim quantize` (after a change to qsim). A run of some
models keeps the other models' rows of the previous tflite.json. Tensor names are cut to the
converter's first name part unless --keep-names (_tflite_models.shorten_tensor_names: qsim
quantize cannot write the joined names as file names).

Per model (benchmarks/_tflite_models.py: MobileNetV2 alpha 0.35, an EfficientNet-Lite0-like
net, a ResNet-18-like net, MLPerf Tiny's DS-CNN and a two-layer transformer encoder; random
seeded weights; converted by TensorFlow's TFLiteConverter to full int8 with int8 input and
output; written to --work, not to the repository):
1. parity: `qsim quantize m.tflite -o Q`, then qsim's integer run (kernels backend, every
   tensor kept) and LiteRT's interpreter (BUILTIN_REF resolver, every tensor preserved) on the
   same seeded int8 inputs (photographs from scikit-image for the image nets, seeded normal
   samples for the others); per TFLite operator output: elements compared, elements differing,
   largest difference in LSB;
2. cycles: `qsim simulate Q --engine model` (and --engine verilator for the --verilator models)
   on 16x16 and 16x32 arrays, and `vela --accelerator-config ethos-u55-256|ethos-u65-512
   --verbose-performance`; both matched per TFLite operator (benchmarks/_tflite_match.py) with
   per-layer and total cycles, and bytes (Vela: SRAM and off-chip, per network; qsim: DRAM).
Writes reports/tflite.md, reports/tflite.json and reports/tflite_cycles.png. A model qsim
cannot read or run is reported with qsim's error and its Vela figures; the others still run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))     # this checkout's qsim

import _tflite_match as match  # noqa: E402
from _tflite_qsim import SETUPS, QsimFailed  # noqa: E402

DEFAULT_MODELS = ("mobilenet_v2", "efficientnet_lite0", "resnet18", "ds_cnn", "transformer")
EVAL_SEED = 1000          # the compared inputs; the calibration data uses seed 0
QSIM_LAYER_KEYS = ("cycles", "compute_cycles", "fill_drain_cycles", "stall_cycles", "dram_bytes", "macs")
VELA_ROW_KEYS = ("cycles", "npu_cycles", "sram_access_cycles", "dram_access_cycles",
                 "offchip_flash_access_cycles", "macs")


def convert_model(name: str, work: Path, seed: int, keep_names: bool) -> tuple[Path, float | None]:
    """The model's .tflite in `work` (kept between runs: a rerun reuses it); tensor names
    shortened unless keep_names (_tflite_models.shorten_tensor_names says why)."""
    path = work / (f"{name}_converter_names.tflite" if keep_names else f"{name}.tflite")
    if path.exists():
        return path, None
    import _tflite_models as models
    start = time.perf_counter()
    net = models.NETWORKS[name]
    data = models.convert(models.build(net, seed), net, seed)
    if not keep_names:
        data = models.shorten_tensor_names(data)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return path, time.perf_counter() - start


def eval_inputs(name: str, count: int, scale: float, zero_point: int) -> np.ndarray:
    import _tflite_models as models
    from _tflite_litert import quantize_input
    x = models.sample_batch(models.NETWORKS[name], count, EVAL_SEED)
    return quantize_input(x, scale, zero_point)


def parity(ops, tensor_dtypes, reference, ours) -> tuple[list[dict], list[dict]]:
    """Per TFLite operator output, over the inputs: compared rows and not-compared rows (why).
    reference: per input, LiteRT's tensors by name; ours: per input, qsim's candidates by name
    (its layouts of the tensor, _tflite_qsim.integer_run), the first of LiteRT's shape taken."""
    compared, skipped = [], []
    for op in ops:
        dtype = tensor_dtypes[op.output]
        if not np.issubdtype(dtype, np.integer):
            skipped.append({"index": op.index, "builtin": op.builtin, "output": op.output,
                            "why": f"{np.dtype(dtype).name} tensor (not integer in the TFLite model)"})
            continue
        total, why = match.Parity(), None
        for theirs_all, ours_all in zip(reference, ours):
            layouts = ours_all.get(op.output)
            if layouts is None:
                why = "no qsim tensor of this name (fused into its consumer or renamed)"
                break
            theirs = theirs_all[op.output]
            mine = next((v for v in layouts if v.shape == theirs.shape), None)
            if mine is None:
                why = f"qsim shape {list(layouts[0].shape)} vs LiteRT {list(theirs.shape)}"
                break
            total.add(match.compare(mine, theirs))
        row = {"index": op.index, "builtin": op.builtin, "output": op.output}
        if why:
            skipped.append(dict(row, why=why))
        else:
            compared.append(dict(row, elements=total.elements, differing=total.differing,
                                 max_lsb=total.max_lsb, higher=total.higher))
    return compared, skipped


def run_parity(result: dict, tflite: Path, qmodel: Path, n_inputs: int) -> list[np.ndarray]:
    import _tflite_litert as litert
    from _tflite_qsim import integer_run
    it = litert.interpreter(tflite)
    ops = litert.operators(it)
    shape, scale, zero_point = litert.input_quantization(it)
    xs = eval_inputs(result["model"], n_inputs, scale, zero_point)
    xs = [x.reshape(shape) for x in xs]
    start = time.perf_counter()
    reference = [litert.run(it, x) for x in xs]
    result["litert_s"] = round(time.perf_counter() - start, 2)
    dtypes = {d["name"]: d["dtype"] for d in it.get_tensor_details()}
    start = time.perf_counter()
    ours = [integer_run(qmodel, x) for x in xs]
    result["qsim_run_s"] = round(time.perf_counter() - start, 2)
    compared, skipped = parity(ops, dtypes, reference, ours)
    total = match.Parity()
    for row in compared:
        total.add(match.Parity(row["elements"], row["differing"], row["max_lsb"], row["higher"]))
    out_name = it.get_output_details()[0]["name"]
    result["parity"] = {"inputs": n_inputs, "tensors": compared, "not_compared": skipped,
                        "by_builtin": {k: vars(v) for k, v in match.parity_by_builtin(compared).items()},
                        "total": vars(total),
                        "origins": [r["index"] for r in match.origins(ops, compared, litert.produced(it))],
                        "model_output": next((r for r in compared if r["output"] == out_name), None)}
    return xs


def npu_runs(result: dict, qmodel: Path, x: np.ndarray, work: Path, verilator: bool) -> None:
    from _tflite_qsim import simulate
    result["npu"] = {}
    for setup in SETUPS:
        engines = ("model", "verilator") if verilator and setup is SETUPS[0] else ("model",)
        for engine in engines:
            start = time.perf_counter()
            report = simulate(qmodel, setup, engine, x, work / "npu")
            layers = [{k: layer.get(k) for k in ("name", "op", "unit", *QSIM_LAYER_KEYS, "verified")}
                      for layer in report["layers"]]
            result["npu"][f"{setup.name}-{engine}"] = {
                "accelerator": setup.accelerator, "engine": engine, "config": report["config"],
                "seconds": round(time.perf_counter() - start, 1), "total_cycles": report["total_cycles"],
                "total_macs": report["total_macs"], "all_verified": report["all_verified"],
                "dram_bytes": sum(layer["dram_bytes"] or 0 for layer in layers), "layers": layers}


def vela_runs(result: dict, tflite: Path, work: Path) -> None:
    from _vela import ACCELERATORS, run_vela
    result["vela"] = {}
    for accelerator in ACCELERATORS:
        run = run_vela(tflite, accelerator, work / "vela" / accelerator)
        s = run.summary
        result["vela"][accelerator] = {
            "seconds": round(run.seconds, 2), "system_config": s.get("system_config"),
            "memory_mode": s.get("memory_mode"), "clock_hz": s["core_clock"],
            "cycles_total": int(s["cycles_total"]), "cycles_npu": int(s.get("cycles_npu", 0)),
            "sram_bytes": int(s.get("sram_total_bytes", 0)), "dram_bytes": int(s.get("dram_total_bytes", 0)),
            "offchip_flash_bytes": int(s.get("off_chip_flash_total_bytes", 0)),
            "sram_used_kib": s.get("sram_memory_used"), "nn_macs": int(s.get("nn_macs", 0)),
            "npu_rows": sum(r.target == "NPU" for r in run.rows),
            "cpu_ops": sorted({r.original_op for r in run.rows if r.target != "NPU"}),
            "rows": [vars(r) for r in run.rows]}


def compare_cycles(result: dict, ops, integer_names: dict[str, str]) -> None:
    """Per accelerator: Vela's rows and qsim's layers (model engine) summed per TFLite operator
    (qsim's layers by the integer graph's names of the operators' outputs)."""
    result["compare"] = {}
    for setup in SETUPS:
        vela, npu = result.get("vela", {}).get(setup.accelerator), result.get("npu", {}).get(f"{setup.name}-model")
        if vela is None or npu is None:
            continue
        rows = vela["rows"]
        v_at = match.match_items(ops, [r["name"] for r in rows],
                                 lambda i, op: match.vela_type_agrees(rows[i]["original_op"], op))
        v_ops, v_un = match.per_op_sums(ops, v_at, rows, VELA_ROW_KEYS)
        layers = npu["layers"]
        q_at = match.match_items(match.renamed(ops, integer_names), [layer["name"] for layer in layers],
                                 lambda i, op: True)
        q_ops, q_un = match.per_op_sums(ops, q_at, [{k: (layer[k] or 0) for k in QSIM_LAYER_KEYS} for layer in layers],
                                        QSIM_LAYER_KEYS)
        per_op = []
        for op, v, q in zip(ops, v_ops, q_ops):
            per_op.append({"index": op.index, "builtin": op.builtin, "output": op.output,
                           "vela_rows": v["items"], "vela_cycles": v["cycles"], "vela_npu_cycles": v["npu_cycles"],
                           "vela_sram_access_cycles": v["sram_access_cycles"],
                           "vela_offchip_access_cycles": v["dram_access_cycles"] + v["offchip_flash_access_cycles"],
                           "qsim_layers": q["items"], "qsim_cycles": q["cycles"],
                           "qsim_compute_cycles": q["compute_cycles"], "qsim_fill_drain_cycles": q["fill_drain_cycles"],
                           "qsim_stall_cycles": q["stall_cycles"], "qsim_dram_bytes": q["dram_bytes"],
                           "macs": q["macs"] or v["macs"]})
        result["compare"][setup.accelerator] = {
            "qsim_config": setup.name, "per_op": per_op,
            "unmatched": {"vela": v_un, "qsim": q_un,
                          "qsim_layers": [layers[i]["name"] for i, k in enumerate(q_at) if k is None]},
            "vela_cycles": vela["cycles_total"], "qsim_cycles": npu["total_cycles"]}


def run_model(name: str, args) -> dict:
    work = Path(args.work) / name
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {"model": name}
    stage = "convert"
    try:
        tflite, convert_s = convert_model(name, Path(args.work), args.seed, args.keep_names)
        result.update(tflite=str(tflite), tflite_bytes=tflite.stat().st_size, convert_s=convert_s)
        import _tflite_litert as litert
        ops = litert.operators(litert.interpreter(tflite))
        result["ops"] = [vars(op) for op in ops]
        stage = "vela"
        vela_runs(result, tflite, work)
        stage = "qsim quantize"
        from _tflite_qsim import quantize
        from qsim.quant.qmodel import is_quantized_model
        qmodel = work / "qmodel"
        start = time.perf_counter()
        if not is_quantized_model(qmodel) or args.requantize:
            quantize(tflite, qmodel)
        result["quantize_s"] = round(time.perf_counter() - start, 1)
        stage = "parity"
        xs = run_parity(result, tflite, qmodel, args.inputs)
        stage = "qsim simulate"
        npu_runs(result, qmodel, xs[0], work, name in args.verilator)
        from _tflite_qsim import integer_names
        compare_cycles(result, ops, integer_names(qmodel))
    except QsimFailed as err:
        result["error"] = {"stage": stage, "message": str(err)}
    except Exception as err:      # noqa: BLE001 - one model's failure must not lose the others'
        result["error"] = {"stage": stage, "message": f"{type(err).__name__}: {err}",
                           "traceback": traceback.format_exc()[-4000:]}
    return result


def keep_raw(result: dict, path: Path) -> None:
    """Moves Vela's rows and qsim's layers (the matched inputs of result["compare"], 60 % of the
    JSON) out of the report into the work folder, and leaves the file's name in their place."""
    raw = {"vela": {acc: v.pop("rows") for acc, v in result.get("vela", {}).items() if "rows" in v},
           "npu": {key: n.pop("layers") for key, n in result.get("npu", {}).items() if "layers" in n}}
    if raw["vela"] or raw["npu"]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(raw, default=str))
        result["raw"] = str(path)


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version
    out = {}
    for package in ("tensorflow-cpu", "tensorflow", "ai-edge-litert", "ethos-u-vela", "numpy"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            pass
    return out


def cpu_model() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return next((line.split(":", 1)[1].strip() for line in text.splitlines()
                 if line.startswith("Model name")), "unknown")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--inputs", type=int, default=2, help="seeded inputs compared per model")
    parser.add_argument("--seed", type=int, default=0, help="weights and calibration data")
    parser.add_argument("--work", default="/tmp/qsim-tflite-bench")
    parser.add_argument("--verilator", default="", help="models also simulated on the verilator engine (16x16)")
    parser.add_argument("--keep-names", action="store_true",
                        help="keep the converter's joined tensor names (qsim quantize fails on them)")
    parser.add_argument("--requantize", action="store_true", help="rerun qsim quantize on a kept work folder")
    parser.add_argument("--out", default=str(HERE.parent / "reports"))
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite tflite.md and the plot from the --out folder's tflite.json")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.report_only:
        from _tflite_report import write_report
        for path in write_report(json.loads((out / "tflite.json").read_text()), out):
            print(f"wrote {path}")
        return 0
    args.verilator = [m for m in args.verilator.split(",") if m]
    models = [m for m in args.models.split(",") if m]
    from _rows import run_header
    header = dict(run_header(), cpu=cpu_model(), versions=versions(), seed=args.seed, inputs=args.inputs,
                  command="python benchmarks/tflite.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  qsim_setups=[vars(s) for s in SETUPS])
    previous = json.loads((out / "tflite.json").read_text()).get("models", {}) if (out / "tflite.json").exists() else {}
    results = {}
    for name in models:
        start = time.perf_counter()
        print(f"{name}: ...", flush=True)
        results[name] = run_model(name, args)
        results[name]["seconds"] = round(time.perf_counter() - start, 1)
        results[name]["run"] = {k: header[k] for k in ("command", "commit", "date", "load")}
        keep_raw(results[name], Path(args.work) / name / "raw.json")
        from _tflite_report import summary_line
        print(summary_line(results[name]), flush=True)
    from _rows import merged_rows
    from _tflite_report import write_report
    doc = dict(header, models=merged_rows(previous, results, DEFAULT_MODELS))
    for path in write_report(doc, out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
