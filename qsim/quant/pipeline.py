"""The quantization pipeline, one for every target (target.py): float graph + calibration
samples → integer model + accuracy figures, in memory.

    fold constant sub-graphs (fold_constants.py) → calibrate (observers over float
    execution, with the target's activation scheme and weight statistics) → lower (the
    target's rules) → evaluate (float vs integer on the evaluation samples, a batch at a
    time where the lowering allows it)

`quantize_graph` reads and writes no files: the `qsim quantize` command
(qsim.commands.quantize) loads the data, writes the folder (qmodel.py) and the report.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np
from typing import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import ir, zoo
from ..errors import DataError, QsimError, UsageError
from ..loader import load, model_kind
from .accuracy import AccuracyReport
from .calibration.annotations import MissingParameters, annotated_input_samples, annotated_parameters
from .calibration.calibrate import calibrate
from .calibration.data import Samples
from .calibration.model_inputs import as_input, check_index_ranges, check_sample_types, sample_shapes
from .cvm.context import CvmConfig
from .cvm.target import CvmTarget
from .evaluation.evaluate import Batched, evaluate
from .evaluation.scoring import ScoredOutput, check_label_range, choose_outputs, label_targets
from .fold_constants import fold_constant_ops
from .lowering.float_side import LoweredModel
from .lowering.softmax_mask import masked_tensors
from .options import QuantizeOptions
from .params import Precision
from .qmodel import METADATA_FILE, is_quantized_model
from .rebatch import rebatched_graph
from .rules import RULES
from .target import Calibration, Target, TargetKind
from .tosa.target import TosaTarget


@dataclass(frozen=True)
class QuantizeResult:
    model: LoweredModel
    report: AccuracyReport
    target: Target
    out_dir: Path | None = None
    seconds: dict = field(default_factory=dict)
    summary: tuple[str, ...] = ()        # further lines of the command's summary (a precision plan's)


def single_input(graph: ir.Graph) -> tuple[str, tuple[int, ...]]:
    """The model's first input and the shape of one sample (model_inputs.sample_shapes: the
    input's shape without its batch axis, the first axis of extent 1)."""
    name, shape = next(iter(sample_shapes(graph).items()))
    return name, shape


def input_feeds(graph: ir.Graph, samples: Samples, input_name: str, limit: int | None = None):
    """`samples.feeds` with each input's sample in that input's shape (its batch axis where the
    model has it) and type: float32, integers for an integer input (token ids, positions) and
    bool for a mask, which float data cannot feed (model_inputs.py)."""
    check_sample_types(graph, samples.arrays(input_name), "the samples")
    for feed, label in samples.feeds(input_name, limit):
        yield {k: as_input(graph, k, v) for k, v in feed.items()}, label


def check_samples(graph: ir.Graph, samples: Samples | None, input_name: str, what: str) -> None:
    """The samples give every graph input, each of its kind, every id in its table's range."""
    if samples is None:
        return
    arrays = samples.arrays(input_name)
    missing = [n for n in graph.inputs if n not in arrays]
    if missing:
        raise DataError(f"the {what} give no samples for model input(s) {', '.join(map(repr, missing))}",
                        hint="model inputs: " + ", ".join(graph.inputs) + "; store one array per input "
                             "(an .npz keyed by input name)")
    check_sample_types(graph, arrays, f"the {what}")
    check_index_ranges(graph, arrays, f"the {what}")


EVAL_BATCH = 100                 # samples per evaluation batch at most ...
EVAL_BATCH_BYTES = 512 << 20     # ... and at most this many bytes of float + integer activations
                                 # (every tensor of the graphs, though evaluation streams and holds
                                 # far less: the bound also keeps a batch's tensors near the caches.
                                 # EfficientNet-Lite0 gets 5; measured at 1 thread, CPU ms a crop:
                                 # batch 1: 61-66, 5: 52-53, 10: 54-55, 20: 56. The report is the
                                 # same bits for any batch size: evaluation/evaluate.py sums per sample)


def activation_bytes(graph: ir.Graph) -> int:
    """Bytes of every non-constant tensor of `graph` (one execution's values)."""
    return sum(int(np.prod(t.shape, dtype=np.int64)) * t.dtype.numpy.itemsize
               for t in graph.tensors.values() if not t.is_constant and t.is_static)


EVAL_BATCH_MIN_SAMPLES = 32     # fewer evaluation samples run one at a time: loading and lowering
                                # the model at another batch costs about what batching saves on
                                # a few dozen samples (ResNet-18, 16 samples: 2.4 s vs 1.6 s CPU)


