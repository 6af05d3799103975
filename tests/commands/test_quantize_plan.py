"""`qsim quantize --target-sqnr / --max-drop` end to end: the folder with the plan, its report
(report.json "precision_plan", the HTML section, sensitivity.png), `qsim simulate` of it
verified, an unreachable target and every misuse of the options (exit 2, a message)."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import qsim
from qsim.cli import main

from quant.test_precision_plan import residual_cnn   # the residual CNN the plan tests use


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan")
    rng = np.random.default_rng(7)
    onnx.save(residual_cnn(rng), root / "m.onnx")
    np.save(root / "c.npy", rng.normal(0, 1, (16, 3, 8, 8)).astype(np.float32))
    np.save(root / "e.npy", rng.normal(0, 1, (12, 3, 8, 8)).astype(np.float32))
    np.save(root / "x.npy", rng.normal(0, 1, (1, 3, 8, 8)).astype(np.float32))
    return root


def quantize(files, *extra) -> int:
    return main(["quantize", str(files / "m.onnx"), "--calib", str(files / "c.npy"), "--eval",
                 str(files / "e.npy"), "--observer", "minmax", "-q", *extra])


@pytest.fixture(scope="module")
def baselines(files):
    """The output SQNR of --precision int8 and 16x8 (the pipeline's report)."""
    sqnr = {}
    for precision in ("int8", "16x8"):
        assert quantize(files, "--precision", precision, "-o", str(files / precision)) == 0
        sqnr[precision] = json.loads((files / precision / "report.json").read_text())["outputs"][0]["sqnr_db"]
    assert sqnr["16x8"] > sqnr["int8"] + 1.0
    return sqnr


@pytest.mark.parametrize("cost", ["cycles", "energy"])
def test_a_plan_meets_a_target_all_int8_misses_and_simulates_verified(files, baselines, cost, capsys):
    target = round((baselines["int8"] + baselines["16x8"]) / 2, 2)
    out = files / f"mixed-{cost}"
    assert quantize(files, "--target-sqnr", str(target), "--cost", cost, "--config", "8x8", "-o", str(out)) == 0
    line = capsys.readouterr().out
    assert "precision plan (output SQNR >= " in line and "% of all-16x8" in line
    report = json.loads((out / "report.json").read_text())
    plan = report["precision_plan"]
    assert plan["met"] and plan["measure"] == cost and plan["npu_config"] == "8x8"
    assert report["outputs"][0]["sqnr_db"] >= target                  # the written model's own evaluation
    assert abs(plan["accuracy"]["sqnr_db"] - report["outputs"][0]["sqnr_db"]) < 1e-6
    layers = plan["plan"]["layers"]
    assert set(layers) == {"c1", "c2", "c3", "y"} and "16x8" in layers.values() and "int8" in layers.values()
    key = "cycles" if cost == "cycles" else "energy_pj"
    assert plan["cost"]["int8"][key] <= plan["cost"]["plan"][key] < plan["cost"]["16x8"][key]
    assert plan["cost"]["plan"]["verified"]
    assert report["settings"]["precision"] == "mixed" and report["settings"]["plan"]["layers"] == layers
    assert (out / "sensitivity.png").stat().st_size > 1000
    assert "Precision plan" in (out / "report.html").read_text()
    loaded = qsim.load(out)                                           # the folder reads back
    wide = [op for op in loaded.ops if op.kind.short_name == "CONV2D"
            and loaded.tensor(op.inputs[0]).dtype is qsim.ir.DType.I16]
    assert len(wide) == sum(layers[c] == "16x8" for c in ("c1", "c2", "c3"))
    assert main(["simulate", str(out), "--engine", "model", "--input", str(files / "x.npy"),
                 "-o", str(files / f"npu-{cost}"), "-q"]) == 0
    sim = json.loads((files / f"npu-{cost}" / "report.json").read_text())
    assert sim["all_verified"]


def test_a_max_drop_target_on_the_class_output(files):
    out = files / "drop"
    assert quantize(files, "--max-drop", "50", "-o", str(out)) == 0
    plan = json.loads((out / "report.json").read_text())["precision_plan"]
    assert plan["met"] and plan["accuracy"]["top1_drop_points"] <= 50


def test_an_unreachable_target_exits_2_with_the_best_reached(files, capsys):
    assert quantize(files, "--target-sqnr", "300", "-o", str(files / "never")) == 2
    err = capsys.readouterr().err
    assert "out of reach" in err and "all-16x8" in err and "dB" in err
    assert not (files / "never").exists()


@pytest.mark.parametrize("extra, words", [
    (["--cost", "energy"], "needs --target-sqnr"),
    (["--config", "8x8"], "needs --target-sqnr"),
    (["--target-sqnr", "30", "--precision", "16x8"], "--precision"),
    (["--target-sqnr", "30", "--target", "cvm"], "cvm"),
    (["--target-sqnr", "30", "--tech", "7nm"], "--cost energy"),
    (["--max-drop", "120"], "[0, 100)"),
    (["--target-sqnr", "nan"], "finite"),
    (["--target-sqnr", "30", "--config", "no-such-config"], "no-such-config"),
])
def test_misused_options_exit_2(files, capsys, extra, words):
    assert quantize(files, *extra, "-o", str(files / "bad")) == 2
    assert words in capsys.readouterr().err


def test_max_drop_needs_a_class_output(tmp_path, capsys):
    from quant.onnx_quantize import init, node, onnx_model
    rng = np.random.default_rng(3)
    model = onnx_model([node("Conv", ["x", "k"], ["y"], pads=[1, 1, 1, 1])], (1, 2, 6, 6), ["y"],
                       [init("k", rng.normal(0, 0.5, (3, 2, 3, 3)).astype(np.float32))])
    onnx.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "c.npy", rng.normal(0, 1, (8, 2, 6, 6)).astype(np.float32))
    assert main(["quantize", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "c.npy"), "--max-drop", "1",
                 "-o", str(tmp_path / "q"), "-q"]) == 2
    assert "class-vector output" in capsys.readouterr().err
