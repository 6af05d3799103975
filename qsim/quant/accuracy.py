"""How close a quantized model is to its float model: the result `qsim quantize` evaluates
(qsim.quant.evaluation.evaluate) and qsim.report.accuracy writes out as report.json, plots and HTML."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TensorAccuracy:
    """Float vs dequantized integer values of one tensor over the evaluation set.

    `error_counts`/`error_edges`: histogram of (dequantized - float) in units of
    the tensor's quantization step (LSB), so 0.5 means half a step.
    """
    name: str
    op: str
    sqnr_db: float
    error_counts: tuple[int, ...] = ()
    error_edges: tuple[float, ...] = ()


@dataclass(frozen=True)
class OutputAccuracy:
    """The figures of one scored graph output (qsim.quant.evaluation.scoring says which and how).

    `role` 'classes' (a class vector: top-1 figures too) or 'values'; `reason` why.
    `max_error_lsb` / `within_one_lsb`: the largest |dequantized - float| and the share of
    elements within one quantization step of the output, over all samples."""
    name: str
    sample_shape: tuple[int, ...]
    role: str
    reason: str
    sqnr_db: float
    max_error_lsb: float
    within_one_lsb: float
    top1_agreement: float | None = None   # classes: share of samples whose argmax agrees
    float_top1: float | None = None       # classes with labels: accuracy against them
    int8_top1: float | None = None
    labelled: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(asdict(self), sample_shape=list(self.sample_shape), sqnr_db=_finite_or_none(self.sqnr_db))


@dataclass(frozen=True)
class AccuracyReport:
    model: str
    eval_samples: int
    # the first scored classification output's figures (None when no scored output is a
    # class vector): fraction of samples where float and int argmax agree, and accuracy
    # against labels when labels are known
    top1_agreement: float | None
    float_top1: float | None = None
    int8_top1: float | None = None
    tensors: tuple[TensorAccuracy, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)   # observer, rounding, mode, ...
    notes: tuple[str, ...] = ()
    outputs: tuple[OutputAccuracy, ...] = ()   # per scored output
    warnings: tuple[str, ...] = ()             # where a figure would mislead

    @property
    def primary_output(self) -> str | None:
        """The output the top-level top-1 figures are of."""
        return next((o.name for o in self.outputs if o.top1_agreement is not None), None)

    def to_json(self) -> dict[str, Any]:
        data = {
            "model": self.model,
            "eval_samples": self.eval_samples,
            "float_top1": self.float_top1,
            "int8_top1": self.int8_top1,
            "top1_agreement": self.top1_agreement,
            "sqnr_db": {t.name: _finite_or_none(t.sqnr_db) for t in self.tensors},
            "tensors": [dict(asdict(t), sqnr_db=_finite_or_none(t.sqnr_db)) for t in self.tensors],
            "settings": self.settings,
            "notes": list(self.notes),
            "outputs": [o.to_json() for o in self.outputs],
            "warnings": list(self.warnings),
        }
        return data


def _finite_or_none(x: float) -> float | None:
    # JSON has no infinity: an exact tensor (no error at all) is reported as null.
    return None if x is None or not math.isfinite(x) else float(x)
