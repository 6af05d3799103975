"""QDQ models (qsim.onnx.qdq): onnxruntime.quantization's QDQ output and hand-written models
import with their QuantizeLinear/DequantizeLinear parameters as annotations, quantize without
calibration data, and give integer outputs within 1 LSB of onnxruntime's execution of the same
QDQ model, differing only where TOSA's round-half-up meets onnxruntime's round-half-even ties.
"""
import json

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from qsim.cli import main
from qsim.errors import DataError, UnsupportedError, UsageError
from qsim.onnx import load
from qsim.quant.calibration.data import Samples
from qsim.quant.pipeline import quantize_graph
from qsim.runtime.executor import execute
from tests.onnx.onnx_helpers import init, make_model, save
from tests.onnx.qdq_models import (QUIET, TIE_SHIFT, attention_model, cnn_model, compare_with_ort, concat_model, depthwise_model,
                                   on_signed_grid, ort_session, prelu_model, q_dq, quantize_linear, quantize_qdq,
                                   samples, scalar_constant, tie_accumulators, tie_model)

# (float model, opset, per-channel weights, activation type): every model in each opset 13/17/21,
# per tensor and per channel, uint8 and int8 activations
CASES = [(cnn_model, 13, False, "QUInt8"), (cnn_model, 17, True, "QInt8"), (cnn_model, 21, True, "QUInt8"),
         (depthwise_model, 13, False, "QInt8"), (depthwise_model, 17, True, "QUInt8"),
         (depthwise_model, 21, False, "QUInt8"), (concat_model, 13, True, "QUInt8"),
         (concat_model, 17, False, "QInt8"), (concat_model, 21, True, "QInt8")]
# Measured on these cases with 40 inputs each (onnxruntime 1.32, both modes): 0 differing
# elements. A difference needs a requantized value within float32 rounding of a .5 tie; the
# bound leaves room for such rare ties without letting a systematic error (which moves a
# large share of elements) through.
MAX_DIFFERING_FRACTION = 0.01


@pytest.mark.parametrize("build, opset, per_channel, activations", CASES,
                         ids=[f"{b.__name__}-opset{o}-{'pc' if p else 'pt'}-{a}" for b, o, p, a in CASES])
def test_quantize_static_models_match_onnxruntime(tmp_path, build, opset, per_channel, activations):
    model = build(opset)
    path = quantize_qdq(model, tmp_path, per_channel=per_channel, activations=activations)
    assert onnx.load(path).opset_import[0].version == opset
    agreement = compare_with_ort(path, samples(model, 40, seed=7, spread=1.5))
    for level in agreement.max_lsb:
        assert agreement.max_lsb[level] <= 1, (level, agreement)
        assert agreement.differing[level] <= MAX_DIFFERING_FRACTION * agreement.elements, (level, agreement)


@pytest.mark.parametrize("build", [cnn_model, depthwise_model, concat_model])
def test_reference_and_kernels_agree_on_a_qdq_model(tmp_path, build):
    """The integer graph of a QDQ model (max pool, global average pool to its own grid, concat
    requantizing, residual add) runs bit-exactly on the TOSA reference and the kernels, on
    seeded inputs and on both rails (every input -128, every input 127)."""
    model = build(17)
    path = quantize_qdq(model, tmp_path, per_channel=True, activations="QInt8")
    graph = load(path)
    lowered = quantize_graph(graph, None, None, QUIET).model
    x_quant = graph.tensor("x").quant
    feeds = [on_signed_grid(quantize_linear(x, x_quant), x_quant) for x in samples(model, 3, seed=11, spread=2.0)]
    feeds += [np.full(feeds[0].shape, -128), np.full(feeds[0].shape, 127)]
    for xq in feeds:
        feed = {lowered.tensor_map["x"].name: xq.astype(np.int8)}
        ref, ker = execute(lowered.graph, feed, "reference"), execute(lowered.graph, feed, "kernels")
        for name in lowered.graph.outputs:
            np.testing.assert_array_equal(ref[name], ker[name])


