"""`qsim quantize`: quantize a float model to a bit-exact integer model (TOSA 0.30 or CVM), write
the quantized-model folder and its accuracy report, and print a summary.

The command reads the model and the data files, runs the pipeline (qsim.quant.pipeline,
in memory), and writes, atomically, one folder: the quantized model (qsim.quant.qmodel:
main.sknd, .dat files, quantization.json) and the report (qsim.report.accuracy:
report.json, report.html, PNG plots). With no model argument, the embedded Fashion-MNIST
CNN (qsim.zoo) is used with its embedded calibration images and labelled test subset.
"""
from __future__ import annotations

import argparse

import dataclasses
import functools
import math
import os
import resource
import sys
import time
from pathlib import Path


from .. import zoo
from ..atomic import atomic_directory
from ..cluster.distributed import CONNECT_TIMEOUT_S
from ..cluster.local_cluster import check_worker_count
from ..cluster.scheduler_address import check_address, probe_scheduler
from ..errors import UsageError
from ..loader import model_kind
from ..outpath import QUANTIZED_MODEL, check_output
from ..quant.calibration.annotations import annotated_parameters
from ..quant.calibration.data import Samples, load_model_samples
from ..quant.calibration.model_inputs import sample_shapes
from ..quant.calibration.observers import ObserverKind
from ..quant.params import Granularity, Precision, PrecisionPlan, Rounding, WeightRounding
from ..quant.accuracy import AccuracyReport
from ..quant.evaluation.distributed import evaluate_distributed
from ..quant.options import QuantizeOptions
from ..quant.pipeline import QuantizeResult, load_float_model, make_target, model_name_of, quantize_graph
from ..quant.qmodel import write_quantized_model
from ..quant.target import TargetKind
from ..report.accuracy import write_accuracy_report
from ..report.precision_plan import summary_line
from ..kernels.backend import Backend
from ..zoo.fashion_mnist import DEBIAN_DIR
from .arguments import whole_number
from .precision_search import COSTS, PlanRequest, choose_plan
from ..quant.precision_plan.scoring import AccuracyTarget
from .qdq_reference import check_reference, scored_against

NAME = "quantize"
HELP = "quantize a float model to a bit-exact integer model (TOSA 0.30 or CVM) and report its accuracy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    p = parser
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help="float model: folder with main.sknd or graph.nnef, a .sknd file, "
                        "graph.nnef, .tgz or .onnx (default: the embedded Fashion-MNIST CNN)")
    p.add_argument("--calib", metavar="DATA", help="calibration inputs: .npy, .npz or a folder "
                   "of images; a model with several inputs: an .npz keyed by input name or a folder "
                   "of NAME.npy files (required with MODEL unless it is quantized already, e.g. an "
                   "ONNX QDQ model; default: the embedded calibration images)")
    p.add_argument("--eval", metavar="DATA", help="evaluation inputs (.npy/.npz/image folder, "
                   "with labels for top-1 accuracy); default: the Fashion-MNIST test set for "
                   "the embedded model, else the calibration data")
    p.add_argument("-o", "--out", metavar="OUT",
                   help="output folder (default qsim-out/<model>-int8/ here)")
    p.add_argument("--target", choices=[k.value for k in TargetKind], default=TargetKind.TOSA.value,
                   help="integer operator set (default tosa)")
    p.add_argument("--cvm-precision", type=int, default=8, choices=range(2, 9), metavar="P",
                   help="--target cvm: activation precision in bits, 2..8 (default 8)")
    p.add_argument("--float-model", metavar="MODEL",
                   help="an ONNX QDQ model's float original: score the integer model against it instead "
                        "of the QDQ model's dequantized graph")
    p.add_argument("--observer", choices=[k.value for k in ObserverKind],
                   default=ObserverKind.AUTO.value,
                   help="range observer for calibrated tensors (default auto: per tensor, the min-max, "
                        "percentile or MSE range costing its consumers the least error on calibration data)")
    p.add_argument("--precision", choices=[p.value for p in Precision], default=None,
                   help="int8, or 16x8: int16 activations, int8 weights (default int8; for a .tflite "
                        "model, its own: 16x8 when its input is int16)")
    p.add_argument("--weights", choices=[g.value for g in Granularity],
                   default=Granularity.PER_CHANNEL.value,
                   help="weight scale granularity (default per-channel)")
    p.add_argument("--rounding", choices=[r.value for r in Rounding], default=None,
                   help="RESCALE rounding; double reproduces TFLite (default: double for a .tflite "
                        "model, whose reference kernels round twice; single otherwise)")
    p.add_argument("--no-bias-correction", action="store_true",
                   help="keep the float biases (default: correct each output channel's mean "
                        "shift caused by weight rounding, from calibration channel means)")
    p.add_argument("--weight-rounding", choices=[r.value for r in WeightRounding],
                   help="int8 weights: adaptive: per weight floor or ceiling, whichever gives each "
                        "layer the least output error on the calibration data; or nearest "
                        "(default adaptive; CVM rounds to nearest)")
    p.add_argument("--backend", choices=[b.value for b in Backend], default=Backend.KERNELS.value,
                   help="integer execution during evaluation (default kernels)")
    p.add_argument("--calib-limit", type=whole_number(1), metavar="N",
                   help="use at most N calibration samples")
    p.add_argument("--eval-limit", type=whole_number(1), metavar="N",
                   help="evaluate at most N samples")
    p.add_argument("--score-output", action="append", default=[], metavar="NAME", dest="score_outputs",
                   help="score this graph output in the report (repeatable; default: every output). "
                        "Every scored output gets SQNR and error figures; top-1 figures where it is "
                        "a class vector (docs/quantize.md: which outputs count as one)")
    g = p.add_argument_group("precision plan (docs/quantize.md, \"Mixed precision with a target\")")
    g.add_argument("--target-sqnr", type=float, metavar="DB",
                   help="choose int8 or 16x8 per layer: the cheapest plan whose output SQNR is at "
                        "least DB (replaces --precision)")
    g.add_argument("--max-drop", type=float, metavar="PT",
                   help="the same for a class-vector output: top-1 agreement with the float model "
                        "drops by at most PT percentage points")
    g.add_argument("--config", metavar="CFG", help="NPU configuration the plan is costed on: a "
                   "preset (8x8, 16x16, 32x32, :os) or a TOML file (default 16x16)")
    g.add_argument("--cost", choices=COSTS, help="what the plan minimizes on the NPU (default cycles)")
    g.add_argument("--tech", metavar="NAME|FILE", help="energy table for --cost energy "
                   "(default 45nm; docs/npu.md, Energy)")
    p.add_argument("--subset", action="store_true",
                   help="embedded model: evaluate on the embedded 1000-image subset only")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    # distributed evaluation (qsim.quant.evaluation.distributed): only when asked, never by default
    p.add_argument("--workers", type=int, metavar="N",
                   help="evaluate on N local worker processes (a Dask LocalCluster; default: this "
                        "process); the report is the same, bit for bit")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="evaluate on an existing Dask cluster, the address `dask scheduler` prints")


