"""execute(..., keep=, on_value=): an inference that keeps only some tensors drops every other one
after its last reader and lets a conv + relu/clamp write only the bounded array; a callback sees
every op output in op order. Oracle: the default run that keeps every tensor (bit for bit), and
the live values a probe op sees while the graph runs."""
import gc
import weakref

import numpy as np
import pytest

import qsim
import qsim.tosa  # noqa: F401
from qsim.errors import UsageError
from qsim.ir import DType, Graph, Op, OpKind, Tensor, register_op_kind
from qsim.runtime import execute, register_dialect
from qsim.runtime.float_ops.bounds import BOUND_ONLY, THEN_BOUND
from qsim.runtime.plan import STREAM_ALL, plan_for

C = 8


def _t(name, shape, data=None):
    return Tensor(name, DType.F32, tuple(shape), data=data)


def _op(kind, inputs, outputs, **attrs):
    return Op(OpKind.get(kind), tuple(inputs), tuple(outputs), attrs, name=outputs[0])


LIVE: list[set] = []
register_op_kind("keepprobe.look")
# the probe returns its input (a copy) and records which values are alive while it runs
register_dialect("keepprobe", lambda op, inputs, context: (LIVE.append(set(context.values)), [inputs[0] + 0])[1])


def _block(rng, probe=False):
    """An EfficientNet-like block: conv3x3 -> clamp(0, 6), depthwise -> relu(max 6), 1x1 project,
    residual add, 1x1 -> relu whose own output an add reads too (so it must be made)."""
    const = {}

    def weight(name, shape):
        const[name] = _t(name, shape, (rng.standard_normal(shape) * 0.5).astype(np.float32))
        return name

    ops = [
        _op("nn.conv", ["x", weight("w1", (C, 3, 3, 3)), weight("b1", (C,))], ["c1"], padding=(1, 1, 1, 1)),
        _op("math.clamp", ["c1", "zero", "six"], ["y1"]),
        _op("nn.conv", ["y1", weight("w2", (C, 1, 3, 3)), weight("b2", (C,))], ["c2"], groups=C,
            padding=(1, 1, 1, 1)),
        _op("nn.relu", ["c2"], ["y2"], max=6.0),
        _op("nn.conv", ["y2", weight("w3", (C, C, 1, 1)), weight("b3", (C,))], ["c3"]),
        _op("math.add", ["c3", "y1"], ["y4"]),
        _op("nn.conv", ["y4", weight("w5", (C, C, 1, 1))], ["c5"]),
        _op("nn.relu", ["c5"], ["y5"]),
        _op("math.add", ["c5", "y5"], ["out"]),
    ]
    if probe:
        ops.append(Op(OpKind.get("keepprobe.look"), ("out",), ("seen",), {}, name="probe"))
    names = ["c1", "y1", "c2", "y2", "c3", "y4", "c5", "y5", "out"] + (["seen"] if probe else [])
    tensors = {"x": _t("x", (2, 3, 12, 12)), "zero": _t("zero", (), np.float32(0.0).reshape(())),
               "six": _t("six", (), np.float32(6.0).reshape(())), **const,
               **{n: _t(n, (2, C, 12, 12)) for n in names}}
    return Graph("block", ("x",), ("seen",) if probe else ("out",), tuple(ops), tensors)


def _x(rng):
    x = (rng.standard_normal((2, 3, 12, 12)) * 3).astype(np.float32)
    x[0, 0, 0, :2] = [-0.0, np.nan]
    return x


def _same_bits(a, b, name):
    assert a.dtype == b.dtype and a.shape == b.shape, name
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32), err_msg=name)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_outputs_only_gives_the_bits_of_keeping_everything(rng, monkeypatch, threads):
    monkeypatch.setenv("QSIM_THREADS", threads)
    g, x = _block(rng), _x(rng)
    everything = execute(g, {"x": x})
    assert set(everything) == set(g.tensors)
    for keep in (["out"], ("out", "c1", "y2"), ["c5"], []):
        got = execute(g, {"x": x}, keep=keep)
        assert set(got) == set(keep)
        for name in keep:
            _same_bits(got[name], everything[name], name)
    assert np.isnan(everything["out"]).any()          # the NaN input went all the way through


