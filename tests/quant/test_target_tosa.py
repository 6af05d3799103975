"""The lowering float graph → TOSA integer graph: structure, bit-exactness, accuracy."""
import numpy as np
import pytest

from qsim import ir
from qsim.errors import UnsupportedError
from qsim.quant.lowering.float_side import compose_perm
from qsim.quant.tosa.target import lower_graph
from qsim.quant.params import QuantConfig, dequantize, quantize
from qsim.runtime.executor import execute

from .lowering_models import FloatGraph, calibrate_minmax, small_cnn


def sqnr_db(ref, test):
    ref = np.asarray(ref, np.float64)
    err = np.asarray(test, np.float64) - ref
    return 10 * np.log10(np.sum(ref ** 2) / max(np.sum(err ** 2), 1e-30))


def _run_both(model, x):
    """Quantizes x, runs the integer graph on both backends, asserts they agree bit for bit."""
    g = model.graph
    name = g.inputs[0]
    q = quantize(x, model.input_quant[name]).astype(g.tensors[name].dtype.numpy)
    ref = execute(g, {name: q}, backend="reference")
    fast = execute(g, {name: q}, backend="kernels")
    for t in g.tensors:
        if t in ref:
            assert np.array_equal(ref[t], fast[t]), f"kernels and reference differ on {t}"
    return ref


def test_compose_perm():
    assert compose_perm((0, 1, 2, 3), (0, 2, 3, 1)) == (0, 2, 3, 1)
    assert compose_perm((0, 2, 3, 1), (0, 1, 2, 3)) == (0, 3, 1, 2)
    x = np.arange(24).reshape(1, 2, 3, 4)
    nhwc = x.transpose(0, 2, 3, 1)
    assert np.array_equal(nhwc.transpose(compose_perm((0, 2, 3, 1), (0, 1, 2, 3))), x)


@pytest.mark.parametrize("double_round", [False, True])
def test_small_cnn_lowers_to_tosa_and_tracks_float(rng, double_round):
    graph = small_cnn(rng)
    calib = [rng.normal(0, 1, (1, 3, 12, 12)).astype(np.float32) for _ in range(8)]
    qparams = calibrate_minmax(graph, calib)
    model = lower_graph(graph, qparams, QuantConfig(double_round=double_round))
    g = model.graph
    kinds = [op.kind.name for op in g.ops]
    assert all(k.startswith("tosa.") for k in kinds)
    # batch norm folded, relu and clamp fused into CLAMP after RESCALE, grouped conv split
    assert "tosa.DEPTHWISE_CONV2D" in kinds and kinds.count("tosa.CONV2D") == 3
    assert "tosa.AVG_POOL2D" in kinds and "tosa.FULLY_CONNECTED" in kinds
    assert all(op.attrs["double_round"] == double_round for op in g.ops if op.kind.name == "tosa.RESCALE")
    assert g.tensors["logits"].dtype is ir.DType.I8
    for x in calib[:3]:
        ints = _run_both(model, x)
        floats = execute(graph, {"x": x})
        got = dequantize(ints["logits"], model.output_quant["logits"])
        assert sqnr_db(floats["logits"], got) > 25.0
        # intermediate values line up by name and layout
        v = model.tensor_map["r1"]
        inter = dequantize(ints[v.name], v.quant).transpose(np.argsort(v.perm))
        assert sqnr_db(floats["r1"], inter) > 30.0


def test_relu_clamps_at_zero_point(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 4, 3, 3))
    c = g.op("nn.conv", [x, g.weights("w", (4, 4, 1, 1)), ""], "c", (1, 4, 3, 3))
    g.op("nn.relu", [c], "y", (1, 4, 3, 3))
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 4, 3, 3)).astype(np.float32) for _ in range(4)]
    qp = calibrate_minmax(graph, calib)
    model = lower_graph(graph, qp)
    ints = _run_both(model, calib[0])
    zp = int(model.output_quant["y"].zero_point)
    assert ints["y"].min() >= zp          # nothing below real 0
    clamp = [op for op in model.graph.ops if op.kind.name == "tosa.CLAMP"]
    assert len(clamp) == 1 and clamp[0].attrs["min_val"] == zp