def test_ties_are_where_tosa_and_onnxruntime_round_differently(tmp_path):
    """Requantization ratio exactly 1/2: every odd accumulator is a tie. TOSA RESCALE rounds it
    up (single rounding, multiplier 2^30, shift 31), onnxruntime to even; the outputs differ by
    1 LSB exactly on the ties whose two roundings differ, and nowhere else."""
    model, ints = tie_model()
    path = save(model, tmp_path, "tie.onnx")
    graph = load(path)
    lowered = quantize_graph(graph, None, None, QUIET).model
    x_quant, y_quant = graph.tensor("x").quant, graph.tensor("y").quant
    assert (x_quant.scale, x_quant.zero_point, x_quant.signed) == (2.0 ** TIE_SHIFT["x"], 0, True)
    sessions = {level: ort_session(path, level) for level in ("ORT_ENABLE_ALL", "ORT_DISABLE_ALL")}
    predicted = differing = elements = 0
    for x in samples(model, 30, seed=3, spread=0.3):
        xq = quantize_linear(x, x_quant)
        acc = tie_accumulators(xq, ints["wq"], ints["bq"])
        half_up = np.clip(np.floor(acc / 2 + 0.5) + ints["zy"], -128, 127)
        half_even = np.clip(np.rint(acc / 2) + ints["zy"], -128, 127)
        ours = execute(lowered.graph, {lowered.tensor_map["x"].name: xq.astype(np.int8)})[lowered.graph.outputs[0]]
        np.testing.assert_array_equal(ours, half_up)
        for session in sessions.values():
            theirs = quantize_linear(session.run(None, {"x": x})[0], y_quant)
            np.testing.assert_array_equal(theirs, half_even)
            assert np.abs(ours.astype(np.int64) - theirs).max() <= 1
            differing += int(np.count_nonzero(ours != theirs))
        predicted += 2 * int(np.count_nonzero(half_up != half_even))
        elements += 2 * acc.size
    assert differing == predicted
    assert 0.1 * elements < differing < 0.3 * elements   # a quarter of the unsaturated results


def test_weights_and_biases_are_the_models_integers(tmp_path):
    """Requantizing the imported weights on their annotation gives back the int8 initializer, and
    the int32 bias is the accumulator bias as stored, with or without calibration data."""
    model = cnn_model(17)
    path = quantize_qdq(model, tmp_path, per_channel=True)
    stored = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    graph = load(path)
    w = graph.tensor("w1_DequantizeLinear_Output")
    assert w.quant.source == "annotation" and w.quant.axis == 0 and w.quant.bits == 8
    calib = Samples(np.stack(samples(model, 4, seed=1)).reshape(4, 3, 8, 8))
    for data in (None, calib):
        lowered = quantize_graph(graph, data, None, QUIET).model
        convs = [op for op in lowered.graph.ops if op.kind.name == "tosa.CONV2D"]
        np.testing.assert_array_equal(convs[0].attrs["weight"], stored["w1_quantized"].transpose(0, 2, 3, 1))
        np.testing.assert_array_equal(convs[0].attrs["bias"], stored["b1_quantized"])
        np.testing.assert_array_equal(convs[1].attrs["weight"], stored["w2_quantized"].transpose(0, 2, 3, 1))
        np.testing.assert_array_equal(convs[1].attrs["bias"], stored["b2_quantized"])
        fc = next(op for op in lowered.graph.ops if op.kind.name == "tosa.FULLY_CONNECTED")
        np.testing.assert_array_equal(fc.attrs["weight"], stored["w3_quantized"])
        np.testing.assert_array_equal(fc.attrs["bias"], stored["b3_quantized"])


def test_uint8_activations_map_exactly_onto_int8(tmp_path):
    model = cnn_model(17)
    path = quantize_qdq(model, tmp_path, per_channel=True, activations="QUInt8")
    stored = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    graph = load(path)
    x = graph.tensor("x").quant
    assert (x.bits, x.signed, x.zero_point) == (8, False, int(stored["x_zero_point"]))
    lowered = quantize_graph(graph, None, None, QUIET).model
    (name, q), = lowered.input_quant.items()
    assert q.signed and q.zero_point == int(stored["x_zero_point"]) - 128 and q.scale == x.scale


