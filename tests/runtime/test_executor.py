"""qsim.runtime.execute: whole TOSA graphs (incl. COND_IF and WHILE_LOOP) on both backends, input
checks, dispatch by dialect."""
import numpy as np
import pytest

import qsim.tosa  # noqa: F401
from qsim.errors import DataError, InvalidGraphError, UnpredictableError, UnsupportedError, UsageError
from qsim.ir import DType, Graph, Op, OpKind, Tensor, register_op_kind
from qsim.runtime import execute, register_dialect, run_graph, run_op
from qsim.tosa import run


def _op(name, inputs, outputs, attrs=None, subgraphs=None, label=""):
    return Op(OpKind.get(f"tosa.{name}"), tuple(inputs), tuple(outputs), attrs or {}, subgraphs or {},
              name=label or outputs[0])


def _graph(name, ops, tensors, inputs, outputs):
    return Graph(name, inputs, outputs, ops, {t.name: t for t in tensors}).verify()


def _conv_block(rng):
    w = rng.integers(-128, 128, size=(4, 3, 3, 2)).astype(np.int8)
    b = rng.integers(-500, 500, size=4).astype(np.int32)
    conv = _op("CONV2D", ["x"], ["acc"], dict(weight=w, bias=b, pad=(1, 0, 1, 0), stride=(2, 2), dilation=(1, 1),
                                              input_zp=-128, weight_zp=0), label="block.conv")
    rq = _op("RESCALE", ["acc"], ["q"], dict(input_zp=0, output_zp=-3, multiplier=np.array([1 << 30] * 4),
                                            shift=np.array([38, 39, 40, 41]), scale32=True, double_round=True,
                                            per_channel=True), label="block.rescale")
    relu = _op("CLAMP", ["q"], ["y"], dict(min_val=-3, max_val=127), label="block.relu")
    tensors = [Tensor("x", DType.I8, (1, 6, 6, 2)), Tensor("acc", DType.I32, (1, 3, 3, 4)),
               Tensor("q", DType.I8, (1, 3, 3, 4)), Tensor("y", DType.I8, (1, 3, 3, 4))]
    return _graph("block", [conv, rq, relu], tensors, ["x"], ["y"]), (conv, rq, relu)


@pytest.mark.parametrize("backend", ["reference", "kernels"])
def test_chain_equals_operator_by_operator(rng, backend):
    g, (conv, rq, relu) = _conv_block(rng)
    x = rng.integers(-128, 128, size=(1, 6, 6, 2)).astype(np.int8)
    values = execute(g, {"x": x}, backend=backend)
    acc, = run("CONV2D", [x], dict(conv.attrs), backend="reference")
    q, = run("RESCALE", [acc], dict(rq.attrs, out_t="int8"), backend="reference")
    y, = run("CLAMP", [q], dict(relu.attrs), backend="reference")
    assert set(values) == {"x", "acc", "q", "y"}
    assert np.array_equal(values["acc"], acc) and np.array_equal(values["q"], q) and np.array_equal(values["y"], y)
    assert values["y"].dtype == np.int8 and values["y"].min() >= -3


def test_each_op_is_validated_once_per_graph_and_backend(rng, monkeypatch):
    """The TOSA runner binds (validates) an op at its graph's first run on a backend and reuses
    the call after: the same results on every run, one bind per op and backend, a new graph
    object bound anew, and the cached calls dropped with their graph."""
    import gc
    from qsim.runtime.runners import tosa as tosa_runner
    binds = []
    real = tosa_runner.bind_op
    monkeypatch.setattr(tosa_runner, "bind_op", lambda *a: binds.append(a[1].label) or real(*a))
    g, _ = _conv_block(rng)
    xs = [rng.integers(-128, 128, size=(1, 6, 6, 2)).astype(np.int8) for _ in range(3)]
    first = [execute(g, {"x": x}, backend="kernels")["y"] for x in xs]
    assert sorted(binds) == ["block.conv", "block.relu", "block.rescale"]
    for backend in ("kernels", "reference"):
        for x, y in zip(xs, first):
            assert np.array_equal(execute(g, {"x": x}, backend=backend)["y"], y)
    assert len(binds) == 6                      # once more for the reference backend, then never
    again, _ = _conv_block(np.random.default_rng(12345))
    execute(again, {"x": xs[0]})
    assert len(binds) == 9 and len(tosa_runner._BOUND) >= 2
    before = len(tosa_runner._BOUND)
    del g, again
    gc.collect()
    assert len(tosa_runner._BOUND) == before - 2


def test_constants_feed_ops():
    c = Tensor("c", DType.I32, (2,), data=np.array([10, -20], np.int32))
    g = _graph("k", [_op("ADD", ["x", "c"], ["y"])],
               [Tensor("x", DType.I32, (2,)), c, Tensor("y", DType.I32, (2,))], ["x"], ["y"])
    assert run_graph(g, [np.array([1, 2], np.int32)], backend="reference")[0].tolist() == [11, -18]


