"""A float model's quantization annotations: their checks before anything is calibrated, and
what a model quantized by its annotations alone (no calibration data) needs.

`@quantize` entries (NNEF 2.0 2.14) and graph.quant lines (NNEF 1.0 5.3) are honoured
exactly, so an annotation that cannot be honoured is an error naming the tensor, never a
silent change: a scale that is not a positive finite number, a zero point outside the
integer range its bits and signedness give, a "symmetric" entry with a non-zero zero point,
per-channel parameters whose length is not the channel count, a per-channel activation
(TOSA rescales activations per tensor), or an activation width other than the run's.
ONNX QDQ models (qsim.onnx.qdq) carry their QuantizeLinear/DequantizeLinear parameters as
@quantize annotations (source "annotation").
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...errors import SemanticError, UnsupportedError
from ..params import Precision, annotated
from .calibrate import as_signed
from .data import Samples


def _what(t: ir.Tensor) -> str:
    origin = {"annotation": "@quantize entry", "tflite": "TFLite quantization"}.get(t.quant.source, "graph.quant line")
    return f"the {origin} of tensor {t.name!r}"


def check_annotation(t: ir.Tensor, precision: Precision) -> None:
    q = t.quant
    scales = q.scales()
    zero_points = q.zero_points()
    if not np.all(np.isfinite(scales)) or np.any(scales <= 0):
        raise SemanticError(f"{_what(t)} has scale {q.scale!r}: scales must be positive and finite")
    if q.bits < 2 or q.bits > 32:
        raise SemanticError(f"{_what(t)} has bits={q.bits}: qsim quantizes to 2..32 bits")
    lo, hi = (-(1 << (q.bits - 1)), (1 << (q.bits - 1)) - 1) if q.signed else (0, (1 << q.bits) - 1)
    bad = zero_points[(zero_points < lo) | (zero_points > hi)]
    if bad.size:
        raise SemanticError(f"{_what(t)} has zero point {int(bad[0])}, outside the "
                            f"{q.bits}-bit {'signed' if q.signed else 'unsigned'} range [{lo}, {hi}]")
    if q.symmetric and np.any(zero_points != 0):
        raise SemanticError(f"{_what(t)} is symmetric but has zero point "
                            f"{int(zero_points[zero_points != 0][0])}",
                            hint="a symmetric quantization has zero point 0: drop one of the two")
    if q.per_channel:
        axis = q.axis if q.axis >= 0 else q.axis + len(t.shape)
        if not 0 <= axis < len(t.shape):
            raise SemanticError(f"{_what(t)} has channel axis {q.axis} for a tensor of rank "
                                f"{len(t.shape)}")
        n = t.shape[axis]
        for label, values in (("scales", scales), ("zero points", zero_points)):
            if values.size not in (1, n) and n is not None:
                raise SemanticError(f"{_what(t)} has {values.size} {label} along axis {axis}, "
                                    f"where the tensor has {n} channels")
        if not t.is_constant:
            raise UnsupportedError(f"{_what(t)} is per channel (axis {axis}), but activations are "
                                   "quantized per tensor in TOSA (one RESCALE zero point and "
                                   "input scale per tensor)",
                                   hint="give the activation one scale and zero point")
    if not t.is_constant and t.dtype.is_float and q.bits == 16:
        zp = as_signed(q).zero_points()
        if np.any(zp != 0):
            raise UnsupportedError(f"{_what(t)} has zero point {int(zp[zp != 0][0])} on TOSA's signed 16-bit "
                                   "grid; TOSA 0.30's 16-bit operators (CONV2D, FULLY_CONNECTED, "
                                   "AVG_POOL2D, TABLE) take zero point 0",
                                   hint="quantize 16-bit activations symmetrically (onnxruntime: "
                                        "extra_options={'ActivationSymmetric': True})")
    if not t.is_constant and t.dtype.is_float:
        expected = precision.activation_dtype.bits
        if q.bits != expected:
            raise UnsupportedError(f"{_what(t)} asks for {q.bits}-bit values, but this run's "
                                   f"activations are {expected}-bit ({precision.value})",
                                   hint="choose --precision to match the annotations, or fix them")


def check_annotations(graph: ir.Graph, precision: Precision) -> None:
    """Raises on the first annotation of `graph` that cannot be honoured."""
    for t in graph.tensors.values():
        if annotated(t):
            check_annotation(t, precision)


def annotated_parameters(graph: ir.Graph) -> dict[str, ir.QuantInfo]:
    """The activation parameters a model's annotations give (no calibration): unsigned ones on
    TOSA's signed grid (as_signed: the same real values)."""
    return {name: as_signed(t.quant) for name, t in graph.tensors.items()
            if annotated(t) and not t.is_constant}


class MissingParameters(dict):
    """Activation parameters that record which tensors a lowering asked for and did not find
    (answering with a placeholder so that the lowering can go on and name them all)."""
    PLACEHOLDER = ir.QuantInfo(scale=1.0, zero_point=0, source="derived")

    def __init__(self, known: dict[str, ir.QuantInfo]):
        super().__init__(known)
        self.missing: list[str] = []

    def __missing__(self, name: str) -> ir.QuantInfo:
        if name not in self.missing:
            self.missing.append(name)
        return self.PLACEHOLDER


ANNOTATED_SAMPLES = 16


def annotated_input_samples(graph: ir.Graph, input_name: str, count: int = ANNOTATED_SAMPLES,
                            seed: int = 0) -> Samples:
    """`count` seeded inputs uniform over the real range the input's annotation represents
    (scale * (qmin - zp) .. scale * (qmax - zp)): evaluation data for a model quantized without
    any data."""
    t = graph.tensor(input_name)
    q = as_signed(t.quant)
    s, zp = float(q.scales()[0]), int(q.zero_points()[0])
    lo, hi = s * (-(1 << (q.bits - 1)) - zp), s * ((1 << (q.bits - 1)) - 1 - zp)
    rng = np.random.default_rng(seed)
    dims = [int(d) for d in t.shape]
    del dims[dims.index(1) if 1 in dims else 0]     # the batch axis (pipeline.single_input)
    shape = (count,) + tuple(dims)
    return Samples(rng.uniform(lo, hi, size=shape).astype(np.float32))
