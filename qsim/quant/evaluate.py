"""Evaluation: the float graph and its integer lowering on the same inputs.

Per float tensor with an integer counterpart: SQNR of the dequantized integer
values against the float values (accumulated over all samples), and a histogram
of the error in units of the tensor's quantization step. On the outputs: top-1
agreement between float and integer, and top-1 accuracy of each when labels
are known. The result is the AccuracyReport that qsim.report writes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from .. import ir
from ..progress import progress
from ..report.accuracy import AccuracyReport, TensorAccuracy
from ..runtime.executor import execute
from .lower import LoweredModel
from .params import dequantize, quantize

ERROR_EDGES_LSB = np.linspace(-4.0, 4.0, 65)   # histogram of (dequantized - float) / scale


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
        out[t.name] = quantize(value, model.input_quant[name], what=name).astype(t.dtype.numpy)
    return out


def float_view(model: LoweredModel, name: str, int_values: dict[str, np.ndarray]) -> np.ndarray:
    """The dequantized integer value of float tensor `name`, in the float layout."""
    v = model.tensor_map[name]
    return dequantize(int_values[v.name], v.quant).transpose(np.argsort(v.perm))


def evaluate(float_graph: ir.Graph, model: LoweredModel,
             samples: Iterable[tuple[dict[str, np.ndarray], int | None]], *, total: int | None = None,
             backend: str = "kernels", name: str = "model", settings: dict | None = None,
             show_progress: bool = True, notes: tuple[str, ...] = ()) -> AccuracyReport:
    """Runs both graphs on every (feed, label) sample and summarizes the agreement."""
    import qsim.skriptnd.execute  # noqa: F401  (float operators' runners)

    watched = [n for n in model.tensor_map if not float_graph.tensor(n).is_constant]
    stats = {n: _TensorStats() for n in watched}
    out_name = float_graph.outputs[0]
    n_samples = agree = float_correct = int_correct = labelled = 0
    for feed, label in progress(samples, "evaluating", total=total, enabled=show_progress):
        fvals = execute(float_graph, feed)
        ivals = execute(model.graph, quantize_feed(model, feed), backend=backend)
        for n in watched:
            f = np.asarray(fvals[n], dtype=np.float64)
            d = float_view(model, n, ivals)
            s = stats[n]
            err = d - f
            s.signal += float(np.sum(f * f))
            s.noise += float(np.sum(err * err))
            lsb = err / float(model.tensor_map[n].quant.scales()[0])
            s.counts += np.histogram(np.clip(lsb, ERROR_EDGES_LSB[0], ERROR_EDGES_LSB[-1]),
                                     ERROR_EDGES_LSB)[0]
        f_top = int(np.argmax(np.asarray(fvals[out_name]).reshape(-1)))
        i_top = int(np.argmax(float_view(model, out_name, ivals).reshape(-1)))
        n_samples += 1
        agree += f_top == i_top
        if label is not None:
            labelled += 1
            float_correct += f_top == int(label)
            int_correct += i_top == int(label)
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