def test_cli_quantizes_without_calibration_and_simulate_verifies(tmp_path, capsys):
    model = depthwise_model(17)
    path = quantize_qdq(model, tmp_path, per_channel=True)
    out = tmp_path / "Q"
    assert main(["quantize", path, "-o", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert "evaluated on 16 samples" in text
    report = json.loads((out / "report.json").read_text())
    assert any("seeded random inputs" in note for note in report["notes"])
    meta = json.loads((out / "quantization.json").read_text())
    assert meta["settings"]["calibration"] == "model annotations"
    np.save(tmp_path / "x.npy", samples(model, 1, seed=5)[0])
    sim = tmp_path / "sim"
    assert main(["simulate", str(out), "--engine", "model", "--input", str(tmp_path / "x.npy"),
                 "-o", str(sim), "-q"]) == 0
    assert json.loads((sim / "report.json").read_text())["all_verified"] is True


# ---------------------------------------------------------------------- annotations that are missing

def _partly_quantized(tmp_path) -> str:
    """A QDQ model whose conv output is not quantized before the sigmoid reads it."""
    rng = np.random.default_rng(4)
    nodes = [*q_dq("x", "s", "z", "x_dq"),
             helper.make_node("DequantizeLinear", ["wq", "sw"], ["w"], name="w_DQ"),
             helper.make_node("Conv", ["x_dq", "w"], ["conv_out"], name="conv"),
             helper.make_node("Sigmoid", ["conv_out"], ["sig"], name="sigmoid"),
             *q_dq("sig", "s", "z", "y")]
    inits = [init("s", np.float32(0.02)), init("z", np.int8(0)), init("sw", np.float32(0.01)),
             init("wq", rng.integers(-100, 100, (2, 2, 1, 1)).astype(np.int8))]
    return save(make_model(nodes, [("x", [1, 2, 3, 3])], [("y", [1, 2, 3, 3])], inits, opset=17), tmp_path, "part.onnx")


def test_missing_annotations_are_named_or_calibrated(tmp_path):
    path = _partly_quantized(tmp_path)
    graph = load(path)
    with pytest.raises(UsageError, match=r"no quantization annotation for 1 tensor.*'conv_out'") as err:
        quantize_graph(graph, None, None, QUIET)
    assert "--calib" in err.value.hint
    calib = Samples(np.random.default_rng(0).standard_normal((8, 2, 3, 3)).astype(np.float32))
    lowered = quantize_graph(graph, calib, None, QUIET).model
    assert lowered.output_quant[lowered.graph.outputs[0]].scale == pytest.approx(0.02)
    assert main(["quantize", path, "-o", str(tmp_path / "o"), "-q"]) == 2


# ---------------------------------------------------------------------- refused models, located

def _expect(tmp_path, model, kind, *fragments):
    path = save(model, tmp_path, "bad.onnx")
    with pytest.raises(kind) as err:
        load(path)
    assert err.value.location.file == path
    for fragment in fragments:
        assert fragment in err.value.message, err.value.message
    assert err.value.hint
    return err.value


def test_dequantize_without_quantize(tmp_path):
    nodes = [helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT8, name="cast"),
             helper.make_node("DequantizeLinear", ["xi", "s", "z"], ["y"], name="lonely_DQ")]
    model = make_model(nodes, [("x", [1, 4])], [("y", [1, 4])], [init("s", np.float32(0.1)), init("z", np.int8(0))])
    _expect(tmp_path, model, DataError, "node 'lonely_DQ' (DequantizeLinear", "reads 'xi'", "node 'cast'")


def test_inconsistent_scales_on_a_shared_tensor(tmp_path):
    nodes = [helper.make_node("QuantizeLinear", ["x", "s1", "z"], ["xq1"], name="Q1"),
             helper.make_node("DequantizeLinear", ["xq1", "s1", "z"], ["x1"], name="DQ1"),
             helper.make_node("QuantizeLinear", ["x", "s2", "z"], ["xq2"], name="Q2"),
             helper.make_node("DequantizeLinear", ["xq2", "s2", "z"], ["x2"], name="DQ2"),
             helper.make_node("Add", ["x1", "x2"], ["y"], name="add")]
    inits = [init("s1", np.float32(0.1)), init("s2", np.float32(0.2)), init("z", np.int8(0))]
    model = make_model(nodes, [("x", [1, 4])], [("y", [1, 4])], inits)
    _expect(tmp_path, model, DataError, "node 'DQ2' (DequantizeLinear", "tensor 'x'", "scale 0.2", "node 'DQ1'")


def test_pair_with_two_parameter_sets(tmp_path):
    nodes = [helper.make_node("QuantizeLinear", ["x", "s1", "z"], ["xq"], name="Q"),
             helper.make_node("DequantizeLinear", ["xq", "s2", "z"], ["y"], name="DQ")]
    inits = [init("s1", np.float32(0.1)), init("s2", np.float32(0.2)), init("z", np.int8(0))]
    _expect(tmp_path, make_model(nodes, [("x", [1, 4])], [("y", [1, 4])], inits), DataError,
            "node 'DQ'", "node 'Q'", "quantized with")


def test_block_quantization_is_refused(tmp_path):
    nodes = [*q_dq("x", "s", "z", "x_dq"),
             helper.make_node("DequantizeLinear", ["wq", "sw"], ["w"], axis=1, block_size=2, name="w_block_DQ"),
             helper.make_node("MatMul", ["x_dq", "w"], ["y"], name="mm")]
    inits = [init("s", np.float32(0.1)), init("z", np.int8(0)), init("wq", np.ones((4, 3), np.int8)),
             init("sw", np.full((2, 3), 0.1, np.float32))]
    _expect(tmp_path, make_model(nodes, [("x", [1, 4])], [("y", [1, 3])], inits, opset=21), UnsupportedError,
            "node 'w_block_DQ' (DequantizeLinear", "block quantization (block_size 2)")


def test_per_axis_activation_is_refused(tmp_path):
    nodes = [*q_dq("x", "s", "z", "y", axis=1)]
    inits = [init("s", np.full(4, 0.1, np.float32)), init("z", np.zeros(4, np.int8))]
    _expect(tmp_path, make_model(nodes, [("x", [1, 4])], [("y", [1, 4])], inits), UnsupportedError,
            "node 'x_DQ'", "per axis")


def test_integer_tensor_read_by_a_float_operator_is_refused(tmp_path):
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="Q"),
             helper.make_node("Cast", ["xq"], ["y"], to=TensorProto.FLOAT, name="cast")]
    inits = [init("s", np.float32(0.1)), init("z", np.int8(0))]
    _expect(tmp_path, make_model(nodes, [("x", [1, 4])], [("y", [1, 4])], inits), UnsupportedError,
            "node 'Q' (QuantizeLinear", "read by node 'cast'")


