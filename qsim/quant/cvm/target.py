"""The CVM target: a float graph becomes `cvm.*` operators on power-of-two scales (NCHW).

The arithmetic is context.py's (module doc there); the rules are rules.py. CVM
models are written as the integer graph is (no attribute tensors to move), every tensor's
precision as its @quantize bits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ... import ir
from ...errors import UsageError
from ..lowering.float_side import FloatSide, LoweredModel
from ..params import Precision
from ..rules import RULES, Rule, apply_rules
from ..target import TargetKind
from . import rules  # noqa: F401  (registers the rules)
from .context import CVM_WORDING, CalibrationScheme, CvmConfig, CvmContext


def lower_cvm_graph(graph: ir.Graph, qparams: dict[str, ir.QuantInfo],
                    config: CvmConfig = CvmConfig()) -> LoweredModel:
    """Lowers `graph` (float, NNEF operators) to a verified graph of `cvm.*` operators.

    `qparams`: per-tensor QuantInfo of every float activation (calibration on
    CalibrationScheme(config.precision), or any per-tensor QuantInfo: only its range is
    used). The result's input/output QuantInfo are power-of-two and symmetric, so
    quantize/dequantize (qsim/quant/params.py) map floats to CVM integers and back."""
    f = FloatSide(graph, qparams, CVM_WORDING)
    ctx = CvmContext(f, config)
    apply_rules(ctx, TargetKind.CVM)
    outputs = []
    for name in graph.outputs:
        v = f.value(name)
        if v.name != f.builder.safe(name):   # deliver each output under its float name (a same-grid cvm_clip)
            v = ctx.requantize(v, ctx.exponent(v), ctx.precision(v.name), name, exact=True, force=True)
            f.bind(name, v)
        outputs.append(v.name)
    return f.model(f"{graph.name}_cvm", outputs)


@dataclass(frozen=True)
class CvmTarget:
    config: CvmConfig = field(default_factory=CvmConfig)
    kind: ClassVar[TargetKind] = TargetKind.CVM
    dialect: ClassVar[str] = "cvm"
    title: ClassVar[str] = "CVM"

    def rules(self) -> dict[str, Rule]:
        return dict(RULES[TargetKind.CVM])

    def check_options(self, options) -> None:
        if options.plan is not None:
            raise UsageError("--target cvm has one precision: a per-layer precision plan "
                             "(--target-sqnr, --max-drop) picks among TOSA modes",
                             hint="drop --target cvm")
        if options.precision is not Precision.INT8:
            raise UsageError("--target cvm quantizes to CVM's INT8/INT32 tensors; --precision 16x8 "
                             "is a TOSA mode", hint="drop --precision or use --target tosa")
        if options.weight_rounding == "adaptive":
            raise UsageError("--target cvm rounds weights to nearest on its power-of-two grid; "
                             "--weight-rounding adaptive is a TOSA option",
                             hint="drop --weight-rounding or use --target tosa")

    def check_graph(self, graph: ir.Graph) -> None:
        """(CVM takes activation ranges only: @quantize annotations need no check.)"""

    def calibration_scheme(self) -> CalibrationScheme:
        return CalibrationScheme(self.config.precision)

    def weight_statistics(self, graph: ir.Graph, options):
        return None, None     # weights round to nearest: no statistics needed

    def lower(self, graph: ir.Graph, calibration) -> LoweredModel:
        return lower_cvm_graph(graph, calibration.qparams, self.config)

    def report_settings(self, options) -> dict:
        return dict(self.config.settings(), observer=options.observer.value, backend=options.backend)

    def folder_settings(self, settings: dict) -> dict:
        return dict(settings, **self.config.settings())

    def folder_name(self, model_name: str) -> str:
        return f"{model_name}-cvm{self.config.precision}"

    def text_form(self, graph: ir.Graph) -> ir.Graph:
        return graph

    def model_header(self, source: str | None) -> str:
        return ("Integer model written by qsim quantize --target cvm (CVM operators, NCHW; "
                "every scale a power of two, @quantize bits = CVM precision)."
                + (f"\nSource: {source}" if source else ""))
