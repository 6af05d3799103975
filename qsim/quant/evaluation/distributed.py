"""`qsim quantize --eval DATA --workers N | --scheduler ADDR`: evaluate (evaluate.py) over Dask,
the samples cut into chunks that run as tasks on qsim.cluster's pools, with the report of the
serial run, bit for bit.

Why the bits are the serial run's: every figure of the report is a count (histogram bins,
elements within one step, top-1 hits: integers, exact in any order), a maximum (exact in any
order) or a float64 sum of squares. The serial run adds each sample's sum of squares to a
running total, sample after sample (evaluate.py, and kernels/quant_ops.pyx add_error_stats,
whose sample totals do not depend on how the samples are batched into calls). A chunk's task
returns those sample totals themselves (evaluate's `tally`), not a chunk total: `merge` puts
the chunks in sample order (each knows its first sample) and folds the totals in that order,
so it gives the serial run's sums whatever the order the chunks come back in and however the
samples were cut. A chunk is a whole number of evaluation batches (`Batched.size`): the same
batches, padded the same way, as the serial run.

The two graphs go to the cluster once per evaluation (DaskPool.keep) and the chunks are cut
from the samples as workers take them (DaskPool.run_stream: a bounded number in memory, no
barrier between rounds). Not the default: a LocalCluster takes about a second to start and each
chunk ships its samples, so a small job (the embedded 10k images: a few seconds serial) gains
little or nothing; the options ask for it explicitly (docs/quantize.md, reports/eval_scale.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from ... import ir
from ...cluster.distributed import InProcess, Task, open_pool
from ...errors import DataError
from ...progress import Progress
from ..accuracy import AccuracyReport
from ..lowering.float_side import LoweredModel
from .evaluate import Batched, _OutputStats, _TensorStats, accuracy_report, evaluate
from .scoring import ScoredOutput, choose_outputs

# Samples per task (chunk_size), rounded up to whole batches. A task costs Dask tens of
# milliseconds (its samples and figures sent, the scheduler's round trips), a 256-sample chunk
# of the embedded CNN a quarter of a second on one thread: fewer, larger chunks keep that share
# small, while enough of them per worker keep the workers' last chunks ending close together.
CHUNK_SAMPLES = 256         # the fewest
MAX_CHUNK_SAMPLES = 2048    # the most: a chunk's samples and per-sample figures stay small in memory
CHUNKS_PER_WORKER = 8       # aimed for, when the sample count is known


@dataclass(frozen=True)
class TensorPart:
    """One chunk's figures of one watched tensor."""
    sums: tuple[tuple[float, float], ...]     # each sample's (signal, noise), in sample order
    counts: tuple[int, ...]                   # the error histogram's bins


@dataclass(frozen=True)
class OutputPart:
    """One chunk's figures of one scored output (evaluate._OutputStats)."""
    sums: tuple[tuple[float, float], ...]
    max_error_lsb: float
    counts: tuple[int, ...]     # elements, within_one_lsb, agree, labelled, float_correct, int_correct


_COUNTED = ("elements", "within_one_lsb", "agree", "labelled", "float_correct", "int_correct")


@dataclass(frozen=True)
class ChunkFigures:
    """What a chunk's task returns: mergeable with the other chunks' (merge)."""
    start: int                  # the chunk's first sample in the evaluation order
    samples: int
    tensors: dict[str, TensorPart]
    outputs: tuple[OutputPart, ...]


def evaluate_chunk(float_graph: ir.Graph, model: LoweredModel, batched: Batched | None,
                   outputs: tuple[ScoredOutput, ...], backend: str, start: int,
                   chunk: list) -> ChunkFigures:
    """The task: evaluate on the samples `chunk` ((feed, label) pairs) that start at sample
    `start`, each sample's sums kept apart."""
    tally: dict = {}
    evaluate(float_graph, model, chunk, backend=backend, show_progress=False, batched=batched,
             outputs=outputs, tally=tally)
    tensors = {n: TensorPart(tuple(s.per_sample), tuple(int(c) for c in s.counts))
               for n, s in tally["tensors"].items()}
    parts = tuple(OutputPart(tuple(o.per_sample), o.max_error_lsb, tuple(getattr(o, k) for k in _COUNTED))
                  for o in tally["outputs"])
    return ChunkFigures(start, tally["samples"], tensors, parts)


