"""The command line's choices are the values of the enums that define them, and each command
passes the enum member on (not the string)."""
import argparse

import pytest

from qsim import cli
from qsim.commands import quantize, simulate
from qsim.npu.engines import Engine
from qsim.quant.calibration.observers import ObserverKind
from qsim.quant.params import Granularity, Precision, Rounding, WeightRounding
from qsim.quant.target import TargetKind
from qsim.kernels.backend import Backend


def _option(command: str, flag: str) -> argparse.Action:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return next(a for a in sub.choices[command]._actions if flag in a.option_strings)


@pytest.mark.parametrize("command,flag,enum", [
    ("quantize", "--target", TargetKind), ("quantize", "--observer", ObserverKind),
    ("quantize", "--precision", Precision), ("quantize", "--weights", Granularity),
    ("quantize", "--rounding", Rounding), ("quantize", "--weight-rounding", WeightRounding),
    ("quantize", "--backend", Backend), ("run", "--backend", Backend)])
def test_choices_are_the_enum_values(command, flag, enum):
    action = _option(command, flag)
    assert list(action.choices) == [member.value for member in enum]
    assert action.default is None or enum(action.default) in enum


def test_quantize_passes_enum_members(monkeypatch):
    seen = {}

    def fake_quantize_to_folder(model, calib, out, options, **kwargs):
        seen.update(options=options, **kwargs)
        raise SystemExit(0)
    monkeypatch.setattr(quantize, "quantize_to_folder", fake_quantize_to_folder)
    args = cli.build_parser().parse_args(
        ["quantize", "--target", "cvm", "--observer", "mse", "--precision", "16x8", "--weights",
         "per-tensor", "--rounding", "double", "--weight-rounding", "nearest", "--backend", "reference"])
    with pytest.raises(SystemExit):
        quantize.run(args)
    options = seen["options"]
    assert seen["target"] is TargetKind.CVM
    assert options.observer is ObserverKind.MSE and options.precision is Precision.INT16X8
    assert options.weight_granularity is Granularity.PER_TENSOR and options.double_round is True
    assert options.weight_rounding is WeightRounding.NEAREST and options.backend is Backend.REFERENCE


def test_simulate_parses_the_engine_before_the_stage_runs(monkeypatch):
    seen = {}

    def fake_simulate_command(model, config, engine, *args, **kwargs):
        seen["engine"] = engine
        raise SystemExit(0)
    monkeypatch.setattr(simulate, "simulate_command", fake_simulate_command)
    with pytest.raises(SystemExit):
        simulate.run(cli.build_parser().parse_args(["simulate", "--engine", "MODEL"]))
    assert seen["engine"] is Engine.MODEL

