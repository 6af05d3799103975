"""qsim.runtime.execute: whole TOSA graphs (incl. COND_IF and WHILE_LOOP) on both backends."""
import numpy as np
import pytest

import qsim.tosa  # noqa: F401
from qsim.errors import InvalidGraphError, UnpredictableError, UsageError
from qsim.ir import DType, Graph, Op, OpKind, Tensor, register_op_kind
from qsim.runtime import execute, register_dialect, run_graph
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


def test_constants_feed_ops():
    c = Tensor("c", DType.I32, (2,), data=np.array([10, -20], np.int32))
    g = _graph("k", [_op("ADD", ["x", "c"], ["y"])],
               [Tensor("x", DType.I32, (2,)), c, Tensor("y", DType.I32, (2,))], ["x"], ["y"])
    assert run_graph(g, [np.array([1, 2], np.int32)], backend="reference")[0].tolist() == [11, -18]


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


def test_while_loop_through_tosa_run():
    g = _while_graph()
    loop = g.ops[0]
    out = run("WHILE_LOOP", [np.array(2, np.int32), np.array(0, np.int32)], dict(loop.subgraphs))
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


@pytest.mark.parametrize("inputs,match", [
    ({}, r"missing input\(s\) x"), ({"x": np.zeros(2, np.int32), "z": 1}, r"unknown input\(s\) z"),
    ({"x": np.zeros(2, np.int8)}, r"declared i32 \(stored as int32\) but the array is int8"),
    ({"x": np.zeros(3, np.int32)}, r"shape \[3\], declared \[2\]"), ({"x": [1, 2]}, r"not a numpy array"),
])
def test_bad_inputs(inputs, match):
    g = _unary_graph("u", "ABS")
    g = Graph("u", ("x",), ("b",), (_op("ABS", ["x"], ["b"]),),
              {"x": Tensor("x", DType.I32, (2,)), "b": Tensor("b", DType.I32, (2,))})
    with pytest.raises(UsageError, match=match):
        execute(g, inputs, "reference")


def test_unknown_backend_and_dialect():
    g = _unary_graph("u", "ABS")
    with pytest.raises(UsageError, match=r"unknown backend 'npu9'"):
        execute(g, {"a": np.zeros(2, np.int32)}, "npu9")
    kind = register_op_kind("testdialect.twice")
    g2 = Graph("d", ("a",), ("b",), (Op(kind, ("a",), ("b",), name="t"),),
               {"a": Tensor("a", DType.I32, (2,)), "b": Tensor("b", DType.I32, (2,))})
    with pytest.raises(UsageError, match=r"no executor is registered for dialect 'testdialect'"):
        execute(g2, {"a": np.zeros(2, np.int32)}, "reference")
    register_dialect("testdialect", lambda op, inputs, backend: [inputs[0] * 2])
    assert execute(g2, {"a": np.array([1, 2], np.int32)}, "reference")["b"].tolist() == [2, 4]


def test_known_dialects_are_imported_on_first_use():
    from qsim.runtime.executor import _DIALECT_MODULES, registered_dialects
    assert _DIALECT_MODULES["cvm"] == "qsim.cvm" and _DIALECT_MODULES["nn"] == "qsim.skriptnd.execute"
    assert "tosa" in registered_dialects()
