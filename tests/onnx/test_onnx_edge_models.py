"""Valid ONNX that onnxruntime runs and qsim used to end in a traceback: a rank-0 output
(ReduceMean keepdims=0), MatMul with a 1-D operand (numpy matmul: a unit axis prepended or
appended, then removed), a model with no outputs. The first two run and quantize through the
CLI and agree with onnxruntime; the last is the same clear error from check, run and quantize.
And an internal failure of a float operator on a graph whose shapes were all checked is not
dressed as the user's "invalid graph" error."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from qsim import ir
from qsim.cli import main
from qsim.errors import InvalidGraphError
from qsim.quant.qmodel import load_quantized_model
from qsim.runtime import float_ops
from qsim.runtime.runners.standard import register_standard_kinds
from qsim.runtime.executor import execute
from onnx_helpers import init, make_model, run_ort, save

RNG = np.random.default_rng(5)


def scalar_output():
    return make_model([helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)], [("x", [1, 3, 4, 4])],
                      [("y", [])])


def matmul_vector_right():
    w = init("w", RNG.normal(size=4).astype(np.float32))
    return make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [1, 3, 4])], [("y", None)], [w])


def matmul_vector_left():
    w = init("w", RNG.normal(size=3).astype(np.float32))
    return make_model([helper.make_node("MatMul", ["w", "x"], ["y"])], [("x", [1, 3, 4])], [("y", None)], [w])


def matmul_two_vectors():
    return make_model([helper.make_node("MatMul", ["x", "x"], ["y"])], [("x", [5])], [("y", None)])


MODELS = {"scalar": (scalar_output, (1, 3, 4, 4)), "right": (matmul_vector_right, (1, 3, 4)),
          "left": (matmul_vector_left, (1, 3, 4)), "dot": (matmul_two_vectors, (5,))}


def npy(path, array):
    np.save(path, array)
    return str(path)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_run_agrees_with_onnxruntime(tmp_path, name):
    build, shape = MODELS[name]
    model = build()
    x = RNG.normal(size=shape).astype(np.float32)
    path = save(model, tmp_path)
    assert main(["run", path, "--input", npy(tmp_path / "x.npy", x), "--output", str(tmp_path / "y.npy")]) == 0
    got, ref = np.load(tmp_path / "y.npy"), run_ort(model, {"x": x})["y"]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["scalar", "right", "left"])
def test_quantize_and_run_agree_with_onnxruntime(tmp_path, name):
    build, shape = MODELS[name]
    model = build()
    path = save(model, tmp_path)
    calib = RNG.normal(size=(8,) + shape[1:]).astype(np.float32)
    out = str(tmp_path / "q")
    assert main(["quantize", path, "--calib", npy(tmp_path / "calib.npy", calib), "-o", out, "-q"]) == 0
    x = calib[:1]
    assert main(["run", out, "--input", npy(tmp_path / "x.npy", x), "--output", str(tmp_path / "y.npy")]) == 0
    quant = load_quantized_model(out).output_quant["y"]
    scale, zero = float(quant.scales()[0]), int(quant.zero_points()[0])
    got = (np.load(tmp_path / "y.npy").astype(np.float64) - zero) * scale
    ref = run_ort(model, {"x": x})["y"]
    assert got.shape == ref.shape
    # int8 in and out: a few output LSB, plus the input's rounding carried through the op
    assert np.max(np.abs(got - ref)) <= 4 * scale + 0.02 * np.max(np.abs(ref))


@pytest.mark.parametrize("command", ["check", "run", "quantize"])
def test_a_model_without_outputs_is_one_clear_error(tmp_path, capsys, command):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [1, 3, 4, 4])], [])
    path = save(model, tmp_path)
    onnx.checker.check_model(model, full_check=True)     # valid ONNX: onnxruntime loads it too
    x = npy(tmp_path / "x.npy", np.zeros((2, 3, 4, 4), np.float32))
    argv = {"check": ["check", path], "run": ["run", path, "--input", x],
            "quantize": ["quantize", path, "--calib", x, "-o", str(tmp_path / "q"), "-q"]}[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "unsupported error" in err and "declares no outputs" in err and "hint: declare" in err
    assert "Traceback" not in err and not (tmp_path / "q").exists()


def test_an_internal_failure_on_checked_shapes_is_not_a_user_error(monkeypatch):
    """A float op raising IndexError where every input shape is static and verified is qsim's bug:
    it propagates (exit 1 in the CLI); with a dynamic extent it is the data's (InvalidGraphError)."""
    def broken(inputs, attrs):
        raise IndexError("tuple index out of range")
    register_standard_kinds()
    relu = ir.OpKind.get("nn.relu")
    monkeypatch.setitem(float_ops.OPS, "nn.relu", broken)
    static = ir.Graph("g", ("x",), ("y",), (ir.Op(relu, ("x",), ("y",), {}),),
                      {"x": ir.Tensor("x", ir.DType.F32, (2,)), "y": ir.Tensor("y", ir.DType.F32, (2,))})
    with pytest.raises(IndexError):
        execute(static, {"x": np.zeros(2, np.float32)})
    dynamic = ir.Graph("g", ("x",), ("y",), (ir.Op(relu, ("x",), ("y",), {}),),
                       {"x": ir.Tensor("x", ir.DType.F32, (None,)), "y": ir.Tensor("y", ir.DType.F32, (None,))})
    with pytest.raises(InvalidGraphError, match="cannot execute"):
        execute(dynamic, {"x": np.zeros(2, np.float32)})
