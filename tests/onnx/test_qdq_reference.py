"""What a QDQ model's report scores against: onnxruntime quantize_static exports of small models
built in code, quantized by qsim with and without `--float-model`."""
from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper

from qsim.cli import main
from qsim.commands.qdq_reference import DEQUANTIZED
from qsim.commands.quantize import quantize_to_folder, summary_lines
from qsim.errors import UsageError
from qsim.onnx.protobuf import read_model
from qsim.onnx.qdq import folded_activation_warnings
from qsim.quant.evaluation.evaluate import float_view, quantize_feed
from qsim.quant.options import QuantizeOptions
from qsim.runtime.executor import execute

from tests.onnx.onnx_helpers import init, make_model, run_ort, save
from tests.onnx.qdq_models import _weights, cnn_model, concat_model, quantize_qdq, samples

OPTIONS = QuantizeOptions(show_progress=False)


def relu_free_model(seed: int = 4):
    """conv -> flatten -> gemm: nothing for quantize_static to fold."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Flatten", ["c1"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], transB=1, name="fc")]
    inits = [init("w1", _weights(rng, (4, 3, 3, 3))), init("b1", _weights(rng, (4,))),
             init("w2", _weights(rng, (10, 4 * 8 * 8), 0.1)), init("b2", _weights(rng, (10,)))]
    return make_model(nodes, [("x", [1, 3, 8, 8])], [("y", [1, 10])], inits)


@pytest.mark.parametrize("activations", ["QInt8", "QUInt8"])
def test_folded_relu_is_found_in_a_quantize_static_export(tmp_path, activations):
    qdq = quantize_qdq(cnn_model(), tmp_path, per_channel=True, activations=activations)
    warnings = folded_activation_warnings(read_model(qdq))
    assert len(warnings) == 1
    # conv1's Relu was folded (its output, named after the Relu's, now comes from the Conv); the
    # residual Add's output (no Relu) keeps a signed grid
    assert "'r1' (Conv)" in warnings[0] and "'a1'" not in warnings[0]
    assert "--float-model" in warnings[0]


def test_no_warning_without_folded_relus(tmp_path):
    qdq = quantize_qdq(relu_free_model(), tmp_path, per_channel=True, activations="QInt8")
    assert folded_activation_warnings(read_model(qdq)) == []


def _eval_file(model, tmp_path, count=12):
    path = tmp_path / "eval.npy"
    np.save(path, np.concatenate([x for x in samples(model, count, seed=7)]))
    return path


def _sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    ref = np.asarray(ref, np.float64)
    return 10 * np.log10(np.sum(ref ** 2) / np.sum((np.asarray(got, np.float64) - ref) ** 2))


def test_report_scores_against_the_float_model(tmp_path):
    model = cnn_model()
    qdq = quantize_qdq(model, tmp_path, per_channel=True, activations="QInt8")
    float_path = str(tmp_path / "model_float.onnx")
    x = _eval_file(model, tmp_path)
    plain = quantize_to_folder(qdq, None, str(tmp_path / "plain"), OPTIONS, evaluation=str(x))
    scored = quantize_to_folder(qdq, None, str(tmp_path / "scored"), OPTIONS, evaluation=str(x),
                                float_model=float_path)
    # without --float-model: said in words, in the summary and report.json, with the warning
    assert plain.report.settings["scored_against"] == DEQUANTIZED
    assert any("dequantized graph" in line for line in summary_lines(plain))
    saved = json.loads((tmp_path / "plain" / "report.json").read_text())
    assert saved["settings"]["scored_against"] == DEQUANTIZED
    assert any("'r1' (Conv)" in w for w in saved["warnings"])
    assert "float model" in scored.report.settings["scored_against"]
    assert not any("'r1'" in w for w in scored.report.warnings)
    # the same integer model either way; --float-model's figure is the SQNR against onnxruntime's
    # execution of the float model, computed here independently of the report
    inputs = np.load(x)
    ref = np.concatenate([run_ort(float_path, {"x": inputs[i:i + 1]})["y"] for i in range(len(inputs))])
    got = np.concatenate([float_view(scored.model, "y", execute(scored.model.graph, quantize_feed(
        scored.model, {"x": inputs[i:i + 1]}))) for i in range(len(inputs))])
    want = _sqnr_db(ref, got)
    out = scored.report.outputs[0]
    assert out.name == "y" and abs(out.sqnr_db - want) <= 1e-6 * abs(want)
    # the dequantized graph keeps conv1's negative values, which the integer model clips
    assert out.sqnr_db > plain.report.outputs[0].sqnr_db + 3.0
    # per-tensor rows compare like with like only: the outputs alone against another model
    assert [t.name for t in scored.report.tensors] == ["y"]


def test_mismatching_float_model_is_a_usage_error(tmp_path, capsys):
    qdq = quantize_qdq(cnn_model(), tmp_path, per_channel=True, activations="QInt8")
    other = save(concat_model(), tmp_path, "other.onnx")
    with pytest.raises(UsageError, match="--float-model .*inputs 'x' \\[1, 3, 6, 6\\] are not the quantized"):
        quantize_to_folder(qdq, None, str(tmp_path / "out"), OPTIONS, float_model=other)
    assert main(["quantize", qdq, "--float-model", other, "-o", str(tmp_path / "out2"), "--quiet"]) == 2
    assert "same input and output names and shapes" in capsys.readouterr().err


def _qdq_benchmark():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import qdq
    return qdq


def test_first_difference_names_a_tie_where_the_two_rules_round_apart(tmp_path):
    """tie_model's requantization ratio is exactly 1/2: the first difference from onnxruntime's
    float path is a tie that TOSA rounds up and onnxruntime to even (grid position k + 0.5)."""
    import onnx
    from pathlib import Path
    from tests.onnx.qdq_models import tie_model
    qdq = _qdq_benchmark()
    model, integers = tie_model()
    path = Path(tmp_path) / "tie.onnx"
    onnx.save(model, path)
    found = qdq.first_difference(path, np.concatenate(samples(model, 3, seed=3)))
    assert found is not None and found["tensor"] == "y" and found["lsb"] == 1
    assert found["grid_position"] % 1 == 0.5 and found["cause"].startswith("tie")
    # half up vs half to even (of the value before the zero point is added): qsim above,
    # onnxruntime on the even neighbour
    assert found["qsim"] == found["grid_position"] + 0.5 and (found["onnxruntime"] - integers["zy"]) % 2 == 0


def test_cause_of_tells_ties_float_rounding_and_other_arithmetic_apart():
    qdq = _qdq_benchmark()
    assert qdq.cause_of(-73.5).startswith("tie")
    assert qdq.cause_of(-73.50001).startswith("near-tie")
    assert qdq.cause_of(12.3).startswith("not a rounding")
