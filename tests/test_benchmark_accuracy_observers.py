"""benchmarks/_peer_observers.py's pure parts on hand-made rows: the margins and goals of the
one-run comparison table and the joining of runs made by separate processes."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import _peer_observers as po  # noqa: E402


def run(models, calib=16, evaluation=16):
    return {"calib": calib, "eval": evaluation, "models": models}


PARTS = {
    "default": {"outputs": {"y": {"auto": 30.0}, "z": {"auto": 40.0}}},
    "observers": {"outputs": {"y": {"minmax": 29.0, "percentile": 30.2, "mse": 30.35},
                              "z": {"minmax": 40.5, "percentile": 39.0, "mse": 40.0}}},
    "ort": {"outputs": {"y": {"onnxruntime": 29.5}, "z": {"onnxruntime": 40.1}}},
}


def test_margins_and_goals_per_output():
    lines = po.table(run({"m": PARTS}), ["m"])
    y = next(line for line in lines if line.startswith("| m | y |"))
    z = next(line for line in lines if line.startswith("| m | z |"))
    # y: 0.35 dB under the best fixed observer (mse) misses the 0.3 dB goal; ahead of onnxruntime
    assert "| +0.50 | -0.35 | **no** |" in y
    # z: 0.1 dB behind onnxruntime and 0.5 dB under min-max's 40.5: both goals missed
    assert "| -0.10 | -0.50 | **no** |" in z
    assert lines[-1] == "Both goals met on 0 of 2 outputs."
    good = {**PARTS, "default": {"outputs": {"y": {"auto": 30.1}, "z": {"auto": 40.3}}}}
    assert po.table(run({"m": good}), ["m"])[-1] == "Both goals met on 2 of 2 outputs."


def test_missing_parts_and_failures_are_shown_not_counted_as_met():
    parts = {"default": {"outputs": {"y": {"auto": 30.0}}},
             "ort": {"outputs": {}, "error": "RuntimeError: no kernel"}}
    line = next(x for x in po.table(run({"m": parts}), ["m"]) if x.startswith("| m | y |"))
    assert "not run" in line and "stops: RuntimeError: no kernel" in line and line.endswith("**no** |")


def test_merged_runs_join_parts_and_refuse_other_data():
    a = run({"m": {"default": PARTS["default"]}})
    b = run({"m": {"observers": PARTS["observers"], "ort": PARTS["ort"]}, "n": {"ort": PARTS["ort"]}})
    joined = po.merged([a, b])
    assert set(joined["models"]["m"]) == {"default", "observers", "ort"} and set(joined["models"]) == {"m", "n"}
    with pytest.raises(SystemExit, match="different sample counts"):
        po.merged([a, run({}, calib=32)])