def test_floor_mode_stride_crops_or_trims_padding(rng):
    # 7x7 input, 3x3 kernel, stride 2, no padding: (7-3) % 2 == 0 exact; 8x8: remainder 1 → crop
    g = FloatGraph(rng)
    x = g.input("x", (1, 2, 8, 8))
    g.op("nn.conv", [x, g.weights("w", (3, 2, 3, 3)), ""], "y", (1, 3, 3, 3), stride=(2, 2),
         padding=(0, 0, 0, 0))
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 2, 8, 8)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert any(op.kind.name == "tosa.SLICE" for op in model.graph.ops)
    ints = _run_both(model, calib[1])
    floats = execute(graph, {"x": calib[1]})
    assert sqnr_db(floats["y"], dequantize(ints["y"], model.output_quant["y"])) > 30.0


def test_unsupported_operator_is_named(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 4))
    g.op("math.mod", [x, g.const("two", 2.0)], "y", (1, 4))
    graph = g.graph(["y"])
    qp = calibrate_minmax(graph, [rng.normal(size=(1, 4)).astype(np.float32)])
    with pytest.raises(UnsupportedError, match=r"math.mod .y.: no integer lowering for math.mod"):
        lower_graph(graph, qp)


def test_missing_quant_params_are_reported(rng):
    graph = small_cnn(rng)
    qp = calibrate_minmax(graph, [rng.normal(size=(1, 3, 12, 12)).astype(np.float32)])
    del qp["add"]
    with pytest.raises(UnsupportedError, match="tensor 'add' has no quantization parameters"):
        lower_graph(graph, qp)


def test_annotated_weights_are_honoured(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 4))
    w = rng.normal(0, 0.5, (3, 4)).astype(np.float32)
    g.tensors["w"] = ir.Tensor("w", ir.DType.F32, (3, 4), data=w,
                               quant=ir.QuantInfo(scale=0.01, zero_point=0, bits=8, symmetric=True,
                                                  source="annotation"))
    g.op("nn.linear", [x, "w", ""], "y", (1, 3))
    graph = g.graph(["y"])
    model = lower_graph(graph, calibrate_minmax(graph, [rng.normal(size=(1, 4)).astype(np.float32)]))
    fc = next(op for op in model.graph.ops if op.kind.name == "tosa.FULLY_CONNECTED")
    assert np.array_equal(fc.attrs["weight"], np.clip(np.floor(w / 0.01 + 0.5), -127, 127).astype(np.int8))


@pytest.mark.parametrize("kind", ["math.add", "math.sub", "math.mul", "math.div", "math.max", "math.min"])
def test_binary_with_constant_and_broadcast(rng, kind):
    g = FloatGraph(rng)
    x = g.input("x", (1, 4, 5, 5))
    c = g.op("nn.conv", [x, g.weights("w", (4, 4, 1, 1)), ""], "c", (1, 4, 5, 5))
    k = g.const("k", rng.normal(0, 1, (4, 1, 1)))        # NNEF right-aligned broadcast
    g.op(kind, [c, k], "y", (1, 4, 5, 5))
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 4, 5, 5)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert any(t.is_constant and t.dtype is ir.DType.I8 for t in model.graph.tensors.values())
    ints = _run_both(model, calib[2])
    floats = execute(graph, {"x": calib[2]})
    assert sqnr_db(floats["y"], dequantize(ints["y"], model.output_quant["y"])) > 28.0


@pytest.mark.parametrize("kind,attrs", [("nn.sigmoid", {}), ("math.tanh", {}), ("nn.elu", {"alpha": 0.5})])
def test_unary_functions_become_tables(rng, kind, attrs):
    g = FloatGraph(rng)
    x = g.input("x", (1, 16))
    g.op(kind, [x], "y", (1, 16), **attrs)
    graph = g.graph(["y"])
    calib = [rng.normal(0, 2, (1, 16)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert [op.kind.name for op in model.graph.ops] == ["tosa.TABLE"]
    ints = _run_both(model, calib[0])
    floats = execute(graph, {"x": calib[0]})
    err = np.abs(dequantize(ints["y"], model.output_quant["y"]) - floats["y"])
    # one step of input rounding through the function (slope <= 1) plus half an output step
    assert err.max() <= model.input_quant["x"].scale + model.output_quant["y"].scale


def test_transpose_is_free_and_outputs_come_back_in_float_layout(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 3, 4, 5))
    c = g.op("nn.conv", [x, g.weights("w", (3, 3, 1, 1)), ""], "c", (1, 3, 4, 5))
    g.op("layout.transpose", [c], "y", (1, 5, 4, 3), perm=(0, 3, 2, 1))
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 3, 4, 5)).astype(np.float32) for _ in range(3)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert model.graph.tensors["y"].shape == (1, 5, 4, 3)
    ints = _run_both(model, calib[0])
    floats = execute(graph, {"x": calib[0]})
    assert sqnr_db(floats["y"], dequantize(ints["y"], model.output_quant["y"])) > 30.0


