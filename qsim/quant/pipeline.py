"""`qsim quantize`: float model + calibration data → integer model folder + accuracy report.

    load (qsim.load) → calibrate (observers over float execution) → lower (TOSA integer
    graph) → evaluate (float vs integer on evaluation data) → write, atomically, one
    folder: the quantized model (main.sknd + .dat) and the report (report.json,
    report.html, PNG plots).

With no model argument, the embedded Fashion-MNIST CNN (qsim.zoo) is used with its
embedded calibration images and labelled test subset.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import ir
from ..atomic import atomic_directory
from ..errors import DataError, UsageError
from ..report.accuracy import AccuracyReport, write_accuracy_report
from .calibrate import calibrate
from .data import Samples, load_samples
from .evaluate import evaluate
from .lower import LoweredModel, lower_graph
from .observers import ObserverKind
from .params import Granularity, Precision, QuantConfig


@dataclass(frozen=True)
class QuantizeOptions:
    observer: ObserverKind = ObserverKind.MINMAX
    precision: Precision = Precision.INT8
    weight_granularity: Granularity = Granularity.PER_CHANNEL
    double_round: bool = False
    backend: str = "kernels"              # integer execution during evaluation
    calib_limit: int | None = None        # use at most this many calibration samples
    eval_limit: int | None = None
    show_progress: bool = True

    @property
    def config(self) -> QuantConfig:
        return QuantConfig(precision=self.precision, weight_granularity=self.weight_granularity,
                           double_round=self.double_round)

    def settings(self) -> dict:
        return {"observer": self.observer.value, "precision": self.precision.value,
                "weights": self.weight_granularity.value,
                "rounding": "double" if self.double_round else "single",
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


def quantize_graph(graph: ir.Graph, calib: Samples, evaluation: Samples | None = None,
                   options: QuantizeOptions = QuantizeOptions(), name: str | None = None,
                   notes: tuple[str, ...] = ()) -> QuantizeResult:
    """Calibrates, lowers and evaluates `graph` (no files read or written)."""
    name = name or graph.name
    input_name, _ = _single_input(graph)
    seconds = {}
    t0 = time.perf_counter()
    n_calib = len(calib) if options.calib_limit is None else min(options.calib_limit, len(calib))
    qparams = calibrate(graph, (feed for feed, _ in calib.feeds(input_name, n_calib)),
                        options.config, options.observer, total=n_calib,
                        show_progress=options.show_progress)
    seconds["calibrate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = lower_graph(graph, qparams, options.config)
    seconds["lower"] = time.perf_counter() - t0
    if evaluation is None:
        evaluation = calib
        notes = notes + ("No evaluation data was given: the report compares float and integer "
                         "results on the calibration data.",)
    t0 = time.perf_counter()
    n_eval = len(evaluation) if options.eval_limit is None else min(options.eval_limit, len(evaluation))
    report = evaluate(graph, model, evaluation.feeds(input_name, n_eval), total=n_eval,
                      backend=options.backend, name=name, settings=options.settings(),
                      show_progress=options.show_progress, notes=notes)
    seconds["evaluate"] = time.perf_counter() - t0
    return QuantizeResult(model, report, None, seconds)


def load_float_model(path) -> ir.Graph:
    """Loads a float model keeping whole every compound operator the lowering has a rule for
    (nn.conv, nn.batch_norm, nn.linear, ...): the rules see the operator, not its expansion."""
    from ..loader import load, model_kind
    from .lower import lowering_rules

    if model_kind(str(path)) == "skriptnd":
        return load(path, keep=set(lowering_rules()))
    return load(path)


def default_output(model_name: str) -> Path:
    return Path("qsim-out") / f"{model_name}-int8"


def quantize_command(model: str | None, calib: str | None, out: str | None,
                     options: QuantizeOptions = QuantizeOptions(),
                     evaluation: str | None = None) -> QuantizeResult:
    """The whole `qsim quantize` job; returns the result with the folder written."""
    from .qmodel import save_quantized

    notes: tuple[str, ...] = ()
    if model is None:
        from .. import zoo
        zm = zoo.default_model()
        graph = load_float_model(zm.path)
        model_name = zm.name
        calib_samples = Samples(zoo.calibration_images()) if calib is None else None
        if evaluation is None:
            images, labels = zoo.test_subset()
            eval_samples = Samples(images, labels)
            notes = (f"Evaluated on the embedded Fashion-MNIST test subset ({len(labels)} "
                     "labelled images).",)
        else:
            eval_samples = None
    else:
        graph = load_float_model(model)
        model_name = Path(model).stem if Path(model).is_file() else Path(model).resolve().name
        calib_samples, eval_samples = None, None
        if calib is None:
            raise UsageError("no calibration data: pass --calib DATA (.npy, .npz or a folder of "
                             "images)", hint="qsim quantize MODEL --calib calib.npz")
    input_name, sample_shape = _single_input(graph)
    if calib_samples is None:
        calib_samples = load_samples(calib, input_name, sample_shape)
    if evaluation is not None:
        eval_samples = load_samples(evaluation, input_name, sample_shape)
    result = quantize_graph(graph, calib_samples, eval_samples, options, model_name, notes)
    target = Path(out) if out is not None else default_output(model_name)
    with atomic_directory(target) as tmp:
        save_quantized(result.model, tmp)
        write_accuracy_report(result.report, tmp)
    return QuantizeResult(result.model, result.report, target, result.seconds)


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
        n = len(calib) if options.calib_limit is None else min(options.calib_limit, len(calib))
        input_name, _ = _single_input(graph)
        qparams = calibrate(graph, (feed for feed, _ in calib.feeds(input_name, n)), options.config,
                            options.observer, total=n, show_progress=options.show_progress)
        _EMBEDDED[options] = lower_graph(graph, qparams, options.config)
    return _EMBEDDED[options]
