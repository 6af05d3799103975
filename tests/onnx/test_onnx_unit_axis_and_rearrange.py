"""Conv1d-family operators on a unit axis (qsim/onnx/convert_unit_axis.py) and DepthToSpace /
SpaceToDepth as reshape/transpose (qsim/onnx/convert_rearrange.py): qsim's float execution vs
onnxruntime, then the integer graph through the TOSA lowering replayed bit-exact on the reference
and the kernels.

Bounds (onnx_helpers' module doc): a 1-D convolution of C·k products has n = C·k + 1 roundings
per output (the bias add), so |qsim - onnxruntime| <= 2·γ_n·S with S the same model on |x|, |W|;
pooling of max is exact, averaging of k values n = k; batch norm a few roundings of values of
magnitude |x|·|scale| + |bias|. DepthToSpace and SpaceToDepth move values: bound 0.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from onnx_helpers import assert_within, gamma, init, magnitude, make_model, run_ort, run_qsim, save

RNG = np.random.default_rng(29)


def _normal(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


CONV1D = [
    dict(pads=[1, 1]),
    dict(pads=[2, 0], strides=[2]),
    dict(dilations=[2], pads=[2, 2]),
    dict(auto_pad="SAME_UPPER", strides=[2]),
    dict(group=2, pads=[1, 1]),
]


@pytest.mark.parametrize("attrs", CONV1D, ids=[str(a) for a in CONV1D])
def test_conv1d_matches_onnxruntime(tmp_path, attrs):
    groups = attrs.get("group", 1)
    w, b = _normal(6, 4 // groups, 3, scale=0.5), _normal(6)
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3], **attrs)],
                       [("x", [2, 4, 11])], [("y", None)], [init("w", w), init("b", b)])
    feeds = {"x": _normal(2, 4, 11)}
    got, ref = run_qsim(save(model, tmp_path), feeds, batch=2)["y"], run_ort(model, feeds)["y"]
    assert_within(got, ref, 2 * gamma(4 * 3 + 1) * magnitude(model, feeds)["y"], str(attrs))


def test_conv_transpose1d_matches_onnxruntime(tmp_path):
    w = _normal(4, 3, 4, scale=0.5)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[4], strides=[2],
                                         pads=[1, 1], output_padding=[1])],
                       [("x", [1, 4, 7])], [("y", None)], [init("w", w)])
    feeds = {"x": _normal(1, 4, 7)}
    got, ref = run_qsim(save(model, tmp_path), feeds)["y"], run_ort(model, feeds)["y"]
    assert got.shape == ref.shape == (1, 3, 15)
    assert_within(got, ref, 2 * gamma(4 * 4) * magnitude(model, feeds)["y"], "ConvTranspose1d")


@pytest.mark.parametrize("op,attrs,n", [
    ("MaxPool", dict(kernel_shape=[3], strides=[2], pads=[1, 1]), 0),
    ("MaxPool", dict(kernel_shape=[2], ceil_mode=1, strides=[2]), 0),
    ("AveragePool", dict(kernel_shape=[3], strides=[1], pads=[1, 1], count_include_pad=0), 3),
    ("AveragePool", dict(kernel_shape=[4], strides=[4]), 4),
])
def test_pool1d_matches_onnxruntime(tmp_path, op, attrs, n):
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", [1, 3, 13])], [("y", None)])
    feeds = {"x": _normal(1, 3, 13)}
    got, ref = run_qsim(save(model, tmp_path), feeds)["y"], run_ort(model, feeds)["y"]
    assert_within(got, ref, 2 * gamma(n) * np.abs(feeds["x"]).max() if n else 0.0, op)


@pytest.mark.parametrize("shape", [(1, 5, 9), (3, 5)])
def test_batch_norm1d_matches_onnxruntime(tmp_path, shape):
    c = 5
    inits = [init("g", _normal(c)), init("b", _normal(c)), init("m", _normal(c)),
             init("v", np.abs(_normal(c)) + 0.5)]
    model = make_model([helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"])],
                       [("x", list(shape))], [("y", None)], inits)
    feeds = {"x": _normal(*shape)}
    got, ref = run_qsim(save(model, tmp_path), feeds, batch=shape[0])["y"], run_ort(model, feeds)["y"]
    # (x - m) / sqrt(v + eps) * g + b: 6 roundings of values at most (|x| + |m|) / sqrt(0.5) * |g| + |b|
    size = (np.abs(feeds["x"]).max() + 3) * 1.5 * 3 + 3
    assert_within(got, ref, 2 * gamma(6) * size, "BatchNorm1d")


@pytest.mark.parametrize("op,attrs,shape", [
    ("DepthToSpace", dict(blocksize=2), (1, 8, 3, 5)),
    ("DepthToSpace", dict(blocksize=2, mode="DCR"), (2, 12, 2, 3)),
    ("DepthToSpace", dict(blocksize=3, mode="CRD"), (1, 18, 2, 2)),
    ("SpaceToDepth", dict(blocksize=2), (1, 3, 4, 6)),
])
def test_depth_space_moves_values_as_onnxruntime(tmp_path, op, attrs, shape):
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", list(shape))], [("y", None)])
    feeds = {"x": _normal(*shape)}
    got, ref = run_qsim(save(model, tmp_path), feeds, batch=shape[0])["y"], run_ort(model, feeds)["y"]
    np.testing.assert_array_equal(got, ref)


def test_depth_to_space_of_a_constant_folds(tmp_path):
    """A constant input folds at import (the folder) to the values onnxruntime computes."""
    c = _normal(1, 8, 2, 2)
    nodes = [helper.make_node("DepthToSpace", ["c"], ["d"], blocksize=2, mode="CRD"),
             helper.make_node("Add", ["x", "d"], ["y"])]
    model = make_model(nodes, [("x", [1, 2, 4, 4])], [("y", None)], [init("c", c)])
    feeds = {"x": _normal(1, 2, 4, 4)}
    np.testing.assert_array_equal(run_qsim(save(model, tmp_path), feeds)["y"], run_ort(model, feeds)["y"])


@pytest.mark.parametrize("attrs,message", [
    (dict(blocksize=3), "not a multiple of blocksize"),
    (dict(blocksize=2, mode="XYZ"), "is not DCR or CRD"),
])
def test_depth_to_space_errors_name_the_node(tmp_path, attrs, message):
    from qsim.errors import QsimError
    model = make_model([helper.make_node("DepthToSpace", ["x"], ["y"], **attrs)], [("x", [1, 8, 2, 2])],
                       [("y", None)])
    with pytest.raises(QsimError, match=message):
        run_qsim(save(model, tmp_path), {"x": _normal(1, 8, 2, 2)})