def _is_tflite(path) -> bool:
    return bool(path) and os.path.isfile(path) and model_kind(path) == "tflite"


def _precision(args: argparse.Namespace) -> Precision:
    if args.precision is not None:
        return Precision(args.precision)
    if _is_tflite(args.model):
        from ..tflite import activation_bits  # deferred: the TFLite front end, for .tflite models only
        return Precision.INT16X8 if activation_bits(args.model) == 16 else Precision.INT8
    return Precision.INT8


def _double_round(args: argparse.Namespace) -> bool:
    if args.rounding is not None:
        return Rounding(args.rounding) is Rounding.DOUBLE
    return _is_tflite(args.model)


def run(args: argparse.Namespace) -> int:
    options = QuantizeOptions(
        observer=ObserverKind(args.observer), precision=_precision(args),
        weight_granularity=Granularity(args.weights), double_round=_double_round(args),
        bias_correction=not args.no_bias_correction, weight_rounding=args.weight_rounding and WeightRounding(args.weight_rounding),
        backend=Backend(args.backend), calib_limit=args.calib_limit, eval_limit=args.eval_limit,
        show_progress=not args.quiet, score_outputs=tuple(args.score_outputs))
    request = plan_request(args)
    result = quantize_to_folder(args.model, args.calib, args.out, options, evaluation=args.eval,
                                subset_only=args.subset, target=TargetKind(args.target),
                                cvm_precision=args.cvm_precision, float_model=args.float_model,
                                plan_request=request, workers=args.workers,
                                scheduler=args.scheduler)
    print("\n".join(summary_lines(result)))
    return 0


def plan_request(args: argparse.Namespace) -> PlanRequest | None:
    """The precision-plan options, checked against the rest (None: no plan search)."""
    searching = args.target_sqnr is not None or args.max_drop is not None
    if not searching:
        for flag, value in (("--config", args.config), ("--cost", args.cost), ("--tech", args.tech)):
            if value is not None:
                raise UsageError(f"{flag} costs a precision plan; it needs --target-sqnr DB or "
                                 "--max-drop PT", hint=f"drop {flag}, or give a target")
        return None
    if args.target != TargetKind.TOSA.value:
        raise UsageError("a precision plan picks TOSA modes; --target cvm has one precision",
                         hint="drop --target cvm")
    if args.precision is not None:
        raise UsageError("--precision and a precision target both set the precision",
                         hint="drop --precision: the plan picks int8 or 16x8 per layer")
    if args.tech is not None and args.cost != "energy":
        raise UsageError("--tech is the energy table of --cost energy", hint="add --cost energy")
    return PlanRequest(AccuracyTarget(args.target_sqnr, args.max_drop), args.config or "16x16",
                       args.cost or "cycles", args.tech)


