"""The executor runs a conv and the relu/clamp after it as one step (runtime/float_ops/fusion.py):
every tensor, the conv's output and the bounded one included, must come out with the bits of
running the ops one at a time, and pairs that may not be fused are left alone."""
import numpy as np
import pytest

from qsim.ir import DType, Graph, Op, OpKind, Tensor
from qsim.runtime import execute, run_op
from qsim.runtime.float_ops import fusion
from qsim.runtime.float_ops.bounds import THEN_BOUND


def _t(name, shape, data=None):
    return Tensor(name, DType.F32, tuple(shape), data=data)


def _op(kind, inputs, outputs, **attrs):
    return Op(OpKind.get(kind), tuple(inputs), tuple(outputs), attrs, name=outputs[0])


def _graph(rng):
    """conv -> clamp(0, 6), depthwise -> relu, conv -> relu(max 4), conv -> relu(alpha) (not
    fused), conv -> clamp(6, 0) (lo > hi: not fused), conv -> add (not a bound)."""
    c = 8
    const = {}

    def weight(name, shape):
        const[name] = _t(name, shape, (rng.standard_normal(shape) * 0.5).astype(np.float32))
        return name

    ops = [
        _op("nn.conv", ["x", weight("w1", (c, 3, 3, 3)), weight("b1", (c,))], ["c1"], padding=(1, 1, 1, 1)),
        _op("math.clamp", ["c1", "zero", "six"], ["y1"]),
        _op("nn.conv", ["y1", weight("w2", (c, 1, 3, 3)), weight("b2", (c,))], ["c2"], groups=c,
            stride=(2, 2), padding=(1, 1, 1, 1)),
        _op("nn.relu", ["c2"], ["y2"]),
        _op("nn.conv", ["y2", weight("w3", (c, c, 1, 1)), weight("b3", (c,))], ["c3"]),
        _op("nn.relu", ["c3"], ["y3"], max=4.0),
        _op("nn.conv", ["y3", weight("w4", (c, c, 1, 1))], ["c4"]),
        _op("nn.relu", ["c4"], ["y4"], alpha=0.25),
        _op("nn.conv", ["y4", weight("w5", (c, c, 1, 1))], ["c5"]),
        _op("math.clamp", ["c5", "six", "zero"], ["y5"]),
        _op("nn.conv", ["y5", weight("w6", (c, c, 1, 1))], ["c6"]),
        _op("math.add", ["c6", "y5"], ["y6"]),
    ]
    shapes = {"c1": (2, c, 12, 12), "y1": (2, c, 12, 12)}
    shapes.update({n: (2, c, 6, 6) for n in ("c2", "y2", "c3", "y3", "c4", "y4", "c5", "y5", "c6", "y6")})
    tensors = {"x": _t("x", (2, 3, 12, 12)), "zero": _t("zero", (), np.float32(0.0).reshape(())),
               "six": _t("six", (), np.float32(6.0).reshape(())), **const}
    tensors.update({n: _t(n, s) for n, s in shapes.items()})
    return Graph("fused", ("x",), ("y6",), tuple(ops), tensors)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_fused_steps_give_every_tensor_the_bits_of_op_by_op(rng, monkeypatch, threads):
    monkeypatch.setenv("QSIM_THREADS", threads)
    g = _graph(rng)
    order = fusion.execution_order(g)
    fused = [op for op in order if THEN_BOUND in op.attrs]
    assert [op.outputs for op in fused] == [("c1", "y1"), ("c2", "y2"), ("c3", "y3")]
    assert [op.attrs[THEN_BOUND] for op in fused] == [(0.0, 6.0), (0.0, None), (0.0, 4.0)]
    assert len(order) == len(g.ops) - 3
    x = (rng.standard_normal((2, 3, 12, 12)) * 3).astype(np.float32)
    x[0, 0, 0, :3] = [-0.0, np.nan, np.inf]
    got = execute(g, {"x": x})
    want = {"x": x, **{n: t.data for n, t in g.tensors.items() if t.is_constant}}
    for op in g.ops:                      # one at a time, as the executor ran them before fusion
        outs = run_op(g, op, [want[n] for n in op.inputs])
        want.update({n: np.asarray(v).astype(np.float32, copy=False) for n, v in zip(op.outputs, outs)})
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_array_equal(got[name].view(np.uint32), np.asarray(value).view(np.uint32), err_msg=name)
    assert np.isnan(got["c1"]).any() and np.isnan(got["y1"]).any()    # a NaN input stays NaN


def test_plan_is_cached_per_graph_and_leaves_other_graphs_alone(rng):
    g = _graph(rng)
    assert fusion.execution_order(g) is fusion.execution_order(g)
    plain = Graph("plain", g.inputs, g.outputs, g.ops[:1], g.tensors)
    assert fusion.execution_order(plain) == plain.ops