def test_four_bit_weights_are_refused(tmp_path):
    w = helper.make_tensor("wq", TensorProto.INT4, [4, 3], [1] * 12)
    nodes = [*q_dq("x", "s", "z", "x_dq"),
             helper.make_node("DequantizeLinear", ["wq", "sw"], ["w"], name="w4_DQ"),
             helper.make_node("MatMul", ["x_dq", "w"], ["y"], name="mm")]
    inits = [init("s", np.float32(0.1)), init("z", np.int8(0)), w, init("sw", np.float32(0.1))]
    _expect(tmp_path, make_model(nodes, [("x", [1, 4])], [("y", [1, 3])], inits, opset=21), UnsupportedError,
            "node 'w4_DQ'", "INT4")


def test_asymmetric_weights_are_refused_when_lowered(tmp_path):
    model, _ = tie_model()
    zw = next(t for t in model.graph.initializer if t.name == "zw")
    zw.CopyFrom(onnx.numpy_helper.from_array(np.array([0, 3, 0], np.int8), "zw"))
    path = save(model, tmp_path, "asym.onnx")
    graph = load(path)
    with pytest.raises(UnsupportedError, match=r"zero point \[0, 3, 0\].*symmetric"):
        quantize_graph(graph, None, None, QUIET)


def test_scale_computed_at_run_time_is_refused(tmp_path):
    nodes = [helper.make_node("Abs", ["s0"], ["s"], name="abs"), *q_dq("x", "s", "z", "y")]
    inits = [init("s0", np.float32(0.1)), init("z", np.int8(0))]
    model = make_model(nodes, [("x", [1, 4])], [("y", [1, 4])], inits)
    _expect(tmp_path, model, UnsupportedError, "node 'x_DQ' (DequantizeLinear", "scale 's'", "computed at run time")