def _embedded_evaluation(subset_only: bool) -> tuple[Samples, str]:
    """The Fashion-MNIST test set for the embedded model: the full 10k images when Debian's
    dataset-fashion-mnist is installed (and not `subset_only`), else the embedded 1000."""
    full = None if subset_only else zoo.full_test_set()
    if full is not None:
        images, labels = full
        return Samples(images, labels), (f"Evaluated on the full Fashion-MNIST test set "
                                          f"({len(labels)} labelled images, {DEBIAN_DIR}).")
    images, labels = zoo.test_subset()
    why = "" if subset_only else " (install Debian's dataset-fashion-mnist for the full 10k)"
    return Samples(images, labels), (f"Evaluated on the embedded Fashion-MNIST test subset "
                                      f"({len(labels)} labelled images){why}.")


def model_samples(graph, model: str | None, calib: str | None, evaluation: str | None,
                  subset_only: bool = False) -> tuple[Samples | None, Samples | None, tuple[str, ...]]:
    """The calibration and evaluation samples of `qsim quantize` (and `qsim explore`): the files
    given, else for the embedded model (`model` None) its calibration images and test set; a
    model with its own quantization needs no calibration data; notes for the report."""
    shapes = sample_shapes(graph)
    notes: tuple[str, ...] = ()
    if calib is not None:
        calib_samples = load_model_samples(calib, shapes)
    elif model is None:
        calib_samples = Samples(zoo.calibration_images())
    elif annotated_parameters(graph):
        calib_samples = None     # quantized by the model's own annotations (e.g. an ONNX QDQ model)
    else:
        raise UsageError("no calibration data: pass --calib DATA (.npy, .npz or a folder of "
                         "images)", hint=f"qsim quantize {model} --calib calib.npz")
    if evaluation is not None:
        eval_samples = load_model_samples(evaluation, shapes)
    elif model is None:
        eval_samples, note = _embedded_evaluation(subset_only)
        notes += (note,)
    else:
        eval_samples = None
    return calib_samples, eval_samples, notes


def quantize_to_folder(model: str | None, calib: str | None, out: str | None,
                     options: QuantizeOptions = QuantizeOptions(),
                     evaluation: str | None = None, subset_only: bool = False,
                     target: TargetKind | str = TargetKind.TOSA, cvm_precision: int = 8,
                     float_model: str | None = None,
                     plan_request: PlanRequest | None = None,
                     workers: int | None = None, scheduler: str | None = None) -> QuantizeResult:
    """The whole `qsim quantize` job; returns the result with the folder written.

    With no `model`, the embedded Fashion-MNIST CNN with its embedded calibration images,
    evaluated on the Fashion-MNIST test set. Otherwise `calib` is required unless the model
    carries its own quantization (annotations, an ONNX QDQ model); `evaluation` defaults to the
    calibration data (the report says so). `float_model`: the float model an ONNX QDQ `model`
    was made from, which the report scores against (qdq_reference.py). `workers` > 1 or
    `scheduler`: the evaluation runs over Dask (distributed_evaluator)."""
    try:
        kind = TargetKind(target)
    except ValueError:
        raise UsageError(f"--target {target}: unknown operator set",
                         hint="use " + " or ".join(k.value for k in TargetKind)) from None
    chosen = make_target(kind, options, cvm_precision)
    chosen.check_options(options)
    # a plan search writes `<model>-mixed` (the plan is not known yet)
    named = chosen if plan_request is None else make_target(kind, dataclasses.replace(options, plan=PrecisionPlan()))
    evaluator = distributed_evaluator(workers, scheduler)
    for flag, value in (("--calib-limit", options.calib_limit), ("--eval-limit", options.eval_limit)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} {value}: must be at least 1")
    notes: tuple[str, ...] = ()
    if model is None:
        model_path = zoo.default_model().path
    else:
        model_path = Path(model)
    model_name = model_name_of(model_path)
    out_dir = Path(out) if out is not None else Path("qsim-out") / named.folder_name(model_name)
    check_output(out if out is not None else out_dir, "-o",
                 [("model", model_path), ("calibration data", calib),
                  ("evaluation data", evaluation), ("float model", float_model)], replaces=QUANTIZED_MODEL, default=out is None)
    graph = load_float_model(model_path)
    calib_samples, eval_samples, more = model_samples(graph, model, calib, evaluation, subset_only)
    notes += more
    sections, searched = (), {}
    if plan_request is not None:
        t0 = time.perf_counter()
        options, section = choose_plan(graph, calib_samples, eval_samples, options, plan_request,
                                       model_name)
        chosen, sections = make_target(kind, options), (section,)
        searched = {"plan search": time.perf_counter() - t0}
    load_batch = lambda n: load_float_model(model_path, batch=n)  # noqa: E731
    reference = None
    if float_model is not None:
        reference = load_float_model(Path(float_model))
        check_reference(reference, graph, float_model)
    against, warnings = scored_against(model_path, float_model)
    if against is not None:
        notes += (f"Scored against {against}.",)
    result = quantize_graph(graph, calib_samples, eval_samples, options, chosen, model_name, notes,
                            load_batch=load_batch, reference=reference,
                            evaluator=evaluator)
    if against is not None:
        report = dataclasses.replace(result.report, warnings=result.report.warnings + warnings,
                                     settings=dict(result.report.settings, scored_against=against))
        result = dataclasses.replace(result, report=report)
    t0 = time.perf_counter()
    by_annotations = model is not None and calib is None
    settings = dict(options.settings(), calibration=calib or ("model annotations" if by_annotations else
                                                              "embedded"),
                    evaluation=evaluation or ("embedded test set" if model is None else "random inputs"
                                              if by_annotations else "calibration data"))
    with atomic_directory(out_dir, command=QUANTIZED_MODEL.command) as tmp:
        write_quantized_model(result.model, chosen, tmp, source=str(model_path), settings=settings)
        write_accuracy_report(result.report, tmp, sections)
    seconds = dict(searched, **result.seconds, write=time.perf_counter() - t0)
    return dataclasses.replace(result, out_dir=out_dir, seconds=seconds,
                               summary=tuple(summary_line(x.choice) for x in sections))


