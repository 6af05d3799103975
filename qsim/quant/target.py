"""Integer targets of the quantization pipeline: which operator set a float graph becomes.

A target is an object with one interface (`Target`) that pipeline.quantize_graph and the
quantized-model folder (qmodel.py) call; nothing else tests which target it is. The two
targets are tosa.target.TosaTarget (TOSA 0.30 operators) and cvm.target.CvmTarget (CVM).
`TargetKind` names them (the CLI's --target choices come from it).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from .. import ir
from .lowering.float_side import LoweredModel
from .options import QuantizeOptions
from .rounding.moments import InputMoments


class TargetKind(enum.Enum):
    TOSA = "tosa"
    CVM = "cvm"


Rule = Callable[[Any, ir.Op], None]


@dataclass
class Calibration:
    """What calibration learnt: activation parameters, and the statistics a target's weight
    recipe uses (TOSA: channel means for bias correction, input moments for adaptive
    rounding; None where the target or the options need none)."""
    qparams: dict[str, ir.QuantInfo]
    channel_means: dict | None = None
    input_moments: InputMoments | None = None
    # a per-layer precision plan's parameters: every tensor calibrated at each width
    # (params.Precision -> qparams), of which the lowering takes each tensor's own
    by_precision: dict | None = None


class Target(Protocol):
    kind: TargetKind

    @property
    def dialect(self) -> str:
        """The operator dialect of the integer graph ("tosa", "cvm")."""

    @property
    def title(self) -> str:
        """The operator set's name in messages ("TOSA", "CVM")."""

    def rules(self) -> dict[str, Rule]:
        """The lowering rule of every float operator kind this target lowers."""

    def check_options(self, options: QuantizeOptions) -> None:
        """A UsageError for an option this target does not take."""

    def check_graph(self, graph: ir.Graph) -> None:
        """An error for a float graph this target cannot take (e.g. its annotations)."""

    def calibration_scheme(self):
        """What calibrate() needs: an object with activation_scheme() -> QuantScheme."""

    def weight_statistics(self, graph: ir.Graph, options: QuantizeOptions) -> tuple[Any, Any]:
        """(channel means, input moments) for calibration to fill, or None for either."""

    def lower(self, graph: ir.Graph, calibration: Calibration) -> LoweredModel:
        """The verified integer graph of `graph` with the calibrated parameters."""

    def report_settings(self, options: QuantizeOptions) -> dict:
        """The settings the accuracy report lists."""

    def folder_settings(self, options: QuantizeOptions) -> dict:
        """The settings quantization.json records (with settings["target"] = kind.value)."""

    def folder_name(self, model_name: str) -> str:
        """The default output folder's name for `model_name`."""

    def text_form(self, graph: ir.Graph) -> ir.Graph:
        """The integer graph in the form the SkriptND writer takes."""

    def model_header(self, source: str | None) -> str:
        """The comment heading main.sknd."""
