"""`qsim quantize --target cvm`: calibrate, lower to CVM operators, evaluate (no files).

Mirrors pipeline.quantize_graph: the same calibration observers (on a symmetric grid of the
CVM precision), the CVM lowering (cvm_lower.py), and the same evaluation (evaluate.py,
unchanged: the CVM model is a LoweredModel whose QuantInfo are power-of-two and symmetric,
and the executor runs `cvm.*` ops through the cvm dialect). The result is a QuantizeResult
whose report reads like the TOSA one, so the two can be compared side by side.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from .. import ir
from ..errors import DataError, QsimError
from .calibrate import calibrate
from .cvm_lower import CalibrationScheme, CvmConfig, lower_cvm_graph
from .data import Samples
from .evaluate import Batched, evaluate
from .lower import Lowered, LoweredModel
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


# ---- model folders ------------------------------------------------------------------------------
def save_cvm_model(model: LoweredModel, folder: str | Path, *, source: str | None = None,
                   settings: dict | None = None) -> Path:
    """Writes the CVM model into `folder` (which may exist and hold other files, e.g. the
    report): main.sknd (`import cvm;`, each tensor's power-of-two scale and precision as its
    @quantize entry), the .dat constants, and quantization.json (qmodel's format, with
    settings["target"] = "cvm")."""
    from ..skriptnd.writer import write_model
    from .qmodel import METADATA_FILE, metadata

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    header = ("Integer model written by qsim quantize --target cvm (CVM operators, NCHW; "
              "every scale a power of two, @quantize bits = CVM precision)."
              + (f"\nSource: {source}" if source else ""))
    # write_model publishes a whole folder atomically: stage it inside `folder` (so a killed
    # run leaves nothing beside it), move the files up
    staging = Path(tempfile.mkdtemp(prefix=".qsim-cvm-", dir=folder))
    try:
        write_model(model.graph, staging / "model", header=header)
        for entry in sorted((staging / "model").iterdir()):
            os.replace(entry, folder / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    doc = metadata(model, source, dict(settings or {}, target="cvm"))
    (folder / METADATA_FILE).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return folder


def load_cvm_model(folder: str | Path) -> LoweredModel:
    """Reads a folder written by save_cvm_model back into a LoweredModel."""
    from ..loader import load
    from .qmodel import METADATA_FILE, _quant_from, read_metadata

    folder = Path(folder)
    doc = read_metadata(folder)
    where = str(folder / METADATA_FILE)
    if doc.get("settings", {}).get("target") != "cvm":
        raise DataError(f"{where}: not a CVM model (settings.target is "
                        f"{doc.get('settings', {}).get('target')!r})",
                        hint="TOSA model folders are read by qsim.quant.qmodel.load_quantized")
    graph = load(folder)
    if any(op.kind.dialect != "cvm" for op in graph.ops):
        raise DataError(f"{folder}: {METADATA_FILE} describes a CVM model, but main.sknd holds "
                        "other operators")
    tensor_map = {}
    for float_name, entry in doc.get("tensor_map", {}).items():
        name = entry.get("tensor") if isinstance(entry, dict) else None
        if name not in graph.tensors:
            raise DataError(f"{where}: tensor_map[{float_name!r}] names {name!r}, which main.sknd "
                            "does not have")
        tensor_map[float_name] = Lowered(name, graph.tensor(name).quant, tuple(entry.get("perm", ())))
    return LoweredModel(graph, _quant_from(graph, graph.inputs, where),
                        _quant_from(graph, graph.outputs, where), tensor_map)
