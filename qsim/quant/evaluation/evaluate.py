"""Evaluation: the float graph and its integer lowering on the same inputs.

Per float tensor with an integer counterpart: SQNR of the dequantized integer
values against the float values (accumulated over all samples), and a histogram
of the error in units of the tensor's quantization step. Per scored output
(qsim.quant.evaluation.scoring): SQNR, largest error and share of elements within one step;
for class-vector outputs also top-1 agreement between float and integer, and
top-1 accuracy of each when labels are known. The result is an AccuracyReport
(qsim.quant.accuracy).
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from ... import ir
from ...kernels.cpu_features import current_isa
from ...kernels.extensions import extension
from ...progress import Progress
from ...runtime.executor import execute
from ...threads import apply_blas_threads, thread_count, wait_in_order
from ..accuracy import AccuracyReport, OutputAccuracy, TensorAccuracy
from ..calibration.data import UNNAMED
from ..lowering.float_side import LoweredModel
from ..lowering.integer_inputs import as_integer_input
from ..params import dequantize, quantize, scheme_of
from .scoring import OutputRole, ScoredOutput, choose_outputs, label_targets, old_rule_warning

ERROR_EDGES_LSB = np.linspace(-4.0, 4.0, 65)   # histogram of (dequantized - float) / scale

_quant_ops = extension("_quant_ops")   # raises KernelsUnavailableError when missing or broken


@dataclass
class _TensorStats:
    signal: float = 0.0
    noise: float = 0.0
    counts: np.ndarray = field(default_factory=lambda: np.zeros(len(ERROR_EDGES_LSB) - 1, np.int64))
    # a list: each sample's (signal, noise) is appended instead of summed (distributed.py merges)
    per_sample: list | None = None

    def sqnr_db(self) -> float:
        if self.noise == 0.0:
            return math.inf
        if self.signal == 0.0:
            return -math.inf
        return 10.0 * math.log10(self.signal / self.noise)


@dataclass(frozen=True)
class _IntegerView:
    """Where float tensor `name`'s integer counterpart is and how to read it in the float
    layout: the integer tensor's name, the axes that bring it to the float layout, its
    scales and zero points along the float layout's channel axis (one of each: per tensor)."""
    int_name: str
    axes: tuple[int, ...]
    scale: np.ndarray           # [C] float64
    zero_point: np.ndarray      # [C] int64
    channel_axis: int | None    # in the float layout
    lsb: float                  # the histogram's unit: the first scale

    @staticmethod
    def of(model: LoweredModel, name: str) -> "_IntegerView":
        v = model.tensor_map[name]
        perm = np.asarray(v.perm, dtype=np.int64)
        axis = None if v.quant.axis is None else int(perm[v.quant.axis])
        return _IntegerView(v.name, tuple(int(a) for a in np.argsort(perm)),
                            np.ascontiguousarray(v.quant.scales(), dtype=np.float64).reshape(-1),
                            np.ascontiguousarray(v.quant.zero_points(), dtype=np.int64).reshape(-1),
                            axis, float(v.quant.scales()[0]))

    def add(self, stats: _TensorStats, float_value, int_values: dict[str, np.ndarray], rows: int | None) -> None:
        """Adds the first `rows` samples' (None: the whole value, one sample) signal, noise and error
        histogram to `stats`, one compiled pass (kernels/quant_ops.pyx add_error_stats) with the
        per-element values of float_view: (q - zp) * scale - f in float64, in units of `lsb`. The
        integer tensor is read through its transposed view (no copy in the float layout). The
        sums go sample by sample into the running totals: the same bits for any batch size."""
        f = np.asarray(float_value)
        if f.dtype not in (np.float32, np.float64):
            f = f.astype(np.float64)
        f = np.ascontiguousarray(first_rows(f, rows))
        q = int_values[self.int_name]
        if q.dtype not in (np.int8, np.int16, np.int32, np.int64):
            q = q.astype(np.int64)
        q = _three_axes(first_rows(q.transpose(self.axes), rows))
        inner = 1 if self.channel_axis is None else int(np.prod(f.shape[self.channel_axis + 1:], dtype=np.int64))
        sample = f.size // rows if rows else f.size
        # per_sample: each sample's totals as the running totals take them in (distributed.py)
        sums = None if stats.per_sample is None else np.empty((f.size // max(sample, 1), 2))
        stats.signal, stats.noise = _quant_ops.add_error_stats(
            current_isa().code, q, f.reshape(-1), self.scale, self.zero_point, max(inner, 1), self.lsb,
            ERROR_EDGES_LSB, stats.counts, max(sample, 1), stats.signal, stats.noise,
            *(() if sums is None else (sums,)))     # the serial run calls it as before the option
        if sums is not None:
            stats.per_sample.extend(map(tuple, sums.tolist()))


def first_rows(a: np.ndarray, rows: int | None) -> np.ndarray:
    """The first `rows` samples of a batched value; None: the whole value, of any rank (a rank-0
    output, e.g. ReduceMean with keepdims=0, has no sample axis to slice)."""
    return a if rows is None else a[:rows]


def _three_axes(a: np.ndarray) -> np.ndarray:
    """`a` (any strides) as a 3-D view with the same elements in the same (C) order: extent-1
    axes dropped, neighbours merged where the outer one steps over the inner one exactly
    (an NHWC tensor read as NCHW becomes [N, C, H*W] with strides [HWC, 1, C]); a copy only
    when more than three axes remain."""
    shape, strides = [], []
    for extent, stride in zip(a.shape, a.strides):
        if extent == 1:
            continue
        if shape and strides[-1] == extent * stride:
            shape[-1] *= extent
            strides[-1] = stride
        else:
            shape.append(extent)
            strides.append(stride)
    if len(shape) > 3:
        return np.ascontiguousarray(a).reshape(1, 1, -1)
    while len(shape) < 3:
        shape.insert(0, 1)
        strides.insert(0, 0)
    return np.lib.stride_tricks.as_strided(a, shape, strides, writeable=False)


class _BatchStats:
    """The error statistics of one batch, taken from the float execution's stream: each watched
    tensor's figures are added as soon as the float executor has made it (the integer values of
    the batch are already there), so no float activation outlives its last reader. With more
    than one thread the additions run on one worker thread beside the float execution
    (add_error_stats releases the GIL), in the order the tensors come; `wait` waits for them.
    One call per tensor and batch, each on one thread: the same figures for any thread count."""

    def __init__(self, views: dict[str, _IntegerView], stats: dict[str, _TensorStats],
                 ivals: dict[str, np.ndarray], rows: int | None, worker: ThreadPoolExecutor | None):
        self.views, self.stats, self.ivals, self.rows, self.worker = views, stats, ivals, rows, worker
        self.pending: list = []
        self.done: set[str] = set()

    def __call__(self, name: str, value: np.ndarray) -> None:
        if name not in self.views or name in self.done:
            return
        self.done.add(name)
        if self.worker is None:
            self.views[name].add(self.stats[name], value, self.ivals, self.rows)
        else:
            self.pending.append(self.worker.submit(self.views[name].add, self.stats[name], value,
                                                   self.ivals, self.rows))

    def take_unstreamed(self, fvals: dict[str, np.ndarray]) -> None:
        """Adds what the stream did not carry (graph inputs: kept in `fvals`)."""
        for name in self.views:
            if name not in self.done:
                self(name, fvals[name])

    def wait(self) -> None:
        """Waits for the batch's additions; the first failure, in tensor order, is raised."""
        wait_in_order(self.pending)


def quantize_feed(model: LoweredModel, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Float graph inputs → integer graph inputs (on each input's QuantInfo)."""
    out = {}
    for name, value in feed.items():
        t = model.graph.tensor(model.tensor_map[name].name)
        fixed = as_integer_input(value, t.dtype, name)   # token ids, masks: taken as they are
        if fixed is not None:
            out[t.name] = fixed
            continue
        out[t.name] = quantized(value, model.input_quant[t.name], t.dtype.numpy, name)
    return out


def quantized(value, quant: ir.QuantInfo, dtype, what: str = "tensor") -> np.ndarray:
    """params.quantize(value, quant).astype(dtype); per tensor into 8- to 32-bit codes in one
    compiled pass (quant_ops.quantize_per_tensor: the same integers, no float64 temporaries),
    else, or where that pass leaves a value to numpy's float -> int64 cast (not finite, beyond
    2^62 steps), params.quantize itself."""
    x, dtype = np.asarray(value), np.dtype(dtype)
    if quant.axis is None and x.dtype in (np.float32, np.float64) and dtype in (np.int8, np.int16, np.int32):
        scheme, info = scheme_of(quant), np.iinfo(dtype)
        if info.min <= scheme.qmin and scheme.qmax <= info.max:
            out = np.empty(x.shape, dtype)
            if _quant_ops.quantize_per_tensor(current_isa().code, np.ascontiguousarray(x).reshape(-1), float(quant.scales()[0]),
                                              int(quant.zero_points()[0]), scheme.qmin, scheme.qmax,
                                              out.reshape(-1)):
                return out
    return quantize(x, quant, what=what).astype(dtype)


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
    """Labels per output over the batch: {output name (UNNAMED: unnamed labels): [rows] int64}."""
    feed = {n: np.concatenate([f[n] for f in feeds]) for n in feeds[0]}
    if any(x is None for x in labels):
        return feed, {}
    rows = [x if isinstance(x, dict) else {UNNAMED: x} for x in labels]
    return feed, {k: np.asarray([r[k] for r in rows], np.int64) for k in rows[0]}


@dataclass
class _OutputStats:
    """Running figures of one scored output over the evaluation samples."""
    output: ScoredOutput
    scale: float
    signal: float = 0.0
    noise: float = 0.0
    max_error_lsb: float = 0.0
    elements: int = 0
    within_one_lsb: int = 0
    agree: int = 0
    labelled: int = 0
    float_correct: int = 0
    int_correct: int = 0
    per_sample: list | None = None     # as _TensorStats.per_sample

    def add(self, f: np.ndarray, q: np.ndarray, labels: np.ndarray | None, samples: int = 1) -> None:
        """Adds `samples` samples (f and q: [samples, ...], or one sample of any shape); the
        sums of squares per sample, in order, so the same bits for any batch size."""
        err = q - f
        if samples == 1:
            sums = [(float(np.sum(f * f)), float(np.sum(err * err)))]
        else:
            sums = [(float(np.sum(x * x)), float(np.sum(d * d)))
                    for x, d in zip(f.reshape(samples, -1), err.reshape(samples, -1))]
        if self.per_sample is not None:
            self.per_sample.extend(sums)
        else:
            for signal, noise in sums:
                self.signal += signal
                self.noise += noise
        lsb = np.abs(err) / self.scale
        if lsb.size:
            self.max_error_lsb = max(self.max_error_lsb, float(lsb.max()))
        self.elements += int(lsb.size)
        self.within_one_lsb += int(np.count_nonzero(lsb <= 1.0))
        if self.output.role is OutputRole.CLASSES:
            rows = f.size // max(1, self.output.classes)
            f_top = np.argmax(f.reshape(rows, -1), axis=1)
            i_top = np.argmax(q.reshape(rows, -1), axis=1)
            self.agree += int(np.sum(f_top == i_top))
            if labels is not None:
                self.labelled += rows
                self.float_correct += int(np.sum(f_top == labels))
                self.int_correct += int(np.sum(i_top == labels))

    def result(self, samples: int) -> OutputAccuracy:
        classes = self.output.role is OutputRole.CLASSES
        return OutputAccuracy(
            name=self.output.name, sample_shape=self.output.sample_shape, role=self.output.role.value,
            reason=self.output.reason, sqnr_db=_TensorStats(self.signal, self.noise).sqnr_db(),
            max_error_lsb=self.max_error_lsb,
            within_one_lsb=self.within_one_lsb / self.elements if self.elements else 0.0,
            top1_agreement=(self.agree / samples if samples else 0.0) if classes else None,
            float_top1=self.float_correct / self.labelled if self.labelled else None,
            int8_top1=self.int_correct / self.labelled if self.labelled else None,
            labelled=self.labelled)


def _pad_rows(feed: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
    """A short last batch is filled up by repeating its last sample (rows dropped later)."""
    out = {}
    for n, v in feed.items():
        extra = size - v.shape[0]
        out[n] = np.concatenate([v, np.repeat(v[-1:], extra, axis=0)]) if extra else v
    return out


def evaluate(float_graph: ir.Graph, model: LoweredModel,
             samples: Iterable[tuple[dict[str, np.ndarray], object]], *, total: int | None = None,
             backend: str = "kernels", name: str = "model", settings: dict | None = None,
             show_progress: bool = True, notes: tuple[str, ...] = (),
             batched: Batched | None = None,
             outputs: tuple[ScoredOutput, ...] | None = None,
             outputs_only: bool = False, tally: dict | None = None) -> AccuracyReport:
    """Runs both graphs on every (feed, labels) sample (feeds with a batch axis of 1; labels
    None, an int, or {output name: int} as Samples.feeds gives them) and summarizes the
    agreement. `outputs`: the scored outputs (default: every output, scoring.choose_outputs,
    unnamed labels going to the classification outputs). With `batched`, samples run
    `batched.size` at a time. `outputs_only`: no per-tensor figures, only the outputs' (the
    float graph is another model than the one lowered, e.g. a QDQ model's float original, whose
    inner tensors need not be the lowered graph's even where the names match). `tally` (a dict: qsim.quant.evaluation.distributed): each sample's sums are kept
    apart, and the running figures are left in it ("tensors", "outputs", "samples")."""
    apply_blas_threads()     # QSIM_THREADS for the float GEMMs

    if outputs is None:
        outputs = choose_outputs(float_graph)
    # (a bool mask input is the same in both graphs: nothing to compare)
    watched = [n for n in model.tensor_map
               if not float_graph.tensor(n).is_constant and float_graph.tensor(n).dtype is not ir.DType.BOOL
               and (not outputs_only or n in float_graph.outputs)]
    stats = {n: _TensorStats() for n in watched}
    scored = [_OutputStats(o, float(model.tensor_map[o.name].quant.scales()[0])) for o in outputs]
    if tally is not None:
        for figures in (*stats.values(), *scored):
            figures.per_sample = []
    unnamed_targets = label_targets(outputs)
    size = batched.size if batched is not None else 1
    fgraph, imodel = (batched.float_graph, batched.model) if batched is not None else (float_graph, model)
    views = {n: _IntegerView.of(imodel, n) for n in watched}
    # kept through a batch: the integer tensors the statistics and scores read (int8 mostly;
    # the int32 accumulators and the rest go after their last reader), and the float values
    # the stream does not carry (graph inputs) or the scores read
    int_keep = {v.int_name for v in views.values()} | {imodel.tensor_map[o.output.name].name for o in scored}
    produced = {name for op in fgraph.ops for name in op.outputs}
    float_keep = {o.output.name for o in scored} | {n for n in watched if n not in produced}
    streamed = [n for n in watched if n in produced]
    worker = ThreadPoolExecutor(1, thread_name_prefix="qsim-stats") if thread_count() > 1 else None
    n_samples = 0
    # with the worker, a batch's statistics may run on while the next batch's integer graph runs
    # (the worker takes them in order: the same figures); at most two batches' values are held
    previous: _BatchStats | None = None
    bar = Progress("evaluating", total, enabled=show_progress)
    try:
        for feed, labels in _batches(samples, size):
            # one sample at a time unless batched: its batch axis need not lead (a sequence-first
            # [S, 1, E] input), so nothing is padded or cut
            rows = next(iter(feed.values())).shape[0] if batched is not None else 1
            kept_rows = rows if batched is not None else None     # None: the whole value
            if batched is not None:
                feed = _pad_rows(feed, size)
            ivals = execute(imodel.graph, quantize_feed(imodel, feed), backend=backend, keep=int_keep)
            if previous is not None:      # its statistics ran on beside this integer execution
                previous.wait()
            batch = _BatchStats(views, stats, ivals, kept_rows, worker)
            # only the watched tensors are streamed: a fused conv + relu/clamp whose own output has
            # no integer view writes only the bounded one
            fvals = execute(fgraph, feed, keep=float_keep, on_value=batch, stream=streamed)
            batch.take_unstreamed(fvals)
            previous = batch
            for o in scored:
                n = o.output.name
                own = labels.get(n, labels.get(UNNAMED) if n in unnamed_targets else None)
                o.add(first_rows(np.asarray(fvals[n], dtype=np.float64), kept_rows),
                      first_rows(float_view(imodel, n, ivals), kept_rows), own, rows)
            n_samples += rows
            bar.advance(rows)
        if previous is not None:
            previous.wait()
    finally:
        bar.close()
        if worker is not None:
            worker.shutdown(wait=True)
    if tally is not None:
        tally.update(tensors=stats, outputs=scored, samples=n_samples)
    return accuracy_report(float_graph, outputs, stats, scored, n_samples, name, settings, notes)


def accuracy_report(float_graph: ir.Graph, outputs: tuple[ScoredOutput, ...], stats: dict[str, _TensorStats],
                    scored: list[_OutputStats], n_samples: int, name: str, settings: dict | None,
                    notes: tuple[str, ...]) -> AccuracyReport:
    """The report of evaluate's running figures (`stats` in the watched tensors' order)."""
    tensors = tuple(TensorAccuracy(n, _producer_kind(float_graph, n), stats[n].sqnr_db(),
                                   tuple(int(c) for c in stats[n].counts),
                                   tuple(float(e) for e in ERROR_EDGES_LSB)) for n in stats)
    per_output = tuple(o.result(n_samples) for o in scored)
    primary = next((o for o in per_output if o.top1_agreement is not None), None)
    # only where every output is scored: a user who chose outputs knows what the report shows
    every = {o.name for o in outputs} == set(float_graph.outputs)
    warning = old_rule_warning(float_graph, outputs) if every else None
    return AccuracyReport(
        model=name, eval_samples=n_samples,
        top1_agreement=primary.top1_agreement if primary else None,
        float_top1=primary.float_top1 if primary else None,
        int8_top1=primary.int8_top1 if primary else None,
        tensors=tensors, settings=dict(settings or {}), notes=notes, outputs=per_output,
        warnings=(warning,) if warning else ())


def _producer_kind(graph: ir.Graph, name: str) -> str:
    op = graph.producer(name)
    return op.kind.name if op is not None else "input"
