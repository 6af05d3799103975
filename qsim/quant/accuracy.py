"""How close a quantized model is to its float model: the result `qsim quantize` evaluates
(qsim.quant.evaluate) and qsim.report.accuracy writes out as report.json, plots and HTML."""
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
class AccuracyReport:
    model: str
    eval_samples: int
    top1_agreement: float                 # fraction of samples where float and int argmax agree
    float_top1: float | None = None       # accuracy against labels, when labels are known
    int8_top1: float | None = None
    tensors: tuple[TensorAccuracy, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)   # observer, rounding, mode, ...
    notes: tuple[str, ...] = ()

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
        }
        return data


def _finite_or_none(x: float) -> float | None:
    # JSON has no infinity: an exact tensor (no error at all) is reported as null.
    return None if x is None or not math.isfinite(x) else float(x)
