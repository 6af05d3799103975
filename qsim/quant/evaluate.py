"""Evaluation: the float graph and its integer lowering on the same inputs.

Per float tensor with an integer counterpart: SQNR of the dequantized integer
values against the float values (accumulated over all samples), and a histogram
of the error in units of the tensor's quantization step. On the outputs: top-1
agreement between float and integer, and top-1 accuracy of each when labels
are known. The result is an AccuracyReport (qsim.quant.accuracy).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from .. import ir
from ..kernels.extensions import extension
from ..threads import apply_blas_threads
from ..progress import Progress
from .accuracy import AccuracyReport, TensorAccuracy
from ..runtime.executor import execute
from ..threads import apply_blas_threads
from .float_side import LoweredModel
from .params import dequantize, quantize

ERROR_EDGES_LSB = np.linspace(-4.0, 4.0, 65)   # histogram of (dequantized - float) / scale

_quant_ops = extension("_quant_ops")   # raises KernelsUnavailableError when missing or broken


@dataclass
class _TensorStats:
    signal: float = 0.0
    noise: float = 0.0
    counts: np.ndarray = field(default_factory=lambda: np.zeros(len(ERROR_EDGES_LSB) - 1, np.int64))

    def sqnr_db(self) -> float:
        if self.noise == 0.0:
            return math.inf
        if self.signal == 0.0:
            return -math.inf
        return 10.0 * math.log10(self.signal / self.noise)


def quantize_feed(model: LoweredModel, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Float graph inputs → integer graph inputs (on each input's QuantInfo)."""
    out = {}
    for name, value in feed.items():
        t = model.graph.tensor(model.tensor_map[name].name)
        out[t.name] = quantize(value, model.input_quant[t.name], what=name).astype(t.dtype.numpy)
    return out


def float_view(model: LoweredModel, name: str, int_values: dict[str, np.ndarray]) -> np.ndarray:
    """The dequantized integer value of float tensor `name`, in the float layout."""
    v = model.tensor_map[name]
    return dequantize(int_values[v.name], v.quant).transpose(np.argsort(v.perm))


@dataclass(frozen=True)
class Batched:
    """The float graph and its lowering built for a batch of `size` samples (same
    quantization parameters as the batch-1 model, so every sample's integer results are
    those of the batch-1 model: TOSA operators never mix samples of the batch axis)."""
    size: int
    float_graph: ir.Graph
    model: LoweredModel


def _batches(samples, size: int):
    """Groups (feed, label) samples into (feed with up to `size` rows, labels or None)."""
    feeds, labels = [], []
    for feed, label in samples:
        feeds.append(feed)
        labels.append(label)
        if len(feeds) == size:
            yield _stack(feeds, labels)
            feeds, labels = [], []
    if feeds:
        yield _stack(feeds, labels)


def _stack(feeds, labels):
    feed = {n: np.concatenate([f[n] for f in feeds]) for n in feeds[0]}
    return feed, (None if any(x is None for x in labels) else np.asarray(labels, np.int64))


def _pad_rows(feed: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
    """A short last batch is filled up by repeating its last sample (rows dropped later)."""
    out = {}
    for n, v in feed.items():
        extra = size - v.shape[0]
        out[n] = np.concatenate([v, np.repeat(v[-1:], extra, axis=0)]) if extra else v
    return out


def evaluate(float_graph: ir.Graph, model: LoweredModel,
             samples: Iterable[tuple[dict[str, np.ndarray], int | None]], *, total: int | None = None,
             backend: str = "kernels", name: str = "model", settings: dict | None = None,
             show_progress: bool = True, notes: tuple[str, ...] = (),
             batched: Batched | None = None) -> AccuracyReport:
    """Runs both graphs on every (feed, label) sample (feeds with a batch axis of 1) and
    summarizes the agreement. With `batched`, samples run `batched.size` at a time."""
    apply_blas_threads()     # QSIM_THREADS for the float GEMMs

    watched = [n for n in model.tensor_map if not float_graph.tensor(n).is_constant]
    stats = {n: _TensorStats() for n in watched}
    out_name = float_graph.outputs[0]
    size = batched.size if batched is not None else 1
    fgraph, imodel = (batched.float_graph, batched.model) if batched is not None else (float_graph, model)
    n_samples = agree = float_correct = int_correct = labelled = 0
    bar = Progress("evaluating", total, enabled=show_progress)
    try:
        for feed, labels in _batches(samples, size):
            rows = next(iter(feed.values())).shape[0]
            feed = _pad_rows(feed, size)
            fvals = execute(fgraph, feed)
            ivals = execute(imodel.graph, quantize_feed(imodel, feed), backend=backend)
            for n in watched:
                f = np.asarray(fvals[n], dtype=np.float64)[:rows]
                err = float_view(imodel, n, ivals)[:rows] - f
                s = stats[n]
                s.signal += float(np.sum(f * f))
                s.noise += float(np.sum(err * err))
                lsb = err / float(imodel.tensor_map[n].quant.scales()[0])
                # np.histogram(np.clip(lsb, -4, 4), 64 bins, range (-4, 4)), in one pass
                _quant_ops.add_clipped_histogram(np.ascontiguousarray(lsb).reshape(-1), ERROR_EDGES_LSB[0],
                                                 ERROR_EDGES_LSB[-1], ERROR_EDGES_LSB, s.counts)
            f_top = np.argmax(np.asarray(fvals[out_name])[:rows].reshape(rows, -1), axis=1)
            i_top = np.argmax(float_view(imodel, out_name, ivals)[:rows].reshape(rows, -1), axis=1)
            n_samples += rows
            agree += int(np.sum(f_top == i_top))
            if labels is not None:
                labelled += rows
                float_correct += int(np.sum(f_top == labels))
                int_correct += int(np.sum(i_top == labels))
            bar.advance(rows)
    finally:
        bar.close()
    tensors = tuple(TensorAccuracy(n, _producer_kind(float_graph, n), stats[n].sqnr_db(),
                                   tuple(int(c) for c in stats[n].counts),
                                   tuple(float(e) for e in ERROR_EDGES_LSB)) for n in watched)
    return AccuracyReport(
        model=name, eval_samples=n_samples,
        top1_agreement=agree / n_samples if n_samples else 0.0,
        float_top1=float_correct / labelled if labelled else None,
        int8_top1=int_correct / labelled if labelled else None,
        tensors=tensors, settings=dict(settings or {}), notes=notes)


def _producer_kind(graph: ir.Graph, name: str) -> str:
    op = graph.producer(name)
    return op.kind.name if op is not None else "input"