def merge(parts: Iterable[ChunkFigures], model: LoweredModel,
          outputs: tuple[ScoredOutput, ...]) -> tuple[dict[str, _TensorStats], list[_OutputStats], int]:
    """The serial run's running figures from the chunks' (any order, any cut of the samples):
    the sample sums folded in sample order (module docstring), the counts added, the maxima
    taken. The chunks must cover samples 0..n-1 once each."""
    ordered = sorted(parts, key=lambda p: p.start)
    expected = 0
    for part in ordered:
        if part.start != expected:
            what = f"sample {expected} is missing" if part.start > expected else \
                f"sample {part.start} is in two chunks"
            raise DataError(f"evaluation chunks do not cover the samples: {what}")
        expected += part.samples
    names = list(ordered[0].tensors) if ordered else []
    stats = {}
    for name in names:
        figures = _TensorStats()
        for part in ordered:
            tensor = part.tensors[name]
            figures.counts += np.asarray(tensor.counts, np.int64)
            for signal, noise in tensor.sums:
                figures.signal += signal
                figures.noise += noise
        stats[name] = figures
    scored = [_OutputStats(o, float(model.tensor_map[o.name].quant.scales()[0])) for o in outputs]
    for k, figures in enumerate(scored):
        for part in ordered:
            out = part.outputs[k]
            for signal, noise in out.sums:
                figures.signal += signal
                figures.noise += noise
            figures.max_error_lsb = max(figures.max_error_lsb, out.max_error_lsb)
            for attr, count in zip(_COUNTED, out.counts):
                setattr(figures, attr, getattr(figures, attr) + count)
    return stats, scored, expected


def chunk_size(batched: Batched | None, total: int | None, workers: int) -> int:
    """Samples per chunk: the total spread over CHUNKS_PER_WORKER chunks per worker, within
    [CHUNK_SAMPLES, MAX_CHUNK_SAMPLES] (CHUNK_SAMPLES when the total is unknown), in whole
    evaluation batches (the serial run's batches: module docstring)."""
    step = batched.size if batched is not None else 1
    want = CHUNK_SAMPLES if total is None else -(-total // (max(1, workers) * CHUNKS_PER_WORKER))
    samples = max(CHUNK_SAMPLES, min(want, MAX_CHUNK_SAMPLES))
    return -(-samples // step) * step


def _chunks(samples: Iterable, size: int) -> Iterator[tuple[int, list]]:
    """(first sample, up to `size` samples) in order."""
    chunk: list = []
    start = 0
    for sample in samples:
        chunk.append(sample)
        if len(chunk) == size:
            yield start, chunk
            start, chunk = start + size, []
    if chunk:
        yield start, chunk


def evaluate_distributed(float_graph: ir.Graph, model: LoweredModel, samples: Iterable, *,
                         workers: int | None, scheduler: str | None, total: int | None = None,
                         backend: str = "kernels", name: str = "model", settings: dict | None = None,
                         show_progress: bool = True, notes: tuple[str, ...] = (),
                         batched: Batched | None = None,
                         outputs: tuple[ScoredOutput, ...] | None = None) -> AccuracyReport:
    """evaluate's report, computed on `workers` local worker processes or on the Dask cluster
    at `scheduler` (qsim.cluster.distributed.open_pool; $QSIM_SCHEDULER is not read: the
    evaluation runs on Dask only when asked). One worker: evaluate itself, here."""
    if outputs is None:
        outputs = choose_outputs(float_graph)
    serial = dict(total=total, backend=backend, name=name, settings=settings, show_progress=show_progress,
                  notes=notes, batched=batched, outputs=outputs)
    with open_pool(workers, scheduler or "") as pool:
        if isinstance(pool, InProcess):
            return evaluate(float_graph, model, samples, **serial)
        return evaluate_on(pool, float_graph, model, samples, **serial)


def evaluate_on(pool, float_graph: ir.Graph, model: LoweredModel, samples: Iterable, *, total: int | None,
                backend: str, name: str, settings: dict | None, show_progress: bool, notes: tuple[str, ...],
                batched: Batched | None, outputs: tuple[ScoredOutput, ...]) -> AccuracyReport:
    """evaluate_distributed on an open Dask `pool` (qsim.cluster.distributed.DaskPool)."""
    serial = dict(total=total, backend=backend, name=name, settings=settings, show_progress=show_progress,
                  notes=notes, batched=batched, outputs=outputs)
    size = chunk_size(batched, total, pool.workers)
    kept = (float_graph, model, batched, outputs)
    made, shown = [0], [0]          # samples put in tasks, samples the bar has counted

    def tasks() -> Iterator[Task]:
        for start, chunk in _chunks(samples, size):
            made[0] += len(chunk)
            yield Task(evaluate_chunk, (*kept, backend, start, chunk),
                       f"evaluate samples {start}-{start + len(chunk) - 1}", shared=(0, 1, 2, 3))

    def advance() -> None:
        # every chunk but the last made has `size` samples: the bar ends at the sample count
        step = min(size, made[0] - shown[0])
        shown[0] += step
        bar.advance(step)

    bar = Progress(f"evaluating ({pool.what})", total, enabled=show_progress)
    try:
        # the graphs go to the cluster once and stay there for every chunk; the chunks are cut
        # from the samples as workers take them (the samples in memory stay bounded)
        with pool.keep(*kept):
            parts: list[ChunkFigures] = pool.run_stream(tasks(), on_done=advance)
    finally:
        bar.close()
    if not parts:           # no samples: evaluate's report of none, every tensor listed
        return evaluate(float_graph, model, [], **serial)
    stats, scored, n_samples = merge(parts, model, outputs)
    return accuracy_report(float_graph, outputs, stats, scored, n_samples, name, settings, notes)

