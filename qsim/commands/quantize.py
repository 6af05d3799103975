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
from ..outpath import QUANTIZED_MODEL, check_output
from ..quant.calibration.annotations import annotated_parameters
from ..quant.calibration.data import Samples, load_samples
from ..quant.calibration.observers import ObserverKind
from ..quant.params import Granularity, Precision, Rounding, WeightRounding
from ..quant.accuracy import AccuracyReport
from ..quant.evaluation.distributed import evaluate_distributed
from ..quant.options import QuantizeOptions
from ..quant.pipeline import (QuantizeResult, load_float_model, make_target, model_name_of,
                              quantize_graph, single_input)
from ..quant.qmodel import write_quantized_model
from ..quant.target import TargetKind
from ..report.accuracy import write_accuracy_report
from ..kernels.backend import Backend
from ..zoo.fashion_mnist import DEBIAN_DIR
from .arguments import whole_number

NAME = "quantize"
HELP = "quantize a float model to a bit-exact integer model (TOSA 0.30 or CVM) and report its accuracy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    p = parser
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help="float model: folder with main.sknd or graph.nnef, a .sknd file, "
                        "graph.nnef, .tgz or .onnx (default: the embedded Fashion-MNIST CNN)")
    p.add_argument("--calib", metavar="DATA", help="calibration inputs: .npy, .npz or a folder "
                   "of images (required with MODEL unless it is quantized already, e.g. an ONNX QDQ "
                   "model; default: the embedded calibration images)")
    p.add_argument("--eval", metavar="DATA", help="evaluation inputs (.npy/.npz/image folder, "
                   "with labels for top-1 accuracy); default: the Fashion-MNIST test set for "
                   "the embedded model, else the calibration data")
    p.add_argument("-o", "--out", metavar="OUT",
                   help="output folder (default qsim-out/<model>-int8/ here)")
    p.add_argument("--target", choices=[k.value for k in TargetKind], default=TargetKind.TOSA.value,
                   help="integer operator set (default tosa)")
    p.add_argument("--cvm-precision", type=int, default=8, choices=range(2, 9), metavar="P",
                   help="--target cvm: activation precision in bits, 2..8 (default 8)")
    p.add_argument("--observer", choices=[k.value for k in ObserverKind],
                   default=ObserverKind.PERCENTILE.value,
                   help="range observer for calibrated tensors (default percentile: the 99.99th percentile range)")
    p.add_argument("--precision", choices=[p.value for p in Precision], default=Precision.INT8.value,
                   help="int8, or 16x8: int16 activations, int8 weights (default int8)")
    p.add_argument("--weights", choices=[g.value for g in Granularity],
                   default=Granularity.PER_CHANNEL.value,
                   help="weight scale granularity (default per-channel)")
    p.add_argument("--rounding", choices=[r.value for r in Rounding], default=Rounding.SINGLE.value,
                   help="RESCALE rounding; double reproduces TFLite (default single)")
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
    p.add_argument("--subset", action="store_true",
                   help="embedded model: evaluate on the embedded 1000-image subset only")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    # distributed evaluation (qsim.quant.evaluation.distributed): only when asked, never by default
    p.add_argument("--workers", type=int, metavar="N",
                   help="evaluate on N local worker processes (a Dask LocalCluster; default: this "
                        "process); the report is the same, bit for bit")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="evaluate on an existing Dask cluster, the address `dask scheduler` prints")


def run(args: argparse.Namespace) -> int:
    options = QuantizeOptions(
        observer=ObserverKind(args.observer), precision=Precision(args.precision),
        weight_granularity=Granularity(args.weights), double_round=Rounding(args.rounding) is Rounding.DOUBLE,
        bias_correction=not args.no_bias_correction, weight_rounding=args.weight_rounding and WeightRounding(args.weight_rounding),
        backend=Backend(args.backend), calib_limit=args.calib_limit, eval_limit=args.eval_limit,
        show_progress=not args.quiet, score_outputs=tuple(args.score_outputs))
    result = quantize_to_folder(args.model, args.calib, args.out, options, evaluation=args.eval,
                                subset_only=args.subset, target=TargetKind(args.target),
                                cvm_precision=args.cvm_precision, workers=args.workers,
                                scheduler=args.scheduler)
    print("\n".join(summary_lines(result)))
    return 0


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


def quantize_to_folder(model: str | None, calib: str | None, out: str | None,
                     options: QuantizeOptions = QuantizeOptions(),
                     evaluation: str | None = None, subset_only: bool = False,
                     target: TargetKind | str = TargetKind.TOSA, cvm_precision: int = 8,
                     workers: int | None = None, scheduler: str | None = None) -> QuantizeResult:
    """The whole `qsim quantize` job; returns the result with the folder written.

    With no `model`, the embedded Fashion-MNIST CNN with its embedded calibration images,
    evaluated on the Fashion-MNIST test set. Otherwise `calib` is required unless the model
    carries its own quantization (annotations, an ONNX QDQ model); `evaluation` defaults to the
    calibration data (the report says so). `workers` > 1 or `scheduler`: the evaluation runs over
    Dask (distributed_evaluator)."""
    try:
        kind = TargetKind(target)
    except ValueError:
        raise UsageError(f"--target {target}: unknown operator set",
                         hint="use " + " or ".join(k.value for k in TargetKind)) from None
    chosen = make_target(kind, options, cvm_precision)
    chosen.check_options(options)
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
    out_dir = Path(out) if out is not None else Path("qsim-out") / chosen.folder_name(model_name)
    check_output(out if out is not None else out_dir, "-o",
                 [("model", model_path), ("calibration data", calib),
                  ("evaluation data", evaluation)], replaces=QUANTIZED_MODEL, default=out is None)
    graph = load_float_model(model_path)
    input_name, sample_shape = single_input(graph)
    if calib is not None:
        calib_samples = load_samples(calib, input_name, sample_shape)
    elif model is None:
        calib_samples = Samples(zoo.calibration_images())
    elif annotated_parameters(graph):
        calib_samples = None     # quantized by the model's own annotations (e.g. an ONNX QDQ model)
    else:
        raise UsageError("no calibration data: pass --calib DATA (.npy, .npz or a folder of "
                         "images)", hint=f"qsim quantize {model} --calib calib.npz")
    if evaluation is not None:
        eval_samples = load_samples(evaluation, input_name, sample_shape)
    elif model is None:
        eval_samples, note = _embedded_evaluation(subset_only)
        notes += (note,)
    else:
        eval_samples = None
    load_batch = lambda n: load_float_model(model_path, batch=n)  # noqa: E731
    result = quantize_graph(graph, calib_samples, eval_samples, options, chosen, model_name, notes,
                            load_batch=load_batch, evaluator=evaluator)
    t0 = time.perf_counter()
    by_annotations = model is not None and calib is None
    settings = dict(options.settings(), calibration=calib or ("model annotations" if by_annotations else
                                                              "embedded"),
                    evaluation=evaluation or ("embedded test set" if model is None else "random inputs"
                                              if by_annotations else "calibration data"))
    with atomic_directory(out_dir, command=QUANTIZED_MODEL.command) as tmp:
        write_quantized_model(result.model, chosen, tmp, source=str(model_path), settings=settings)
        write_accuracy_report(result.report, tmp)
    seconds = dict(result.seconds, write=time.perf_counter() - t0)
    return dataclasses.replace(result, out_dir=out_dir, seconds=seconds)


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
    lines += [f"  {line}" for line in output_lines(r)]
    lines += [f"  warning: {w}" for w in r.warnings]
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
