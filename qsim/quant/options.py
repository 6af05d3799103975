"""What a user chooses for one quantization run (`qsim quantize`'s options): QuantizeOptions.

The integer widths and granularity it names are params.py's (Precision, Granularity,
QuantConfig: what the lowering reads); the observers are calibration/observers.py's. Every
target takes these options and refuses the ones it does not support (Target.check_options).
"""
from __future__ import annotations

from dataclasses import dataclass

from .calibration.observers import ObserverKind
from .params import Granularity, Precision, PrecisionPlan, QuantConfig


@dataclass(frozen=True)
class QuantizeOptions:
    observer: ObserverKind = ObserverKind.AUTO   # per tensor, the range costing least downstream
                                                 # (calibration/choose.py; reports/accuracy.md)
    precision: Precision = Precision.INT8
    weight_granularity: Granularity = Granularity.PER_CHANNEL
    double_round: bool = False
    bias_correction: bool = True          # correct each output's mean shift from weight rounding
    weight_rounding: str | None = None    # "adaptive" (least layer-output error, rounding/adaptive.py)
                                          # or "nearest"; None: the target's default
                                          # (adaptive for TOSA, nearest for CVM)
    backend: str = "kernels"              # integer execution during evaluation
    calib_limit: int | None = None        # use at most this many calibration samples
    eval_limit: int | None = None
    show_progress: bool = True
    score_outputs: tuple[str, ...] = ()   # outputs the report scores (default: every output)
    plan: PrecisionPlan | None = None     # per-layer precisions (TOSA; overrides `precision`)

    @property
    def config(self) -> QuantConfig:
        return QuantConfig(precision=self.precision, weight_granularity=self.weight_granularity,
                           double_round=self.double_round, plan=self.plan)

    @property
    def rounding_mode(self) -> str:
        """The weight rounding this run uses: the TOSA default when none was chosen."""
        return self.weight_rounding or "adaptive"

    def settings(self) -> dict:
        return {"observer": self.observer.value,
                "precision": self.precision.value if self.plan is None else "mixed",
                "weights": self.weight_granularity.value,
                "rounding": "double" if self.double_round else "single",
                "bias_correction": self.bias_correction,
                "weight_rounding": self.rounding_mode,
                "backend": self.backend} | ({"score_outputs": list(self.score_outputs)}
                                            if self.score_outputs else {}) | (
            {"plan": self.plan.to_json()} if self.plan is not None else {})