def eval_batch_size(graph: ir.Graph, model: LoweredModel, samples: int) -> int:
    """Samples per evaluation batch: 1 for fewer than EVAL_BATCH_MIN_SAMPLES samples, else
    EVAL_BATCH, fewer when a batch's activations (float and integer graph) would pass
    EVAL_BATCH_BYTES, never more than there are samples."""
    if samples < EVAL_BATCH_MIN_SAMPLES:
        return 1
    per_sample = max(1, activation_bytes(graph) + activation_bytes(model.graph))
    return max(1, min(EVAL_BATCH, samples, EVAL_BATCH_BYTES // per_sample))


def calibrate_model(graph: ir.Graph, calib: Samples | None, input_name: str,
                    options: QuantizeOptions, target: Target) -> Calibration:
    """Runs the float graph over the calibration samples (at most options.calib_limit); with
    no samples, the model's own annotations are the parameters (annotated_calibration)."""
    if calib is None:
        return Calibration(annotated_parameters(graph))
    if options.plan is not None:
        return calibrate_each_width(graph, calib, input_name, options)
    means, moments = target.weight_statistics(graph, options)
    n_calib = len(calib) if options.calib_limit is None else min(options.calib_limit, len(calib))
    qparams = calibrate(graph, (feed for feed, _ in input_feeds(graph, calib, input_name, n_calib)),
                        target.calibration_scheme(), options.observer, total=n_calib,
                        show_progress=options.show_progress, channel_means=means,
                        input_moments=moments, skip=masked_tensors(graph))
    return Calibration(qparams, means, moments)


def calibrate_each_width(graph: ir.Graph, calib: Samples, input_name: str,
                         options: QuantizeOptions) -> Calibration:
    """A per-layer plan's calibration (tosa/mixed_precision.py): every tensor at each width,
    int8 (asymmetric) and int16 (symmetric), as `--precision` calibrates it; the weight
    statistics are float-side, the same at both."""
    by = {p: calibrate_model(graph, calib, input_name, dataclasses.replace(options, precision=p, plan=None),
                             TosaTarget(dataclasses.replace(options.config, precision=p, plan=None)))
          for p in Precision}
    base = by[Precision.INT8]
    return Calibration(base.qparams, base.channel_means, base.input_moments,
                       {p: c.qparams for p, c in by.items()})


def lower_annotated(graph: ir.Graph, calibration: Calibration, target: Target) -> LoweredModel:
    """Lowers a model quantized by its annotations alone; a tensor the lowering needs that has
    none is a UsageError naming every such tensor (found by lowering once with placeholders)."""
    recording = MissingParameters(calibration.qparams)
    try:
        model = target.lower(graph, dataclasses.replace(calibration, qparams=recording))
    except QsimError:
        if not recording.missing:
            raise
        model = None
    if recording.missing:
        names = ", ".join(repr(n) for n in recording.missing[:10])
        more = f" and {len(recording.missing) - 10} more" if len(recording.missing) > 10 else ""
        raise UsageError(f"model {graph.name!r} has no quantization annotation for {len(recording.missing)} "
                         f"tensor(s) the integer graph needs: {names}{more}",
                         hint="pass --calib DATA to calibrate them (annotated tensors keep their "
                              "parameters), or quantize them in the model (QuantizeLinear/"
                              "DequantizeLinear pairs, @quantize, graph.quant)")
    return model


def same_but_batch(graph: ir.Graph, model: LoweredModel, big: ir.Graph, big_model: LoweredModel,
                   size: int) -> bool:
    """Whether the float graph `big` and its lowering `big_model` are `graph` and `model` with
    every non-constant tensor's leading extent 1 -> size and otherwise the same operators,
    parameters and constants (constant tensors and tensor-valued attributes): then each sample of a batch gets exactly the batch-1 bits (no
    operator a lowering emits mixes batch rows)."""
    def batch_of(a: ir.Tensor, b: ir.Tensor | None) -> bool:
        return (b is not None and bool(a.shape) and a.shape[0] == 1
                and tuple(b.shape) == (size,) + tuple(a.shape[1:]))

    for name in model.tensor_map:
        t = graph.tensors.get(name)
        if t is None or (not t.is_constant and not batch_of(t, big.tensors.get(name))):
            return False
    small, large = model.graph, big_model.graph
    if [op.kind.name for op in small.ops] != [op.kind.name for op in large.ops]:
        return False
    for a, b in zip(small.ops, large.ops):
        if a.inputs != b.inputs or a.outputs != b.outputs:
            return False
        for key, value in a.attrs.items():     # tensor attributes (TOSA weights, tables, ...)
            if isinstance(value, np.ndarray) and not (isinstance(b.attrs.get(key), np.ndarray)
                                                      and np.array_equal(value, b.attrs[key])):
                return False
    for name, t in small.tensors.items():
        u = large.tensors.get(name)
        if u is None or u.quant != t.quant or u.dtype is not t.dtype:
            return False
        if t.is_constant:
            if not (u.is_constant and np.array_equal(u.data, t.data)):
                return False
        elif not batch_of(t, u):
            return False
    return True


def batched_models(graph: ir.Graph, model: LoweredModel, calibration: Calibration, target: Target,
                   load_batch: Callable[[int], ir.Graph] | None,
                   size: int = EVAL_BATCH) -> Batched | None:
    """The float graph and its lowering at batch `size`, when the model can be loaded at
    another batch size (a SkriptND graph attribute `batch`, an ONNX dynamic first input
    dimension) and the lowering differs from the batch-1 one in the batch axis only
    (same_but_batch); else None. A TOSA lowering is the batch-1 integer graph rebatched
    (rebatched_graph: its weights, scales and tables as they are, not lowered again, adaptive
    rounding included); another target's, or one rebatched_graph refuses, is lowered again from
    the batch-`size` float graph with the batch-1 calibration (so the same integer weights and
    scales)."""
    if load_batch is None or size <= 1:
        return None
    try:
        big = fold_constant_ops(load_batch(size))
        rebatched = rebatched_graph(model.graph, size)
        big_model = (dataclasses.replace(model, graph=rebatched) if rebatched is not None
                     else target.lower(big, calibration))
    except QsimError:
        return None
    if not same_but_batch(graph, model, big, big_model, size):
        return None
    return Batched(size, big, big_model)


def quantize_graph(graph: ir.Graph, calib: Samples | None, evaluation: Samples | None = None,
                   options: QuantizeOptions = QuantizeOptions(), target: Target | None = None,
                   name: str | None = None, notes: tuple[str, ...] = (),
                   load_batch: Callable[[int], ir.Graph] | None = None,
                   reference: ir.Graph | None = None,
                   evaluator: Callable[..., AccuracyReport] | None = None) -> QuantizeResult:
    """Calibrates, lowers to `target`'s operators (default: TOSA with the options' config) and
    evaluates `graph` (no files read or written). With `calib` None the model's annotations
    (@quantize, graph.quant, ONNX QDQ pairs) are its only parameters: no calibration, no bias
    correction or adaptive rounding (they need data). `load_batch(n)`, when given, loads the same
    float model at batch n, to evaluate n samples at a time. `reference`: the float graph the
    integer model is scored against instead of `graph` (a QDQ model's float original: the
    outputs only, one sample at a time). `evaluator`: evaluate's stand-in
    with its arguments (qsim.quant.evaluation.distributed: the same report over Dask; not with
    `reference`, which is scored in this process)."""
    target = target or TosaTarget(options.config)
    target.check_options(options)
    name = name or graph.name
    graph = fold_constant_ops(graph)      # weights computed from constants become constants
    input_name, _ = single_input(graph)
    check_samples(graph, calib, input_name, "calibration data")
    check_samples(graph, evaluation, input_name, "evaluation data")
    outputs = scored_outputs(graph, evaluation or calib, options.score_outputs)
    target.check_graph(graph)
    seconds = {}
    t0 = time.perf_counter()
    calibration = calibrate_model(graph, calib, input_name, options, target)
    seconds["calibrate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = target.lower(graph, calibration) if calib is not None else lower_annotated(graph, calibration, target)
    seconds["lower"] = time.perf_counter() - t0
    if evaluation is None and calib is not None:
        evaluation = calib
        notes = notes + ("No evaluation data was given: the report compares float and integer "
                         "results on the calibration data.",)
    elif evaluation is None:
        if len(graph.inputs) > 1:
            raise UsageError(f"model {graph.name!r} has {len(graph.inputs)} inputs; without data qsim "
                             "generates inputs for one-input models only", hint="pass --eval DATA")
        evaluation = annotated_input_samples(graph, input_name)
        notes = notes + (f"No calibration or evaluation data was given: the report compares float and "
                         f"integer results on {len(evaluation)} seeded random inputs spread over the "
                         "input's annotated range; pass --eval for figures on real data.",)
    t0 = time.perf_counter()
    n_eval = len(evaluation) if options.eval_limit is None else min(options.eval_limit, len(evaluation))
    common = dict(total=n_eval, backend=options.backend, name=name, settings=target.report_settings(options),
                  show_progress=options.show_progress, notes=notes, outputs=outputs)
    feeds = input_feeds(graph, evaluation, input_name, n_eval)
    if reference is not None:
        report = evaluate(reference, model, feeds, batched=None, outputs_only=True, **common)
    else:
        batched = batched_models(graph, model, calibration, target, load_batch,
                                 eval_batch_size(graph, model, n_eval))
        report = (evaluator or evaluate)(graph, model, feeds, batched=batched, **common)
    seconds["evaluate"] = time.perf_counter() - t0
    return QuantizeResult(model, report, target, None, seconds)


def scored_outputs(graph: ir.Graph, samples: Samples | None,
                   requested: tuple[str, ...] = ()) -> tuple[ScoredOutput, ...]:
    """The outputs the report scores (qsim.quant.evaluation.scoring), with the samples' labels checked
    against each labelled output's classes (None: no samples, a model quantized by its
    annotations and evaluated on generated inputs, so no labels)."""
    if samples is None:
        return choose_outputs(graph, requested, labelled=(), unnamed_labels=False)
    outputs = choose_outputs(graph, requested, labelled=tuple(samples.output_labels),
                             unnamed_labels=samples.labels is not None)
    by_name = {o.name: o for o in outputs}
    for out_name, labels in samples.output_labels.items():
        if out_name in by_name:
            check_label_range(out_name, labels, by_name[out_name].classes, f"labels/{out_name}")
    if samples.labels is not None:
        for target_name in label_targets(outputs):
            check_label_range(target_name, samples.labels, by_name[target_name].classes)
    return outputs


def make_target(kind: TargetKind, options: QuantizeOptions = QuantizeOptions(),
                cvm_precision: int = 8) -> Target:
    """The target of `qsim quantize --target KIND`: TOSA with the options' config, or CVM at
    `cvm_precision` bits."""
    if kind is TargetKind.CVM:
        return CvmTarget(CvmConfig(precision=cvm_precision))
    return TosaTarget(options.config)


def load_float_model(path, batch: int | None = None) -> ir.Graph:
    """Loads a float model keeping whole every compound operator some target has a rule for
    (nn.conv, nn.batch_norm, nn.linear, ...): the rules see the operator, not its expansion.
    `batch` sets a SkriptND model's graph attribute `batch` (an error if it has none), an
    ONNX model's dynamic first input dimension (an error if its inputs have a fixed one) or
    the leading extent 1 of an NNEF 1.0 model's external inputs.
    A quantized-model folder is a UsageError: it holds integer operators already."""
    if is_quantized_model(path):
        raise UsageError(f"{path} is a quantized model folder (it has {METADATA_FILE}); qsim quantize "
                         "takes a float model", hint="quantize the float model it was made from")
    if model_kind(str(path)) == "skriptnd":
        keep = {kind for rules in RULES.values() for kind in rules}
        return load(path, keep=keep, attribs=None if batch is None else {"batch": batch})
    if model_kind(str(path)) == "onnx":
        graph = load(path, batch=batch or 1)
        if batch is not None and any(graph.tensor(n).shape[:1] != (batch,) for n in graph.inputs):
            raise UsageError(f"{path}: the ONNX model's inputs have a fixed batch size",
                             hint="export it with a dynamic first dimension to evaluate in batches")
        return graph
    # NNEF 1.0: the external inputs' leading extent 1 becomes `batch` (batched_models checks
    # that the result is the same model on more samples)
    return load(path, batch=batch or 1)


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


_EMBEDDED: dict[tuple, LoweredModel] = {}


def embedded_quantized_model(options: QuantizeOptions = QuantizeOptions(show_progress=False),
                             target: Target | None = None) -> LoweredModel:
    """The embedded Fashion-MNIST CNN quantized in memory for `target` (default: TOSA with the
    options' config) with the embedded calibration set (what `qsim quantize` with no model
    writes, without the evaluation), cached per process, options and target."""
    target = target or TosaTarget(options.config)
    key = (options, target)
    if key not in _EMBEDDED:
        graph = load_float_model(zoo.default_model().path)
        calib = Samples(zoo.calibration_images())
        input_name, _ = single_input(graph)
        _EMBEDDED[key] = target.lower(graph, calibrate_model(graph, calib, input_name, options, target))
    return _EMBEDDED[key]
