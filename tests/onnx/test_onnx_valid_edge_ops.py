"""Valid ONNX that onnxruntime runs and qsim used to refuse (issue 29): LogSoftmax, Mod with
fmod=1 on computed tensors, empty slices, Cast to UINT64, a pytorch_half_pixel resize to an
extent of 1, repeated Reduce axes. qsim's float run vs onnxruntime within float32 bounds
(onnx_helpers' module doc); the integer lowering where TOSA expresses the operator (docs/onnx.md
says where it does not: float Mod).
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_helpers import EPS32, assert_within, gamma, init, make_model, run_ort, run_qsim, save
from qsim.errors import UnsupportedError

RNG = np.random.default_rng(2929)


@pytest.mark.parametrize("opset,axis", [(17, -1), (17, 1), (11, 1)])
def test_log_softmax_matches_onnxruntime(tmp_path, opset, axis):
    x = (RNG.normal(size=(2, 5, 7)) * 30).astype(np.float32)
    x[0, 0, 0] = 200.0          # p underflows to 0 in float32: log(softmax) would be -inf
    model = make_model([helper.make_node("LogSoftmax", ["x"], ["y"], axis=axis)], [("x", [2, 5, 7])],
                       [("y", None)], opset=opset)
    got, ref = run_qsim(save(model, tmp_path), {"x": x}, batch=2)["y"], run_ort(model, {"x": x})["y"]
    assert np.all(np.isfinite(got))
    # x - max exact (Sterbenz); log of a sum of <= 35 exps in [0, 1]: a few EPS32 of |log sum| <= 4;
    # the final subtraction one rounding of |x - max| + 4
    assert_within(got, ref, 2 * gamma(40) * (np.abs(ref) + 4) + 8 * EPS32, "LogSoftmax")


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_fmod_of_computed_tensors_matches_onnxruntime(tmp_path, dtype):
    """C fmod takes the dividend's sign: sign(a) * (|a| % |b|), exact (no rounding)."""
    a = (RNG.normal(size=(3, 8)) * 20).astype(dtype)
    b = np.array([3, -3, 2.5, -0.75, 7, 1, -1, 4], dtype)
    if dtype == np.int64:
        b = np.array([3, -3, 2, -5, 7, 1, -1, 4], dtype)
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Mod", ["n", "b"], ["y"], fmod=1)]
    model = make_model(nodes, [("x", [3, 8], dtype)], [("y", None, dtype)], [init("b", b)])
    got, ref = run_qsim(save(model, tmp_path), {"x": a}, batch=3)["y"], run_ort(model, {"x": a})["y"]
    np.testing.assert_array_equal(got, ref)


def test_fmod_has_no_integer_lowering_and_says_so(tmp_path):
    from qsim.quant.calibration.data import Samples
    from qsim.quant.options import QuantizeOptions
    from qsim.quant.pipeline import load_float_model, quantize_graph
    model = make_model([helper.make_node("Mod", ["x", "b"], ["y"], fmod=1)], [("x", [1, 4])], [("y", None)],
                       [init("b", np.float32(1.5))])
    graph = load_float_model(save(model, tmp_path))
    with pytest.raises(UnsupportedError, match="no integer lowering for math.mod"):
        quantize_graph(graph, Samples(RNG.normal(size=(4, 4)).astype(np.float32)), None,
                       QuantizeOptions(show_progress=False))


def test_empty_slice_feeding_concat_is_dropped(tmp_path):
    """torch's x[:, 5:5] pieces: an empty constant that Concat drops."""
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a"], ["empty"]),
             helper.make_node("Concat", ["empty", "x", "empty"], ["y"], axis=1)]
    model = make_model(nodes, [("x", [1, 10])], [("y", None)],
                       [init("s", np.array([5])), init("e", np.array([5])), init("a", np.array([1]))])
    x = RNG.normal(size=(1, 10)).astype(np.float32)
    np.testing.assert_array_equal(run_qsim(save(model, tmp_path), {"x": x})["y"], run_ort(model, {"x": x})["y"])