@pytest.mark.parametrize("shape", [(2, 10), (1, 1000), (1, 5000)])
def test_integer_softmax_matches_float_within_one_step(rng, shape):
    """(1, 1000): an ImageNet classifier's softmax, which needs the exp values shifted
    right before the int32 sum."""
    g = FloatGraph(rng)
    x = g.input("x", shape)
    g.op("nn.softmax", [x], "y", shape, axes=(1,))
    graph = g.graph(["y"])
    calib = [rng.normal(0, 3, shape).astype(np.float32) for _ in range(6)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    for xs in calib:
        ints = _run_both(model, xs)
        # oracle: the exact softmax of the *quantized* input, on the 1/255 grid
        xq = dequantize(quantize(xs, model.input_quant["x"]), model.input_quant["x"])
        p = np.exp(xq - xq.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        want = np.floor(p * 255 + 0.5) - 128          # 1/255 grid: p = 1 is 127
        assert np.abs(ints["y"].astype(int) - want).max() <= 1
        # the integer winner is a float winner up to one output step
        picked = p[np.arange(p.shape[0]), np.argmax(ints["y"], axis=1)]
        assert np.all(picked >= p.max(axis=1) - 1 / 255)
    assert any(op.kind.name == "tosa.ARITHMETIC_RIGHT_SHIFT" and "exp_k" in op.outputs[0]
               for op in model.graph.ops) == (shape[1] > 511)


def test_softmax_rejects_too_long_axis(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 70000))
    g.op("nn.softmax", [x], "y", (1, 70000), axes=(1,))
    graph = g.graph(["y"])
    qp = calibrate_minmax(graph, [rng.normal(size=(1, 70000)).astype(np.float32)])
    with pytest.raises(UnsupportedError, match="softmax over 70000 elements"):
        lower_graph(graph, qp)


UNARY_REFERENCE = {   # independent float64 formulas (NNEF 2.0 4.2 / 4.4)
    "math.log": np.log, "math.log2": np.log2, "math.sqrt": np.sqrt,
    "math.rsqrt": lambda x: 1 / np.sqrt(x), "math.rcp": lambda x: 1 / x, "math.sqr": lambda x: x * x,
    "math.rsqr": lambda x: 1 / (x * x), "math.sin": np.sin, "math.cos": np.cos,
    "math.sinh": np.sinh, "math.cosh": np.cosh, "math.atan": np.arctan, "math.asinh": np.arcsinh,
    "math.abs": np.abs, "math.neg": lambda x: -x,
    "nn.erf": np.vectorize(__import__("math").erf),
    "nn.selu": lambda x: 1.05070102 * np.where(x < 0, 1.67326319 * (np.exp(np.minimum(x, 0)) - 1), x),
    "nn.thresholded_relu": lambda x: np.where(x > 0.5, x, 0.0),
}
POSITIVE_DOMAIN = {"math.log", "math.log2", "math.sqrt", "math.rsqrt", "math.rcp", "math.rsqr"}


@pytest.mark.parametrize("kind", sorted(UNARY_REFERENCE))
def test_more_unary_functions_are_exact_tables(rng, kind):
    """TABLE(q) must be the output level nearest f(dequantized q): within half an output
    step of f at the input's grid point (the calibrated output range holds every value)."""
    g = FloatGraph(rng)
    x = g.input("x", (1, 64))
    attrs = {"theta": 0.5} if kind == "nn.thresholded_relu" else {}
    g.op(kind, [x], "y", (1, 64), **attrs)
    graph = g.graph(["y"])
    if kind in POSITIVE_DOMAIN:
        calib = [rng.uniform(0.5, 4.0, (1, 64)).astype(np.float32) for _ in range(3)]
    else:
        calib = [rng.normal(0, 1.5, (1, 64)).astype(np.float32) for _ in range(3)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert [op.kind.name for op in model.graph.ops] == ["tosa.TABLE"]
    ints = _run_both(model, calib[1])
    xq = model.graph.tensor(model.graph.inputs[0])
    x_grid = dequantize(quantize(calib[1], model.input_quant["x"]), model.input_quant["x"])
    expected = UNARY_REFERENCE[kind](x_grid.astype(np.float64))
    inside = (expected >= -128 * 10) & np.isfinite(expected)   # grid points in the domain
    yq = model.output_quant["y"]
    lo, hi = (-128 - yq.zero_point) * yq.scale, (127 - yq.zero_point) * yq.scale
    expected = np.clip(expected, lo, hi)
    got = dequantize(ints["y"], yq)
    assert xq.dtype is ir.DType.I8
    assert np.all(np.abs(got - expected)[inside] <= yq.scale / 2 + 1e-9)


@pytest.mark.parametrize("stride, padding, with_relu", [((2, 2), (1, 1, 1, 1), True),
                                                        ((1, 1), (0, 0, 0, 0), False),
                                                        ((2, 1), (0, 1, 1, 0), False)])
def test_deconv_becomes_transpose_conv2d(rng, stride, padding, with_relu):
    g = FloatGraph(rng)
    x = g.input("x", (1, 4, 5, 6))
    kh, kw = 3, 3
    oh = (5 - 1) * stride[0] + kh - padding[0] - padding[2]
    ow = (6 - 1) * stride[1] + kw - padding[1] - padding[3]
    y = g.op("nn.deconv", [x, g.weights("w", (4, 6, kh, kw)), g.weights("b", (6,), 0.1)], "y",
             (1, 6, oh, ow), stride=stride, padding=padding)
    out = g.op("nn.relu", [y], "r", (1, 6, oh, ow)) if with_relu else y
    graph = g.graph([out])
    calib = [rng.normal(0, 1, (1, 4, 5, 6)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    kinds = [op.kind.name for op in model.graph.ops]
    assert "tosa.TRANSPOSE_CONV2D" in kinds and ("tosa.CLAMP" in kinds) == with_relu
    ints = _run_both(model, calib[1])
    floats = execute(graph, {"x": calib[1]})
    assert sqnr_db(floats[out], dequantize(ints[out], model.output_quant[out])) > 30.0


def test_deconv_with_dilation_is_refused(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 2, 4, 4))
    g.op("nn.deconv", [x, g.weights("w", (2, 2, 3, 3))], "y", (1, 2, 4, 4), dilation=(2, 2))
    graph = g.graph(["y"])
    qp = calibrate_minmax(graph, [rng.normal(size=(1, 2, 4, 4)).astype(np.float32)])
    with pytest.raises(UnsupportedError, match="dilated deconvolution"):
        lower_graph(graph, qp)


@pytest.mark.parametrize("kind, attrs, out_hw", [
    ("image.nearest_upsample", {"axes": (2, 3), "factor": (2, 2)}, (8, 10)),
    ("image.nearest_upsample", {"axes": (2, 3), "factor": (4, 1)}, (16, 5)),
    ("image.nearest_resize", {"axes": (2, 3), "size": (8, 20), "coordinate_transform": "ASYMMETRIC",
                              "rounding_method": "FLOOR"}, (8, 20)),
])
def test_nearest_upsampling_becomes_resize_repeating_rows(rng, kind, attrs, out_hw):
    g = FloatGraph(rng)
    x = g.input("x", (1, 3, 4, 5))
    g.op(kind, [x], "y", (1, 3) + out_hw, **attrs)
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 3, 4, 5)).astype(np.float32) for _ in range(2)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert "tosa.RESIZE" in [op.kind.name for op in model.graph.ops]
    ints = _run_both(model, calib[0])
    xq = quantize(calib[0], model.input_quant["x"])
    fy, fx = out_hw[0] // 4, out_hw[1] // 5
    expected = np.repeat(np.repeat(xq, fy, axis=2), fx, axis=3)   # same grid: same integers
    assert model.output_quant["y"] == model.input_quant["x"]
    np.testing.assert_array_equal(ints["y"], expected)
    floats = execute(graph, {"x": calib[0]})
    np.testing.assert_allclose(dequantize(ints["y"], model.output_quant["y"]), floats["y"],
                               atol=model.input_quant["x"].scale / 2 + 1e-6)


def test_upsampling_by_three_repeats_rows_and_channel_resizing_is_refused(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 2, 4, 4))
    g.op("image.nearest_upsample", [x], "y", (1, 2, 12, 12), axes=(2, 3), factor=(3, 3))
    graph = g.graph(["y"])
    qp = calibrate_minmax(graph, [rng.normal(size=(1, 2, 4, 4)).astype(np.float32)])
    model = lower_graph(graph, qp)
    ints = _run_both(model, rng.normal(size=(1, 2, 4, 4)).astype(np.float32))
    xq = ints[model.graph.inputs[0]]
    y = ints[model.tensor_map["y"].name].transpose(np.argsort(model.tensor_map["y"].perm))
    assert np.array_equal(y, xq.repeat(3, axis=2).repeat(3, axis=3))   # each row and column 3 times
    g = FloatGraph(rng)
    x = g.input("x", (1, 2, 4, 4))
    g.op("image.nearest_upsample", [x], "y", (1, 4, 4, 4), axes=(1,), factor=(2,))
    graph = g.graph(["y"])
    qp = calibrate_minmax(graph, [rng.normal(size=(1, 2, 4, 4)).astype(np.float32)])
    with pytest.raises(UnsupportedError, match="only resizing H and W"):
        lower_graph(graph, qp)