def test_constant_nodes_and_output_names(tmp_path):
    """Parameters in Constant nodes (PyTorch's exporter) read; the graph output keeps its name."""
    model, _ = tie_model(opset=13)
    graph = load(save(model, tmp_path, "tie13.onnx"))
    assert graph.outputs == ("y",) and graph.tensor("y").quant.scale == 2.0 ** TIE_SHIFT["y"]
    assert [op.kind.name for op in graph.ops] == ["nn.conv"]
    assert scalar_constant("k", 1.0, np.float32).op_type == "Constant"


# A PyTorch model with fake quantization (QAT style), exported by the TorchScript exporter:
# QuantizeLinear/DequantizeLinear pairs with parameters in Constant nodes, float weights quantized
# through a pair, float biases, a Relu between Conv and its pair. Written by
# tests/onnx/torch_exports/make_exports.py (FakeQuant), so the test needs no torch.
TORCH_FAKE_QUANT = str(Path(__file__).resolve().parent / "torch_exports" / "fake_quant_qdq_opset17.onnx")


def test_pytorch_fake_quant_export():
    path = TORCH_FAKE_QUANT
    graph = load(path)
    assert graph.outputs == ("y",) and graph.tensor("y").quant.zero_point == 3
    assert sum(t.quant is not None for t in graph.tensors.values()) == 5    # x, relu, y, two weights
    rng = np.random.default_rng(6)
    agreement = compare_with_ort(path, [(rng.standard_normal((1, 3, 6, 6)) * 1.5).astype(np.float32)
                                        for _ in range(100)])
    # measured: 4 of 500 (fused), 7 of 500 (float): the float biases are rounded to the
    # accumulator grid here, onnxruntime's float path adds them unrounded
    for level in agreement.max_lsb:
        assert agreement.max_lsb[level] <= 1 and agreement.differing[level] <= 0.03 * agreement.elements, agreement


def test_fake_quantized_weights_must_be_finite(tmp_path):
    model, _ = tie_model()
    wf = next(t for t in model.graph.initializer if t.name == "wf")
    data = onnx.numpy_helper.to_array(wf).copy()
    data[1, 0, 0, 0] = np.nan
    wf.CopyFrom(onnx.numpy_helper.from_array(data, "wf"))
    _expect(tmp_path, model, DataError, "node 'w_Q' (QuantizeLinear", "'wf'", "non-finite")


def test_unquantized_tensors_before_grid_keeping_operators_take_their_parameters(tmp_path):
    """PRelu outputs that onnxruntime leaves unquantized, read only by MaxPool or by Transpose ->
    Flatten whose outputs are quantized, take those parameters: no calibration is needed, and the
    result is onnxruntime's (max and layout moves commute with quantization)."""
    model = prelu_model()
    path = quantize_qdq(model, tmp_path, per_channel=True)
    stripped = onnx.load(path)
    quantized = {n.input[0] for n in stripped.graph.node if n.op_type == "QuantizeLinear"}
    assert "p1" not in quantized and "p2" not in quantized and {"m1", "f"} <= quantized
    graph = load(path)
    for unquantized, after in (("p1", "m1"), ("p2", "f"), ("t", "f")):
        assert graph.tensor(unquantized).quant == graph.tensor(after).quant
    agreement = compare_with_ort(path, samples(model, 40, seed=8, spread=1.5))
    for level in agreement.max_lsb:
        assert agreement.max_lsb[level] <= 1, agreement
        assert agreement.differing[level] <= MAX_DIFFERING_FRACTION * agreement.elements, agreement


def test_attention_core(tmp_path):
    """MatMul by constant weights, q·kᵀ and p·v of computed operands (MATMUL), softmax, residual
    add. Measured (30 inputs, 1,440 output elements): 109-122 differ by 1 LSB from the fused
    kernels and 72-74 from the float path: qsim's integer softmax and onnxruntime's (a float32
    exp, or QLinearSoftmax's table) round differently, and those 1-LSB probabilities move p·v."""
    model = attention_model()
    for per_channel in (False, True):
        path = quantize_qdq(model, tmp_path, per_channel=per_channel, activations="QInt8", name=f"attn{per_channel}")
        agreement = compare_with_ort(path, samples(model, 30, seed=1))
        for level in agreement.max_lsb:
            assert agreement.max_lsb[level] <= 1, agreement
            assert agreement.differing[level] <= 0.12 * agreement.elements, agreement


