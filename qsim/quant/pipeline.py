"""`qsim quantize`: float model + calibration data → integer model folder + accuracy report.

    load (qsim.load) → calibrate (observers over float execution) → lower (TOSA integer
    graph) → evaluate (float vs integer on evaluation data) → write, atomically, one
    folder: the quantized model (main.sknd + .dat) and the report (report.json,
    report.html, PNG plots).

With no model argument, the embedded Fashion-MNIST CNN (qsim.zoo) is used with its
embedded calibration images and labelled test subset.
"""
from __future__ import annotations

import math
import time

import numpy as np
from typing import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import ir
from ..atomic import atomic_directory
from ..outpath import QUANTIZED_MODEL, check_output
from ..errors import DataError, QsimError, UsageError
from ..report.accuracy import write_accuracy_report
from .accuracy import AccuracyReport
from .annotations import check_annotations
from .calibrate import calibrate
from .data import Samples, load_samples
from .evaluate import Batched, evaluate
from .lower import LoweredModel, lower_graph
from .observers import ObserverKind
from .params import Granularity, Precision, QuantConfig
from .rounding import ROUNDING_MODES, InputMoments, watch_layers


@dataclass(frozen=True)
class QuantizeOptions:
    observer: ObserverKind = ObserverKind.PERCENTILE   # best measured on both models (reports/accuracy.md)
    precision: Precision = Precision.INT8
    weight_granularity: Granularity = Granularity.PER_CHANNEL
    double_round: bool = False
    bias_correction: bool = True          # correct each output's mean shift from weight rounding
    weight_rounding: str | None = None    # "adaptive" (least layer-output error, rounding.py)
                                          # or "nearest"; None: the target's default
                                          # (adaptive for TOSA, nearest for CVM)
    backend: str = "kernels"              # integer execution during evaluation
    calib_limit: int | None = None        # use at most this many calibration samples
    eval_limit: int | None = None
    show_progress: bool = True

    @property
    def config(self) -> QuantConfig:
        return QuantConfig(precision=self.precision, weight_granularity=self.weight_granularity,
                           double_round=self.double_round)

    @property
    def rounding_mode(self) -> str:
        """The weight rounding this run uses: the TOSA default when none was chosen."""
        return self.weight_rounding or "adaptive"

    def settings(self) -> dict:
        return {"observer": self.observer.value, "precision": self.precision.value,
                "weights": self.weight_granularity.value,
                "rounding": "double" if self.double_round else "single",
                "bias_correction": self.bias_correction,
                "weight_rounding": self.rounding_mode,
                "backend": self.backend}


@dataclass(frozen=True)
class QuantizeResult:
    model: LoweredModel
    report: AccuracyReport
    out_dir: Path | None = None
    seconds: dict = field(default_factory=dict)


def _single_input(graph: ir.Graph) -> tuple[str, tuple[int, ...]]:
    if len(graph.inputs) != 1:
        raise UsageError(f"model {graph.name!r} has {len(graph.inputs)} inputs; qsim quantize "
                         "calibrates single-input models", hint="see README: multi-input models")
    name = graph.inputs[0]
    shape = graph.tensor(name).shape
    if any(d is None for d in shape) or not shape or shape[0] != 1:
        raise UsageError(f"model input {name!r} has shape {list(shape)}; qsim quantize needs a "
                         "static shape with batch 1", hint="declare the input as [1, ...]")
    return name, tuple(int(d) for d in shape[1:])


EVAL_BATCH = 100


@dataclass
class Calibration:
    """What calibration learnt: activation parameters, and the statistics the weight recipe
    uses (channel means for bias correction, input moments for adaptive rounding)."""
    qparams: dict[str, ir.QuantInfo]
    config: QuantConfig
    channel_means: dict | None
    input_moments: InputMoments | None

    def lower(self, graph: ir.Graph) -> LoweredModel:
        return lower_graph(graph, self.qparams, self.config, self.channel_means, self.input_moments)


