"""The TOSA 0.30 target: a float graph becomes `tosa.*` operators (NHWC inside).

The rules are rules_*.py (imported here, so the registry holds them); their context
is context.TosaContext. The folder form of the integer graph is tosa.sknd_form's
(tensor attributes as @variable inputs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ... import ir
from ...errors import UsageError
from ...tosa.sknd_form import to_sknd_form
from ..calibration.annotations import check_annotations
from ..lowering.float_side import FloatSide, Lowered, LoweredModel, Wording, identity
from ..params import Precision, QuantConfig
from ..rounding.adaptive import ROUNDING_MODES
from ..rounding.moments import watch_layers
from ..rules import RULES, Rule, apply_rules
from ..target import TargetKind
from . import runtime_mask  # noqa: F401  (its pattern rule first: before the element-wise chains)
from . import (rules_activation, rules_elementwise, rules_gather,  # noqa: F401  (register the rules)
               rules_layout, rules_linear, rules_matmul, rules_norm, rules_resize, rules_softmax)
from .context import TosaContext
from .mixed_precision import PlanSwitch

TOSA_WORDING = Wording(onto="", default_hint="qsim lowers only what TOSA 0.30 can express exactly; "
                                             "change the model or file an issue")


def lower_graph(graph: ir.Graph, qparams: dict[str, ir.QuantInfo],
                config: QuantConfig = QuantConfig(),
                channel_means: dict[str, np.ndarray] | None = None,
                input_moments=None, by_precision: dict | None = None) -> LoweredModel:
    """Lowers `graph` (float, NNEF operators) to a verified TOSA integer graph.
    `channel_means` (from calibrate) turns on bias correction of the weight rounding;
    `input_moments` (rounding.InputMoments from calibrate) turns on adaptive rounding.
    Under a per-layer plan (config.plan), `by_precision` holds the parameters calibrated at
    each width (Precision -> qparams; mixed_precision.py), and `qparams` is not read."""
    f = FloatSide(graph, qparams, TOSA_WORDING)
    ctx = TosaContext(f, config, channel_means, input_moments)
    if config.plan is not None:
        if by_precision is None or set(by_precision) != set(Precision):
            raise UsageError("a per-layer precision plan needs every tensor calibrated at each "
                             "width (int8 and 16x8)", hint="calibrate with mixed_calibration()")
        ctx.plan_switch = PlanSwitch(ctx, config.plan, by_precision)
        f.qparams = ctx.plan_switch.qparams()
    apply_rules(ctx, TargetKind.TOSA)
    outputs = []
    for name in graph.outputs:
        # A graph output is delivered in the float tensor's own layout under its own name
        # (its text-safe form: `safe`).
        safe = f.builder.safe(name)
        if safe in f.builder.tensors and f.value(name).perm != identity(len(f.value(name).perm)):
            f.rename(safe, f"{name}.int_layout")
        v = f.value(name)
        if v.perm != identity(len(v.perm)):
            v = ctx.to_float_layout(v, hint=name, exact=True)
        elif v.name != safe:
            if safe in f.builder.tensors:
                f.rename(safe, f"{name}.int")
            v = Lowered(ctx.emit("IDENTITY", [v.name], {}, hint=name, label=name, quant=v.quant,
                                 exact=True), v.quant, v.perm)
        f.bind(name, v)
        outputs.append(v.name)
    return f.model(f"{graph.name}_int", outputs)


@dataclass(frozen=True)
class TosaTarget:
    config: QuantConfig = QuantConfig()
    kind: ClassVar[TargetKind] = TargetKind.TOSA
    dialect: ClassVar[str] = "tosa"
    title: ClassVar[str] = "TOSA"

    def rules(self) -> dict[str, Rule]:
        return dict(RULES[TargetKind.TOSA])

    def check_options(self, options) -> None:
        """Every QuantizeOptions field is a TOSA option."""

    def check_graph(self, graph: ir.Graph) -> None:
        check_annotations(graph, self.config.precision)

    def calibration_scheme(self) -> QuantConfig:
        return self.config

    def weight_statistics(self, graph: ir.Graph, options):
        rounding = options.rounding_mode
        if rounding not in ROUNDING_MODES:
            raise UsageError(f"unknown weight rounding {rounding!r}",
                             hint=f"choose one of {', '.join(ROUNDING_MODES)}")
        means: dict | None = {} if options.bias_correction else None
        moments = watch_layers(graph) if rounding == "adaptive" else None
        return means, moments

    def lower(self, graph: ir.Graph, calibration) -> LoweredModel:
        return lower_graph(graph, calibration.qparams, self.config, calibration.channel_means,
                           calibration.input_moments, calibration.by_precision)

    def _config_settings(self) -> dict:
        # the target's own config is what the lowering used: it wins over the options'
        plan = self.config.plan
        return {"precision": self.config.precision.value if plan is None else "mixed",
                "weights": self.config.weight_granularity.value,
                "rounding": "double" if self.config.double_round else "single"}

    def report_settings(self, options) -> dict:
        return dict(options.settings(), **self._config_settings())

    def folder_settings(self, settings: dict) -> dict:
        # (no "target" entry: a folder without one is TOSA)
        return {k: self._config_settings().get(k, v) for k, v in settings.items()}

    def folder_name(self, model_name: str) -> str:
        suffix = ("mixed" if self.config.plan is not None
                  else "int8" if self.config.precision is Precision.INT8 else "int16x8")
        return f"{model_name}-{suffix}"

    def text_form(self, graph: ir.Graph) -> ir.Graph:
        return to_sknd_form(graph)

    def model_header(self, source: str | None) -> str:
        # (the source model is recorded in quantization.json, not here: the model text depends
        # on the integer graph only, so saving a loaded model again gives identical files)
        return "Integer model written by qsim quantize (TOSA 0.30 operators, NHWC inside)."