def test_sixteen_bit_activations(tmp_path):
    """int16/uint16 activations (opset 21, symmetric) quantize with --precision 16x8. TOSA 0.30
    requantizes the int48 accumulator with a 16-bit multiplier (RESCALE ERROR_IF(scale32 &&
    in_t == int48_t)), precise to 2^-15 relative, so a layer's results near full scale round
    differently from onnxruntime's float32 requantization on a few % of elements, by 1 LSB of the
    16-bit grid (1/256 of an 8-bit step); across this model's four layers, at most 2."""
    from qsim.quant.params import Precision
    from qsim.quant.options import QuantizeOptions
    model = cnn_model(21)
    options = QuantizeOptions(show_progress=False, precision=Precision.INT16X8)
    for activations in ("QInt16", "QUInt16"):
        path = quantize_qdq(model, tmp_path, per_channel=True, activations=activations, name=activations,
                            extra_options={"ActivationSymmetric": True})
        x = load(path).tensor("x").quant
        assert x.bits == 16 and x.zero_point == (0 if activations == "QInt16" else 32768)
        agreement = compare_with_ort(path, samples(model, 20, seed=1, spread=1.5), options=options)
        assert max(agreement.max_lsb.values()) <= 2, agreement
        with pytest.raises(UnsupportedError, match="asks for 16-bit values, but this run's activations are 8-bit"):
            quantize_graph(load(path), None, None, QUIET)


def test_asymmetric_sixteen_bit_activations_are_refused(tmp_path):
    from qsim.quant.params import Precision
    from qsim.quant.options import QuantizeOptions
    path = quantize_qdq(cnn_model(21), tmp_path, per_channel=True, activations="QInt16")
    with pytest.raises(UnsupportedError, match=r"tensor 'x' has zero point -?\d+ on TOSA's signed 16-bit grid") as err:
        quantize_graph(load(path), None, None, QuantizeOptions(show_progress=False, precision=Precision.INT16X8))
    assert "ActivationSymmetric" in err.value.hint


def test_constant_matmul_operand_with_a_zero_point(tmp_path):
    """A constant MatMul operand quantized like an activation (per tensor, zero point -1: what
    onnxruntime writes for a weight that reaches MatMul through a Transpose) becomes
    FULLY_CONNECTED's weight_zp, exactly; the outputs are within 1 LSB of onnxruntime."""
    rng = np.random.default_rng(9)
    bq = rng.integers(-128, 128, (8, 5)).astype(np.int8)
    nodes = [*q_dq("x", "sx", "zx", "x_dq"),
             helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["b"], name="b_DQ"),
             helper.make_node("MatMul", ["x_dq", "b"], ["m"], name="mm"),
             *q_dq("m", "sy", "zy", "y")]
    inits = [init("sx", np.float32(0.02)), init("zx", np.int8(3)), init("bq", bq), init("sb", np.float32(0.01)),
             init("zb", np.int8(-1)), init("sy", np.float32(0.05)), init("zy", np.int8(-2))]
    model = make_model(nodes, [("x", [1, 3, 8])], [("y", [1, 3, 5])], inits, opset=17)
    path = save(model, tmp_path, "mm.onnx")
    lowered = quantize_graph(load(path), None, None, QUIET).model
    fc = next(op for op in lowered.graph.ops if op.kind.name == "tosa.FULLY_CONNECTED")
    assert fc.attrs["weight_zp"] == -1
    np.testing.assert_array_equal(np.asarray(fc.attrs["weight"]).reshape(5, 8), bq.T)
    for corner in (-128, 127):   # both rails: the reference and the kernels agree bit for bit
        feed = {lowered.graph.inputs[0]: np.full((1, 3, 8), corner, np.int8)}
        ref, ker = execute(lowered.graph, feed, "reference"), execute(lowered.graph, feed, "kernels")
        np.testing.assert_array_equal(ref[lowered.graph.outputs[0]], ker[lowered.graph.outputs[0]])
    agreement = compare_with_ort(path, [(rng.standard_normal((1, 3, 8)) * 1.5).astype(np.float32) for _ in range(30)])
    assert max(agreement.max_lsb.values()) <= 1, agreement