def distributed_evaluator(workers: int | None, scheduler: str | None):
    """evaluate_distributed on `workers` local processes or the cluster at `scheduler`, checked
    now (before the calibration's minutes); None for this process (no option, or --workers 1)."""
    if workers is not None and scheduler is not None:
        raise UsageError("--workers and --scheduler do not combine",
                         hint="--workers N starts N local worker processes; --scheduler evaluates on "
                              "the workers of an existing cluster")
    if scheduler is not None:
        probe_scheduler(check_address(scheduler), CONNECT_TIMEOUT_S)
    elif workers is None:
        return None
    else:
        check_worker_count(workers)
        if workers == 1:
            return None
    return functools.partial(evaluate_distributed, workers=workers, scheduler=scheduler)


def summary_lines(result: QuantizeResult) -> list[str]:
    """The console summary of a `qsim quantize` run: the totals, then one line per scored output."""
    r = result.report
    lines = [f"quantized {r.model}: {len(result.model.graph.ops)} {result.target.title} operators, "
             f"evaluated on {r.eval_samples} samples"]
    if "scored_against" in r.settings:
        lines.append(f"  scored against {r.settings['scored_against']}")
    lines += [f"  {line}" for line in output_lines(r)]
    lines += [f"  warning: {w}" for w in r.warnings]
    lines += [f"  {line}" for line in result.summary]
    finite = [t for t in r.tensors if math.isfinite(t.sqnr_db)]
    if finite:
        worst = min(finite, key=lambda t: t.sqnr_db)
        lines.append(f"  lowest per-tensor SQNR: {worst.sqnr_db:.1f} dB ({worst.name})")
    timing = ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items())
    lines.append(f"  time: {timing}; peak memory {peak_memory_mb():.0f} MB")
    if result.out_dir is not None:
        lines.append(f"wrote {result.out_dir}/ (main.sknd, .dat files, quantization.json, "
                     "report.json, report.html, plots)")
    return lines


def peak_memory_mb() -> float:
    """The largest resident set this process has had so far, in MB (the whole run's peak when
    read at its end: loading, calibration, lowering, evaluation and writing)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10   # bytes on macOS, KiB on Linux


def output_lines(r: AccuracyReport) -> list[str]:
    """One line per scored output: its top-1 figures where it is a class vector, then SQNR and
    the share of elements within one quantization step."""
    lines = []
    for o in r.outputs:
        sqnr = "exact" if not math.isfinite(o.sqnr_db) else f"{o.sqnr_db:.1f} dB"
        values = f"SQNR {sqnr}, {_pct(o.within_one_lsb)} of elements within 1 LSB"
        if o.top1_agreement is None:
            lines.append(f"output '{o.name}' {list(o.sample_shape)}: {values}")
            continue
        labelled = (f", top-1 accuracy float {_pct(o.float_top1)}, integer {_pct(o.int8_top1)}"
                    if o.float_top1 is not None else "")
        lines.append(f"output '{o.name}' {list(o.sample_shape)} (class vector: {o.reason}): top-1 agreement "
                     f"float vs integer {_pct(o.top1_agreement)}{labelled}, {values}")
    return lines


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f} %"