def test_hard_swish_composed_from_primitives_lowers(rng):
    """NNEF has no hard_swish operator: models spell it x * clamp(x + 3, 0, 6) / 6."""
    g = FloatGraph(rng)
    x = g.input("x", (1, 8, 4, 4))
    t = g.op("math.add", [x, g.const("three", 3.0)], "t", (1, 8, 4, 4))
    r = g.op("math.clamp", [t, g.const("zero", 0.0), g.const("six", 6.0)], "r", (1, 8, 4, 4))
    m = g.op("math.mul", [x, r], "m", (1, 8, 4, 4))
    g.op("math.div", [m, g.const("six2", 6.0)], "y", (1, 8, 4, 4))
    graph = g.graph(["y"])
    calib = [rng.normal(0, 3, (1, 8, 4, 4)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    ints = _run_both(model, calib[1])
    xf = calib[1].astype(np.float64)
    expected = xf * np.clip(xf + 3, 0, 6) / 6                      # independent formula
    assert sqnr_db(expected, dequantize(ints["y"], model.output_quant["y"])) > 30.0


def test_division_by_a_computed_tensor_is_lowered(rng):
    """(tests/quant/test_lowering_transformer.py checks its accuracy and corners.)"""
    g = FloatGraph(rng)
    x = g.input("x", (1, 4))
    g.op("math.div", [x, x], "y", (1, 4))
    graph = g.graph(["y"])
    qp = calibrate_minmax(graph, [rng.normal(size=(1, 4)).astype(np.float32)])
    assert "tosa.CLZ" in [op.kind.name for op in lower_graph(graph, qp).graph.ops]


def _after_conv(g, x_shape):
    """input -> 1x1 conv (so the tested operator reads a computed int8 tensor)."""
    x = g.input("x", x_shape)
    c = x_shape[1]
    return g.op("nn.conv", [x, g.weights("w0", (c, c, 1, 1), 0.5), ""], "c0", x_shape)


LAYOUT_CASES = [  # (kind, attrs, output shape) on a [1, 4, 6, 6] NCHW input
    # NNEF 2.0 packs paddings as [begin..., end...]
    ("layout.pad", {"axes": (2, 3), "padding": (1, 2, 0, 1)}, (1, 4, 7, 9)),
    ("layout.slice", {"axes": (1, 3), "begin": (1, 2), "end": (3, 6)}, (1, 2, 6, 4)),
    ("layout.flatten", {"axis": 1}, (1, 144)),
    ("layout.squeeze", {"axes": (0,)}, (4, 6, 6)),
    ("layout.unsqueeze", {"axes": (4,)}, (1, 4, 6, 6, 1)),
    ("nn.avg_pool", {"size": (3, 3), "stride": (2, 2), "padding": (1, 1, 1, 1)}, (1, 4, 3, 3)),
    ("math.sum_reduce", {"axes": (1,)}, (1, 1, 6, 6)),
    ("math.mean_reduce", {"axes": (3,)}, (1, 4, 6, 1)),
    ("math.max_reduce", {"axes": (2, 3)}, (1, 4, 1, 1)),
    ("math.min_reduce", {"axes": (1,)}, (1, 1, 6, 6)),
    ("math.iden", {}, (1, 4, 6, 6)),
]


@pytest.mark.parametrize("kind, attrs, out_shape", LAYOUT_CASES, ids=[c[0] for c in LAYOUT_CASES])
def test_layout_and_reduction_rules_track_float(rng, kind, attrs, out_shape):
    g = FloatGraph(rng)
    c0 = _after_conv(g, (1, 4, 6, 6))
    g.op(kind, [c0], "y", out_shape, **attrs)
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 4, 6, 6)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert all(op.kind.dialect == "tosa" for op in model.graph.ops)
    ints = _run_both(model, calib[1])
    floats = execute(graph, {"x": calib[1]})
    got = dequantize(ints["y"], model.output_quant["y"])
    assert got.shape == tuple(out_shape)
    assert sqnr_db(floats["y"], got) > 30.0


def test_concat_of_differently_scaled_inputs(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 3, 5, 5))
    a = g.op("nn.conv", [x, g.weights("wa", (2, 3, 1, 1), 0.2), ""], "a", (1, 2, 5, 5))
    b = g.op("nn.conv", [x, g.weights("wb", (4, 3, 1, 1), 2.0), ""], "b", (1, 4, 5, 5))
    g.op("layout.concat", [a, b], "y", (1, 6, 5, 5), axis=1)
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 3, 5, 5)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert "tosa.CONCAT" in [op.kind.name for op in model.graph.ops]
    ints = _run_both(model, calib[0])
    floats = execute(graph, {"x": calib[0]})
    assert sqnr_db(floats["y"], dequantize(ints["y"], model.output_quant["y"])) > 30.0