def test_a_conv_whose_output_nobody_reads_makes_only_the_bounded_array(rng):
    g = _block(rng)
    fused = {s.op.outputs: s for s in plan_for(g, frozenset(["out"]), None).steps
             if THEN_BOUND in s.op.attrs}
    # c1 and c2 are read by their relu/clamp only; c5 is read by the last add too
    assert set(fused) == {("c1", "y1"), ("c2", "y2"), ("c5", "y5")}
    assert [fused[k].op.attrs.get(BOUND_ONLY, False) for k in (("c1", "y1"), ("c2", "y2"), ("c5", "y5"))] \
        == [True, True, False]
    assert fused[("c1", "y1")].unmade == {"c1"} and not fused[("c5", "y5")].unmade
    # kept, or streamed to a callback: made
    assert not any(BOUND_ONLY in s.op.attrs for s in plan_for(g, frozenset(["out", "c1", "c2"]), None).steps
                   if s.op.outputs[0] in ("c1", "c2"))
    assert not any(BOUND_ONLY in s.op.attrs for s in plan_for(g, frozenset(["out"]), STREAM_ALL).steps)
    assert not any(BOUND_ONLY in s.op.attrs for s in plan_for(g, None, None).steps)


def test_values_are_released_after_their_last_reader(rng):
    g = _block(rng, probe=True)
    LIVE.clear()
    execute(g, {"x": _x(rng)}, keep=["seen"])
    # while the probe runs only its input and the constants are alive: every activation has gone
    # (x after the first conv, y1 after the residual add, c1/c2 were never made)
    constants = {n for n, t in g.tensors.items() if t.is_constant}
    assert LIVE == [constants | {"out"}]
    LIVE.clear()
    execute(g, {"x": _x(rng)}, keep=["seen", "y2"])
    assert LIVE == [constants | {"out", "y2"}]
    LIVE.clear()
    execute(g, {"x": _x(rng)})                          # the default keeps everything
    assert LIVE == [set(g.tensors) - {"seen"}]


def test_on_value_streams_every_output_in_op_order_and_lets_it_go(rng):
    g, x = _block(rng), _x(rng)
    everything = execute(g, {"x": x})
    seen, refs = [], {}

    def on_value(name, value):
        seen.append(name)
        _same_bits(value, everything[name], name)
        refs[name] = weakref.ref(value)

    got = execute(g, {"x": x}, keep=["out"], on_value=on_value)
    assert seen == [n for op in g.ops for n in op.outputs]        # the graph's op order, all made
    assert set(got) == {"out"}
    gc.collect()
    # nothing the run did not keep is still held anywhere
    assert {n for n, r in refs.items() if r() is not None} == {"out"}
    # without keep the callback sees the same values and everything is returned
    seen.clear()
    assert set(execute(g, {"x": x}, on_value=on_value)) == set(g.tensors)
    assert seen == [n for op in g.ops for n in op.outputs]