def calibrate_model(graph: ir.Graph, calib: Samples, input_name: str,
                    options: QuantizeOptions) -> Calibration:
    """Runs the float graph over the calibration samples (at most options.calib_limit)."""
    rounding = options.rounding_mode
    if rounding not in ROUNDING_MODES:
        raise UsageError(f"unknown weight rounding {rounding!r}",
                         hint=f"choose one of {', '.join(ROUNDING_MODES)}")
    n_calib = len(calib) if options.calib_limit is None else min(options.calib_limit, len(calib))
    means: dict | None = {} if options.bias_correction else None
    moments = watch_layers(graph) if rounding == "adaptive" else None
    qparams = calibrate(graph, (feed for feed, _ in calib.feeds(input_name, n_calib)),
                        options.config, options.observer, total=n_calib,
                        show_progress=options.show_progress, channel_means=means,
                        input_moments=moments)
    return Calibration(qparams, options.config, means, moments)


def batched_models(graph: ir.Graph, model: LoweredModel, stats: "Calibration",
                   load_batch: Callable[[int], ir.Graph] | None,
                   size: int = EVAL_BATCH) -> Batched | None:
    """The float graph and its lowering at batch `size`, when the model can be loaded at
    another batch size (a SkriptND graph attribute `batch`), else None. The lowering reuses
    the batch-1 quantization parameters, so the integer weights and scales are identical;
    the batch graphs must differ from the batch-1 ones in the leading axis only."""
    if load_batch is None or size <= 1:
        return None
    try:
        big = load_batch(size)
    except QsimError:
        return None
    big_model = stats.lower(big)

    def same_but_batch(a: ir.Graph, b: ir.Graph, names) -> bool:
        for n in names:
            if n not in a.tensors or n not in b.tensors:
                return False
            sa, sb = a.tensor(n).shape, b.tensor(n).shape
            if not sa or sa[0] != 1 or sb[0] != size or tuple(sa[1:]) != tuple(sb[1:]):
                return False
        return True

    watched = list(model.tensor_map)
    if not (same_but_batch(graph, big, [n for n in watched if not graph.tensor(n).is_constant])
            and same_but_batch(model.graph, big_model.graph,
                               [lw.name for n, lw in model.tensor_map.items()
                                if not graph.tensor(n).is_constant])):
        return None
    return Batched(size, big, big_model)