def test_matmul_of_two_computed_tensors(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 6, 8))
    a = g.op("nn.relu", [x], "a", (1, 6, 8))
    g.op("linalg.matmul", [a, x], "y", (1, 6, 6), transB=True)
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 6, 8)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert "tosa.MATMUL" in [op.kind.name for op in model.graph.ops]
    ints = _run_both(model, calib[2])
    floats = execute(graph, {"x": calib[2]})
    assert sqnr_db(floats["y"], dequantize(ints["y"], model.output_quant["y"])) > 30.0


def test_standalone_batch_norm_is_a_depthwise_1x1(rng):
    g = FloatGraph(rng)
    x = g.input("x", (1, 4, 5, 5))
    g.op("nn.batch_norm", [x, g.const("m", rng.normal(0, 0.2, 4)), g.const("v", rng.uniform(0.5, 2, 4)),
                           g.const("bb", rng.normal(0, 0.1, 4)), g.const("s", rng.uniform(0.5, 1.5, 4))],
         "y", (1, 4, 5, 5))
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 4, 5, 5)).astype(np.float32) for _ in range(4)]
    model = lower_graph(graph, calibrate_minmax(graph, calib))
    assert "tosa.DEPTHWISE_CONV2D" in [op.kind.name for op in model.graph.ops]
    ints = _run_both(model, calib[3])
    floats = execute(graph, {"x": calib[3]})
    assert sqnr_db(floats["y"], dequantize(ints["y"], model.output_quant["y"])) > 30.0


