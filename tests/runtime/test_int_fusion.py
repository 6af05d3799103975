"""The executor's integer fusion (runtime/int_fusion.py): a conv-like TOSA op, its RESCALE and the
CLAMP after it as one step. Oracle: the same graph with every tensor kept (the ops apart, bit for
bit) and the reference backend; the plan's unmade outputs and which steps reach the fused kernel."""
import numpy as np
import pytest

import qsim.tosa  # noqa: F401
from qsim.errors import UnpredictableError
from qsim.ir import DType, Graph, Op, OpKind, Tensor
from qsim.runtime import execute
from qsim.runtime.float_ops.fusion import execution_order
from qsim.runtime.int_fusion import RESCALE_ONLY, THEN_RESCALE
from qsim.runtime.plan import STREAM_ALL, plan_for
from qsim.runtime.runners import tosa as tosa_runner

C = 16


def _op(name, inputs, outputs, attrs):
    return Op(OpKind.get(f"tosa.{name}"), tuple(inputs), tuple(outputs), attrs, name=outputs[0])


def _rescale(src, dst, rng, shift=36, scale32=True):
    top = 1 << 31 if scale32 else 1 << 15
    return _op("RESCALE", [src], [dst], dict(input_zp=0, output_zp=-5, multiplier=rng.integers(top // 4, top, C),
                                             shift=np.full(C, shift if scale32 else shift - 16), scale32=scale32,
                                             double_round=scale32, per_channel=True))


def _graph(rng, *, acc_reader=False, shift=36, dtype=DType.I8, **conv_attrs):
    """x -> CONV2D (acc) -> RESCALE (q) -> CLAMP (y) -> DEPTHWISE_CONV2D (d) -> RESCALE (out);
    acc_reader: a second RESCALE reads acc too (so it must be made)."""
    conv = _op("CONV2D", ["x"], ["acc"], {
        **dict(weight=rng.integers(-128, 128, (C, 3, 3, 4)).astype(np.int8), bias=rng.integers(-900, 900, C).astype(np.int32),
               pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1), input_zp=-128 if dtype == DType.I8 else 0, weight_zp=0),
        **conv_attrs})
    dw = _op("DEPTHWISE_CONV2D", ["y"], ["d"], dict(
        weight=rng.integers(-128, 128, (3, 3, C, 1)).astype(np.int8), bias=rng.integers(-900, 900, C).astype(np.int32),
        pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1), input_zp=-5, weight_zp=0))
    ops = [conv, _rescale("acc", "q", rng, shift, dtype == DType.I8), _op("CLAMP", ["q"], ["y"], dict(min_val=-5, max_val=100)),
           dw, _rescale("d", "out", rng)]
    names = {"x": dtype, "acc": DType.I48 if dtype == DType.I16 else DType.I32, "q": DType.I8, "y": DType.I8,
             "d": DType.I32, "out": DType.I8}
    outputs = ["out"]
    if acc_reader:
        ops.append(_rescale("acc", "side", rng))
        names["side"] = DType.I8
        outputs.append("side")
    tensors = {n: Tensor(n, t, (2, 9, 9, 4 if n == "x" else C)) for n, t in names.items()}
    return Graph("chain", ("x",), tuple(outputs), tuple(ops), tensors).verify()


def _x(rng, dtype=np.int8):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, (2, 9, 9, 4), endpoint=True).astype(dtype)


@pytest.fixture
def fused_calls(monkeypatch):
    """The fused kernel calls, as (first op, computed: bool)."""
    calls = []
    real = tosa_runner.rescaled

    def spy(op, *args):
        y = real(op, *args)
        calls.append((op, y is not None))
        return y
    monkeypatch.setattr(tosa_runner, "rescaled", spy)
    return calls


def test_chains_are_one_step_each(rng):
    g = _graph(rng)
    order = execution_order(g)
    assert [op.kind.short_name for op in order] == ["CONV2D", "DEPTHWISE_CONV2D"]
    assert order[0].outputs == ("acc", "q", "y") and order[1].outputs == ("d", "out")
    assert [o.outputs[0] for o in order[0].attrs[THEN_RESCALE]] == ["acc", "q", "y"]
    assert order[1].attrs[THEN_RESCALE][2] is None
    steps = plan_for(g, frozenset(["out"]), None).steps
    assert [s.unmade for s in steps] == [frozenset({"acc", "q"}), frozenset({"d"})]
    assert all(RESCALE_ONLY in s.op.attrs for s in steps)
    # kept, read elsewhere or streamed: every output is made
    for keep, stream in ((frozenset(["out", "acc"]), None), (frozenset(["out", "q"]), None),
                         (frozenset(["out"]), STREAM_ALL), (frozenset(["out"]), frozenset(["acc"])), (None, None)):
        first = plan_for(g, keep, stream).steps[0]
        assert not first.unmade and RESCALE_ONLY not in first.op.attrs


