"""`qsim quantize --target cvm`: calibrate, lower to CVM operators, evaluate (no files).

Mirrors pipeline.quantize_graph: the same calibration observers (on a symmetric grid of the
CVM precision), the CVM lowering (cvm_lower.py), and the same evaluation (evaluate.py,
unchanged: the CVM model is a LoweredModel whose QuantInfo are power-of-two and symmetric,
and the executor runs `cvm.*` ops through the cvm dialect). The result is a QuantizeResult
whose report reads like the TOSA one, so the two can be compared side by side.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from .. import ir
from ..errors import QsimError
from .calibrate import calibrate
from .cvm_lower import CalibrationScheme, CvmConfig, lower_cvm_graph
from .data import Samples
from .evaluate import Batched, evaluate
from .lower import LoweredModel
from .pipeline import EVAL_BATCH, QuantizeOptions, QuantizeResult, _single_input


def _same_but_batch(small: ir.Graph, big: ir.Graph, size: int) -> bool:
    """Whether `big` is `small` with every non-constant tensor's leading extent 1 -> size
    and otherwise the same operators, attributes and constants (so each sample of a batch
    gets exactly the batch-1 bits: no CVM operator the lowering emits mixes batch rows)."""
    if [op.kind.name for op in small.ops] != [op.kind.name for op in big.ops]:
        return False
    for a, b in zip(small.ops, big.ops):
        if a.inputs != b.inputs or a.outputs != b.outputs:
            return False
    for name, t in small.tensors.items():
        u = big.tensors.get(name)
        if u is None or u.quant != t.quant or u.dtype is not t.dtype:
            return False
        if t.is_constant:
            if not (u.is_constant and np.array_equal(u.data, t.data)):
                return False
        elif not t.shape or t.shape[0] != 1 or u.shape != (size,) + tuple(t.shape[1:]):
            return False
    return True


def cvm_batched(model: LoweredModel, qparams, config: CvmConfig,
                load_batch: Callable[[int], ir.Graph] | None, size: int) -> Batched | None:
    """The float graph and its CVM lowering at batch `size`, when the model loads at that
    batch and the lowering differs from the batch-1 one in the batch axis only."""
    if load_batch is None or size <= 1:
        return None
    try:
        big = load_batch(size)
        big_model = lower_cvm_graph(big, qparams, config)
    except QsimError:
        return None
    if not _same_but_batch(model.graph, big_model.graph, size):
        return None
    return Batched(size, big, big_model)


def cvm_calibrate(graph: ir.Graph, calib: Samples, config: CvmConfig,
                  options: QuantizeOptions) -> dict[str, ir.QuantInfo]:
    input_name, _ = _single_input(graph)
    n = len(calib) if options.calib_limit is None else min(options.calib_limit, len(calib))
    return calibrate(graph, (feed for feed, _ in calib.feeds(input_name, n)),
                     CalibrationScheme(config.precision), options.observer, total=n,
                     show_progress=options.show_progress)


def cvm_quantize_graph(graph: ir.Graph, calib: Samples, evaluation: Samples | None = None,
                       options: QuantizeOptions = QuantizeOptions(), config: CvmConfig = CvmConfig(),
                       name: str | None = None, notes: tuple[str, ...] = (),
                       load_batch: Callable[[int], ir.Graph] | None = None) -> QuantizeResult:
    """Calibrates, lowers to CVM and evaluates `graph` (no files read or written).

    `options` supplies the observer, the evaluation backend, the sample limits and the
    progress bar (its TOSA-only fields precision / weight granularity / rounding are not
    used); `config` the CVM precisions. `load_batch(n)` as in pipeline.quantize_graph."""
    name = name or graph.name
    input_name, _ = _single_input(graph)
    seconds = {}
    t0 = time.perf_counter()
    qparams = cvm_calibrate(graph, calib, config, options)
    seconds["calibrate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = lower_cvm_graph(graph, qparams, config)
    seconds["lower"] = time.perf_counter() - t0
    if evaluation is None:
        evaluation = calib
        notes = notes + ("No evaluation data was given: the report compares float and integer "
                         "results on the calibration data.",)
    t0 = time.perf_counter()
    n_eval = len(evaluation) if options.eval_limit is None else min(options.eval_limit, len(evaluation))
    batched = cvm_batched(model, qparams, config, load_batch, min(EVAL_BATCH, n_eval))
    settings = dict(config.settings(), observer=options.observer.value, backend=options.backend)
    report = evaluate(graph, model, evaluation.feeds(input_name, n_eval), total=n_eval,
                      backend=options.backend, name=name, settings=settings,
                      show_progress=options.show_progress, notes=notes, batched=batched)
    seconds["evaluate"] = time.perf_counter() - t0
    return QuantizeResult(model, report, None, seconds)


_EMBEDDED: dict[tuple, LoweredModel] = {}


def embedded_cvm_model(config: CvmConfig = CvmConfig(),
                       options: QuantizeOptions = QuantizeOptions(show_progress=False)) -> LoweredModel:
    """The embedded Fashion-MNIST CNN lowered to CVM with the embedded calibration set,
    cached per process, config and options."""
    key = (config, options)
    if key not in _EMBEDDED:
        from .. import zoo
        from .pipeline import load_float_model
        graph = load_float_model(zoo.default_model().path)
        qparams = cvm_calibrate(graph, Samples(zoo.calibration_images()), config, options)
        _EMBEDDED[key] = lower_cvm_graph(graph, qparams, config)
    return _EMBEDDED[key]