@pytest.mark.parametrize("precision", ["int8", "16x8"])
def test_dead_channel_with_large_bias_still_fits_int32(rng, precision):
    """After batch-norm folding a channel can have weights ~1e-9 and bias ~1 (EfficientNet):
    at input_scale * weight_scale its bias would need ~1e12 steps. Only that channel's weight
    scale is widened; the other channels keep theirs."""
    g = FloatGraph(rng)
    x = g.input("x", (1, 3, 6, 6))
    w = rng.normal(0, 0.3, (4, 3, 3, 3))
    w[2] = 1e-9
    bias = np.array([0.1, -0.2, 1.0, 0.05])
    y = g.op("nn.conv", [x, g.const("w", w), g.const("b", bias)], "y", (1, 4, 6, 6),
             padding=(1, 1, 1, 1))
    graph = g.graph([y])
    calib = [rng.normal(0, 1, (1, 3, 6, 6)).astype(np.float32) for _ in range(4)]
    from qsim.quant.params import Precision
    config = QuantConfig(precision=Precision(precision))
    model = lower_graph(graph, calibrate_minmax(graph, calib, config), config)
    conv = next(op for op in model.graph.ops if op.kind.name == "tosa.CONV2D")
    assert conv.attrs["bias"].dtype == (np.int32 if precision == "int8" else np.int64)
    live = np.abs(w[[0, 1, 3]]).reshape(3, -1).max(axis=1) / 127
    ints = _run_both(model, calib[2])
    floats = execute(graph, {"x": calib[2]})
    got = dequantize(ints["y"], model.output_quant["y"])
    assert sqnr_db(floats["y"], got) > 30.0
    np.testing.assert_allclose(got[0, 2], 1.0, atol=model.output_quant["y"].scale)
    # the live channels' weights are quantized exactly as without the dead channel
    np.testing.assert_array_equal(conv.attrs["weight"][[0, 1, 3]],
                                  np.clip(np.floor(w[[0, 1, 3]].transpose(0, 2, 3, 1)
                                                   / live[:, None, None, None] + 0.5), -127, 127))