def test_a_graphs_constants_are_gathered_once_and_never_take_a_runs_values():
    """execute keeps a graph's constants between runs (runtime/executor.py _constants): each run
    gets its own copy, so a run's inputs and outputs never leak into the next one's values."""
    from qsim.runtime.executor import _constants
    c = Tensor("c", DType.I32, (2,), data=np.array([10, -20], np.int32))
    g = _graph("k2", [_op("ADD", ["x", "c"], ["y"])],
               [Tensor("x", DType.I32, (2,)), c, Tensor("y", DType.I32, (2,))], ["x"], ["y"])
    first = execute(g, {"x": np.array([1, 2], np.int32)}, backend="reference")
    second = execute(g, {"x": np.array([5, 6], np.int32)}, backend="reference")
    assert first["y"].tolist() == [11, -18] and second["y"].tolist() == [15, -14]
    constants, nbytes = _constants(g)
    assert list(constants) == ["c"] and constants["c"] is c.data and nbytes == 8
    assert _constants(g)[0] is constants                     # the same entry: gathered once


def _unary_graph(name, op, dtype=DType.I32, shape=(2,), attrs=None):
    return _graph(name, [_op(op, ["a"], ["b"], attrs)], [Tensor("a", dtype, shape), Tensor("b", dtype, shape)],
                  ["a"], ["b"])


@pytest.mark.parametrize("backend", ["reference", "kernels"])
def test_cond_if_takes_the_branch(backend):
    then_g = _unary_graph("then", "ABS")
    else_g = _unary_graph("else", "NEGATE", attrs=dict(input1_zp=0, output_zp=0))
    op = _op("COND_IF", ["x", "c"], ["y"], subgraphs={"then_graph": then_g, "else_graph": else_g}, label="if")
    g = _graph("main", [op], [Tensor("x", DType.I32, (2,)), Tensor("c", DType.BOOL, ()),
                              Tensor("y", DType.I32, (2,))], ["x", "c"], ["y"])
    x = np.array([-5, 7], np.int32)
    assert execute(g, {"x": x, "c": np.array(True)}, backend)["y"].tolist() == [5, 7]
    assert execute(g, {"x": x, "c": np.array(False)}, backend)["y"].tolist() == [5, -7]


def _while_graph():
    # state (i, acc): while i < 5: acc = acc + i * 3; i = i + 1  ->  acc = 3 * (0+1+2+3+4) = 30
    cond = _graph("cond", [_op("GREATER", ["limit", "i"], ["go"])],
                  [Tensor("i", DType.I32, ()), Tensor("acc", DType.I32, ()),
                   Tensor("limit", DType.I32, (), data=np.array(5, np.int32)), Tensor("go", DType.BOOL, ())],
                  ["i", "acc"], ["go"])
    body = _graph("body", [_op("MUL", ["i", "three"], ["i3"], dict(shift=0)),
                           _op("ADD", ["acc", "i3"], ["acc2"]),
                           _op("ADD", ["i", "one"], ["i2"])],
                  [Tensor("i", DType.I32, ()), Tensor("acc", DType.I32, ()), Tensor("i3", DType.I32, ()),
                   Tensor("acc2", DType.I32, ()), Tensor("i2", DType.I32, ()),
                   Tensor("one", DType.I32, (), data=np.array(1, np.int32)),
                   Tensor("three", DType.I32, (), data=np.array(3, np.int32))],
                  ["i", "acc"], ["i2", "acc2"])
    loop = _op("WHILE_LOOP", ["i0", "a0"], ["i_out", "a_out"], subgraphs={"cond_graph": cond, "body_graph": body},
               label="loop")
    return _graph("main", [loop], [Tensor("i0", DType.I32, ()), Tensor("a0", DType.I32, ()),
                                   Tensor("i_out", DType.I32, ()), Tensor("a_out", DType.I32, ())],
                  ["i0", "a0"], ["i_out", "a_out"])


@pytest.mark.parametrize("backend", ["reference", "kernels"])
def test_while_loop_iterates_until_the_condition_fails(backend):
    g = _while_graph()
    out = run_graph(g, [np.array(0, np.int32), np.array(0, np.int32)], backend)
    assert [int(v) for v in out] == [5, 30]
    out = run_graph(g, [np.array(7, np.int32), np.array(1, np.int32)], backend)   # condition false at once
    assert [int(v) for v in out] == [7, 1]


def test_while_loop_as_one_op_needs_the_executor():
    """qsim.tosa.run validates WHILE_LOOP but cannot run its graphs (the executor is a later
    stage); run_op runs the one op with the executor."""
    g = _while_graph()
    loop = g.ops[0]
    with pytest.raises(UnsupportedError, match="WHILE_LOOP: a control-flow operator runs its graphs") as err:
        run("WHILE_LOOP", [np.array(2, np.int32), np.array(0, np.int32)], dict(loop.subgraphs))
    assert "qsim.runtime.execute" in err.value.hint
    out = run_op(g, loop, [np.array(2, np.int32), np.array(0, np.int32)], "reference")
    assert [int(v) for v in out] == [5, 27]


