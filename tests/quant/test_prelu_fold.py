"""PReLU / leaky ReLU folded into a convolution's or dense layer's output RESCALE
(tosa/rules_activation.rescale_with_slopes): the int32 accumulator is split by sign and each half
rescaled once, so the layer output is rounded once, on the PReLU output's grid.

Oracle: the accumulator as the TOSA reference's CONV2D / FULLY_CONNECTED computed it (the replay
checks reference and kernels agree on every tensor), times the exactly known real ratio
s_x * s_w / s_y (power-of-two input and weight scales, weights that are exact multiples of
their scale), with the slope below zero, rounded half up as RESCALE rounds.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim import ir
from qsim.quant.params import Granularity, QuantConfig, Precision
from qsim.quant.tosa.target import lower_graph

from .lowering_models import FloatGraph
from .onnx_quantize import replay

S_X, S_W = 2.0 ** -4, 2.0 ** -6          # the accumulator's real step: 2^-10
DYADIC_SLOPES = [0.0, 0.25, -0.5, 1.5, 2.0 ** -40, -1.0, 0.125, 3.0, 1.0]


def _q(scale, zp):
    return ir.QuantInfo(float(scale), int(zp))


def _conv_prelu(slopes, rng, kind="prelu", channels=None):
    """x [1, 2, 16, 16] -> 3x3 conv (weights k * S_W, every channel reaching |k| = 127; bias a
    multiple of S_X * S_W) -> PReLU(slopes) or leaky ReLU(alpha = slopes[0])."""
    c = channels or len(slopes)
    k = rng.integers(-127, 128, size=(c, 2, 3, 3))
    k.reshape(c, -1)[:, 0] = np.where(rng.random(c) < 0.5, -127, 127)
    g = FloatGraph(rng)
    x = g.input("x", (1, 2, 16, 16))
    bias = rng.integers(-3000, 3000, size=c) * S_X * S_W
    conv = g.op("nn.conv", [x, g.const("w", k * S_W), g.const("b", bias)], "c", (1, c, 16, 16),
                padding=(1, 1, 1, 1))
    if kind == "prelu":
        g.op("nn.prelu", [conv, g.const("slope", np.asarray(slopes).reshape(c, 1, 1))], "y",
             (1, c, 16, 16), axis=1)
    else:
        g.op("nn.relu", [conv], "y", (1, c, 16, 16), alpha=float(slopes[0]))
    return g.graph(["y"]), k


def _codes(rng, zp_x):
    """Channel 0: every int8 code; channel 1: seeded random codes with both rails and zp_x."""
    c0 = np.arange(-128, 128).reshape(16, 16)
    c1 = rng.integers(-128, 128, size=(16, 16))
    c1.reshape(-1)[:3] = [-128, 127, zp_x]
    return np.stack([c0, c1])[None]


def _accumulator(model, ints):
    """The CONV2D accumulator of a replay, [N, C, H, W] like the float output."""
    name = next(op for op in model.graph.ops if op.kind.name == "tosa.CONV2D").outputs[0]
    return ints[name].astype(np.int64).transpose(0, 3, 1, 2)


def _output(model, ints):
    v = model.tensor_map["y"]
    return ints[v.name].transpose(np.argsort(v.perm))


def _expected(acc, slopes, ratio, zp_y):
    """zp_y + round_half_up(ratio * acc) above 0, sign(a) * round_half_up(|a| ratio acc)
    below, saturated to int8 (the fold's definition; exact when every factor is dyadic).
    `acc` has its channels on axis 1."""
    a = np.asarray(slopes, np.float64).reshape((-1,) + (1,) * (acc.ndim - 2))
    pos = np.floor(ratio * acc + 0.5)
    neg = np.sign(a) * np.floor(np.abs(a) * ratio * acc + 0.5)
    return np.clip(zp_y + np.where(acc >= 0, pos, neg), -128, 127)


@settings(derandomize=True, deadline=None, max_examples=40)
@given(slopes=st.lists(st.sampled_from(DYADIC_SLOPES), min_size=4, max_size=4),
       zp_x=st.sampled_from([-128, 127, 0, -7]), zp_y=st.sampled_from([-128, 127, 0, 33]),
       y_log2=st.integers(-12, -2), seed=st.integers(0, 2 ** 16),
       weights=st.sampled_from([Granularity.PER_CHANNEL, Granularity.PER_TENSOR]))
def test_folded_prelu_rounds_the_accumulator_once_exactly(slopes, zp_x, zp_y, y_log2, seed, weights):
    """Power-of-two scales and dyadic slopes (negative, 0, tiny, > 1): the output is exactly
    the rounded (half up, towards +inf) and saturated value for every element, ties included
    (ratio 2^-10 / 2^y_log2 is a power of two, so odd accumulators hit x.5); with y_log2 -12
    most of the accumulator's span saturates at both rails. Per-tensor weights: one positive
    multiplier, per-channel negative ones."""
    rng = np.random.default_rng(seed)
    graph, _ = _conv_prelu(slopes, rng)
    # no parameters for the conv output "c": the fold never materializes it
    model = lower_graph(graph, {"x": _q(S_X, zp_x), "y": _q(2.0 ** y_log2, zp_y)},
                        QuantConfig(weight_granularity=weights))
    kinds = [op.kind.name for op in model.graph.ops]
    assert {"tosa.MAXIMUM", "tosa.MINIMUM"} <= set(kinds) and kinds.count("tosa.RESCALE") == 3
    assert "tosa.TABLE" not in kinds and "tosa.CLAMP" not in kinds
    ints = replay(model, _codes(rng, zp_x))
    acc = _accumulator(model, ints)
    got = _output(model, ints)
    want = _expected(acc, slopes, S_X * S_W / 2.0 ** y_log2, zp_y)
    assert np.array_equal(got, want)
    ties = (np.abs(acc) * S_X * S_W / 2.0 ** y_log2) % 1 == 0.5
    assert ties.any() or y_log2 <= -10                   # ratio < 1: ties occur


@settings(derandomize=True, deadline=None, max_examples=25)
@given(slopes=st.lists(st.floats(-2.0, 2.0), min_size=3, max_size=3),
       out_lo=st.floats(-40.0, -0.01), out_hi=st.floats(0.01, 40.0), seed=st.integers(0, 2 ** 16))
def test_folded_prelu_is_within_half_a_step_for_any_grid(slopes, out_lo, out_hi, seed):
    """Arbitrary slopes and output grids: within 1/2 output step of the exact value (plus
    the 31-bit multiplier's relative error), or at the rail it saturates to."""
    from qsim.quant.params import params_from_range
    rng = np.random.default_rng(seed)
    graph, _ = _conv_prelu(slopes, rng)
    yq = params_from_range(out_lo, out_hi, QuantConfig().activation_scheme(), what="y")
    model = lower_graph(graph, {"x": _q(S_X, -3), "y": yq})
    ints = replay(model, _codes(rng, -3))
    acc = _accumulator(model, ints).astype(np.float64)
    s_y, zp_y = float(yq.scales()[0]), int(yq.zero_points()[0])
    a = np.asarray(slopes).reshape(-1, 1, 1)
    target = zp_y + np.where(acc >= 0, acc, a * acc) * S_X * S_W / s_y
    got = _output(model, ints).astype(np.float64)
    rail = np.clip(target, -128, 127)
    assert np.all(np.abs(got - rail) <= 0.5 + 1e-6 * np.maximum(1.0, np.abs(target)))


def test_leaky_relu_after_a_dense_layer_folds(rng):
    """nn.linear + leaky ReLU: one rounding of the FULLY_CONNECTED accumulator (slope 0.125,
    power-of-two scales: exact)."""
    g = FloatGraph(rng)
    x = g.input("x", (1, 256))
    k = rng.integers(-127, 128, size=(5, 256))
    k[:, 0] = 127
    g.op("nn.linear", [x, g.const("w", k * S_W), g.const("b", np.arange(5) * 1000 * S_X * S_W)], "d", (1, 5))
    g.op("nn.relu", ["d"], "y", (1, 5), alpha=0.125)
    model = lower_graph(g.graph(["y"]), {"x": _q(S_X, 5), "y": _q(2.0 ** -5, -20)})
    kinds = [op.kind.name for op in model.graph.ops]
    assert "tosa.MAXIMUM" in kinds and "tosa.TABLE" not in kinds
    codes = np.stack([np.arange(-128, 128), rng.permutation(np.arange(-128, 128))])
    got, accs = [], []
    for row in codes:
        ints = replay(model, row.reshape(1, 256))
        fc = next(op for op in model.graph.ops if op.kind.name == "tosa.FULLY_CONNECTED").outputs[0]
        accs.append(ints[fc].astype(np.int64))
        got.append(_output(model, ints))
    acc = np.concatenate(accs)
    assert np.array_equal(np.concatenate(got), _expected(acc, [0.125], S_X * S_W / 2.0 ** -5, -20))


def test_no_fold_where_the_conv_output_must_appear(rng):
    """An annotated conv output (it must exist in the integer graph), a 16x8 run (int48
    accumulator) and a PReLU that also reads another tensor keep the PReLU's own lowering."""
    graph, _ = _conv_prelu([0.25, -0.5], rng)
    qp = {"x": _q(S_X, 0), "c": _q(2.0 ** -6, 3), "y": _q(2.0 ** -6, -9)}
    annotated = graph.tensors["c"]
    tensors = dict(graph.tensors, c=ir.Tensor("c", annotated.dtype, annotated.shape,
                                              quant=ir.QuantInfo(2.0 ** -6, 3, source="annotation")))
    graph_a = ir.Graph(graph.name, graph.inputs, graph.outputs, graph.ops, tensors).verify()
    for g, config in ((graph_a, QuantConfig()), (graph, QuantConfig(precision=Precision.INT16X8))):
        qp16 = qp if config.precision is Precision.INT8 else {
            n: ir.QuantInfo(q.scale / 256, q.zero_point * 0, bits=16) for n, q in qp.items()}
        model = lower_graph(g, qp16, config)
        kinds = [op.kind.name for op in model.graph.ops]
        assert "tosa.MAXIMUM" not in kinds and "tosa.CLAMP" in kinds, kinds
        assert "c" in model.tensor_map


def test_mtcnn_style_block_simulates_verified_with_the_fold(tmp_path, rng, capsys):
    """conv -> PReLU -> max pool -> dense -> PReLU -> two heads, through `qsim quantize` and
    `qsim simulate` (cycle model): every layer bit-exact with the kernels."""
    from qsim import cli
    from .onnx_quantize import init, node, onnx_model
    c = 6
    w = rng.normal(0, 0.3, (c, 3, 3, 3)).astype(np.float32)
    model = onnx_model([node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                        node("PRelu", ["c", "slope"], ["p"], name="prelu"),
                        node("MaxPool", ["p"], ["m"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
                        node("Flatten", ["m"], ["f"], name="flat"),
                        node("Gemm", ["f", "w2", "b2"], ["d"], name="dense", transB=1),
                        node("PRelu", ["d", "slope2"], ["y"], name="prelu2")], (1, 3, 8, 8), ["y"],
                       [init("w", w), init("b", rng.normal(0, 0.1, c).astype(np.float32)),
                        init("slope", np.float32([0.25, -0.1, 0.0, 0.5, 1e-9, 0.02]).reshape(c, 1, 1)),
                        init("w2", rng.normal(0, 0.1, (10, c * 16)).astype(np.float32)),
                        init("b2", rng.normal(0, 0.1, 10).astype(np.float32)),
                        init("slope2", np.float32(np.linspace(-0.3, 0.6, 10)))], 13)
    import onnx
    onnx.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "calib.npy", rng.normal(0, 1, (16, 3, 8, 8)).astype(np.float32))
    np.save(tmp_path / "x1.npy", rng.normal(0, 1, (1, 3, 8, 8)).astype(np.float32))
    out = tmp_path / "q"
    assert cli.main(["quantize", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npy"),
                     "-o", str(out), "-q"]) == 0
    text = (out / "main.sknd").read_text()
    assert text.count("tosa.MAXIMUM") == 2 and text.count("tosa.TABLE") == 0
    assert cli.main(["simulate", str(out), "--engine", "model", "--input", str(tmp_path / "x1.npy"),
                     "-o", str(tmp_path / "npu"), "-q"]) == 0
    assert "verified" in capsys.readouterr().out
