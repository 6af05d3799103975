"""Calibration: run the float graph over calibration inputs and choose every activation's
quantization parameters.

Annotations win: a tensor whose QuantInfo came from @quantize or graph.quant keeps it
exactly; every other non-constant tensor gets parameters from an observer
(min-max, percentile or MSE, ObserverKind) on the run's activation scheme.
"""
from __future__ import annotations

from typing import Collection, Iterable

import numpy as np

from .. import ir
from ..errors import DataError
from ..progress import progress
from ..runtime.executor import execute
from ..threads import apply_blas_threads
from .observers import ObserverKind, make_observer
from .params import QuantConfig

ANNOTATION_SOURCES = ("annotation", "graph.quant")


def annotated(t: ir.Tensor) -> bool:
    return t.quant is not None and t.quant.source in ANNOTATION_SOURCES


def calibrate(graph: ir.Graph, batches: Iterable[dict[str, np.ndarray]],
              config: QuantConfig = QuantConfig(), observer: ObserverKind | str = ObserverKind.MINMAX,
              total: int | None = None, show_progress: bool = True,
              channel_means: dict[str, np.ndarray] | None = None,
              input_moments=None, skip: Collection[str] = ()) -> dict[str, ir.QuantInfo]:
    """QuantInfo for every non-constant tensor of the float `graph`.

    `batches` yields {input name: float array}; each is one execution of the graph.
    `channel_means`, when given, is filled with each activation's mean per channel (axis 1,
    over all other axes and all samples), which bias correction uses.
    `input_moments` (rounding.InputMoments), when given, accumulates the input patch moments
    of the layers it watches, which adaptive weight rounding uses.
    `skip`: tensors no observer watches and that get no parameters (attention scores after a
    -inf mask, which only the integer softmax reads: softmax_mask.py).
    """
    apply_blas_threads()     # QSIM_THREADS for the float GEMMs

    observers = {}
    sums: dict[str, np.ndarray] = {}
    for name, t in graph.tensors.items():
        if not t.is_constant and not annotated(t) and name not in skip:
            observers[name] = make_observer(observer, name=name)
    if input_moments is not None:
        input_moments.expect_samples(total)
    seen = 0
    for feed in progress(batches, "calibrating", total=total, enabled=show_progress):
        values = execute(graph, feed)
        for name, obs in observers.items():
            obs.update(values[name])
        if input_moments is not None:
            input_moments.update(values)
        if channel_means is not None:
            for name, t in graph.tensors.items():
                if not t.is_constant and len(t.shape) >= 2:
                    v = np.asarray(values[name], dtype=np.float64)
                    axes = tuple(a for a in range(v.ndim) if a != 1)
                    sums[name] = sums.get(name, 0.0) + v.mean(axis=axes)
        seen += 1
    if input_moments is not None:
        input_moments.calibration_done()
    if seen == 0:
        raise DataError("no calibration samples were given",
                        hint="pass --calib with a .npy/.npz array or a folder of images")
    if channel_means is not None:
        channel_means.update({name: total / seen for name, total in sums.items()})
    scheme = config.activation_scheme()
    params = {name: obs.params(scheme) for name, obs in observers.items()}
    for name, t in graph.tensors.items():
        if annotated(t) and not t.is_constant:
            params[name] = as_signed(t.quant)
    return params


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