def test_bias_correction_removes_the_mean_shift_of_weight_rounding(rng):
    """Inputs with a large mean (after a relu) turn per-weight rounding errors into a
    per-channel offset of the output; bias correction subtracts sum_k err_k * E[x_k]."""
    from qsim.quant.calibration.calibrate import calibrate
    g = FloatGraph(rng)
    x = g.input("x", (1, 8, 6, 6))
    w = rng.normal(0, 0.05, (6, 8, 3, 3)) + 0.02            # many small weights, same sign
    g.op("nn.conv", [x, g.const("w", w), g.const("b", np.zeros(6))], "y", (1, 6, 6, 6),
         padding=(1, 1, 1, 1))
    graph = g.graph(["y"])
    data = [np.abs(rng.normal(2.0, 1.0, (1, 8, 6, 6))).astype(np.float32) for _ in range(16)]
    means = {}
    qp = calibrate(graph, ({"x": d} for d in data), QuantConfig(), "minmax", show_progress=False,
                   channel_means=means)
    assert means["x"].shape == (8,)
    np.testing.assert_allclose(means["x"], np.mean([d.astype(np.float64).mean(axis=(0, 2, 3)) for d in data], axis=0), rtol=1e-12)
    plain, corrected = lower_graph(graph, qp), lower_graph(graph, qp, channel_means=means)

    def mean_offset(model):
        errs = []
        for d in data:
            got = dequantize(_run_both(model, d)["y"], model.output_quant["y"])
            want = execute(graph, {"x": d})["y"]
            errs.append((got - want)[:, :, 1:-1, 1:-1].mean(axis=(0, 2, 3)))   # inner pixels
        return np.abs(np.mean(errs, axis=0))

    before, after = mean_offset(plain), mean_offset(corrected)
    assert after.sum() < 0.5 * before.sum()


def test_tap_coverage_by_hand():
    from qsim.quant.tosa.rules_linear import tap_coverage
    # 4 rows, 3-tap filter, padding 1 each side, stride 1: taps 0 and 2 read padding once
    # in 4 outputs; 5 cols, stride 2, no padding, 3 taps: every tap always reads input
    cov = tap_coverage((4, 5), (4, 2), (1, 0), (1, 2), (1, 1), (3, 3))
    np.testing.assert_allclose(cov, np.outer([0.75, 1.0, 0.75], [1.0, 1.0, 1.0]))


@pytest.mark.parametrize("attrs, what, out_shape", [
    (dict(stride=(2 ** 63, 2 ** 63)), "stride", (1, 3, 1, 1)),  # found by benchmarks/fuzz.py (OverflowError)
    (dict(stride=(2 ** 31, 1)), "stride", (1, 3, 1, 10)),
])
def test_conv_attributes_outside_tosa_int32_are_refused(rng, attrs, what, out_shape):
    g = FloatGraph(rng)
    x = g.input("x", (1, 2, 8, 8))
    g.op("nn.conv", [x, g.weights("w", (3, 2, 3, 3)), ""], "y", out_shape,
         padding=(2, 2, 2, 2), **attrs)
    graph = g.graph(["y"])
    calib = [rng.normal(0, 1, (1, 2, 8, 8)).astype(np.float32)]
    with pytest.raises(UnsupportedError, match=f"{what} .* is outside TOSA's int32 attribute range"):
        lower_graph(graph, calibrate_minmax(graph, calib))
