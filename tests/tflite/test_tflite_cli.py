"""The commands on a .tflite file: check names the format and the TFLite parameters; quantize
needs no --calib and uses double rounding; simulate verifies every layer; export-vectors
quantizes the file in memory and its last layer's golden output is LiteRT's output; bad files
and unsupported builtins exit 2 with a located message."""
from __future__ import annotations

import json

import numpy as np

from qsim.cli import main
from tests.tflite import op_models
from tests.tflite.harness import run_litert
from tests.tflite.test_tflite_reader import _unsupported


def _cnn(tmp_path):
    data, shape, _ = op_models.small_cnn()
    path = tmp_path / "cnn.tflite"
    path.write_bytes(data)
    x = np.random.default_rng(2).integers(-128, 128, shape).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    return data, str(path), x


def test_check_names_the_format_and_parameters(tmp_path, capsys):
    _, path, _ = _cnn(tmp_path)
    assert main(["check", path]) == 0
    out = capsys.readouterr().out
    assert "valid TFLite model" in out and "input   input: f32[1, 16, 16, 3]" in out
    assert "input: scale 0.02, zero point -1, 8-bit signed (tflite)" in out


def test_quantize_without_calibration_then_simulate_verifies(tmp_path, capsys):
    _, path, _ = _cnn(tmp_path)
    out = tmp_path / "Q"
    assert main(["quantize", path, "-o", str(out), "-q"]) == 0
    meta = json.loads((out / "quantization.json").read_text())
    assert meta["settings"]["calibration"] == "model annotations"
    assert meta["settings"]["rounding"] == "double"
    sim = tmp_path / "sim"
    assert main(["simulate", str(out), "--engine", "model", "--input", str(tmp_path / "x.npy"),
                 "-o", str(sim), "-q"]) == 0
    assert json.loads((sim / "report.json").read_text())["all_verified"] is True


def test_export_vectors_from_the_tflite_file_end_in_litert_output(tmp_path, capsys):
    data, path, x = _cnn(tmp_path)
    out = tmp_path / "V"
    assert main(["export-vectors", path, "--out", str(out), "--input", str(tmp_path / "x.npy")]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    last = manifest["layers"][-1]
    assert last["name"] == "probabilities"
    golden = np.load(out / last["tensors"]["output"]["npy"])
    np.testing.assert_array_equal(golden.reshape(1, 10), run_litert(data, x)[0])


def test_unsupported_builtin_and_damaged_file_exit_2(tmp_path, capsys):
    bad = tmp_path / "lstm.tflite"
    bad.write_bytes(_unsupported("LSTM", 4))
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "builtin LSTM (version 4) is not supported" in err and "Traceback" not in err
    cut = tmp_path / "cut.tflite"
    cut.write_bytes(op_models.small_cnn()[0][:300])
    assert main(["quantize", str(cut), "-o", str(tmp_path / "q"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "data error" in err and "outside the file" in err


def test_a_16x8_model_quantizes_at_16x8_by_default(tmp_path, capsys):
    path = tmp_path / "m16.tflite"
    path.write_bytes(op_models.conv_16x8()[0])
    assert main(["quantize", str(path), "-o", str(tmp_path / "Q"), "-q"]) == 0
    meta = json.loads((tmp_path / "Q" / "quantization.json").read_text())
    assert meta["settings"]["precision"] == "16x8" and meta["settings"]["rounding"] == "double"


def test_a_float_model_runs_as_litert_and_quantizes_from_calibration(tmp_path, capsys):
    """A float .tflite: qsim's float execution equals LiteRT's within float32 rounding of a
    27-term conv, a 64-term mean and a softmax; qsim quantize calibrates it (--calib)."""
    from ai_edge_litert.interpreter import Interpreter
    import qsim
    from qsim.runtime.executor import execute
    data = op_models.float_cnn()
    path = tmp_path / "f.tflite"
    path.write_bytes(data)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(1, 8, 8, 3)).astype(np.float32)
    graph = qsim.load(str(path))
    ours = execute(graph, {"x": x}, keep=graph.outputs)["y"]
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    theirs = it.get_tensor(it.get_output_details()[0]["index"])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=64 * 2.0 ** -24 * 8)
    np.save(tmp_path / "calib.npy", rng.normal(size=(16, 8, 8, 3)).astype(np.float32))
    assert main(["quantize", str(path), "--calib", str(tmp_path / "calib.npy"), "-o", str(tmp_path / "Q"),
                 "-q"]) == 0
    meta = json.loads((tmp_path / "Q" / "quantization.json").read_text())
    assert meta["settings"]["rounding"] == "double" and meta["settings"]["precision"] == "int8"