@pytest.mark.parametrize("threads", ["1", "2"])
def test_outputs_only_gives_the_bits_of_the_ops_apart(rng, monkeypatch, fused_calls, threads):
    monkeypatch.setenv("QSIM_THREADS", threads)
    g, x = _graph(rng), _x(rng)
    full = execute(g, {"x": x})                                   # every tensor: the ops apart
    assert fused_calls == [] and set(full) >= {"acc", "q", "y", "d", "out"}
    ref = execute(g, {"x": x}, backend="reference")
    for name in ("acc", "q", "y", "d", "out"):
        assert np.array_equal(full[name], ref[name]) and full[name].dtype == ref[name].dtype, name
    got = execute(g, {"x": x}, keep=["out"])
    assert list(got) == ["out"] and got["out"].dtype == np.int8
    assert np.array_equal(got["out"], full["out"])
    assert fused_calls == [("CONV2D", True), ("DEPTHWISE_CONV2D", True)]
    fused_calls.clear()
    got = execute(g, {"x": x}, keep=["out", "y"], backend="reference")    # apart, intermediates dropped
    assert sorted(got) == ["out", "y"] and np.array_equal(got["y"], full["y"]) and fused_calls == []


def test_read_kept_or_streamed_intermediates_are_made(rng, fused_calls):
    g, x = _graph(rng, acc_reader=True), _x(rng)
    full = execute(g, {"x": x})
    got = execute(g, {"x": x}, keep=["out", "side"])
    assert np.array_equal(got["out"], full["out"]) and np.array_equal(got["side"], full["side"])
    assert fused_calls == [("DEPTHWISE_CONV2D", True)]           # acc has another reader
    seen = []
    got = execute(g, {"x": x}, keep=["out"], on_value=lambda n, v: seen.append((n, v.copy())))
    assert [n for n, _ in seen] == ["acc", "q", "y", "d", "out", "side"]
    assert all(np.array_equal(v, full[n]) for n, v in seen)
    kept = execute(g, {"x": x}, keep=["q", "d", "out"])
    assert sorted(kept) == ["d", "out", "q"] and all(np.array_equal(kept[n], full[n]) for n in kept)


def test_cases_the_kernel_does_not_fuse_run_apart(rng, fused_calls):
    """An accumulator bound the conv kernel cannot prove (a bias near 2^31; the sums stay below
    it): the kernel hands the chain back, the ops run apart on the reference's order, the same
    values, and the intermediates are still dropped."""
    x = np.full((2, 9, 9, 4), -128, np.int8)
    x[:, 4, 4, 0] = -127
    g = _graph(rng, weight=np.full((C, 3, 3, 4), -128, np.int8), bias=np.full(C, (1 << 31) - 1000, np.int32))
    full = execute(g, {"x": x}, backend="reference")
    got = execute(g, {"x": x}, keep=["out"])
    assert list(got) == ["out"] and np.array_equal(got["out"], full["out"])
    assert fused_calls == [("CONV2D", False), ("DEPTHWISE_CONV2D", True)]


def test_int48_accumulators_are_not_fused(rng, fused_calls):
    g, x = _graph(rng, dtype=DType.I16), _x(rng, np.int16)
    assert [op.kind.short_name for op in execution_order(g)] == ["CONV2D", "RESCALE", "CLAMP", "DEPTHWISE_CONV2D"]
    got = execute(g, {"x": x}, keep=["out"])
    assert np.array_equal(got["out"], execute(g, {"x": x}, backend="reference")["out"])
    assert fused_calls == [("DEPTHWISE_CONV2D", True)]


def test_require_failures_are_the_rescales_own(rng, fused_calls):
    """A RESCALE whose REQUIRE fails (scale32 shift 10: |value| >= 2^8) raises the error of the
    ops apart, naming the RESCALE, fused or not."""
    g, x = _graph(rng, shift=10), _x(rng)
    errors = []
    for keep in (None, ["out"]):
        with pytest.raises(UnpredictableError, match="REQUIRE") as err:
            execute(g, {"x": x}, keep=keep)
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "RESCALE" in errors[0]
    assert fused_calls == [("CONV2D", False)]