def quantize_graph(graph: ir.Graph, calib: Samples, evaluation: Samples | None = None,
                   options: QuantizeOptions = QuantizeOptions(), name: str | None = None,
                   notes: tuple[str, ...] = (),
                   load_batch: Callable[[int], ir.Graph] | None = None) -> QuantizeResult:
    """Calibrates, lowers and evaluates `graph` (no files read or written). `load_batch(n)`,
    when given, loads the same float model at batch n, to evaluate n samples at a time."""
    name = name or graph.name
    input_name, _ = _single_input(graph)
    check_annotations(graph, options.precision)
    seconds = {}
    t0 = time.perf_counter()
    stats = calibrate_model(graph, calib, input_name, options)
    seconds["calibrate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = stats.lower(graph)
    seconds["lower"] = time.perf_counter() - t0
    if evaluation is None:
        evaluation = calib
        notes = notes + ("No evaluation data was given: the report compares float and integer "
                         "results on the calibration data.",)
    t0 = time.perf_counter()
    n_eval = len(evaluation) if options.eval_limit is None else min(options.eval_limit, len(evaluation))
    batched = batched_models(graph, model, stats, load_batch, min(EVAL_BATCH, n_eval))
    report = evaluate(graph, model, evaluation.feeds(input_name, n_eval), total=n_eval,
                      backend=options.backend, name=name, settings=options.settings(),
                      show_progress=options.show_progress, notes=notes, batched=batched)
    seconds["evaluate"] = time.perf_counter() - t0
    return QuantizeResult(model, report, None, seconds)


def load_float_model(path, batch: int | None = None) -> ir.Graph:
    """Loads a float model keeping whole every compound operator the lowering has a rule for
    (nn.conv, nn.batch_norm, nn.linear, ...): the rules see the operator, not its expansion.
    `batch` sets a SkriptND model's graph attribute `batch` (an error if it has none)."""
    from ..loader import load, model_kind
    from .lower import lowering_rules

    if model_kind(str(path)) == "skriptnd":
        return load(path, keep=set(lowering_rules()),
                    attribs=None if batch is None else {"batch": batch})
    if batch is not None:
        raise UsageError(f"{path}: an NNEF 1.0 model has a fixed batch size")
    return load(path)


def default_output(model_name: str, precision: Precision = Precision.INT8) -> Path:
    suffix = "int8" if precision is Precision.INT8 else "int16x8"
    return Path("qsim-out") / f"{model_name}-{suffix}"


def _embedded_evaluation(subset_only: bool) -> tuple[Samples, str]:
    """The Fashion-MNIST test set for the embedded model: the full 10k images when Debian's
    dataset-fashion-mnist is installed (and not `subset_only`), else the embedded 1000."""
    from .. import zoo
    from ..zoo.fashion_mnist import DEBIAN_DIR
    full = None if subset_only else zoo.full_test_set()
    if full is not None:
        images, labels = full
        return Samples(images, labels), (f"Evaluated on the full Fashion-MNIST test set "
                                          f"({len(labels)} labelled images, {DEBIAN_DIR}).")
    images, labels = zoo.test_subset()
    why = "" if subset_only else " (install Debian's dataset-fashion-mnist for the full 10k)"
    return Samples(images, labels), (f"Evaluated on the embedded Fashion-MNIST test subset "
                                      f"({len(labels)} labelled images){why}.")


def model_name_of(path: str | Path) -> str:
    p = Path(path)
    if p.is_dir():
        return p.resolve().name
    if p.name in ("main.sknd", "graph.nnef"):
        return p.resolve().parent.name
    name = p.name
    for suffix in (".tar.gz", ".tgz", ".tar", ".sknd", ".nnef"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return p.stem


def quantize_command(model: str | None, calib: str | None, out: str | None,
                     options: QuantizeOptions = QuantizeOptions(),
                     evaluation: str | None = None, subset_only: bool = False,
                     target: str = "tosa", cvm_precision: int = 8) -> QuantizeResult:
    """The whole `qsim quantize` job; returns the result with the folder written.

    With no `model`, the embedded Fashion-MNIST CNN with its embedded calibration images,
    evaluated on the Fashion-MNIST test set. Otherwise `calib` is required; `evaluation`
    defaults to the calibration data (the report says so)."""
    from .qmodel import save_quantized

    if target not in ("tosa", "cvm"):
        raise UsageError(f"--target {target}: unknown operator set", hint="use tosa or cvm")
    if target == "cvm" and options.precision is not Precision.INT8:
        raise UsageError("--target cvm quantizes to CVM's INT8/INT32 tensors; --precision 16x8 "
                         "is a TOSA mode", hint="drop --precision or use --target tosa")
    if target == "cvm" and options.weight_rounding == "adaptive":
        raise UsageError("--target cvm rounds weights to nearest on its power-of-two grid; "
                         "--weight-rounding adaptive is a TOSA option",
                         hint="drop --weight-rounding or use --target tosa")
    for flag, value in (("--calib-limit", options.calib_limit), ("--eval-limit", options.eval_limit)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} {value}: must be at least 1")
    notes: tuple[str, ...] = ()
    if model is None:
        from .. import zoo
        model_path = zoo.default_model().path
    else:
        model_path = Path(model)
        if calib is None:
            raise UsageError("no calibration data: pass --calib DATA (.npy, .npz or a folder of "
                             "images)", hint=f"qsim quantize {model} --calib calib.npz")
    model_name = model_name_of(model_path)
    out_dir = Path(out) if out is not None else (
        default_output(model_name, options.precision) if target == "tosa"
        else Path("qsim-out") / f"{model_name}-cvm{cvm_precision}")
    check_output(out if out is not None else out_dir,
                 "-o" if out is not None else "the default output folder",
                 [("model", model_path), ("calibration data", calib),
                  ("evaluation data", evaluation)], replaces=QUANTIZED_MODEL)
    graph = load_float_model(model_path)
    input_name, sample_shape = _single_input(graph)
    if calib is not None:
        calib_samples = load_samples(calib, input_name, sample_shape)
    else:
        calib_samples = Samples(zoo.calibration_images())
    if evaluation is not None:
        eval_samples = load_samples(evaluation, input_name, sample_shape)
    elif model is None:
        eval_samples, note = _embedded_evaluation(subset_only)
        notes += (note,)
    else:
        eval_samples = None
    if eval_samples is not None and eval_samples.labels is not None:
        check_labels(eval_samples, int(np.prod(graph.tensor(graph.outputs[0]).shape)))
    load_batch = lambda n: load_float_model(model_path, batch=n)  # noqa: E731
    if target == "cvm":
        from .cvm_lower import CvmConfig
        from .cvm_pipeline import cvm_quantize_graph, save_cvm_model
        cvm_config = CvmConfig(precision=cvm_precision)
        result = cvm_quantize_graph(graph, calib_samples, eval_samples, options, cvm_config,
                                    model_name, notes, load_batch=load_batch)
        save = save_cvm_model
    else:
        result = quantize_graph(graph, calib_samples, eval_samples, options, model_name, notes,
                                load_batch=load_batch)
        save = save_quantized
    t0 = time.perf_counter()
    settings = dict(options.settings(), calibration=calib or "embedded", evaluation=evaluation
                    or ("embedded test set" if model is None else "calibration data"))
    if target == "cvm":
        settings.update(cvm_config.settings())
    with atomic_directory(out_dir) as tmp:
        save(result.model, tmp, source=str(model_path), settings=settings)
        write_accuracy_report(result.report, tmp)
    seconds = dict(result.seconds, write=time.perf_counter() - t0)
    return QuantizeResult(result.model, result.report, out_dir, seconds)


def summary_lines(result: QuantizeResult) -> list[str]:
    """The console summary of a `qsim quantize` run."""
    r = result.report
    pct = lambda x: "n/a" if x is None else f"{100 * x:.2f} %"  # noqa: E731
    dialect = "CVM" if any(op.kind.dialect == "cvm" for op in result.model.graph.ops) else "TOSA"
    lines = [f"quantized {r.model}: {len(result.model.graph.ops)} {dialect} operators, "
             f"evaluated on {r.eval_samples} samples",
             f"  top-1 agreement float vs integer: {pct(r.top1_agreement)}"]
    if r.float_top1 is not None:
        lines.append(f"  top-1 accuracy: float {pct(r.float_top1)}, integer {pct(r.int8_top1)}")
    finite = [t for t in r.tensors if math.isfinite(t.sqnr_db)]
    if finite:
        worst = min(finite, key=lambda t: t.sqnr_db)
        lines.append(f"  lowest per-tensor SQNR: {worst.sqnr_db:.1f} dB ({worst.name})")
    timing = ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items())
    lines.append(f"  time: {timing}")
    if result.out_dir is not None:
        lines.append(f"wrote {result.out_dir}/ (main.sknd, .dat files, quantization.json, "
                     "report.json, report.html, plots)")
    return lines


def check_labels(samples: Samples, classes: int) -> None:
    if samples.labels is not None and (samples.labels.min() < 0 or samples.labels.max() >= classes):
        raise DataError(f"labels must be class ids in [0, {classes}), got "
                        f"{int(samples.labels.min())}..{int(samples.labels.max())}")


_EMBEDDED: dict[QuantizeOptions, LoweredModel] = {}


def embedded_quantized_model(options: QuantizeOptions = QuantizeOptions(show_progress=False)) -> LoweredModel:
    """The embedded Fashion-MNIST CNN quantized in memory with the embedded calibration set
    (what `qsim quantize` with no arguments writes), cached per process and options."""
    if options not in _EMBEDDED:
        from .. import zoo
        graph = load_float_model(zoo.default_model().path)
        calib = Samples(zoo.calibration_images())
        input_name, _ = _single_input(graph)
        _EMBEDDED[options] = calibrate_model(graph, calib, input_name, options).lower(graph)
    return _EMBEDDED[options]