def test_stream_names_the_outputs_the_callback_sees_and_lets_the_others_go_unmade(rng):
    """stream=names: the callback sees those (in op order, the same bits); a fused conv whose own
    output is neither streamed, read nor kept writes only the bounded one, as without a callback
    (c1, c2 here; c5 is read by the last add, so it is made, but not streamed)."""
    g, x = _block(rng), _x(rng)
    everything = execute(g, {"x": x})
    seen = []

    def on_value(name, value):
        seen.append(name)
        _same_bits(value, everything[name], name)

    got = execute(g, {"x": x}, keep=["out"], on_value=on_value, stream=["y1", "y2", "c3", "out"])
    assert seen == ["y1", "y2", "c3", "out"] and set(got) == {"out"}
    _same_bits(got["out"], everything["out"], "out")
    steps = {s.op.outputs: s for s in plan_for(g, frozenset(["out"]), frozenset(["y1", "y2", "c3", "out"])).steps}
    assert steps[("c1", "y1")].unmade == {"c1"} and steps[("c2", "y2")].unmade == {"c2"}
    assert not steps[("c5", "y5")].unmade
    # a streamed conv output is made
    seen.clear()
    execute(g, {"x": x}, keep=["out"], on_value=on_value, stream=["c2"])
    assert seen == ["c2"]
    with pytest.raises(UsageError, match=r"stream names 'nope', which is not a tensor"):
        execute(g, {"x": x}, keep=["out"], on_value=on_value, stream=["nope"])


def test_the_executor_never_writes_into_a_value_it_handed_out(rng):
    g, x = _block(rng), _x(rng)
    copies, handed = {}, {}

    def on_value(name, value):
        copies[name], handed[name] = value.copy(), value

    execute(g, {"x": x}, keep=["out"], on_value=on_value)
    for name, value in handed.items():
        _same_bits(value, copies[name], name)


def test_a_callback_error_stops_the_run(rng):
    g = _block(rng)

    def on_value(name, value):
        if name == "y2":
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        execute(g, {"x": _x(rng)}, keep=["out"], on_value=on_value)


def test_unknown_names_in_keep_are_a_usage_error(rng):
    g = _block(rng)
    with pytest.raises(UsageError, match=r"graph 'block': keep names 'nope', which is not a tensor") as err:
        execute(g, {"x": _x(rng)}, keep=["out", "nope"])
    assert "out" in err.value.hint
    with pytest.raises(UsageError, match=r"keep names 'a', 'b', which are not"):
        execute(g, {"x": _x(rng)}, keep=["a", "b"])
    assert set(execute(g, {"x": _x(rng)}, keep="out")) == {"out"}     # one name as a string


BRANCH = """import math;

graph G {
    @input { x: real[3]; c: bool[]; }
    @output { y: real[3]; }
    @compose {
        t = math.abs(x);
        y = if c then math.neg(t) else math.exp(t);
    }
}
"""


def test_control_flow_captures_stay_alive_until_the_subgraph_ran(tmp_path):
    """The branches read t by name (a capture): it must not be released before the branch ran."""
    (tmp_path / "main.sknd").write_text(BRANCH)
    g = qsim.load(tmp_path)
    x = np.array([0.5, -1.0, 2.0], np.float32)
    for cond, want in ((True, -np.abs(x)), (False, np.exp(np.abs(x)))):
        got = execute(g, {"x": x, "c": np.array(cond)}, keep=["y"])
        assert set(got) == {"y"}
        _same_bits(got["y"], want.astype(np.float32), "y")


RESHAPE = """import math;
import layout;

graph G {
    @input { x: real[h|8, w|8]; }
    @output { z: real[h, ~|64]; }
    @compose {
        e = math.exp(x);
        z = layout.reshape{shape=[h, -1]}(e);
    }
}
"""


def test_runtime_attributes_read_the_shapes_of_released_inputs(tmp_path):
    """reshape's shape [h, -1] is evaluated from x's extents when it runs (2.6.1), after x's last
    reader (exp) let x go: the released values' shapes are kept for that."""
    (tmp_path / "main.sknd").write_text(RESHAPE)
    g = qsim.load(tmp_path)
    steps = plan_for(g, frozenset(["z"]), None).steps
    assert [s.op.kind.name for s in steps if s.dynamic] == ["layout.unflatten"]     # the reshape's last part
    assert "x" in steps[0].release                  # x goes after exp, before the dynamic step runs
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    got = execute(g, {"x": x}, keep=["z"])
    assert set(got) == {"z"} and got["z"].shape == (3, 4)
    _same_bits(got["z"], execute(g, {"x": x})["z"], "z")
