"""A zero layout.pad read only by a conv is folded into the conv's padding (runtime/pad_folding.py).

Oracles: the unfolded run (execute keeping every tensor folds nothing: the explicit pad, then the
conv on the padded copy) bit for bit, and a float64 convolution of the numpy-padded input written
here (float32 rounding bounds). Cases: odd sizes, asymmetric and one-sided pads, strides,
dilation, groups, depthwise (multiplier 1 and 2), a conv that pads too, a fused relu/clamp.
The pads that must not be folded are checked to stay steps."""
import numpy as np
import pytest

from qsim.ir import DType, Graph, Op, OpKind, Tensor
from qsim.runtime import execute
from qsim.runtime.plan import check_keep, plan_for

from test_float_speed_paths import EPS32, float64_conv   # tests/runtime is on sys.path


def _t(name, shape, data=None):
    return Tensor(name, DType.F32, tuple(shape), data=data)


def _op(kind, inputs, outputs, **attrs):
    return Op(OpKind.get(kind), tuple(inputs), tuple(outputs), attrs, name=outputs[0])


def _out_size(n, before, after, k, stride, dilation):
    return (n + before + after - ((k - 1) * dilation + 1)) // stride + 1


def _graph(rng, shape, n, k, stride, groups, widths, conv_pad=(0, 0, 0, 0), dilation=1, bound=None,
           value=None, pad_axes=(0, 1, 2, 3)):
    """x -> layout.pad(widths (top, bottom, left, right) on H, W) -> nn.conv [-> relu/clamp]."""
    B, C, H, W = shape
    t, bt, left, r = widths
    padded = (B, C, H + t + bt, W + left + r)
    w = (rng.standard_normal((n, C // groups, k, k)) * 0.5).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    oh = _out_size(padded[2], conv_pad[0], conv_pad[2], k, stride, dilation)
    ow = _out_size(padded[3], conv_pad[1], conv_pad[3], k, stride, dilation)
    full = {0: (0, 0), 1: (0, 0), 2: (t, bt), 3: (left, r)}
    pad_attr = tuple(full[a][0] for a in pad_axes) + tuple(full[a][1] for a in pad_axes)
    tensors = {"x": _t("x", shape), "p": _t("p", padded), "w": _t("w", w.shape, w), "b": _t("b", b.shape, b),
               "c": _t("c", (B, n, oh, ow))}
    pad_inputs = ["x"]
    if value is not None:
        tensors["v"] = _t("v", (), np.float32(value).reshape(()))
        pad_inputs.append("v")
    ops = [_op("layout.pad", pad_inputs, ["p"], axes=pad_axes, padding=pad_attr, method="CONSTANT"),
           _op("nn.conv", ["p", "w", "b"], ["c"], stride=(stride, stride), dilation=(dilation, dilation),
               padding=conv_pad, groups=groups)]
    out = "c"
    if bound == "relu":
        ops.append(_op("nn.relu", ["c"], ["y"]))
        tensors["y"], out = _t("y", (B, n, oh, ow)), "y"
    return Graph("padded", ("x",), (out,), tuple(ops), tensors), w, b


def _steps(graph, keep):
    return [s.op.kind.name for s in plan_for(graph, check_keep(graph, keep), None).steps]


def _input(rng, shape):
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    x.reshape(-1)[:3] = [-0.0, 0.0, -1e-40]          # signed zeros and a subnormal near the border
    return x


# (B, C, H, W), N, k, stride, groups, pad widths (top, bottom, left, right), conv padding, dilation
CASES = [
    ((1, 3, 15, 15), 8, 3, 2, 1, (0, 1, 0, 1), (0, 0, 0, 0), 1),       # EfficientNet's stride-2 stem
    ((2, 16, 13, 11), 16, 3, 2, 16, (0, 1, 0, 1), (0, 0, 0, 0), 1),    # depthwise stride 2
    ((1, 24, 9, 10), 24, 5, 2, 24, (1, 2, 1, 2), (0, 0, 0, 0), 1),     # depthwise 5x5, asymmetric
    ((2, 12, 7, 7), 24, 3, 1, 12, (1, 1, 1, 1), (0, 0, 0, 0), 1),      # channel multiplier 2
    ((1, 8, 17, 19), 40, 3, 1, 1, (2, 0, 0, 3), (1, 1, 1, 1), 1),      # the conv pads too
    ((2, 6, 12, 12), 9, 3, 1, 3, (1, 1, 2, 2), (0, 0, 0, 0), 2),       # groups, dilation
    ((1, 32, 6, 5), 50, 1, 1, 1, (1, 0, 0, 1), (0, 0, 0, 0), 1),       # 1x1 on a padded border
    ((1, 64, 28, 28), 64, 3, 1, 1, (1, 1, 1, 1), (0, 0, 0, 0), 1),     # the GEMM's direct path
]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("bound", [None, "relu"])
@pytest.mark.parametrize("shape,n,k,stride,groups,widths,conv_pad,dilation", CASES)
def test_folded_pad_gives_the_bits_of_the_explicit_pad(rng, monkeypatch, threads, bound, shape, n, k, stride,
                                                       groups, widths, conv_pad, dilation):
    monkeypatch.setenv("QSIM_THREADS", threads)
    g, w, b = _graph(rng, shape, n, k, stride, groups, widths, conv_pad, dilation, bound)
    assert "layout.pad" not in _steps(g, g.outputs)          # folded ...
    assert "layout.pad" in _steps(g, None)                   # ... but not when every tensor is returned
    x = _input(rng, shape)
    folded = execute(g, {"x": x}, keep=g.outputs)
    explicit = execute(g, {"x": x})
    for name in g.outputs:
        np.testing.assert_array_equal(folded[name].view(np.uint32), explicit[name].view(np.uint32))
    # the float64 convolution of the numpy-padded input: within float32 rounding of the sum
    t, bt, left, r = widths
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (t + conv_pad[0], bt + conv_pad[2]),
                                       (left + conv_pad[1], r + conv_pad[3])])
    fc, m = shape[1] // groups, n // groups
    got = explicit["c"]
    exact, mag = np.zeros(got.shape), np.zeros(got.shape)
    wd = np.zeros((n, fc, (k - 1) * dilation + 1, (k - 1) * dilation + 1), np.float32)
    wd[:, :, ::dilation, ::dilation] = w                     # dilation as a sparse kernel
    for gi in range(groups):
        e, s = float64_conv(xp[:, gi * fc:(gi + 1) * fc], wd[gi * m:(gi + 1) * m], b[gi * m:(gi + 1) * m], stride, 0)
        exact[:, gi * m:(gi + 1) * m], mag[:, gi * m:(gi + 1) * m] = e, s
    assert np.all(np.abs(folded["c"] - exact) <= (fc * k * k + 1) * EPS32 * mag) if "c" in folded else \
        np.all(np.abs(folded["y"] - np.maximum(exact, 0)) <= (fc * k * k + 1) * EPS32 * mag)


def test_pads_that_must_stay_steps(rng):
    shape, args = (1, 4, 6, 6), (4, 3, 1, 1, (1, 1, 1, 1))
    g, _, _ = _graph(rng, shape, *args)
    assert "layout.pad" in _steps(g, ["c", "p"])                         # the caller keeps it
    assert "layout.pad" in [s.op.kind.name for s in plan_for(g, frozenset(["c"]), frozenset(["p"])).steps]
    for value in (-0.0, 0.5):                                            # not +0.0
        assert "layout.pad" in _steps(_graph(rng, shape, *args, value=value)[0], ["c"])
    assert "layout.pad" not in _steps(_graph(rng, shape, *args, value=0.0)[0], ["c"])
    assert "layout.pad" not in _steps(_graph(rng, shape, *args, pad_axes=(2, 3))[0], ["c"])


def test_a_pad_read_twice_or_on_the_channels_stays(rng):
    g, _, _ = _graph(rng, (1, 4, 6, 6), 4, 3, 1, 1, (1, 1, 1, 1))
    twice = Graph(g.name, g.inputs, ("c", "s"), g.ops + (_op("math.add", ["p", "p"], ["s"]),),
                  {**g.tensors, "s": _t("s", g.tensor("p").shape)})
    assert "layout.pad" in _steps(twice, twice.outputs)
    channels = Graph(g.name, g.inputs, g.outputs, (
        _op("layout.pad", ["x"], ["p"], axes=(1,), padding=(1, 1), method="CONSTANT"),
        _op("nn.conv", ["p", "w2"], ["c"], padding=(1, 1, 1, 1))),
        {"x": g.tensor("x"), "p": _t("p", (1, 6, 6, 6)), "c": g.tensor("c"),
         "w2": _t("w2", (4, 6, 3, 3), rng.standard_normal((4, 6, 3, 3)).astype(np.float32))})
    assert "layout.pad" in _steps(channels, channels.outputs)
    x = _input(rng, (1, 4, 6, 6))
    got = execute(channels, {"x": x}, keep=channels.outputs)["c"]
    np.testing.assert_array_equal(got.view(np.uint32), execute(channels, {"x": x})["c"].view(np.uint32))