def test_empty_slice_feeding_arithmetic_is_a_clear_error(tmp_path):
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a"], ["empty"]),
             helper.make_node("Relu", ["empty"], ["y"])]
    model = make_model(nodes, [("x", [1, 10])], [("y", None)],
                       [init("s", np.array([5])), init("e", np.array([5])), init("a", np.array([1]))])
    with pytest.raises(UnsupportedError, match="is empty .* qsim graphs hold no empty tensors"):
        run_qsim(save(model, tmp_path), {"x": np.zeros((1, 10), np.float32)})


def test_cast_to_uint64_in_shape_arithmetic_and_on_data(tmp_path):
    """Shape arithmetic through UINT64 folds; a computed cast is held as int64 (same values below 2^63)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Cast", ["s"], ["su"], to=TensorProto.UINT64),
             helper.make_node("Cast", ["su"], ["si"], to=TensorProto.INT64),
             helper.make_node("Reshape", ["x", "si"], ["r"]), helper.make_node("Relu", ["r"], ["p"]),
             helper.make_node("Cast", ["p"], ["y"], to=TensorProto.UINT64)]
    model = make_model(nodes, [("x", [1, 10])], [helper.make_tensor_value_info("y", TensorProto.UINT64, None)])
    x = (RNG.normal(size=(1, 10)) * 1e6).astype(np.float32)
    got, ref = run_qsim(save(model, tmp_path), {"x": x})["y"], run_ort(model, {"x": x})["y"]
    assert got.dtype == np.int64 and ref.dtype == np.uint64
    np.testing.assert_array_equal(got, ref.astype(np.int64))


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("sizes", [[1, 2, 1, 3], [1, 2, 1, 1], [1, 2, 8, 1]])
def test_pytorch_half_pixel_resize_to_an_extent_of_one(tmp_path, mode, sizes):
    """Output extent 1 samples source coordinate 0 (ONNX Resize: pytorch_half_pixel), x[0]."""
    model = make_model([helper.make_node("Resize", ["x", "", "", "sz"], ["y"], mode=mode,
                                         coordinate_transformation_mode="pytorch_half_pixel")],
                       [("x", [1, 2, 4, 5])], [("y", None)], [init("sz", np.array(sizes))])
    x = RNG.normal(size=(1, 2, 4, 5)).astype(np.float32)
    got, ref = run_qsim(save(model, tmp_path), {"x": x})["y"], run_ort(model, {"x": x})["y"]
    # the resized axes interpolate (a few roundings of values <= max|x|); the extent-1 axes are exact
    assert_within(got, ref, 2 * gamma(16) * 2 * np.abs(x).max(), f"{mode} {sizes}")
    if sizes[2:] == [1, 1]:      # both axes to extent 1: exactly x[..., 0, 0], as onnxruntime
        np.testing.assert_array_equal(got[..., 0, 0], x[..., 0, 0])
        np.testing.assert_array_equal(ref[..., 0, 0], x[..., 0, 0])


@pytest.mark.parametrize("op,opset,axes", [("ReduceMean", 13, [1, 1]), ("ReduceSum", 13, [2, -1]),
                                           ("ReduceMax", 18, [0, 0, 2]), ("ReduceSum", 18, [-1, 2, 1])])
def test_repeated_reduce_axes_are_reduced_once(tmp_path, op, opset, axes):
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    axes_input = (op == "ReduceSum" and opset >= 13) or opset >= 18
    node = (helper.make_node(op, ["x", "ax"], ["y"], keepdims=1) if axes_input
            else helper.make_node(op, ["x"], ["y"], axes=axes, keepdims=1))
    inits = [init("ax", np.array(axes))] if axes_input else []
    model = make_model([node], [("x", [2, 3, 4])], [("y", None)], inits, opset=opset)
    got, ref = run_qsim(save(model, tmp_path), {"x": x}, batch=2)["y"], run_ort(model, {"x": x})["y"]
    assert_within(got, ref, 2 * gamma(12) * np.abs(x).sum(), f"{op} {axes}")