def test_while_loop_body_signature_error():
    g = _while_graph()
    loop = g.ops[0]
    with pytest.raises(InvalidGraphError, match=r"tosa_input_shape\(cond_graph\)"):
        run("WHILE_LOOP", [np.array([2], np.int32), np.array(0, np.int32)], dict(loop.subgraphs))


def test_errors_carry_the_op_label(rng):
    g = _graph("ovf", [_op("ADD", ["x", "x"], ["y"], label="stage2.add")],
               [Tensor("x", DType.I32, (1,)), Tensor("y", DType.I32, (1,))], ["x"], ["y"])
    with pytest.raises(UnpredictableError, match=r"tosa.ADD 'stage2.add': .*apply_add"):
        execute(g, {"x": np.array([2 ** 30], np.int32)}, "reference")


@pytest.mark.parametrize("inputs,kind,match", [
    ({}, DataError, r"no value for input\(s\) x"),
    ({"x": np.zeros(2, np.int32), "z": 1}, DataError, r"unknown input\(s\) z"),
    ({"x": np.zeros(2, np.float32)}, DataError, r"input 'x' is declared i32 \(stored as int32\) but the array is float32"),
    ({"x": np.zeros(2, bool)}, DataError, r"declared i32 \(stored as int32\) but the array is bool"),
    ({"x": np.array([0, 1 << 31])}, DataError, r"input 'x' has values outside i32"),
    ({"x": np.zeros(3, np.int32)}, DataError, r"input 'x' has shape \[3\], the graph declares \[2\]"),
    ([np.zeros(2, np.int32)] * 2, DataError, r"takes 1 input\(s\) \(x\); got 2"),
    ({"x": [1, 2]}, UsageError, r"not a numpy array"),
])
def test_bad_inputs(inputs, kind, match):
    g = Graph("u", ("x",), ("b",), (_op("ABS", ["x"], ["b"]),),
              {"x": Tensor("x", DType.I32, (2,)), "b": Tensor("b", DType.I32, (2,))})
    with pytest.raises(kind, match=match):
        execute(g, inputs, "reference")


def test_integer_inputs_are_range_checked_and_float_inputs_converted():
    g = Graph("u", ("x",), ("b",), (_op("ABS", ["x"], ["b"]),),
              {"x": Tensor("x", DType.I48, (2,)), "b": Tensor("b", DType.I48, (2,))})
    with pytest.raises(DataError, match=r"input 'x' has values outside i48"):
        execute(g, {"x": np.array([1, 1 << 47], np.int64)}, "reference")
    kind = register_op_kind("math.neg")
    f = Graph("f", ("x",), ("y",), (Op(kind, ("x",), ("y",), name="y"),),
              {"x": Tensor("x", DType.F32, (2,)), "y": Tensor("y", DType.F32, (2,))})
    g32 = Graph("u", ("x",), ("b",), (_op("ABS", ["x"], ["b"]),),
                {"x": Tensor("x", DType.I32, (2,)), "b": Tensor("b", DType.I32, (2,))})
    values = execute(g32, {"x": np.array([-3, 1], np.int8)}, "reference")      # every value fits: converted
    assert values["x"].dtype == values["b"].dtype == np.int32 and values["b"].tolist() == [3, 1]
    values = execute(f, {"x": np.array([1.5, -2.0], np.float64)})
    assert values["x"].dtype == values["y"].dtype == np.float32 and values["y"].tolist() == [-1.5, 2.0]


def test_unknown_backend_and_dialect():
    g = _unary_graph("u", "ABS")
    with pytest.raises(UsageError, match=r"unknown backend 'npu9'"):
        execute(g, {"a": np.zeros(2, np.int32)}, "npu9")
    kind = register_op_kind("testdialect.twice")
    g2 = Graph("d", ("a",), ("b",), (Op(kind, ("a",), ("b",), name="t"),),
               {"a": Tensor("a", DType.I32, (2,)), "b": Tensor("b", DType.I32, (2,))})
    with pytest.raises(UnsupportedError, match=r"testdialect.twice 't': neither a standard operator nor "
                                               r"one the model defines, and no runner is registered for "
                                               r"dialect 'testdialect'"):
        execute(g2, {"a": np.zeros(2, np.int32)}, "reference")
    register_dialect("testdialect", lambda op, inputs, context: [inputs[0] * 2 + (context.backend == "kernels")])
    assert execute(g2, {"a": np.array([1, 2], np.int32)}, "reference")["b"].tolist() == [2, 4]
    assert execute(g2, {"a": np.array([1, 2], np.int32)}, "kernels")["b"].tolist() == [3, 5]


def test_every_family_has_its_runner_without_importing_more():
    from qsim.runtime.executor import registered_dialects
    assert {"tosa", "cvm", "control", "layout", "math", "linalg", "nn", "image", "quant",
            "algo"} <= set(registered_dialects())
