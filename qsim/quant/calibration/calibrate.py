"""Calibration: run the float graph over calibration inputs and choose every activation's
quantization parameters.

Annotations win: a tensor whose QuantInfo came from @quantize or graph.quant keeps it
exactly; every other non-constant tensor gets parameters from an observer
(min-max, percentile or MSE, ObserverKind) on the run's activation scheme; with the auto
observer, one of those ranges per tensor, chosen by the error it causes downstream on the first
calibration samples (choose.py).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Collection, Iterable

import numpy as np

from ... import ir
from ...errors import DataError
from ...kernels.cpu_features import current_isa
from ...kernels.extensions import extension
from ...progress import progress
from ...runtime.executor import execute
from ...threads import apply_blas_threads, thread_count, wait_in_order
from .choose import AUTO_SAMPLES, choose_observers
from .observers import ObserverKind, make_observer
from ..params import QuantConfig, annotated

# With more than one thread, a tensor of fewer elements than this is observed on the calling
# thread: handing it to the worker costs more than its compiled passes (the embedded CNN, whose
# activations are all below it, calibrated in 0.65 s at 2 threads against 0.41 s at 1). Each
# tensor always takes the same route (its size is fixed by the graph), so every statistic still
# sees its values in sample order: the same bits either way.
WORKER_MIN_ELEMENTS = 1 << 14

_quant_ops = extension("_quant_ops")   # raises KernelsUnavailableError when missing or broken


def calibrate(graph: ir.Graph, batches: Iterable[dict[str, np.ndarray]],
              config: QuantConfig = QuantConfig(), observer: ObserverKind | str = ObserverKind.MINMAX,
              total: int | None = None, show_progress: bool = True,
              channel_means: dict[str, np.ndarray] | None = None,
              input_moments=None, skip: Collection[str] = (),
              choices: dict[str, str] | None = None) -> dict[str, ir.QuantInfo]:
    """QuantInfo for every non-constant tensor of the float `graph`.

    `batches` yields {input name: float array}; each is one execution of the graph.
    `channel_means`, when given, is filled with each activation's mean per channel (axis 1,
    over all other axes and all samples), which bias correction uses.
    `input_moments` (rounding.InputMoments), when given, accumulates the input patch moments
    of the layers it watches, which adaptive weight rounding uses.
    `skip`: tensors no observer watches and that get no parameters (attention scores after a
    -inf mask, which only the integer softmax reads: lowering/softmax_mask.py).
    `choices`, when given with the auto observer, is filled with {tensor: chosen range's label}.
    """
    apply_blas_threads()     # QSIM_THREADS for the float GEMMs

    observers = {}
    sums: dict[str, np.ndarray] = {}
    for name, t in graph.tensors.items():
        if not t.is_constant and not annotated(t) and name not in skip:
            observers[name] = make_observer(observer, name=name)
    auto = (observer if isinstance(observer, ObserverKind) else ObserverKind.from_name(observer)) is ObserverKind.AUTO
    kept: list[dict[str, np.ndarray]] = []          # the samples the auto observer scores on
    if input_moments is not None:
        input_moments.expect_samples(total)
    averaged = ({name for name, t in graph.tensors.items() if not t.is_constant and len(t.shape) >= 2}
                if channel_means is not None else set())
    moment_inputs = input_moments.input_names() if input_moments is not None else set()

    def observe(name: str, value: np.ndarray) -> None:
        """Tensor `name`'s observer and channel mean for this sample."""
        if name in observers:
            observers[name].update(value)
        if name in averaged:
            sums[name] = sums.get(name, 0.0) + channel_mean(value)

    # With more than one thread the observers and channel means run on one worker thread beside
    # the float execution (their compiled passes release the GIL), in the order the tensors
    # come, so each statistic sees the same values in the same order: the same parameters for
    # any thread count. The moments stay on this thread. Each sample waits for its statistics
    # (no activation outlives its sample) and the first failure, in tensor order, is raised.
    worker = ThreadPoolExecutor(1, thread_name_prefix="qsim-calib") if thread_count() > 1 else None
    pending: list = []

    def take(name: str, value: np.ndarray) -> None:
        """Every statistic of tensor `name` for this sample, while its value is fresh."""
        if name in moment_inputs:
            input_moments.update_from(name, value)
        if name in observers or name in averaged:
            if worker is None or value.size < WORKER_MIN_ELEMENTS:
                try:
                    observe(name, value)
                except Exception:
                    sample_done()     # a failure of an earlier tensor, still on the worker, comes first
                    raise
            else:
                pending.append(worker.submit(observe, name, value))

    def sample_done() -> None:
        try:
            wait_in_order(pending)
        finally:
            pending.clear()

    # The executor streams each op output to take() and drops it after its last reader, so a
    # sample holds only its live activations; graph inputs (and any constant a layer reads)
    # are not streamed: they are kept and taken after the run. Each statistic is per tensor and
    # sees the samples in the same order as before, so the parameters are the same bits.
    produced = {name for op in graph.ops for name in op.outputs}
    unstreamed = sorted((set(observers) | moment_inputs | averaged) - produced)
    keep = list(graph.outputs) + unstreamed
    seen = 0
    try:
        for feed in progress(batches, "calibrating", total=total, enabled=show_progress):
            if auto and len(kept) < AUTO_SAMPLES:
                kept.append(feed)
            try:
                values = execute(graph, feed, keep=keep, on_value=take)
                for name in unstreamed:
                    take(name, values[name])
            finally:
                sample_done()
            seen += 1
    finally:
        if worker is not None:
            worker.shutdown(wait=True)
    if input_moments is not None:
        input_moments.calibration_done()
    if seen == 0:
        raise DataError("no calibration samples were given",
                        hint="pass --calib with a .npy/.npz array or a folder of images")
    if channel_means is not None:
        channel_means.update({name: total / seen for name, total in sums.items()})
    scheme = config.activation_scheme()
    if auto:
        chosen = choose_observers(graph, observers, scheme, kept)
        if choices is not None:
            choices.update(chosen)
    params = {name: obs.params(scheme) for name, obs in observers.items()}
    for name, t in graph.tensors.items():
        if annotated(t) and not t.is_constant:
            params[name] = as_signed(t.quant)
    return params


def channel_mean(value) -> np.ndarray:
    """The mean per channel (axis 1) over every other axis, in float64: numpy's
    `value.astype(np.float64).mean(axis=(0, 2, ...))`, bit for bit. A float32 sample (batch 1,
    every calibration execution) is summed by one compiled pass (kernels/quant_ops.pyx
    channel_sums_f32: numpy's pairwise summation, without the float64 copy of the tensor)."""
    v = np.asarray(value)
    if v.dtype == np.float32 and v.ndim >= 2 and v.shape[0] == 1 and v.size:
        sums = np.empty(v.shape[1])
        _quant_ops.channel_sums_f32(np.ascontiguousarray(v).reshape(1, v.shape[1], -1), sums, current_isa().code)
        return sums / (v.size // v.shape[1])
    v = v.astype(np.float64)
    return v.mean(axis=tuple(a for a in range(v.ndim) if a != 1))


def as_signed(q: ir.QuantInfo) -> ir.QuantInfo:
    """An unsigned b-bit activation annotation (NNEF 1.0 linear_quantize is unsigned) on the
    signed b-bit grid TOSA activations use: q_signed = q_unsigned - 2^(b-1), so the zero
    point moves by -2^(b-1) and scale and the represented real values stay exactly the same."""
    if q.signed:
        return q
    offset = 1 << (q.bits - 1)
    zp = np.asarray(q.zero_point, dtype=np.int64) - offset
    return ir.QuantInfo(q.scale, zp if zp.ndim else int(zp), q.axis, q.bits, True, q.symmetric,
                        q.source)
